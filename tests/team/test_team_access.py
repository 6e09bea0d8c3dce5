"""A team server never shows one user's private memories to another, through any surface.

Every surface is taken from its registration table, so a new one is covered without anyone
adding it here: the REST and claude-mem operations from the server's OpenAPI document, the
streams and the WebSocket from the Starlette route list, the WebSocket's ops from `WS_OPS`,
and the MCP tools, resources, resource templates and prompts from the official MCP client's
list calls. User bob calls each of them with the arguments most likely to reach user ann's
private (`user`-domain) memories; none may answer with their text, id or a count that
includes them, and none may change them. Admin-only operations refuse him.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import re
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from starlette.routing import Route, WebSocketRoute
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

from mcp_support import Inbox, seed
from nmem.adapters.http.app import create_app
from nmem.adapters.http.streams import WS_OPS
from nmem.config import Settings, load_settings
from nmem.service.api import Service
from nmem.team import accounts as team
from nmem.team.access import Viewer, acting_as
from store_engines import ENGINES, pg_unavailable, schema_url
from stream_support import Server, SseReader, running_server

pytestmark = pytest.mark.slow

MARKER = "zebrafruit"           # in every private memory of ann's, never sent by bob
SECRET_NS = "annsecretns"       # the namespace only ann's private memories use
QUERY = "staging password rotation"
ANN_PRIVATE = 3
NOW = 1_790_000_500


@dataclass
class World:
    server: Server
    settings: Settings
    tokens: dict[str, str]
    ann_uids: list[str]
    ann_urns: list[str]
    ann_public: str        # a project memory of ann's: what bob may see
    ann_public_urn: str
    bob_private: str       # bob's own user memory, near-identical to ann's
    observation: int

    def secrets(self) -> list[str]:
        return [MARKER, SECRET_NS, *self.ann_uids]

    def leaked(self, answer: str, asked: str = "") -> list[str]:
        """What of ann's private memories `answer` shows, not counting what the request itself named."""
        return [s for s in self.secrets() if s in answer and s not in asked]


def call(port: int, method: str, path: str, token: str | None, body: Any = None,
         headers: dict[str, str] | None = None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    sent = {**({"Authorization": f"Bearer {token}"} if token else {}), **(headers or {})}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        sent["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=sent)
    response = conn.getresponse()
    text = response.read().decode()
    conn.close()
    return response.status, text


def private_note(i: int) -> str:
    word = ("reminder", "memo", "aside")[i]
    return f"{MARKER} {word}: the {QUERY} happens on Fridays; ask the on-call lead for the vault path."


@pytest.fixture(scope="module", params=ENGINES)
def engine_env(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """The server's store: a SQLite file, or a fresh schema on the test PostgreSQL server."""
    if request.param == "sqlite":
        yield {}
        return
    reason = pg_unavailable()
    if reason is not None:
        pytest.skip(reason)
    import psycopg

    base = os.environ["NMEM_TEST_PG"]
    schema = f"nmem_t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield {"NMEM_STORE_URL": schema_url(base, schema)}
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, engine_env: dict[str, str]) -> Iterator[World]:
    home = tmp_path_factory.mktemp("team-access")
    settings = load_settings({"NMEM_HOME": str(home), "NMEM_STREAMING_POLL_MS": "50",
                              "NMEM_STREAMING_KEEPALIVE": "0.3", "NMEM_DUPLICATE_THRESHOLD": "0.3", **engine_env})
    with Service.open(settings) as service:
        seeded = seed(service)
        for name, admin in (("root", True), ("ann", False), ("bob", False), ("carol", False)):
            team.add_user(service.store, name, admin, NOW)
        tokens = {name: team.create_token(service.store, name, NOW)["token"]
                  for name in ("root", "ann", "bob", "carol")}
    assert (home / "nmem.db").exists() == (not engine_env), "the store is on the engine the test names"
    with running_server(settings) as server:
        for topic in ("wheel caches", "YAML tabs", "UTC logs", "migrations", "nightly index", "feature flags",
                      "route bundles", "retry backoff", "dashboards", "docs builds"):
            call(server.port, "POST", "/api/v1/memories", tokens["root"], {"content": f"Team rule on {topic}."})
        uids, urns = [], []
        for i in range(ANN_PRIVATE):
            status, text = call(server.port, "POST", "/api/v1/memories", tokens["ann"],
                                {"content": private_note(i), "domain": "user", "namespace": SECRET_NS,
                                 "tags": [f"{MARKER}-tag"]})
            assert status == 201, text
            uids.append(json.loads(text)["id"])
            urns.append(json.loads(text)["urn"])
        status, text = call(server.port, "POST", "/api/v1/memories", tokens["ann"],
                            {"content": "The staging deploy runs from the release branch.", "namespace": "decisions"})
        assert status == 201, text
        public = json.loads(text)
        status, text = call(server.port, "POST", "/api/v1/memories", tokens["bob"],
                            {"content": f"note: the {QUERY} happens on Fridays; ask the on-call lead for the vault "
                                        "path.", "domain": "user", "namespace": "learnings"})
        assert status == 201, text
        yield World(server, settings, tokens, uids, urns, public["id"], public["urn"], json.loads(text)["id"],
                    seeded.read)


def ann_untouched(world: World) -> None:
    """Ann's private memories are as she wrote them: live, not archived, merged, pinned or edited."""
    with Service.open(world.settings) as service:  # no viewer: the whole store
        for i, uid in enumerate(world.ann_uids):
            memory = service.store.get_memory(uid)
            assert memory is not None and memory.deleted_at is None, uid
            assert memory.content == private_note(i) and memory.tier != "archived" and not memory.is_pinned
            assert memory.tags == [f"{MARKER}-tag"] and memory.relates_to == []


# -- REST and claude-mem routes, from the OpenAPI document ----------------------------------------------------

def _value(name: str, schema: dict[str, Any], world: World) -> Any:
    kind = schema.get("type") or next((s.get("type") for s in schema.get("anyOf", []) if s.get("type") != "null"),
                                      "string")
    if isinstance(kind, list):
        kind = kind[0]
    by_name: dict[str, Any] = {
        "query": QUERY, "q": QUERY, "ref": world.ann_urns[0], "refs": world.ann_uids[0], "ids": str(world.observation),
        "id": world.observation, "anchor": world.observation, "session_id": "s1", "project": "demo",
        "domain": "user", "user": "ann", "name": "bob", "target": "1", "content": "bob's probe note",
        "summary": "bob's probe", "limit": 100, "scope": "all", "key": "probe-key-0001",
        "event": {"hook_event_name": "SessionStart", "session_id": "s-bob", "cwd": "/work/demo", "source": "startup"},
        "hook_event_name": "SessionStart", "cwd": "/work/demo", "file": "/work/demo/src/auth.py",
        "file_path": "/work/demo/src/auth.py", "type": "memories",
    }
    if name in by_name:
        return by_name[name]
    return {"integer": 1, "number": 1, "boolean": False, "array": [], "object": {}}.get(kind, "x")


def _operations(world: World) -> list[tuple[str, str, dict[str, Any]]]:
    status, text = call(world.server.port, "GET", "/openapi.json", world.tokens["bob"])
    assert status == 200
    paths = json.loads(text)["paths"]
    ops = [(method.upper(), path, op) for path, methods in paths.items() for method, op in methods.items()
           if method in ("get", "post", "put", "patch", "delete")]
    assert len(ops) > 40, "the OpenAPI document lists the REST and claude-mem operations"
    return ops


def _request(world: World, method: str, path: str, op: dict[str, Any], spec: dict[str, Any]
             ) -> tuple[str, Any]:
    query: dict[str, Any] = {}
    for param in op.get("parameters", []):
        value = _value(param["name"], param.get("schema", {}), world)
        if param["in"] == "path":
            path = path.replace("{" + param["name"] + "}", quote(str(value), safe=""))
        elif param["in"] == "query" and (param.get("required") or param["name"] in ("query", "q", "domain", "ref",
                                                                                    "refs", "ids", "scope")):
            query[param["name"]] = value
    body = None
    content = op.get("requestBody", {}).get("content", {}).get("application/json")
    if content is not None:
        schema = content.get("schema", {})
        if "$ref" in schema:
            schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
        body = {name: _value(name, sub, world) for name, sub in schema.get("properties", {}).items()
                if name in schema.get("required", []) or name in ("ids", "refs")}
        if "ids" in body and isinstance(body["ids"], str):
            body["ids"] = [world.observation]
    return path + ("?" + urlencode(query) if query else ""), body


def test_no_rest_or_claude_mem_operation_shows_bob_anns_private_memories(world: World) -> None:
    spec = json.loads(call(world.server.port, "GET", "/openapi.json", world.tokens["bob"])[1])
    refused_admin = []
    for method, path, op in _operations(world):
        target, body = _request(world, method, path, op, spec)
        status, text = call(world.server.port, method, target, world.tokens["bob"], body,
                            {"X-Nmem-CSRF": "1"})
        where = f"{method} {target} -> {status}"
        assert status < 500, f"{where}: {text[:300]}"
        assert not world.leaked(text, target + json.dumps(body)), f"{where} leaks: {text[:400]}"
        if world.ann_urns[0] in target and status < 300 and method != "GET":
            pytest.fail(f"{where}: bob changed ann's private memory")
        if re.search(r"\badmin", op.get("summary", "")):  # (admin), (admins only…), (an admin's…)
            assert status == 403, f"{where}: an admin-only operation answered bob: {text[:200]}"
            refused_admin.append(path)
    assert len(refused_admin) >= 6
    ann_untouched(world)


def test_bob_reads_his_own_private_memory_and_counts_without_anns(world: World) -> None:
    status, text = call(world.server.port, "GET", f"/api/v1/memories/{world.bob_private}", world.tokens["bob"])
    assert status == 200 and "Fridays" in text
    for user, own in (("bob", 1), ("ann", ANN_PRIVATE)):
        status, text = call(world.server.port, "GET", "/api/v1/status", world.tokens[user])
        data = json.loads(text)
        assert status == 200 and data["by_domain"]["user"] == own, (user, data)
    status, text = call(world.server.port, "GET", "/api/v1/status", world.tokens["bob"])
    with Service.open(world.settings) as service:
        everything = service.status()["memories"]
    # ann's three and the seed's (written before the team existed, so nobody's) are out of bob's count
    assert json.loads(text)["memories"] == everything - ANN_PRIVATE - 1


# -- streams and the WebSocket, from the route list ------------------------------------------------------------

def _route_table(world: World) -> list[Any]:
    with Service.open(world.settings) as service:
        app = create_app(world.settings, service=service)
        return list(app.starlette.routes)


def _read_stream(world: World, method: str, path: str) -> str:
    if method == "GET":
        reader = SseReader(world.server.port, path, {"Authorization": f"Bearer {world.tokens['bob']}"})
        assert reader.status < 500
        seen = []
        try:
            while True:
                event = reader.next_event()
                seen.append(json.dumps(event.data))
                if event.event in ("complete", "error"):
                    break
        except EOFError:
            pass
        finally:
            reader.close()
        return "\n".join(seen)
    return call(world.server.port, method, path, world.tokens["bob"], None, {"X-Nmem-CSRF": "1"})[1]


def test_no_stream_or_page_outside_the_api_shows_bob_anns_private_memories(world: World) -> None:
    spec = json.loads(call(world.server.port, "GET", "/openapi.json", world.tokens["bob"])[1])
    documented = set(spec["paths"])
    tried = 0
    for route in _route_table(world):
        if not isinstance(route, Route) or route.path in documented or "{" in route.path:
            continue
        if route.path in ("/stream/changes", "/mcp"):
            continue  # the live feed and MCP have tests of their own below
        for method in sorted((route.methods or {"GET"}) - {"HEAD"}):
            suffix = f"?{urlencode({'query': QUERY, 'scope': 'all', 'domain': 'user'})}"
            text = _read_stream(world, method, route.path + suffix) if route.path.startswith("/stream/") else \
                call(world.server.port, method, route.path + suffix, world.tokens["bob"], None,
                     {"X-Nmem-CSRF": "1"})[1]
            assert not world.leaked(text), f"{method} {route.path} leaks: {text[:400]}"
            tried += 1
    assert tried >= 4
    # a real consolidation by bob: it read nothing of ann's and archived nothing of hers
    text = _read_stream(world, "POST", "/stream/consolidate?dry_run=0")
    assert not world.leaked(text)
    ann_untouched(world)


def test_the_live_feed_and_websocket_never_carry_anns_private_writes(world: World) -> None:
    routes = _route_table(world)
    assert any(isinstance(r, WebSocketRoute) and r.path == "/ws" for r in routes)
    port, bob = world.server.port, world.tokens["bob"]
    feed = SseReader(port, "/stream/changes", {"Authorization": f"Bearer {bob}"})
    assert feed.next_event().event == "start"
    with ws_connect(f"ws://127.0.0.1:{port}/ws", additional_headers={"Authorization": f"Bearer {bob}"}) as ws:
        answers = []
        for n, op in enumerate(WS_OPS):
            ws.send(json.dumps({"op": op, "id": n, "query": QUERY, "scope": "all", "urn": world.ann_urns[0]}))
            while True:
                message = json.loads(ws.recv(timeout=10))
                answers.append(message)
                if message.get("event") in ("complete", "error", "pong", f"{op}d"):
                    break
        ws.send(json.dumps({"op": "subscribe", "id": "all", "urn": "nmem://user"}))
        ws.send(json.dumps({"op": "subscribe", "id": "pub", "urn": world.ann_public_urn}))
        # ann edits a private memory, then a public one: bob gets the second, never the first
        for ref, text in ((world.ann_uids[1], private_note(1)), (world.ann_public, "Deploys run from main now.")):
            status, _ = call(port, "PATCH", f"/api/v1/memories/{ref}", world.tokens["ann"], {"content": text})
            assert status == 200
        call(port, "PATCH", f"/api/v1/memories/{world.ann_uids[1]}", world.tokens["ann"],
             {"content": private_note(1)})
        while True:
            message = json.loads(ws.recv(timeout=10))
            answers.append(message)
            if message.get("event") == "change" and world.ann_public in json.dumps(message):
                break
        shown = json.dumps(answers)
        assert not world.leaked(shown, world.ann_urns[0]), shown[:500]
    while True:
        event = feed.next_event()
        assert not world.leaked(json.dumps(event.data)), event
        if event.event == "change" and event.data["record"].get("id") == world.ann_public:
            break
    feed.close()


# -- MCP: tools, resources, templates and prompts, from the official client's list calls -----------------------

@asynccontextmanager
async def mcp_as(world: World, user: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {world.tokens[user]}"}
    async with create_mcp_http_client(headers=headers) as http, \
            Client(streamable_http_client(f"{world.server.base}/mcp", http_client=http)) as client:
        yield client


def _tool_args(schema: dict[str, Any], world: World) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for name, sub in schema.get("properties", {}).items():
        kind = sub.get("type")
        if name in ("query", "q"):
            args[name] = QUERY
        elif name in ("ids", "refs", "urns"):
            args[name] = [world.observation] if (sub.get("items") or {}).get("type") == "integer" else world.ann_urns
        elif name in ("id", "ref", "urn", "uri", "anchor", "memory"):
            args[name] = world.observation if kind == "integer" else world.ann_urns[0]
        elif name == "domain":
            args[name] = "user"
        elif name == "set":
            args[name] = {"context.max_tokens": 100}
        elif name == "dry_run":
            args[name] = False
        elif name in schema.get("required", []):
            args[name] = {"integer": 1, "number": 1, "boolean": False, "array": [], "object": {}}.get(
                str(kind), "bob's probe note")
    return args


async def _text(coro: Any) -> str:
    try:
        return json.dumps((await coro).model_dump(mode="json"))
    except MCPError as exc:
        return str(exc)


@pytest.mark.anyio
async def test_no_mcp_tool_resource_template_or_prompt_shows_bob_anns_private_memories(world: World) -> None:
    async with mcp_as(world, "bob") as client:
        tools = (await client.list_tools()).tools
        assert len(tools) >= 13
        for tool in tools:
            args = _tool_args(tool.input_schema, world)
            result = await client.call_tool(tool.name, args)
            shown = json.dumps(result.model_dump(mode="json"))
            assert not world.leaked(shown, json.dumps(args)), f"{tool.name}({args}) leaks: {shown[:400]}"
            if tool.name in ("configure", "sync"):
                assert result.is_error and "admin" in shown, f"{tool.name} answered bob: {shown[:300]}"
        listed = []
        cursor = None
        while True:
            page = await client.list_resources(cursor=cursor)
            listed.append(json.dumps(page.model_dump(mode="json")))
            cursor = page.next_cursor
            if not cursor:
                break
        assert not world.leaked("".join(listed)), listed
        templates = (await client.list_resource_templates()).resource_templates
        assert templates
        for template in templates:
            for values in ({"domain": "user", "namespace": SECRET_NS, "id": world.ann_uids[0]},
                           {"domain": "user", "namespace": "learnings", "id": world.bob_private}):
                uri = re.sub(r"\{(\w+)\}", lambda m, v=values: quote(str(v[m.group(1)]), safe=""),  # type: ignore[misc]
                             template.uri_template)
                shown = await _text(client.read_resource(uri))
                assert not world.leaked(shown, uri), f"{uri} leaks: {shown[:400]}"
        for uri in ("nmem://user", f"nmem://user/{SECRET_NS}", world.ann_urns[0]):
            shown = await _text(client.read_resource(uri))
            assert not world.leaked(shown, uri), f"{uri} leaks: {shown[:400]}"
        for prompt in (await client.list_prompts()).prompts:
            arguments = {a.name: QUERY for a in prompt.arguments or []}
            shown = await _text(client.get_prompt(prompt.name, arguments))
            assert not world.leaked(shown), f"prompt {prompt.name} leaks: {shown[:300]}"
    ann_untouched(world)


@pytest.mark.anyio
async def test_configure_by_a_non_admin_changes_nothing_and_an_admins_change_is_server_wide(world: World) -> None:
    async with mcp_as(world, "bob") as bob:
        refused = await bob.call_tool("configure", {"set": {"context.max_tokens": 100}})
        assert refused.is_error and "admin" in json.dumps(refused.model_dump(mode="json"))
        read = await bob.call_tool("configure", {"names": ["context.max_tokens"]})
        assert not read.is_error
        assert read.structured_content["settings"]["context.max_tokens"]["value"] != 100  # type: ignore[index]
    async with mcp_as(world, "root") as root:
        done = await root.call_tool("configure", {"set": {"search.default_limit": 11}})
        assert not done.is_error and done.structured_content["changed"] == ["search.default_limit"]  # type: ignore[index]


@pytest.mark.anyio
async def test_consolidation_is_per_user_and_audited(world: World) -> None:
    async with mcp_as(world, "bob") as bob:
        dry = await bob.call_tool("consolidate", {"dry_run": True})
        real = await bob.call_tool("consolidate", {"dry_run": False})
    for result in (dry, real):
        assert not result.is_error
        assert not world.leaked(json.dumps(result.model_dump(mode="json")))
    ann_untouched(world)
    status, text = call(world.server.port, "GET", "/api/v1/audit?user=bob&limit=1000", world.tokens["root"])
    actions = [row["action"] for row in json.loads(text)["results"]]
    assert status == 200 and "consolidate_dry_run" in actions and "consolidate" in actions
    run_id = real.structured_content["run_id"]  # type: ignore[index]
    async with mcp_as(world, "ann") as ann:
        undo = await ann.call_tool("consolidate", {"undo": run_id})
        assert undo.is_error, "only the user who ran a consolidation may see or undo it"


def test_a_revoked_token_closes_its_open_websocket_and_change_feed(world: World) -> None:
    port = world.server.port
    with Service.open(world.settings) as service:
        token = team.create_token(service.store, "carol", NOW)
    auth = {"Authorization": f"Bearer {token['token']}"}
    feed = SseReader(port, "/stream/changes", auth)
    assert feed.next_event().event == "start"
    with ws_connect(f"ws://127.0.0.1:{port}/ws", additional_headers=auth) as ws:
        ws.send(json.dumps({"op": "recall", "id": 1, "query": "login"}))
        assert json.loads(ws.recv(timeout=10))["event"] == "start"
        with Service.open(world.settings) as service:
            team.revoke(service.store, str(token["id"]), NOW)
        call(port, "POST", "/api/v1/memories", world.tokens["root"], {"content": "written after the revocation"})
        with contextlib.suppress(ConnectionClosed):  # closed at once, or at this message at the latest
            ws.send(json.dumps({"op": "recall", "id": 2, "query": "revocation"}))
        messages = []
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                messages.append(json.loads(ws.recv(timeout=10)))
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
        assert closed.value.rcvd.reason == "token revoked"
        answers = [m for m in messages if m.get("id") == 2]
        assert answers == [] and any(m.get("data", {}).get("type") == "unauthorized" for m in messages), messages
    events = []
    while True:
        try:
            event = feed.next_event()
        except EOFError:
            break
        events.append(event)
        if event.event == "error":
            break
    assert events[-1].event == "error" and events[-1].data["type"] == "unauthorized", events
    assert not any("after the revocation" in json.dumps(e.data) for e in events), events
    feed.close()


def test_the_viewer_signs_a_team_user_in_with_a_cookie(world: World) -> None:
    port = world.server.port
    status, _ = call(port, "GET", "/login?token=nmem_wrong", None)
    assert status == 401
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", f"/login?token={world.tokens['bob']}&next=/")
    response = conn.getresponse()
    response.read()
    conn.close()
    cookie = response.getheader("set-cookie") or ""
    assert response.status == 303 and cookie.startswith("nmem_session=") and world.tokens["bob"] not in cookie
    session = cookie.split(";", 1)[0]
    status, text = call(port, "GET", "/api/v1/memories?domain=user", None, headers={"Cookie": session})
    assert status == 200 and "Fridays" in text and not world.leaked(text)
    forged = session.rsplit(".", 1)[0] + "." + "0" * 64
    assert call(port, "GET", "/api/v1/status", None, headers={"Cookie": forged})[0] == 401


def test_consolidation_never_merges_one_writers_private_memory_into_anothers(nmem_home: Path) -> None:
    """Run locally (the CLI: no viewer, every memory), near-duplicates of two writers stay apart."""
    settings = load_settings({"NMEM_HOME": str(nmem_home), "NMEM_DUPLICATE_THRESHOLD": "0.5"})
    with Service.open(settings) as service:
        for name in ("ann", "bob"):
            team.add_user(service.store, name, False, NOW)
        for topic in ("wheel caches", "YAML tabs", "UTC logs", "migrations", "nightly index", "feature flags"):
            service.remember(f"Team rule on {topic}.", domain="org")
        written = {}
        for name, words in (("ann", ("memo", "aside")), ("bob", ("reminder",))):
            with acting_as(Viewer(name)):
                written[name] = [service.remember(f"{w}: the {QUERY} happens on Fridays; ask the on-call lead.",
                                                  domain="user").id for w in words]
        report = service.consolidate(dry_run=True)
    private = {*written["ann"], *written["bob"]}
    groups = [ids for merge in report["merges"]
              if (ids := {m["id"] for m in merge["merged"]} | {merge["survivor"]}) & private]
    assert groups == [set(written["ann"])], report["merges"]  # ann's two merge; bob's near-duplicate stays his


# -- nothing tells an existing private memory from one that never was ----------------------------------------

def _as_nobody(text: str, named: str) -> str:
    return text.replace(named, "REF").replace(quote(named, safe=""), "REF")


def _unseen_refs(world: World) -> list[tuple[str, str]]:
    """(a name of ann's private memory, the same kind of name that names nothing): her number, id and URN."""
    with Service.open(world.settings) as service:
        number = service.store.memory_numbers([world.ann_uids[0]])[world.ann_uids[0]]
    fake = world.ann_uids[0][:-6] + "ZZZZZZ"
    return [(str(number), "987654"), (world.ann_uids[0], fake), (world.ann_urns[0], world.ann_urns[0].replace(
        world.ann_uids[0], fake))]


def test_no_operation_answers_bob_differently_for_anns_private_memory_than_for_none(world: World) -> None:
    """Every REST and claude-mem operation with a path parameter, and every MCP tool taking a memory,
    answers bob the same (status and text, the name aside) whether it names ann's private memory or
    a memory that never existed: an error message must not confirm that she has one."""
    spec = json.loads(call(world.server.port, "GET", "/openapi.json", world.tokens["bob"])[1])
    tried = 0
    for method, path, op in _operations(world):
        names = [p["name"] for p in op.get("parameters", []) if p["in"] == "path"]
        if not names:
            continue
        for ann, nobody in _unseen_refs(world):
            answers = []
            for ref in (ann, nobody):
                target, body = _request(world, method, path, op, spec)
                for name in names:
                    target = target.replace(quote(str(_value(name, {}, world)), safe=""), quote(ref, safe=""))
                status, text = call(world.server.port, method, target, world.tokens["bob"], body,
                                    {"X-Nmem-CSRF": "1"})
                answers.append((status, _as_nobody(text, ref)))
            assert answers[0] == answers[1], f"{method} {path}: {answers}"
            tried += 1
    assert tried >= 15
    ann_untouched(world)


@pytest.mark.anyio
async def test_no_mcp_tool_answers_bob_differently_for_anns_private_memory_than_for_none(world: World) -> None:
    async with mcp_as(world, "bob") as client:
        tools = (await client.list_tools()).tools
        tried = 0
        for tool in tools:
            props = tool.input_schema.get("properties", {})
            keys = [k for k in ("id", "ref", "urn", "memory", "ids", "refs", "urns") if k in props]
            if not keys or tool.name in ("configure", "sync"):
                continue
            for ann, nobody in _unseen_refs(world):
                answers = []
                for ref in (ann, nobody):
                    args = _tool_args(tool.input_schema, world)
                    for key in keys:
                        kind = props[key].get("type")
                        args[key] = [ref] if kind == "array" else ref
                    result = await client.call_tool(tool.name, args)
                    answers.append(_as_nobody(json.dumps(result.model_dump(mode="json")), ref))
                assert answers[0] == answers[1], f"{tool.name}: {answers}"
                tried += 1
        assert tried >= 6
    ann_untouched(world)


@pytest.mark.anyio
async def test_mcp_subscriptions_never_tell_bob_that_ann_changed_a_private_memory(world: World) -> None:
    """Bob may follow the `user` domain (his own private memories) and a public memory; ann's
    edits of her private memories notify him of nothing, the edit of the public one does."""
    inbox = Inbox()
    headers = {"Authorization": f"Bearer {world.tokens['bob']}"}
    async with create_mcp_http_client(headers=headers) as http, \
            Client(streamable_http_client(f"{world.server.base}/mcp", http_client=http), mode="legacy",
                   message_handler=inbox) as bob:
        for uri in ("nmem://org", "nmem://user", f"nmem://user/{SECRET_NS}", world.ann_urns[0],
                    world.ann_public_urn):
            with contextlib.suppress(MCPError), warnings.catch_warnings():  # refused for her private ones
                warnings.simplefilter("ignore")  # resources/subscribe is deprecated after 2025-11-25
                await bob.subscribe_resource(uri)
        # what was written before (bob's own private memory too) is heard first: start after it
        call(world.server.port, "POST", "/api/v1/memories", world.tokens["root"],
             {"content": "Org rule: the watcher caught up.", "domain": "org"})
        await inbox.wait_updated("nmem://org", timeout=10)
        await inbox.wait_list_changed(timeout=10)  # a poll's last notification: its batch is all here
        inbox.messages.clear()
        for ref in world.ann_uids:
            status, _ = call(world.server.port, "PATCH", f"/api/v1/memories/{ref}", world.tokens["ann"],
                             {"tags": [f"{MARKER}-tag", "edited"]})
            assert status == 200
        status, _ = call(world.server.port, "PATCH", f"/api/v1/memories/{world.ann_public}", world.tokens["ann"],
                         {"content": "Deploys run from the release branch, again."})
        assert status == 200
        await inbox.wait_updated(world.ann_public_urn, timeout=10)
        heard = json.dumps([m.model_dump(mode="json") for m in inbox.messages if not isinstance(m, Exception)])
        assert not world.leaked(heard) and "nmem://user" not in heard, heard[:600]
    with Service.open(world.settings) as service:  # her edits undone: the other tests see her notes as written
        for ref in world.ann_uids:
            service.update(ref, tags=[f"{MARKER}-tag"])


def test_a_search_score_does_not_tell_bob_which_words_anns_private_memories_hold(world: World) -> None:
    """Bob writes two project memories alike but for one word: a word of ann's private notes and
    one nobody wrote. If their scores differ, a score is an oracle for her private words. Every
    surface that ranks memories is asked: REST search (memories, everything), recall, and the MCP
    tools `search` and `recall`."""
    for word in (MARKER, "kiwiplumbo"):
        status, text = call(world.server.port, "POST", "/api/v1/memories", world.tokens["bob"],
                            {"content": f"note about {word} and the rotation schedule", "namespace": "learnings"})
        assert status == 201, text
    scores: dict[str, dict[str, float]] = {}
    for word in (MARKER, "kiwiplumbo"):
        for surface, path in (("search", f"/api/v1/search?query={word}&scope=memories"),
                              ("search all", f"/api/v1/search?query={word}&scope=all"),
                              ("recall", f"/api/v1/memories?query={word}")):
            status, text = call(world.server.port, "GET", path, world.tokens["bob"])
            assert status == 200, text
            scores.setdefault(surface, {})[word] = _score_of(json.loads(text), word)
        for tool, args in (("search", {"query": word, "scope": "memories"}), ("recall", {"query": word})):
            result = asyncio.run(_tool_result(world, tool, args))
            scores.setdefault(f"mcp {tool}", {})[word] = _score_of(result, word)
    for surface, by_word in scores.items():
        assert by_word[MARKER] == by_word["kiwiplumbo"], (surface, scores)


def _score_of(answer: Any, word: str) -> float:
    """The score of the one result in an answer (REST or an MCP tool's structured content) that holds `word`."""
    rows = answer.get("results") or answer.get("memories") or answer.get("hits") or []
    found = [r for r in rows if word in json.dumps(r)]
    assert len(found) == 1, answer
    return float(found[0]["score"])


async def _tool_result(world: World, tool: str, args: dict[str, Any]) -> Any:
    async with mcp_as(world, "bob") as client:
        result = await client.call_tool(tool, args)
        return result.structured_content or json.loads(result.content[0].text)


@pytest.mark.parametrize("route", ["/api/v1/hook", "/api/v1/events"])
def test_a_remote_event_never_makes_the_server_read_a_file_it_names(world: World, tmp_path: Path,
                                                                     route: str) -> None:
    """A hook event sent over the network names a transcript on its sender's machine; the server
    must not open that path on its own disk (another user's transcript, the operator's files)."""
    secret = "operatorsownwords"
    transcript = tmp_path / "operator.jsonl"
    lines = [{"type": "user", "sessionId": "op-1", "cwd": "/srv", "timestamp": "2026-11-01T10:00:00Z", "uuid": "u1",
              "parentUuid": None, "message": {"role": "user", "content": "rotate the keys"}},
             {"type": "assistant", "sessionId": "op-1", "cwd": "/srv", "timestamp": "2026-11-01T10:00:05Z",
              "uuid": "a1", "parentUuid": "u1",
              "message": {"id": "m1", "type": "message", "role": "assistant", "model": "claude",
                          "content": [{"type": "text", "text": f"{secret}: the key is in /srv"}]}}]
    transcript.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    session = f"bob-{route.rsplit('/', 1)[1]}"
    for n, hook in enumerate(({"hook_event_name": "UserPromptSubmit", "prompt": "what did the operator say"},
                              {"hook_event_name": "Stop", "transcript_path": str(transcript),
                               "stop_hook_active": False})):
        payload = {"session_id": session, "cwd": "/work/demo", **hook}
        body = payload if route.endswith("/hook") else {"event": payload, "key": f"{session}-{n}",
                                                        "received_at": NOW + n}
        status, text = call(world.server.port, "POST", route, world.tokens["bob"], body)
        assert status == 200, text
    status, text = call(world.server.port, "GET", f"/api/v1/search?query={secret}&scope=all", world.tokens["bob"])
    assert status == 200 and secret not in json.dumps(json.loads(text)["results"]), text[:400]


def test_settings_and_status_never_show_a_token_or_password_in_a_url(tmp_path: Path) -> None:
    """Every user of a team server may read the settings and status: a sync remote's token (as
    GitHub documents it, the URL's user) and a password in a store URL's query stay hidden."""
    from nmem.capture.privacy import redact_url

    token = "ghp_R4nd0mT0k3nV4lu3Abcdefghijklmnop1234"
    for url, secret in ((f"https://{token}@github.com/acme/memory.git", token),
                        ("postgresql://app@db.internal/nmem?password=hunter22x&sslmode=require", "hunter22x"),
                        ("postgresql://app@db.internal/nmem?sslmode=verify-full&sslpassword=k3yp4ss99", "k3yp4ss99"),
                        ("https://git.acme.io/memory.git?private_token=abcdef123456ghijk", "abcdef123456ghijk"),
                        ("postgresql://app:hunter22x@db.internal/nmem", "hunter22x")):
        shown = redact_url(url)
        assert secret not in shown and ("***" in shown or "[REDACTED:" in shown), shown
    assert redact_url("postgresql://app@db.internal/nmem?sslmode=require") == \
        "postgresql://app@db.internal/nmem?sslmode=require"
    settings = load_settings({"NMEM_HOME": str(tmp_path), "NMEM_SYNC_REMOTE": f"https://{token}@github.com/acme/m.git"})
    with Service.open(settings) as service:
        for name, admin in (("root", True), ("bob", False)):
            team.add_user(service.store, name, admin, NOW)
        bob = team.create_token(service.store, "bob", NOW)["token"]
    with running_server(settings) as server:
        for path in ("/api/v1/settings", "/api/v1/status"):
            status, text = call(server.port, "GET", path, bob)
            assert status == 200 and token not in text and token[:12] not in text, (path, text[:300])


def test_anns_better_matches_never_push_bobs_own_memory_off_his_page(world: World) -> None:
    """Other users' private memories are left out before a page is cut, not after: bob finds his own
    match with `limit=1` however many stronger matches ann keeps private, and an empty page never
    tells him she has them."""
    word = "quillfeather"
    status, _ = call(world.server.port, "POST", "/api/v1/memories", world.tokens["bob"],
                     {"content": f"{word}: the on-call rota lives in the wiki", "namespace": "learnings"})
    assert status == 201
    extra = []
    for i in range(6):
        status, text = call(world.server.port, "POST", "/api/v1/memories", world.tokens["ann"],
                            {"content": f"{MARKER} {word} {word} {word} note {i}", "domain": "user",
                             "namespace": SECRET_NS})
        assert status == 201
        extra.append(json.loads(text)["id"])
    for path in (f"/api/v1/search?query={word}&scope=memories&limit=1", f"/api/v1/memories?query={word}&limit=1",
                 f"/api/v1/search?query={word}&limit=1", f"/api/search?query={word}&type=memories&limit=1"):
        status, text = call(world.server.port, "GET", path, world.tokens["bob"])
        assert status == 200 and "on-call rota" in text and not world.leaked(text), (path, text[:300])
    for uid in extra:  # ann's count stays what the other tests expect
        assert call(world.server.port, "DELETE", f"/api/v1/memories/{uid}", world.tokens["ann"])[0] == 200
