"""`make attack`, area team: one user of a team server tries to reach another's private memories.

A real `nmem serve --transport http` on loopback, users and tokens made with the real CLI. Ann
writes private (`user`-domain) memories, all carrying one marker word; bob, a non-admin, tries
every way the trust review found in: MCP resources, consolidation (dry and real, MCP and stream),
`configure`, the counts of status and consolidation, a revoked token's open WebSocket and
change feed, and the viewer's login. `leaked` counts answers that show bob ann's text, ids or
counts; `lost` ann's memories or settings bob changed; `errors` answers that are not the clear
refusal expected (a 5xx, a missing audit row, a stream that stays open after revocation).

    .venv/bin/python bench/attack.py --area team
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

MARKER = "quokkaledger"
VARIANTS = ("reminder", "heads-up", "memo", "aside", "footnote")  # no digits: a number makes notes differ
SECRET_NS = "annvault"
CLAUDE_PROJECT = "/work/teamproj"
# Shared notes on other topics: similarity weighs words by rarity, so near-duplicates need a corpus to stand out in.
FILLER = ("Builds cache the wheel directory between CI jobs.", "The parser rejects tabs in YAML front matter.",
          "Use UTC timestamps in every log line.", "Migrations run before the web workers start.",
          "The search index is rebuilt nightly at two.", "Feature flags live in the settings table.",
          "Frontend bundles are split per route.", "Retries back off exponentially up to a minute.",
          "Metrics go to the shared dashboard.", "Docs are built from the main branch only.")


def _nmem(home: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "nmem", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NMEM_HOME": str(home)}, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"nmem {' '.join(args)}: {done.stderr}")
    return done.stdout.strip()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Team:
    """A team server on loopback and the tokens of its users."""

    def __init__(self, home: Path, port: int, tokens: dict[str, str]) -> None:
        self.home = home
        self.port = port
        self.tokens = tokens
        self.private: list[dict[str, Any]] = []

    def call(self, user: str | None, method: str, path: str, body: Any = None,
             headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        sent = {"X-Nmem-CSRF": "1", **({"Authorization": f"Bearer {self.tokens[user]}"} if user else {}),
                **(headers or {})}
        data = json.dumps(body).encode() if body is not None else None
        if data is not None:
            sent["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=sent)
        response = conn.getresponse()
        text = response.read().decode()
        conn.close()
        return response.status, text, {k.lower(): v for k, v in response.getheaders()}

    def secrets(self) -> list[str]:
        return [MARKER, SECRET_NS, *(m["id"] for m in self.private)]

    def leaks(self, text: str, asked: str = "") -> int:
        return int(any(s in text and s not in asked for s in self.secrets()))

    def ann_changed(self) -> int:
        """How many of ann's private memories are not as she wrote them (read as ann)."""
        changed = 0
        for memory in self.private:
            status, text, _ = self.call("ann", "GET", f"/api/v1/memories/{memory['id']}")
            now = json.loads(text) if status == 200 else {}
            changed += int(status != 200 or now.get("content") != memory["content"]
                           or now.get("tier") == "archived" or now.get("tags") != memory["tags"])
        return changed

    def audit_actions(self, user: str) -> list[str]:
        status, text, _ = self.call("root", "GET", f"/api/v1/audit?user={user}&limit=10000")
        return [r["action"] for r in json.loads(text)["results"]] if status == 200 else []

    def sse(self, user: str, method: str, path: str, until: tuple[str, ...] = ("complete", "error"),
            timeout: float = 60) -> list[tuple[str, Any]]:
        events: list[tuple[str, Any]] = []
        for event in self.events(user, method, path, timeout):
            events.append(event)
            if event[0] in until:
                break
        return events

    def events(self, user: str, method: str, path: str, timeout: float = 60) -> Iterator[tuple[str, Any]]:
        """The events of a stream as they come, until it ends or `timeout` seconds have passed."""
        ends = time.monotonic() + timeout
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        conn.request(method, path, headers={"Authorization": f"Bearer {self.tokens[user]}", "X-Nmem-CSRF": "1"})
        response = conn.getresponse()
        fields: dict[str, str] = {}
        try:
            while True:
                line = response.readline().decode()
                if not line or time.monotonic() > ends:
                    return
                line = line.rstrip("\n")
                if line == "" and fields:
                    yield fields.get("event", ""), json.loads(fields.get("data", "null"))
                    fields = {}
                elif line and not line.startswith(":"):
                    name, _, value = line.partition(":")
                    fields[name] = value.lstrip()
        finally:
            conn.close()


@contextlib.contextmanager
def team_server(work: Path, quick: bool) -> Iterator[Team]:
    home = work / "server"
    home.mkdir(parents=True, exist_ok=True)
    for name, admin in (("root", True), ("ann", False), ("bob", False), ("carol", False)):
        _nmem(home, "user", "add", name, *(["--admin"] if admin else []))
    tokens = {name: _nmem(home, "token", "create", name) for name in ("root", "ann", "bob", "carol")}
    port = _free_port()
    log = (home / "serve.log").open("wb")
    env = {**os.environ, "NMEM_HOME": str(home), "CLAUDE_PROJECT_DIR": CLAUDE_PROJECT,
           "NMEM_STREAMING_POLL_MS": "50", "NMEM_STREAMING_KEEPALIVE": "0.5",
           "NMEM_DUPLICATE_THRESHOLD": "0.3"}
    server = subprocess.Popen([sys.executable, "-m", "nmem", "serve", "--transport", "http", "--host", "127.0.0.1",
                               "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        team = Team(home, port, tokens)
        ends = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError):
                if team.call(None, "GET", "/health")[0] == 200:
                    break
            if time.monotonic() > ends or server.poll() is not None:
                raise RuntimeError("team server did not start: " + (home / "serve.log").read_text())
            time.sleep(0.1)
        for note in FILLER:
            team.call("root", "POST", "/api/v1/memories", {"content": note, "domain": "org"})
        for i in range(3 if quick else 20):
            content = (f"{MARKER} {VARIANTS[i % len(VARIANTS)]}: the staging vault password rotates on Fridays, "
                       "ask the on-call lead.")
            status, text, _ = team.call("ann", "POST", "/api/v1/memories", {
                "content": content, "domain": "user", "namespace": SECRET_NS, "tags": ["ann-only"]})
            if status != 201:
                raise RuntimeError(f"ann could not remember: {status} {text}")
            team.private.append({**json.loads(text), "content": content, "tags": ["ann-only"]})
        team.call("bob", "POST", "/api/v1/memories", {
            "content": "note: the staging vault password rotates on Fridays, ask the on-call lead.", "domain": "user"})
        yield team
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


# -- MCP through the official client -------------------------------------------------------------------------------

def _mcp(team: Team, user: str, work: Any) -> Any:
    import anyio
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def run() -> Any:
        headers = {"Authorization": f"Bearer {team.tokens[user]}"}
        async with create_mcp_http_client(headers=headers) as http, \
                Client(streamable_http_client(f"http://127.0.0.1:{team.port}/mcp", http_client=http)) as client:
            return await work(client)
    return anyio.run(run)


def _dump(value: Any) -> str:
    return json.dumps(value.model_dump(mode="json") if hasattr(value, "model_dump") else value, default=str)


def _resources(team: Team) -> tuple[int, int, int]:
    from mcp.shared.exceptions import MCPError

    uris = ["nmem://user", f"nmem://user/{SECRET_NS}", *(m["urn"] for m in team.private),
            *(f"nmem://user/{SECRET_NS}/{quote(m['id'])}" for m in team.private)]

    async def work(client: Any) -> tuple[int, int, int]:
        tried = leaked = errors = 0
        cursor = None
        while True:
            page = await client.list_resources(cursor=cursor)
            tried += 1
            leaked += team.leaks(_dump(page))
            cursor = page.next_cursor
            if not cursor:
                break
        for uri in uris:
            tried += 1
            try:
                leaked += team.leaks(_dump(await client.read_resource(uri)), uri)
            except MCPError as exc:
                errors += int("not found" not in str(exc).lower())
        return tried, leaked, errors
    result: tuple[int, int, int] = _mcp(team, "bob", work)
    return result


def _consolidate_mcp(team: Team, dry_run: bool) -> tuple[int, str]:
    async def work(client: Any) -> Any:
        return await client.call_tool("consolidate", {"dry_run": dry_run})
    result = _mcp(team, "bob", work)
    return int(bool(result.is_error)), _dump(result)


def _configure(team: Team) -> tuple[int, int, int]:
    """Bob tries to shrink everyone's SessionStart block; ann's block and the setting must not change."""
    before = team.call("ann", "GET", "/api/v1/context")[1]

    async def bob(client: Any) -> Any:
        return await client.call_tool("configure", {"set": {"context.max_tokens": 100}})

    async def ann(client: Any) -> Any:
        return await client.call_tool("configure", {"names": ["context.max_tokens"]})
    refused = _mcp(team, "bob", bob)
    value = _mcp(team, "ann", ann).structured_content["settings"]["context.max_tokens"]["value"]
    after = team.call("ann", "GET", "/api/v1/context")[1]
    lost = int(value == 100 or json.loads(before)["context"] != json.loads(after)["context"])
    errors = int(not (refused.is_error and "admin" in _dump(refused)))
    return 1, lost, errors


def _revoked_ws(team: Team) -> tuple[int, int, int]:
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    token = _nmem(team.home, "token", "create", "carol")
    team.tokens["carol-ws"] = token
    leaked = errors = 0
    with connect(f"ws://127.0.0.1:{team.port}/ws", additional_headers={"Authorization": f"Bearer {token}"}) as ws:
        ws.send(json.dumps({"op": "ping", "id": 0}))
        errors += int(json.loads(ws.recv(timeout=10)).get("event") != "pong")
        _nmem(team.home, "token", "revoke", "carol")
        code = None
        try:
            ws.send(json.dumps({"op": "recall", "id": 1, "query": "staging vault"}))
            while True:
                message = json.loads(ws.recv(timeout=10))
                leaked += int(message.get("id") == 1 and message.get("event") in ("start", "result"))
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd is not None else None
        except TimeoutError:
            errors += 1
        errors += int(code != 1008)
    return 1, leaked, errors


def _revoked_feed(team: Team) -> tuple[int, int, int]:
    token = _nmem(team.home, "token", "create", "carol")
    team.tokens["carol-sse"] = token
    feed = team.events("carol-sse", "GET", "/stream/changes", timeout=20)
    events = [next(feed)]  # `start`: the feed is open
    _nmem(team.home, "token", "revoke", "carol")
    team.call("root", "POST", "/api/v1/memories", {"content": "written after carol's revocation"})
    try:
        for event in feed:  # must end with `unauthorized` within a keep-alive, not run on
            events.append(event)
            if event[0] == "error":
                break
    except TimeoutError:
        pass
    feed.close()
    leaked = sum("after carol's revocation" in json.dumps(data) for _, data in events)
    errors = int(events[-1][0] != "error" or events[-1][1].get("type") != "unauthorized")
    return 1, leaked, errors


def _login(team: Team) -> tuple[int, int, int]:
    status, _, headers = team.call(None, "GET", f"/login?token={team.tokens['bob']}&next=/")
    cookie = headers.get("set-cookie", "").split(";", 1)[0]
    errors = int(status != 303 or not cookie.startswith("nmem_session="))
    if not errors:
        status, text, _ = team.call(None, "GET", "/api/v1/memories?domain=user", headers={"Cookie": cookie})
        errors += int(status != 200)
        return 1, team.leaks(text), errors + int(team.tokens["bob"] in cookie)
    return 1, 0, errors


def scenarios(work: Path, quick: bool) -> Iterator[Any]:
    from attack import Row

    with team_server(work, quick) as team:
        tried, leaked, errors = _resources(team)
        yield Row("team", "MCP resources (list, nmem://user, namespace, record) as another user", tried,
                  leaked=leaked, errors=errors)

        dry_err, dry = _consolidate_mcp(team, True)
        events = team.sse("bob", "POST", "/stream/consolidate?dry_run=1")
        audited = team.audit_actions("bob").count("consolidate_dry_run")
        yield Row("team", "consolidate dry run (MCP tool and /stream/consolidate) by a non-admin", 2,
                  leaked=team.leaks(dry) + team.leaks(json.dumps(events)),
                  errors=dry_err + int(events[-1][0] != "complete") + int(audited < 2))

        real_err, real = _consolidate_mcp(team, False)
        events = team.sse("bob", "POST", "/stream/consolidate?dry_run=0")
        audited = team.audit_actions("bob").count("consolidate")
        yield Row("team", "consolidate for real by a non-admin (ann's private memories)", 2,
                  lost=team.ann_changed(), leaked=team.leaks(real) + team.leaks(json.dumps(events)),
                  errors=real_err + int(events[-1][0] != "complete") + int(audited < 2))

        tried, lost, errors = _configure(team)
        yield Row("team", "configure context.max_tokens=100 by a non-admin", tried, lost=lost, errors=errors)

        status, text, _ = team.call("bob", "GET", "/api/v1/status")
        counts = json.loads(text) if status == 200 else {}
        progress = team.sse("bob", "POST", "/stream/consolidate?dry_run=1&domain=user")
        compared = [d for e, d in progress if e == "progress" and "comparing" in str(d)]
        counted = counts.get("by_domain", {}).get("user", 0) != 1 or "comparing 1 memories" not in json.dumps(compared)
        yield Row("team", "counts: /api/v1/status and consolidation progress", 2,
                  leaked=int(counted) + team.leaks(text), errors=int(status != 200))

        tried, leaked, errors = _revoked_ws(team)
        yield Row("team", "revoked token's open /ws asks recall", tried, leaked=leaked, errors=errors)
        tried, leaked, errors = _revoked_feed(team)
        yield Row("team", "revoked token's open /stream/changes", tried, leaked=leaked, errors=errors)
        tried, leaked, errors = _login(team)
        yield Row("team", "viewer /login with a user's token", tried, leaked=leaked, errors=errors)
