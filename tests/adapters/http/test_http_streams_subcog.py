"""subcog's streaming protocol (§4, §2.2.5) against a real `nmem serve --transport sse|websocket`
process: its WebSocket messages, `POST /stream/recall`, its event payloads, `subcog://` topics, and
the change feed's long-poll. Writers are real `nmem` processes; clients are `http.client` and
`websockets`."""

from __future__ import annotations

import http.client
import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import connect

from conftest import run_nmem
from mcp_support import CWD, Seeded, child_env, free_port, nmem_argv, seed, stop, wait_for_port
from nmem.config import load_settings
from nmem.service.api import Service

pytestmark = pytest.mark.slow
CSRF = {"X-Nmem-CSRF": "1"}


class Served:
    def __init__(self, port: int, home: Path, seeded: Seeded) -> None:
        self.port, self.home, self.seeded = port, home, seeded

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
                timeout: float = 30) -> tuple[int, str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        conn.request(method, path, body=data, headers={**({"Content-Type": "application/json"} if data else {}),
                                                       **(headers or {})})
        response = conn.getresponse()
        text = response.read().decode()
        conn.close()
        return response.status, text


def events_of(text: str) -> list[tuple[str, Any]]:
    """An SSE body's events as (name, data)."""
    out = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(":"))
        if "event" in fields:
            out.append((fields["event"], json.loads(fields["data"])))
    return out


def serve(home: Path, transport: str) -> subprocess.Popen[bytes]:
    port = free_port()
    log = home / f"serve-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(nmem_argv("serve", "--transport", transport, "--port", str(port)),
                                env=child_env(home, NMEM_STREAMING_POLL_MS="50", NMEM_STREAMING_KEEPALIVE="0.5",
                                              CLAUDE_PROJECT_DIR=CWD),
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    wait_for_port(port, proc, log)
    proc.port = port  # type: ignore[attr-defined]
    return proc


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("subcog-streams") / "home"
    with Service.open(load_settings({"NMEM_HOME": str(home)})) as service:
        seeded = seed(service)
    proc = serve(home, "websocket")
    try:
        yield Served(proc.port, home, seeded)  # type: ignore[attr-defined]
    finally:
        stop(proc)


def subcog_uri(urn: str) -> str:
    return "subcog://" + urn.removeprefix("nmem://")


def test_serve_transport_sse_is_the_http_server(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    proc = serve(home, "sse")
    try:
        status, text = Served(proc.port, home, None).request("GET", "/health")  # type: ignore[arg-type, attr-defined]
        assert (status, json.loads(text)["status"]) == (200, "ok")
    finally:
        stop(proc)


def test_post_stream_recall_streams_subcog_s_events(served: Served) -> None:
    status, text = served.request("POST", "/stream/recall", {"query": "JWT", "namespace": "decisions", "limit": 5})
    assert status == 200
    events = events_of(text)
    names = [name for name, _ in events]
    assert names == ["start", "progress", "result", "progress", "complete"]
    start, progress, result, _, complete = (data for _, data in events)
    assert start == {"operation": "recall", "params": {"query": "JWT", "namespace": "decisions", "limit": 5}}
    assert progress == {"phase": "recall", "current": 0, "total": 1, "message": "recalling memories"}
    assert set(result) == {"memory", "score"}
    assert (result["memory"]["uri"], result["score"]) == (served.seeded.memory_urn, result["memory"]["score"])
    assert (complete["success"], complete["summary"], complete["count"]) == (True, "1 memories", 1)


@pytest.mark.parametrize(("body", "headers", "message"), [
    ({"query": "JWT", "limt": 5}, {}, "unknown recall argument(s) limt"),
    ({"query": 7}, {}, "query must be a string"),
    (b"query=JWT", {"Content-Type": "application/x-www-form-urlencoded"}, "send the arguments as JSON"),
    (b"[1]", {}, "the request body must be a JSON object"),
], ids=["typo", "not-text", "form", "array"])
def test_post_stream_recall_refuses_bad_arguments_before_streaming(served: Served, body: Any,
                                                                    headers: dict[str, str], message: str) -> None:
    status, text = served.request("POST", "/stream/recall", body, headers)
    assert status == 400
    assert json.loads(text)["error"]["message"].startswith(message)


def test_websocket_operation_messages_in_subcog_s_shapes(served: Served) -> None:
    seeded = served.seeded
    with connect(f"ws://127.0.0.1:{served.port}/ws", open_timeout=10) as ws:
        ws.send(json.dumps({"operation": "recall", "query": "JWT"}))
        replies = [json.loads(ws.recv(timeout=10))]
        while replies[-1]["type"] != "complete":
            replies.append(json.loads(ws.recv(timeout=10)))
        results = [r["data"] for r in replies if r["type"] == "result"]
        assert [r["memory"]["uri"] for r in results] == [seeded.memory_urn]
        assert replies[0] == {"type": "start", "id": None,
                              "data": {"operation": "recall", "params": {"query": "JWT"}}}

        alias = subcog_uri(seeded.memory_urn)
        ws.send(json.dumps({"operation": "subscribe", "uri": alias}))
        assert json.loads(ws.recv(timeout=10)) == {"type": "subscribed", "id": None, "uri": alias}
        done = run_nmem(["update", seeded.memory_id, "--summary", "JWT for login sessions, hourly"],
                        env=child_env(served.home))
        assert done.returncode == 0, done.stderr
        change = json.loads(ws.recv(timeout=10))
        assert (change["type"], change["uri"], change["action"]) == ("change", alias, "updated")
        assert change["memory"]["summary"] == "JWT for login sessions, hourly"

        ws.send(json.dumps({"operation": "explode"}))
        error = json.loads(ws.recv(timeout=10))
        assert (error["type"], error["data"]["code"]) == ("error", -32602)
        assert error["data"]["message"].startswith("unknown operation 'explode'")
        ws.send(json.dumps({"operation": "subscribe", "uri": "file:///etc/passwd"}))
        assert json.loads(ws.recv(timeout=10))["data"]["message"] == \
            "urn must be a string starting with nmem:// or subcog://"


def test_change_feed_takes_subcog_topics_and_sends_uri_and_memory(served: Served) -> None:
    seeded = served.seeded
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    conn.request("GET", "/stream/changes?since=0&urn=" + subcog_uri(seeded.user_memory_urn))
    response = conn.getresponse()
    assert response.status == 200
    seen: dict[str, str] = {}
    while "event" not in seen or seen["event"] != "change":
        line = response.readline().decode().rstrip("\n")
        if line.startswith(("event: ", "data: ")):
            key, _, value = line.partition(": ")
            seen[key] = value
    data = json.loads(response.readline().decode().partition(": ")[2])
    conn.close()
    assert (data["uri"], data["urn"]) == (seeded.user_memory_urn, seeded.user_memory_urn)
    assert data["memory"] == data["record"] and data["kind"] == "memory"


def test_consolidate_stream_speaks_subcog_s_start_and_complete(served: Served) -> None:
    status, text = served.request("POST", "/stream/consolidate?dry_run=1", headers=CSRF, timeout=60)
    events = events_of(text)
    assert status == 200 and events[0] == ("start", {"operation": "consolidate",
                                                    "params": {"dry_run": True, "domain": None}})
    progress = [data for name, data in events if name == "progress"]
    assert progress and all({"phase", "current", "total", "message"} <= set(p) for p in progress)
    name, complete = events[-1]
    assert name == "complete" and complete["success"] is True and complete["result"]["dry_run"] is True


def test_changes_long_poll_holds_the_request_until_a_write(served: Served) -> None:
    status, text = served.request("GET", "/api/v1/changes")
    cursor = json.loads(text)["cursor"]
    answer: list[tuple[int, str]] = []
    poll = threading.Thread(target=lambda: answer.append(
        served.request("GET", f"/api/v1/changes?since={cursor}&wait=60", timeout=90)))
    poll.start()
    poll.join(1.5)
    assert poll.is_alive(), answer  # nothing new: the server holds the request
    done = run_nmem(["capture", "learnings", "long-poll answered", "--domain", "user"], env=child_env(served.home))
    assert done.returncode == 0, done.stderr
    poll.join(60)
    assert not poll.is_alive()
    status, text = answer[0]
    page = json.loads(text)
    assert status == 200 and page["count"] >= 1
    assert [c["record"]["summary"] for c in page["changes"] if c["kind"] == "memory"] == ["long-poll answered"]
    assert page["cursor"] != cursor


def test_changes_long_poll_without_news_answers_empty_and_refuses_a_long_wait(served: Served) -> None:
    cursor = json.loads(served.request("GET", "/api/v1/changes")[1])["cursor"]
    status, text = served.request("GET", f"/api/v1/changes?since={cursor}&wait=0.2")
    assert (status, json.loads(text)) == (200, {"changes": [], "cursor": cursor, "count": 0})
    status, text = served.request("GET", "/api/v1/changes?wait=121")
    assert status == 422 and "wait" in json.loads(text)["error"]["message"]
