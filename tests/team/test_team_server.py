"""The team server through real HTTP on loopback: `nmem serve --transport http` as a subprocess,
users and tokens made with the real CLI, remote capture by real `nmem record --remote` processes.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from conftest import run_nmem
from fixtures.harness import event, hook
from mcp_support import child_env, free_port, nmem_argv, stop, structured, wait_for_port

pytestmark = [pytest.mark.slow]

CWD = "/home/dev/code/teamproj"


@dataclass
class Team:
    home: Path
    port: int
    alice: str   # admin
    bob: str
    carol: str   # revoked in a test


def cli(home: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return run_nmem(list(args), env=child_env(home, **extra))


def make_token(home: Path, user: str, **extra: str) -> str:
    done = cli(home, "token", "create", user, **extra)
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip()
    assert token.startswith("nmem_") and len(token) > 40
    return token


@contextmanager
def serve(home: Path, port: int, **extra: str) -> Iterator[None]:
    log = home / f"serve-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(nmem_argv("serve", "--transport", "http", "--port", str(port)),
                                env=child_env(home, CLAUDE_PROJECT_DIR=CWD, **extra), stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, proc, log)
        ready(port)
        yield
    finally:
        stop(proc)


def ready(port: int, timeout: float = 60) -> None:
    """Wait for /health: the port listens before the app has started."""
    ends = time.monotonic() + timeout
    while True:
        try:
            if call(port, "GET", "/health")[0] == 200:
                return
        except OSError:
            pass
        assert time.monotonic() < ends, f"server on {port} not ready in {timeout} s"
        time.sleep(0.1)


def call(port: int, method: str, path: str, token: str | None = None, body: Any = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    else:
        headers["X-Nmem-CSRF"] = "1"
    conn.request(method, path, body=json.dumps(body).encode() if body is not None else None, headers=headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, json.loads(data) if data else None


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    home = tmp_path_factory.mktemp("team") / "server-home"
    home.mkdir()
    for args in (("user", "add", "alice", "--admin"), ("user", "add", "bob"), ("user", "add", "carol")):
        done = cli(home, *args)
        assert done.returncode == 0, done.stderr
    tokens = {name: make_token(home, name) for name in ("alice", "bob", "carol")}
    port = free_port()
    with serve(home, port):
        yield Team(home, port, tokens["alice"], tokens["bob"], tokens["carol"])


def test_the_store_keeps_only_digests_of_tokens(team: Team) -> None:
    raw = (team.home / "nmem.db").read_bytes()
    assert team.alice.encode() not in raw and team.bob.encode() not in raw


def test_every_request_needs_a_user_token(team: Team) -> None:
    assert call(team.port, "GET", "/api/v1/status")[0] == 401
    assert call(team.port, "GET", "/api/v1/status", "nmem_not-a-token")[0] == 401
    assert call(team.port, "GET", "/api/v1/status", team.bob)[0] == 200
    assert call(team.port, "GET", "/health")[0] == 200


def test_a_revoked_token_is_refused_at_once(team: Team) -> None:
    spare = make_token(team.home, "carol")
    assert call(team.port, "GET", "/api/v1/status", spare)[0] == 200
    listed = json.loads(cli(team.home, "token", "list", "--user", "carol", "--format", "json").stdout)["tokens"]
    spare_id = max(t["id"] for t in listed)
    done = cli(team.home, "token", "revoke", str(spare_id))
    assert done.returncode == 0, done.stderr
    assert call(team.port, "GET", "/api/v1/status", spare)[0] == 401
    assert call(team.port, "GET", "/api/v1/status", team.carol)[0] == 200  # her other token still works
    assert cli(team.home, "token", "revoke", str(spare_id)).returncode == 10  # nothing live by that id


def test_cli_refuses_bad_users_and_changes_nothing(team: Team) -> None:
    before = cli(team.home, "user", "list", "--format", "json").stdout
    assert cli(team.home, "user", "add", "alice").returncode == 2
    assert cli(team.home, "user", "add", "Not A Name").returncode == 11
    assert cli(team.home, "token", "create", "nobody").returncode == 10
    assert cli(team.home, "user", "list", "--format", "json").stdout == before


def test_a_users_user_domain_is_theirs_alone_over_rest(team: Team) -> None:
    status, mine = call(team.port, "POST", "/api/v1/memories", team.alice,
                        {"content": "alice keeps her quokka notes private", "domain": "user"})
    assert status == 201, mine
    status, shared = call(team.port, "POST", "/api/v1/memories", team.alice,
                          {"content": "the team agreed quokka naming", "domain": "org"})
    assert status == 201, shared

    def recalled(token: str) -> set[str]:
        status, body = call(team.port, "GET", "/api/v1/memories?query=quokka&project=*", token)
        assert status == 200, body
        return {r["id"] for r in body["results"]}

    def searched(token: str) -> set[str]:
        status, body = call(team.port, "GET", "/api/v1/search?query=quokka&scope=all&project=*", token)
        assert status == 200, body
        return {r["id"] for r in body["results"]}

    assert recalled(team.alice) == searched(team.alice) == {mine["id"], shared["id"]}
    assert recalled(team.bob) == searched(team.bob) == {shared["id"]}
    for path in (f"/api/v1/memories/{mine['id']}", f"/api/v1/memories/{mine['urn']}",
                 f"/api/v1/records/{mine['id']}"):
        assert call(team.port, "GET", path, team.bob)[0] == 404, path
    status, body = call(team.port, "GET", f"/api/v1/records?refs={mine['id']}&refs={shared['id']}", team.bob)
    assert [r["id"] for r in body["results"]] == [shared["id"]] and body["missing"] == [mine["id"]]
    assert call(team.port, "PATCH", f"/api/v1/memories/{mine['id']}", team.bob, {"content": "hijacked"})[0] == 404
    assert call(team.port, "DELETE", f"/api/v1/memories/{mine['id']}", team.bob)[0] == 404
    assert call(team.port, "PUT", f"/api/v1/pins/{mine['id']}", team.bob)[0] == 404
    status, body = call(team.port, "GET", f"/api/v1/memories/{mine['id']}", team.alice)
    assert status == 200 and body["content"] == "alice keeps her quokka notes private"  # untouched


def test_a_users_user_domain_stays_out_of_other_users_change_feeds(team: Team) -> None:
    """The live feed broadcasts every write; a `user` memory reaches only its writer's feed."""
    status, mine = call(team.port, "POST", "/api/v1/memories", team.carol,
                        {"content": "carol's private wombat reminder", "domain": "user"})
    assert status == 201, mine
    status, shared = call(team.port, "POST", "/api/v1/memories", team.carol,
                          {"content": "the team's wombat naming rule", "domain": "org"})
    assert status == 201, shared

    def fed(token: str) -> set[str]:
        status, body = call(team.port, "GET", "/api/v1/changes?since=0&limit=1000", token)
        assert status == 200, body
        return {c["record"].get("id") for c in body["changes"] if c["kind"] == "memory"}

    assert {mine["id"], shared["id"]} <= fed(team.carol)
    assert shared["id"] in fed(team.bob) and mine["id"] not in fed(team.bob)
    conn = http.client.HTTPConnection("127.0.0.1", team.port, timeout=30)  # the SSE backlog of a resuming client
    conn.request("GET", "/stream/changes?since=0", headers={"Authorization": f"Bearer {team.bob}"})
    response = conn.getresponse()
    assert response.status == 200
    seen = b""
    while shared["id"].encode() not in seen:
        seen += response.read1(65536)
    conn.close()
    assert mine["id"].encode() not in seen and b"wombat reminder" not in seen


def test_a_users_user_domain_is_theirs_alone_over_mcp(team: Team) -> None:
    status, mine = call(team.port, "POST", "/api/v1/memories", team.alice,
                        {"content": "alice wombat secret for mcp", "domain": "user"})
    assert status == 201

    async def ask(token: str) -> tuple[set[str], list[str], bool, bool]:
        headers = {"Authorization": f"Bearer {token}"}
        async with create_mcp_http_client(headers=headers) as http, \
                Client(streamable_http_client(f"http://127.0.0.1:{team.port}/mcp", http_client=http)) as client:
            recalled = structured(await client.call_tool("recall", {"query": "wombat", "project": "*"}))
            got = structured(await client.call_tool("get", {"refs": [mine["id"]]}))
            try:
                await client.read_resource(mine["urn"])
                readable = True
            except MCPError:
                readable = False
            forgot = await client.call_tool("forget", {"id": mine["id"]})
            return {r["id"] for r in recalled["results"]}, got["missing"], readable, forgot.is_error

    import anyio

    ids, missing, readable, forget_failed = anyio.run(ask, team.bob)
    assert mine["id"] not in ids and missing == [mine["id"]] and not readable and forget_failed
    ids, missing, readable, forget_failed = anyio.run(ask, team.alice)  # alice forgets her own memory here
    assert mine["id"] in ids and missing == [] and readable and not forget_failed


def test_audit_records_who_wrote_and_forgot_what(team: Team) -> None:
    assert call(team.port, "POST", "/api/v1/memories", team.alice, {"content": "alice's audited note"})[0] == 201
    status, memory = call(team.port, "POST", "/api/v1/memories", team.bob,
                          {"content": "bob decided on platypus caching", "domain": "org"})
    assert status == 201
    assert call(team.port, "DELETE", f"/api/v1/memories/{memory['id']}", team.bob)[0] == 200
    status, body = call(team.port, "GET", "/api/v1/audit", team.bob)
    assert status == 200
    mine = [(r["user"], r["action"], r["urn"]) for r in body["results"]]
    assert ("bob", "remember", memory["urn"]) in mine and ("bob", "forget", memory["urn"]) in mine
    assert {r["user"] for r in body["results"]} == {"bob"}  # a non-admin reads only their own rows
    assert call(team.port, "GET", "/api/v1/audit?user=alice", team.bob)[0] == 403
    status, everything = call(team.port, "GET", "/api/v1/audit?limit=1000", team.alice)
    assert {"alice", "bob"} <= {r["user"] for r in everything["results"]}
    done = cli(team.home, "audit", "--user", "bob", "--format", "json")
    assert done.returncode == 0 and memory["urn"] in done.stdout


def test_only_an_admin_manages_users_over_http(team: Team) -> None:
    assert call(team.port, "GET", "/api/v1/users", team.bob)[0] == 403
    assert call(team.port, "POST", "/api/v1/users", team.bob, {"name": "mallory", "admin": True})[0] == 403
    status, added = call(team.port, "POST", "/api/v1/users", team.alice, {"name": "dave"})
    assert status == 201, added
    status, created = call(team.port, "POST", "/api/v1/users/dave/tokens", team.alice)
    assert status == 201
    assert call(team.port, "GET", "/api/v1/status", created["token"])[0] == 200
    assert call(team.port, "DELETE", "/api/v1/tokens/dave", team.alice)[1] == {"revoked": 1}
    assert call(team.port, "GET", "/api/v1/status", created["token"])[0] == 401


def remote_hook(client_home: Path, url: str, token: str, payload: dict[str, Any],
                budget_ms: int = 10_000) -> subprocess.CompletedProcess[str]:
    """A real `nmem record --remote` process (a budget generous enough for a loaded test machine)."""
    return hook(client_home, payload, args=("record", "--remote", url), NMEM_REMOTE_TOKEN=token,
                NMEM_BUSY_BUDGET_MS=str(budget_ms))


def test_remote_capture_spools_while_the_server_is_down_and_drains_once_it_is_up(tmp_path: Path) -> None:
    server_home = tmp_path / "server"
    server_home.mkdir()
    assert cli(server_home, "user", "add", "erin").returncode == 0
    token = make_token(server_home, "erin")
    client_home = tmp_path / "laptop"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    session = "remote-sess-1"
    # The server is down: every hook exits 0 and keeps its event.
    start = remote_hook(client_home, url, token, event("SessionStart", session, CWD, source="startup"))
    assert start.returncode == 0, start.stderr
    for i in range(3):
        prompt = event("UserPromptSubmit", session, CWD, prompt=f"offline prompt {i}")
        done = remote_hook(client_home, url, token, prompt)
        assert done.returncode == 0, done.stderr
    spooled = list((client_home / "spool" / "remote").rglob("*.json"))
    assert len(spooled) == 4
    with serve(server_home, port):
        done = remote_hook(client_home, url, token, event("UserPromptSubmit", session, CWD, prompt="online prompt"))
        assert done.returncode == 0, done.stderr
        assert list((client_home / "spool" / "remote").rglob("*.json")) == []
        # A retry whose first answer was lost: the same key is stored once.
        status, body = call(port, "POST", "/api/v1/events", token,
                            {"key": "retry-key-0001", "event": event("UserPromptSubmit", session, CWD,
                                                                     prompt="sent twice")})
        assert status == 200 and body["stored"] == "prompt"
        status, again = call(port, "POST", "/api/v1/events", token,
                             {"key": "retry-key-0001", "event": event("UserPromptSubmit", session, CWD,
                                                                      prompt="sent twice")})
        assert status == 200 and again["skipped"] == "duplicate"
        status, found = call(port, "GET", "/api/v1/search?scope=prompts&project=*&limit=50&order_by=date_asc"
                                          f"&session_id={session}", token)
        # stored oldest first: prompt ids follow the order the hooks fired in
        contents = [r["content_preview"] for r in sorted(found["results"], key=lambda r: r["id"])]
        assert contents == ["offline prompt 0", "offline prompt 1", "offline prompt 2", "online prompt",
                            "sent twice"]
        status, audit = call(port, "GET", "/api/v1/audit", token)
        recorded = [r["urn"] for r in audit["results"] if r["action"] == "record"]
        assert len(recorded) == len(set(recorded))  # nothing attributed twice
        assert {r["urn"] for r in found["results"]} <= set(recorded)
        assert {r["user"] for r in audit["results"]} == {"erin"}


def test_remote_hook_with_a_refused_token_keeps_the_event_and_never_exits_2(team: Team, tmp_path: Path) -> None:
    client_home = tmp_path / "laptop"
    url = f"http://127.0.0.1:{team.port}"
    done = remote_hook(client_home, url, "nmem_wrong", event("UserPromptSubmit", "bad-token", CWD, prompt="kept"))
    assert done.returncode == 4 and "refused the token" in done.stderr
    assert len(list((client_home / "spool" / "remote").rglob("*.json"))) == 1
    done = remote_hook(client_home, url, team.bob, event("UserPromptSubmit", "bad-token", CWD, prompt="next"))
    assert done.returncode == 0, done.stderr
    assert list((client_home / "spool" / "remote").rglob("*.json")) == []


def test_remote_session_start_prints_the_servers_context_block(team: Team, tmp_path: Path) -> None:
    call(team.port, "POST", "/api/v1/memories", team.bob,
         {"content": "teamproj deploys from the release branch", "domain": "project:teamproj"})
    done = remote_hook(tmp_path / "laptop", f"http://127.0.0.1:{team.port}", team.bob,
                       event("SessionStart", "ctx-1", CWD, source="startup"))
    assert done.returncode == 0, done.stderr
    assert "teamproj deploys from the release branch" in done.stdout


def test_a_bad_remote_url_is_bad_input(tmp_path: Path) -> None:
    done = hook(tmp_path / "laptop", event("UserPromptSubmit", "s", CWD, prompt="x"),
                args=("record", "--remote", "ftp://nowhere"))
    assert done.returncode == 1 and "http(s) URL" in done.stderr
    assert not (tmp_path / "laptop" / "spool" / "remote").exists()


def test_single_user_mode_is_unchanged(tmp_path: Path) -> None:
    home = tmp_path / "solo"
    home.mkdir()
    port = free_port()
    with serve(home, port):
        status, memory = call(port, "POST", "/api/v1/memories", None, {"content": "solo note", "domain": "user"})
        assert status == 201  # loopback without a token, as before
        assert call(port, "GET", f"/api/v1/memories/{memory['id']}")[0] == 200
        assert call(port, "GET", "/api/v1/audit")[1] == {"results": [], "count": 0}
        assert call(port, "GET", "/api/v1/users")[0] == 403


def test_users_added_while_the_server_runs_are_demanded_from_the_next_request_on(tmp_path: Path) -> None:
    """The guard asks only for a token's user once it has seen users, and whether users exist
    whenever it found none: a single-user server whose store gets its first user refuses the
    next request without that user's token, and a wrong token stays refused."""
    home = tmp_path / "solo-then-team"
    home.mkdir()
    port = free_port()
    with serve(home, port):
        assert call(port, "GET", "/api/v1/status")[0] == 200   # loopback, no users yet: no token needed
        done = cli(home, "user", "add", "erin")
        assert done.returncode == 0, done.stderr
        assert call(port, "GET", "/api/v1/status")[0] == 401
        erin = make_token(home, "erin")
        assert call(port, "GET", "/api/v1/status", erin)[0] == 200
        assert call(port, "GET", "/api/v1/status", "nmem_not-a-token")[0] == 401
        assert call(port, "GET", "/api/v1/status")[0] == 401
        assert call(port, "GET", "/api/v1/status", erin)[0] == 200


def test_claude_codes_http_hook_posts_the_bare_hook_input(team: Team) -> None:
    """What a `"type": "http"` hook in Claude Code's settings sends: the hook input as the body."""
    call(team.port, "POST", "/api/v1/memories", team.bob,
         {"content": "teamproj pins its lockfile", "domain": "project:teamproj"})
    status, body = call(team.port, "POST", "/api/v1/hook", team.bob, event("SessionStart", "http-hook-1", CWD,
                                                                           source="startup"))
    assert status == 200, body
    assert body["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert "teamproj pins its lockfile" in body["hookSpecificOutput"]["additionalContext"]
    status, body = call(team.port, "POST", "/api/v1/hook", team.bob,
                        event("UserPromptSubmit", "http-hook-1", CWD, prompt="sent by the http hook"))
    assert status == 200 and body == {}
    status, found = call(team.port, "GET", "/api/v1/search?scope=prompts&project=*&query=http+hook", team.bob)
    assert [r["content_preview"] for r in found["results"]] == ["sent by the http hook"]
    assert call(team.port, "POST", "/api/v1/hook", None, event("UserPromptSubmit", "x", CWD, prompt="y"))[0] == 401
    status, body = call(team.port, "POST", "/api/v1/hook", team.bob, {"session_id": "x"})
    assert status == 400, body


@pytest.mark.postgres
def test_the_team_server_on_a_postgresql_store(tmp_path: Path, pg_url: str) -> None:
    """Users, tokens, revocation, writes and their audit rows with the server's store on PostgreSQL."""
    home = tmp_path / "pg-server-home"
    home.mkdir()
    on_pg = {"NMEM_STORE_URL": pg_url}
    for args in (("user", "add", "alice", "--admin"), ("user", "add", "bob")):
        done = cli(home, *args, **on_pg)
        assert done.returncode == 0, done.stderr
    alice, bob = make_token(home, "alice", **on_pg), make_token(home, "bob", **on_pg)
    assert not (home / "nmem.db").exists(), "nothing went to a SQLite file"
    port = free_port()
    with serve(home, port, **on_pg):
        assert call(port, "GET", "/api/v1/status")[0] == 401
        assert call(port, "GET", "/api/v1/status", bob)[0] == 200
        status, mine = call(port, "POST", "/api/v1/memories", alice,
                            {"content": "alice keeps her wombat notes private", "domain": "user"})
        assert status == 201, mine
        status, shared = call(port, "POST", "/api/v1/memories", bob,
                              {"content": "bob decided on wombat caching", "domain": "org"})
        assert status == 201, shared
        status, body = call(port, "GET", "/api/v1/memories?query=wombat&project=*", bob)
        assert status == 200 and {r["id"] for r in body["results"]} == {shared["id"]}
        assert call(port, "DELETE", f"/api/v1/memories/{shared['id']}", bob)[0] == 200
        status, body = call(port, "GET", "/api/v1/audit", bob)
        assert status == 200
        assert [(r["user"], r["action"], r["urn"]) for r in body["results"]] == [
            ("bob", "remember", shared["urn"]), ("bob", "forget", shared["urn"])]
        assert call(port, "GET", "/api/v1/audit?user=alice", bob)[0] == 403
        status, added = call(port, "POST", "/api/v1/users", alice, {"name": "dave"})
        assert status == 201, added
        assert call(port, "DELETE", "/api/v1/tokens/bob", alice)[1] == {"revoked": 1}
        assert call(port, "GET", "/api/v1/status", bob)[0] == 401
    listed = json.loads(cli(home, "user", "list", "--format", "json", **on_pg).stdout)
    assert [u["name"] for u in listed["users"]] == ["alice", "bob", "dave"]


def test_the_log_is_for_admins(team: Team) -> None:
    assert call(team.port, "GET", "/api/v1/log", team.bob)[0] == 403
    status, body = call(team.port, "GET", "/api/v1/log", team.alice)
    assert status == 200 and body["path"].endswith("nmem.log")
    status, projects = call(team.port, "GET", "/api/v1/projects", team.bob)
    assert status == 200 and isinstance(projects["results"], list)
