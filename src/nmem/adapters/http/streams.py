"""Live streams (subcog §4): SSE at `/stream/*` and a WebSocket at `/ws` (docs/streams.md).

Every stream speaks the same events: `start`, `progress`, `result`, `change`, `error`,
`complete`, their data a superset of subcog's (§4.4: `{operation, params}`, `{phase, current,
total, message}`, `{memory, score}`, `{uri, memory}`, `{code, message}`, `{success, summary}`).
subcog's own requests (`POST /stream/recall` with a JSON body, WebSocket messages naming their
`operation`) recall memories, and get their results as `{memory, score}` and WebSocket replies as
`{"type": ..., "data": ...}`. `/stream/changes` is the live feed of what any process writes (hooks included):
one poller per server checks `PRAGMA data_version` every `streaming.poll_ms` and fans each
change out to every client, so a hundred clients cost one query per commit, not a hundred.
An idle stream sends a `: keep-alive` comment every `streaming.keepalive_seconds`.

The streams read through their own `Service` (own SQLite connections), used on the event
loop only, so they never share a connection with request handlers running in threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from nmem.changes import Change, Cursor, may_see
from nmem.config import Settings
from nmem.errors import InvalidArgument, NmemError
from nmem.models import urn_parts
from nmem.service.api import Service
from nmem.service.args import ProjectScope
from nmem.sync.engine import run_sync
from nmem.team import accounts as team
from nmem.team.access import acting_as

SEARCH_SCOPES = ("memories", "observations", "prompts", "sessions")
QUEUE_SIZE = 2000  # changes a slow client may fall behind by before it is told to reconnect
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}
_LAGGING = object()
REVOKED = {"type": "unauthorized", "code": -32000,
           "message": "the token this stream was opened with was revoked; sign in again"}


def sse(event: str, data: Any, event_id: str | None = None) -> str:
    """One server-sent event; the data is one line of JSON (newlines in text are escaped by JSON)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n"


def error_body(exc: NmemError) -> dict[str, Any]:
    return {"type": exc.kind, "message": exc.message, "code": exc.mcp_code}


def canonical_urn(value: Any, name: str = "urn") -> str:
    """An `nmem://` URN from either scheme (subcog:// is an alias); InvalidArgument for anything else."""
    parts = urn_parts(value) if isinstance(value, str) and len(value) <= 500 else None
    if parts is None:
        raise InvalidArgument(f"{name} must be a string starting with nmem:// or subcog://")
    return "nmem://" + "/".join(parts)


def _progress(phase: str, current: int, total: int, message: str, **extra: Any) -> dict[str, Any]:
    return {"phase": phase, "current": current, "total": total, "message": message, **extra}


class Subscriber:
    """One client's queue of changes from the hub."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue(QUEUE_SIZE)
        self.lagging = False

    def offer(self, change: Change) -> None:
        if self.lagging:
            return
        try:
            self.queue.put_nowait(change)
        except asyncio.QueueFull:
            self.lagging = True
            self.queue.get_nowait()
            self.queue.put_nowait(_LAGGING)


class StreamHub:
    """The change poller and its subscribers, plus the service the streams read through."""

    def __init__(self, settings: Settings, service: Service | None = None, users: Any = None) -> None:
        self.settings = settings
        self.users = users  # a team server's TeamAuth: streams re-check their token with it
        self.poll_interval = max(10, int(settings["streaming.poll_ms"])) / 1000
        self.keepalive = max(0.05, float(settings["streaming.keepalive_seconds"]))
        self._service = service
        self._own_service = service is None
        self.subscribers: set[Subscriber] = set()
        self._task: asyncio.Task[None] | None = None
        self.cursor: Cursor | None = None

    @property
    def service(self) -> Service:
        if self._service is None:
            self._service = Service.open(self.settings)
        return self._service

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self._own_service and self._service is not None:
            self._service.close()
            self._service = None

    @contextlib.contextmanager
    def subscribe(self) -> Iterator[Subscriber]:
        """A subscriber that receives every change committed from now on, while the block runs."""
        subscriber = Subscriber()
        self.subscribers.add(subscriber)
        self._start()
        try:
            yield subscriber
        finally:
            self.subscribers.discard(subscriber)

    def signed_in(self, scope: Any) -> bool:
        """Whether the user a stream was opened for still holds a live token."""
        return self.users is None or self.users.still_signed_in(scope)

    def _start(self) -> None:
        if self._task is None or self._task.done():
            # The poller reads for every subscriber, so as nobody: each stream filters for its own user.
            with acting_as(None):
                self.cursor = self.service.change_cursor()
                self._task = asyncio.get_running_loop().create_task(self._poll())

    async def _poll(self) -> None:
        store = self.service.store
        token = store.change_token()
        while True:
            await asyncio.sleep(self.poll_interval)
            if not self.subscribers:
                continue
            try:
                now = store.change_token()
                if now == token:
                    continue
                token = now
                self.publish_new()
            except NmemError:
                continue  # a busy or briefly unreadable database: the next tick reads it again

    def publish_new(self) -> None:
        """Read what was committed since the hub's cursor and hand it to every subscriber."""
        assert self.cursor is not None
        while True:
            changes, self.cursor = self.service.changes(self.cursor, limit=500)
            for change in changes:
                for subscriber in list(self.subscribers):
                    subscriber.offer(change)
            if len(changes) < 500:
                return


# -- SSE -----------------------------------------------------------------------------------

def _hub(request: Request | WebSocket) -> StreamHub:
    hub: StreamHub = request.app.state.stream_hub
    return hub


def _stream(events: AsyncIterator[str]) -> StreamingResponse:
    return StreamingResponse(events, media_type="text/event-stream", headers=SSE_HEADERS)


def _refused(exc: NmemError) -> JSONResponse:
    return JSONResponse({"error": error_body(exc)}, status_code=getattr(exc, "http_status", 400))


async def stream_changes(request: Request) -> Response:
    """The live feed: `change` events, each with the cursor to resume from as its `id`."""
    hub = _hub(request)
    since_text = request.headers.get("last-event-id") or request.query_params.get("since")
    topic = request.query_params.get("urn") or None
    try:
        since = Cursor.parse(since_text) if since_text else None
        if topic is not None:
            topic = canonical_urn(topic).rstrip("/")
    except NmemError as exc:
        return _refused(exc)
    return _stream(_change_events(hub, since, topic, request.scope))


async def _change_events(hub: StreamHub, since: Cursor | None, topic: str | None,
                         scope: Any = None) -> AsyncIterator[str]:
    with hub.subscribe() as subscriber:
        cursor = hub.service.change_cursor() if since is None else since
        yield sse("start", {"cursor": str(cursor), "urn": topic})
        while since is not None:  # the backlog a resuming client missed
            backlog, cursor = hub.service.changes(cursor, limit=500)
            for change in backlog:
                if topic is None or topic in change.topics():
                    yield sse("change", change.to_dict(), change.cursor)
            if len(backlog) < 500:
                break
        while True:
            try:
                item = await asyncio.wait_for(subscriber.queue.get(), hub.keepalive)
            except TimeoutError:
                item = None
            if not hub.signed_in(scope):
                yield sse("error", REVOKED)
                return
            if item is None:
                yield ": keep-alive\n\n"
                continue
            if item is _LAGGING:
                yield sse("error", {"type": "lagging", "message": "this client fell behind; reconnect with "
                                    "Last-Event-ID to read on from its last change", "code": -32000})
                return
            live: Change = item
            if cursor.covers(live.source, live.position):
                continue  # read already with the backlog, or written before this client came
            cursor = cursor.advanced(live.source, live.position)
            if (topic is None or topic in live.topics()) and may_see(hub.service.store, live):
                yield sse("change", live.to_dict(), live.cursor)


def _search_args(params: Any) -> dict[str, Any]:
    """Search parameters as the REST API and the MCP tools name them (claude-mem's too)."""
    def get(*names: str) -> str | None:
        for name in names:
            if params.get(name) not in (None, ""):
                return str(params.get(name))
        return None

    args: dict[str, Any] = {
        "project": get("project"), "obs_type": get("obs_type", "type"), "namespace": get("namespace"),
        "tags": get("tags", "concepts"), "files": get("files", "file"), "session_id": get("session_id", "session"),
        "date_start": get("date_start", "dateStart"), "date_end": get("date_end", "dateEnd"),
        "order_by": get("order_by", "orderBy") or "relevance", "limit": get("limit"),
    }
    return {k: v for k, v in args.items() if v is not None}


def _flag(value: Any) -> bool:
    return str(value).lower() in ("1", "true", "yes", "on", "full")


def recall_events(service: Service, query: str | None, scope: str, args: dict[str, Any], full: bool
                  ) -> Iterator[tuple[str, Any]]:
    """A search told as it runs: `start`, per scope a `progress` then its `result`s, `complete`.
    Raises before `start` on a bad argument (so a stream can answer 400 instead)."""
    scopes = SEARCH_SCOPES if scope == "all" else (scope,)
    if scope != "all" and scope not in SEARCH_SCOPES:
        raise InvalidArgument(f"unknown scope {scope!r}; valid: {', '.join((*SEARCH_SCOPES, 'all'))}")
    began = time.perf_counter()
    first = service.search(query, scope=scopes[0], **args)  # validates everything once, up front
    yield "start", {"operation": "search", "params": {"query": query, "scope": scope, **args},
                    "query": query, "scopes": list(scopes), "format": "full" if full else "index"}
    count = 0
    for index, name in enumerate(scopes):
        yield "progress", _progress("searching", index, len(scopes), f"searching {name}",
                                    scope=name, stage="searching", done=index)
        result = first if index == 0 else service.search(query, scope=name, **args)
        for hit in result.to_list(full=full):
            count += 1
            yield "result", {"scope": name, **hit}
        yield "progress", _progress("done", index + 1, len(scopes), f"{len(result.hits)} {name}", scope=name,
                                    stage="done", found=len(result.hits), done=index + 1)
    yield "complete", {"success": True, "summary": f"{count} results", "count": count,
                       "elapsed_ms": round((time.perf_counter() - began) * 1000, 1)}


# subcog's recall arguments (§2.2.2 RecallArgs; `reason` needs an LLM nmem's recall does not use)
RECALL_ARGS = ("query", "mode", "limit", "namespace", "domain", "min_similarity", "spec", "tags",
               "include_archived", "detail", "project")


def memory_recall_events(service: Service, args: dict[str, Any], current: str | None
                         ) -> Iterator[tuple[str, Any]]:
    """subcog's recall as a stream: memories (as `nmem recall`), each result `{memory, score}`.
    Raises before `start` on a bad argument."""
    unknown = sorted(set(args) - set(RECALL_ARGS))
    if unknown:
        raise InvalidArgument(f"unknown recall argument(s) {', '.join(unknown)}; valid: {', '.join(RECALL_ARGS)}")
    options = {k: v for k, v in args.items() if v is not None}
    query = options.pop("query", None)
    if query is not None and not isinstance(query, str):
        raise InvalidArgument("query must be a string")
    if not isinstance(options.get("include_archived", False), bool):
        raise InvalidArgument("include_archived must be true or false")
    project = ProjectScope.parse(options.pop("project", None), current, bound=True).only
    began = time.perf_counter()
    rows = service.recall_results(query or None, detail=str(options.pop("detail", "summary")), project=project,
                                  **options)
    yield "start", {"operation": "recall", "params": {"query": query, **args}}
    yield "progress", _progress("recall", 0, 1, "recalling memories")
    for row in rows:
        yield "result", {"memory": row, "score": row.get("score")}
    yield "progress", _progress("recall", 1, 1, f"{len(rows)} memories")
    yield "complete", {"success": True, "summary": f"{len(rows)} memories", "count": len(rows),
                       "elapsed_ms": round((time.perf_counter() - began) * 1000, 1)}


async def stream_recall(request: Request) -> Response:
    """GET: a search across every kind of record (the REST search's parameters). POST with a JSON
    body of subcog's recall arguments: a memory recall, as subcog's `/stream/recall`."""
    params = request.query_params
    try:
        if request.method == "POST":
            events = memory_recall_events(_hub(request).service, await _json_body(request),
                                          request.app.state.nmem.project)
        else:
            query = params.get("query") or params.get("q") or None
            events = recall_events(_hub(request).service, query, params.get("scope") or "all", _search_args(params),
                                   _flag(params.get("format") or params.get("full") or ""))
        first = next(events)
    except NmemError as exc:
        return _refused(exc)

    async def body() -> AsyncIterator[str]:
        yield sse(*first)
        try:
            for event in events:
                yield sse(*event)
                await anyio.sleep(0)
        except NmemError as exc:
            yield sse("error", error_body(exc))
    return _stream(body())


async def _json_body(request: Request) -> dict[str, Any]:
    """A JSON object body (empty: no arguments). Only `application/json`, which no cross-site form
    can send without a preflight the guard refuses: so this read-only POST needs no CSRF header."""
    raw = await request.body()
    if not raw.strip():
        return {}
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        raise InvalidArgument("send the arguments as JSON (Content-Type: application/json)")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise InvalidArgument("the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise InvalidArgument("the request body must be a JSON object")
    return data


async def _threaded_operation(work: Callable[[Callable[[dict[str, Any]], None]], dict[str, Any]],
                              name: str, params: dict[str, Any] | None = None) -> AsyncIterator[str]:
    """Run `work(progress)` in a thread, telling its progress as it comes, then its result."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    steps = 0

    def progress(info: dict[str, Any]) -> None:
        nonlocal steps
        steps += 1
        step = {"phase": str(info.get("event") or name), "current": steps, "total": None,
                "message": str(info.get("message") or info.get("event") or ""), **info}
        loop.call_soon_threadsafe(queue.put_nowait, ("progress", step))

    def run() -> None:
        try:
            outcome: tuple[str, Any] = ("result", work(progress))
        except NmemError as exc:
            outcome = ("error", error_body(exc))
        loop.call_soon_threadsafe(queue.put_nowait, outcome)

    yield sse("start", {"operation": name, "params": params or {}})
    began = time.perf_counter()
    # The worker acts for the signed-in user too (an executor thread starts with a fresh context).
    worker = loop.run_in_executor(None, contextvars.copy_context().run, run)
    try:
        while True:
            event, data = await queue.get()
            yield sse(event, data)
            if event in ("result", "error"):
                break
    finally:
        await worker
    if event == "result":
        yield sse("complete", {"success": True, "summary": f"{name} finished", "result": data, "operation": name,
                               "elapsed_ms": round((time.perf_counter() - began) * 1000, 1)})


async def stream_sync(request: Request) -> Response:
    """`nmem sync` with the configured remote (a client cannot name another), told as it runs;
    on a team server an admin's task (it pushes every user's memories)."""
    settings = _hub(request).settings
    try:
        team.require_admin("sync")
    except NmemError as exc:
        return _refused(exc)
    params = request.query_params
    direction = params.get("direction") or "both"
    if direction not in ("both", "fetch", "push"):
        return _refused(InvalidArgument("direction must be both, fetch or push"))
    domains = params.getlist("domain")
    force = _flag(params.get("force") or "")

    def work(progress: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        with Service.open(settings) as service:  # its own connections, in the worker thread
            report = run_sync(service.store, settings, fetch=direction != "push", push=direction != "fetch",
                              force=force, domains=domains, project=params.get("project") or service.project_for(),
                              progress=progress)
            return report.to_dict()
    return _stream(_threaded_operation(work, "sync", {"direction": direction, "domains": domains, "force": force}))


async def stream_consolidate(request: Request) -> Response:
    """`nmem consolidate` (merge near-duplicates, archive stale notes, roll sessions up), told as
    it runs; `dry_run=1` plans without writing, `domain=` narrows it."""
    settings = _hub(request).settings
    params = request.query_params
    dry_run = _flag(params.get("dry_run") or "")
    domain = params.get("domain") or None

    def work(progress: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        with Service.open(settings) as service:  # its own connections, in the worker thread
            return service.consolidate(dry_run=dry_run, domain=domain,
                                       progress=lambda message: progress({"message": message}))
    return _stream(_threaded_operation(work, "consolidate", {"dry_run": dry_run, "domain": domain}))


# -- WebSocket -------------------------------------------------------------------------------

# A connection's subscriptions: URN -> whether it was asked for in subcog's dialect (`operation`).
Topics = dict[str, bool]
# Keys of a WebSocket message that are the protocol's, not the operation's arguments.
WS_KEYS = ("op", "operation", "id")


async def websocket_endpoint(ws: WebSocket) -> None:
    """JSON messages: `{"op": "recall", "id", "query", ...}` streams a search as events;
    `{"op": "subscribe" | "unsubscribe", "urn"}` follows a URN's changes; `{"op": "ping"}`.
    subcog's `{"operation": "recall" | "subscribe", ...}` is answered in its own shapes."""
    hub = _hub(ws)  # the app's guard already checked Host, token and Origin (no cross-site page)
    await ws.accept()
    topics: Topics = {}
    with hub.subscribe() as subscriber:
        async with anyio.create_task_group() as group:
            group.start_soon(_forward_changes, ws, hub, subscriber, topics)
            try:
                while True:
                    text = await ws.receive_text()
                    if not hub.signed_in(ws.scope):
                        await _close_revoked(ws)
                        break
                    await _answer(ws, hub, topics, text)
            except WebSocketDisconnect:
                pass
            group.cancel_scope.cancel()


async def _close_revoked(ws: WebSocket) -> None:
    with contextlib.suppress(Exception):  # the client may be gone already
        await ws.send_json({"event": "error", "data": REVOKED})
        await ws.close(code=1008, reason="token revoked")


def subcog_uri(urn: str) -> str:
    return "subcog://" + urn.removeprefix("nmem://")


async def _forward_changes(ws: WebSocket, hub: StreamHub, subscriber: Subscriber, topics: Topics) -> None:
    while True:
        try:
            item = await asyncio.wait_for(subscriber.queue.get(), hub.keepalive)
        except TimeoutError:
            item = None
        if not hub.signed_in(ws.scope):
            await _close_revoked(ws)
            return
        if item is None:
            continue
        if item is _LAGGING:
            await ws.send_json({"event": "error", "data": {"type": "lagging", "message": "fell behind; "
                                                           "subscribe again", "code": -32000}})
            await ws.close(code=1013)
            return
        change: Change = item
        matched = sorted(topics.keys() & change.topics())
        if not matched or not may_see(hub.service.store, change):
            continue
        ours = [urn for urn in matched if not topics[urn]]
        if ours:
            await ws.send_json({"event": "change", "urns": ours, "data": change.to_dict()})
        if len(ours) < len(matched):  # subcog §4.3: {"type": "change", "uri", "memory"}
            await ws.send_json({"type": "change", "uri": subcog_uri(change.urn), "memory": change.record,
                                "kind": change.kind, "action": change.action, "cursor": change.cursor})


async def _reply(ws: WebSocket, event: str, message: dict[str, Any], subcog: bool, **fields: Any) -> None:
    """One answer to a message: `{"event", "id", ...}`, or in subcog's dialect `{"type", "id", ...}`."""
    await ws.send_json({"type" if subcog else "event": event, "id": message.get("id"), **fields})


async def _ping(ws: WebSocket, hub: StreamHub, topics: Topics, message: dict[str, Any], subcog: bool) -> None:
    await _reply(ws, "pong", message, subcog)


async def _follow(ws: WebSocket, hub: StreamHub, topics: Topics, message: dict[str, Any], subcog: bool) -> None:
    op = message.get("op") or message.get("operation")
    given = message.get("urn") if message.get("urn") is not None else message.get("uri")
    urn = canonical_urn(given).rstrip("/")
    if op == "subscribe":
        topics[urn] = subcog
    else:
        topics.pop(urn, None)
    if subcog:
        await _reply(ws, f"{op}d", message, subcog, uri=given)
    else:
        await _reply(ws, f"{op}d", message, subcog, urn=urn)


async def _recall(ws: WebSocket, hub: StreamHub, topics: Topics, message: dict[str, Any], subcog: bool) -> None:
    if subcog:  # subcog's recall: memories, each result {memory, score}
        args = {k: v for k, v in message.items() if k not in WS_KEYS}
        events = memory_recall_events(hub.service, args, ws.app.state.nmem.project)
    else:
        query = message.get("query")
        if query is not None and not isinstance(query, str):
            raise InvalidArgument("query must be a string")
        events = recall_events(hub.service, query or None, str(message.get("scope") or "all"),
                               _search_args(message), _flag(message.get("format") or message.get("full") or ""))
    for event, data in events:
        await _reply(ws, event, message, subcog, data=data)


# The WebSocket's operations: `{"op": <name>, ...}` or subcog's `{"operation": <name>, ...}`
# (tests enumerate this table).
WS_OPS: dict[str, Callable[[WebSocket, StreamHub, Topics, dict[str, Any], bool], Any]] = {
    "recall": _recall, "subscribe": _follow, "unsubscribe": _follow, "ping": _ping,
}


async def _answer(ws: WebSocket, hub: StreamHub, topics: Topics, text: str) -> None:
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        message = None
    if not isinstance(message, dict):
        await ws.send_json({"event": "error", "data": {"type": "invalid_argument", "code": -32602,
                                                       "message": "each message must be a JSON object"}})
        return
    subcog = "op" not in message and "operation" in message
    op = message.get("operation") if subcog else message.get("op")
    try:
        handler = WS_OPS.get(op) if isinstance(op, str) else None
        if handler is None:
            key = "operation" if subcog else "op"
            raise InvalidArgument(f"unknown {key} {str(op)[:40]!r}; valid: {', '.join(WS_OPS)}")
        await handler(ws, hub, topics, message, subcog)
    except NmemError as exc:
        await _reply(ws, "error", message, subcog, data=error_body(exc))


# POSTs that only read and take only JSON bodies: the guard asks no CSRF header of them (`_json_body`).
HEADER_EXEMPT = ("/stream/recall",)


def routes() -> list[BaseRoute]:
    """The stream routes; the app sets `app.state.stream_hub` (a `StreamHub`) before serving
    and closes it on shutdown."""
    return [
        Route("/stream/changes", stream_changes, methods=["GET"]),
        Route("/stream/recall", stream_recall, methods=["GET", "POST"]),
        Route("/stream/sync", stream_sync, methods=["POST"]),
        Route("/stream/consolidate", stream_consolidate, methods=["POST"]),
        WebSocketRoute("/ws", websocket_endpoint),
    ]
