"""SSE streams and the WebSocket on a real loopback server; writers are real `nmem` processes."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from websockets.sync.client import connect

from conftest import hook_payload, run_nmem
from mcp_support import child_env, seed
from nmem.config import Settings, load_settings
from nmem.service.api import Service
from stream_support import Server, SseReader, running_server

pytestmark = pytest.mark.slow
CSRF = {"X-Nmem-CSRF": "1"}


def seeded_settings(home: Path, **env: str) -> Settings:
    settings = load_settings({"NMEM_HOME": str(home), "NMEM_STREAMING_POLL_MS": "50",
                              "NMEM_STREAMING_KEEPALIVE": "0.3", **env})
    with Service.open(settings) as service:
        seed(service)
    return settings


@pytest.fixture
def server(nmem_home: Path) -> Iterator[Server]:
    with running_server(seeded_settings(nmem_home)) as running:
        yield running


def hook(home: Path, command: str) -> None:
    payload = hook_payload("PostToolUse", session_id="s1", tool_name="Bash", tool_input={"command": command},
                           tool_response={"stdout": "done", "exit_code": 0})
    done = run_nmem(["record"], stdin=json.dumps(payload), env=child_env(home))
    assert done.returncode == 0, done.stderr


def test_change_feed_delivers_a_hook_write_and_resumes(server: Server, nmem_home: Path) -> None:
    stream = SseReader(server.port, "/stream/changes")
    assert stream.status == 200 and stream.response.getheader("content-type").startswith("text/event-stream")
    start = stream.next_event()
    assert start.event == "start"
    hook(nmem_home, "cargo build --release")
    change = stream.next_event()
    assert change.event == "change" and change.data["kind"] == "observation"
    assert change.data["record"]["content_preview"].startswith("cargo build --release")
    assert change.id == change.data["cursor"]
    stream.close()
    # two writes while away; Last-Event-ID brings back exactly those
    hook(nmem_home, "cargo test")
    settings: Settings = server.settings
    with Service.open(settings) as writer:
        memory = writer.remember("Release builds need LTO off on CI", namespace="gotchas", project="demo")
    resumed = SseReader(server.port, "/stream/changes", {"Last-Event-ID": change.id or ""})
    assert resumed.next_event().event == "start"
    seen = [resumed.next_event(), resumed.next_event()]
    assert [e.data["kind"] for e in seen] == ["observation", "memory"]
    assert seen[0].data["record"]["content_preview"].startswith("cargo test")
    assert seen[1].data["urn"] == memory.urn and seen[1].data["action"] == "created"
    resumed.close()


def test_keep_alive_comments_while_idle(server: Server) -> None:
    stream = SseReader(server.port, "/stream/changes")
    assert stream.next_event().event == "start"
    assert stream.comments_within(1.0) >= 2
    stream.close()
    stream.close()


def test_urn_filter_keeps_only_its_changes(server: Server, nmem_home: Path) -> None:
    with Service.open(server.settings) as writer:
        kept = writer.remember("Keep this", namespace="decisions", project="demo")
        stream = SseReader(server.port, "/stream/changes?urn=nmem://project:demo/decisions")
        assert stream.next_event().event == "start"
        hook(nmem_home, "ls -la")
        writer.update(kept.id, content="Keep this, edited")
    change = stream.next_event()
    assert change.data["urn"] == kept.urn and change.data["action"] == "updated"
    stream.close()


@pytest.mark.parametrize("path", ["/stream/changes?since=nope", "/stream/changes?urn=http://x",
                                  "/stream/recall?scope=everything", "/stream/recall?order_by=size"])
def test_bad_parameters_are_400_before_any_event(server: Server, path: str) -> None:
    stream = SseReader(server.port, path)
    assert stream.status == 400
    body = json.loads(stream.response.read())
    stream.close()
    assert body["error"]["type"] == "invalid_argument" and body["error"]["message"]


def test_recall_streams_progress_then_results(server: Server) -> None:
    stream = SseReader(server.port, "/stream/recall?query=auth&scope=all")
    events = stream.events_until("complete")
    names = [e.event for e in events]
    assert names[0] == "start" and names[-1] == "complete"
    assert names.count("progress") == 8
    results = [e.data for e in events if e.event == "result"]
    assert results and events[-1].data["count"] == len(results)
    assert all("auth" in json.dumps(r).lower() for r in results)
    stream.close()
    assert {r["scope"] for r in results} <= {"memories", "observations", "prompts", "sessions"}


def test_consolidate_streams_its_progress_and_report(server: Server) -> None:
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    conn.request("POST", "/stream/consolidate?dry_run=1", headers=CSRF)
    text = conn.getresponse().read().decode()
    conn.close()
    events = [block for block in text.split("\n\n") if block]
    assert events[0].startswith("event: start") and events[-1].startswith("event: complete")
    assert any(b.startswith("event: progress") and "memories" in b for b in events)
    report = next(json.loads(b.split("data: ", 1)[1]) for b in events if b.startswith("event: result"))
    assert report["dry_run"] is True and report["run_id"] is None


def test_operations_that_write_need_the_csrf_header(server: Server) -> None:
    import http.client
    for path in ("/stream/sync", "/stream/consolidate"):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("POST", path, headers={"Origin": "http://evil.example"})
        assert conn.getresponse().status == 403
        conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("GET", path)
        assert conn.getresponse().status == 405  # EventSource's GET cannot start them
        conn.close()


def test_sync_without_a_remote_is_an_error_event(server: Server) -> None:
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("POST", "/stream/sync", headers=CSRF)
    text = conn.getresponse().read().decode()
    conn.close()
    assert text.startswith("event: start") and "event: error" in text and "event: complete" not in text


def test_sync_streams_progress_and_its_report(tmp_path: Path, nmem_home: Path) -> None:
    import http.client
    import subprocess
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    with running_server(seeded_settings(nmem_home, NMEM_SYNC_REMOTE=str(remote))) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        conn.request("POST", "/stream/sync", headers=CSRF)
        text = conn.getresponse().read().decode()
        conn.close()
    events = [block for block in text.split("\n\n") if block]
    assert events[0].startswith("event: start") and events[-1].startswith("event: complete")
    result = next(json.loads(b.split("data: ", 1)[1]) for b in events if b.startswith("event: result"))
    assert result["pushed"] >= 1 and result["remote"] == str(remote)


def test_websocket_recall_and_urn_subscription(server: Server, nmem_home: Path) -> None:
    with connect(f"ws://127.0.0.1:{server.port}/ws", open_timeout=10) as ws:
        ws.send(json.dumps({"op": "recall", "id": 7, "query": "auth", "scope": "observations"}))
        replies = []
        while not replies or replies[-1]["event"] != "complete":
            replies.append(json.loads(ws.recv(timeout=10)))
        assert {r["id"] for r in replies} == {7}
        assert [r["event"] for r in replies][:2] == ["start", "progress"]
        assert any(r["event"] == "result" for r in replies)
        with Service.open(server.settings) as writer:
            memory = writer.remember("Tokens rotate hourly", namespace="security", project="demo")
            ws.send(json.dumps({"op": "subscribe", "urn": memory.urn}))
            assert json.loads(ws.recv(timeout=10)) == {"event": "subscribed", "id": None, "urn": memory.urn}
            hook(nmem_home, "not about the memory")
            writer.forget(memory.id)
        changes = [json.loads(ws.recv(timeout=10))]
        while changes[-1]["data"]["action"] != "forgotten":  # its creation may come first: it was polled later
            changes.append(json.loads(ws.recv(timeout=10)))
        assert all(c["event"] == "change" and c["urns"] == [memory.urn] for c in changes)
        ws.send("not json")
        assert json.loads(ws.recv(timeout=10))["data"]["type"] == "invalid_argument"
        ws.send(json.dumps({"op": "subscribe", "urn": "file:///etc/passwd"}))
        assert json.loads(ws.recv(timeout=10))["data"]["type"] == "invalid_argument"


def test_websocket_from_another_origin_is_refused(server: Server) -> None:
    from websockets.exceptions import InvalidStatus
    with pytest.raises(InvalidStatus):
        connect(f"ws://127.0.0.1:{server.port}/ws", origin="http://evil.example", open_timeout=10)  # type: ignore[arg-type]


def test_many_clients_each_get_the_change(server: Server, nmem_home: Path) -> None:
    streams = [SseReader(server.port, "/stream/changes") for _ in range(20)]
    for s in streams:
        assert s.next_event().event == "start"
    hook(nmem_home, "echo fan-out")
    got: list[str] = []

    def read(s: SseReader) -> None:
        got.append(s.next_event().data["record"]["content_preview"])

    threads = [threading.Thread(target=read, args=(s,)) for s in streams]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert len(got) == 20 and all(g.startswith("echo fan-out") for g in got)
    for s in streams:
        s.close()
