"""Endpoints as data: method, path, pydantic models for the parameters and the body, and the
service call. One declaration gives the Starlette route and the OpenAPI operation, so the
document cannot drift from what the server accepts.

A handler is a plain function `(Context, params, body) -> JSON-ready object`. A server runs
it off the event loop (`nmem.adapters.http.threads`): reads on its pool of threads, writes on its
one writer thread; a Context without threads calls it on the loop. A handler that waits without
holding a thread (the change feed's long-poll) returns an awaitable, which is awaited on the loop.
A write whose answer needs a read after the commit (a SessionStart's context block) returns
`ThenRead`: the writer thread only writes, and the read runs on a read thread once it is committed.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import re
import types
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Union, get_args, get_origin

import pydantic
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Host, Match, Route

from nmem.adapters.http.threads import StoreThreads
from nmem.errors import InternalError, InvalidArgument, NmemError, ValidationError
from nmem.service.api import Service

log = logging.getLogger("nmem.http")
Handler = Callable[["Context", Any, Any], Any]
# pydantic error types meaning "well-typed but out of range": nmem's ValidationError (422), as in MCP
RANGE_ERRORS = frozenset(("greater_than", "greater_than_equal", "less_than", "less_than_equal",
                          "string_too_long", "string_too_short", "too_long", "too_short"))


class Params(pydantic.BaseModel):
    """Query and path parameters: unknown names are refused, so a typo is an error, not ignored."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)


class Body(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)


@dataclass
class Context:
    """What every handler may use: the service and the server's defaults."""

    service: Service
    project: str | None = None          # the server's current project (search boost, memory domain)
    cwd: str | None = None              # relative file paths are read from this directory's project root
    threads: StoreThreads | None = None  # where handlers run; None: on the event loop


@dataclass(frozen=True)
class ThenRead:
    """A write handler's answer when it needs a read after its write: `answer` runs once the write is
    committed, on a read thread (not on the one writer thread, which meanwhile stores the next
    writes), and returns the JSON-ready answer. It reads from the store's committed state, so it
    sees what the write stored. The request was admitted for its write: the read is not shed."""

    answer: Callable[[], Any]


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    summary: str
    handler: Handler
    params: type[pydantic.BaseModel] | None = None
    body: type[pydantic.BaseModel] | None = None
    tag: str = "trail"
    status: int = 200
    description: str = ""
    path_params: tuple[str, ...] = ()
    response: dict[str, Any] | None = None   # JSON schema of a success, when more than "an object"
    # Parameters the handler checks itself (claude-mem's): their JSON schemas for the document;
    # the handler gets the query as {name: text} (repeated names comma-joined) or the JSON body.
    query_schema: dict[str, Any] | None = None
    body_schema: dict[str, Any] | None = None
    reads_only: bool = False                 # a POST that changes nothing: no CSRF header needed
    # A write that may share one transaction with other waiting ones (group commit, `http.write_batch`):
    # all its writes inside the store's transaction(), nothing done that an undone commit would leave.
    grouped: bool = False
    # What tells this route's writes apart by cost (a hook event's name): each kind's wait is
    # estimated at its own recent cost (admission, `WriteLane.kind_wait`); the route alone else.
    write_kind: Callable[[Any], str] | None = None
    deprecated: bool = False

    @property
    def writes(self) -> bool:
        """Whether the handler may write: it runs on the server's one writer thread."""
        return self.method not in ("GET", "HEAD") and not self.reads_only

    @property
    def openapi_path(self) -> str:
        """The path as OpenAPI writes it: `{ref}`, not Starlette's `{ref:path}`."""
        return re.sub(r"\{(\w+):\w+\}", r"{\1}", self.path)

    @property
    def operation_id(self) -> str:
        return self.handler.__name__.strip("_")

    def route(self, context: Context) -> EndpointRoute:
        return EndpointRoute(self, context)

    async def call(self, context: Context, request: Request) -> Response:
        try:
            params: Any = None
            body: Any = None
            if self.params is not None:
                params = _parse_params(self.params, request)
            elif self.query_schema is not None:
                params = {key: ",".join(request.query_params.getlist(key)) for key in request.query_params}
            if self.body is not None:
                body = _validate(self.body, _json_object(await request.body(), request), "field")
            elif self.body_schema is not None:
                body = _json_object(await request.body(), request)
            call = functools.partial(self.handler, context, params, body)
            kind = self.operation_id if self.write_kind is None else f"{self.operation_id} {self.write_kind(body)}"
            result = await context.threads.run(call, write=self.writes, grouped=self.grouped, kind=kind) \
                if context.threads else call()
            if isinstance(result, ThenRead):
                result = await context.threads.run(result.answer, write=False, admitted=True) \
                    if context.threads else result.answer()
            if inspect.isawaitable(result):  # a handler that waits (the change feed's long-poll)
                result = await result
        except NmemError as exc:
            if exc.http_status == 500:   # the client hears a 500; the server's log keeps why
                log.error("%s %s failed: %s: %s", self.method, self.path, type(exc).__name__, exc.message)
            return error_response(exc, context.service)
        except Exception:  # a bug answers with a generic 500; the traceback stays in the server's log
            log.exception("%s %s failed", self.method, self.path)
            return error_response(InternalError("Internal error"), context.service)
        return json_response(result, self.status)


class EndpointRoute(Route):
    """A declared endpoint's Starlette route, which knows its declaration (for `DirectRoutes`)."""

    def __init__(self, declared: Endpoint, context: Context) -> None:
        self.declared = declared
        self.context = context

        async def endpoint(request: Request) -> Response:
            return await declared.call(context, request)
        super().__init__(declared.path, endpoint, methods=[declared.method], name=declared.operation_id)


def first_match(table: Sequence[BaseRoute], method: str, path: str) -> BaseRoute | None:
    """The route Starlette's router hands an http request for `method` and `path` to (its first
    full match), None when none matches fully or the answer could depend on more than the method
    and the path (a route by Host)."""
    scope = {"type": "http", "method": method, "path": path, "root_path": "", "headers": []}
    for route in table:
        if isinstance(route, Host):
            return None
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return route
    return None


class DirectRoutes:
    """The app behind the guard: Starlette, with a shortcut for the declared endpoints of fixed
    paths (`GET /api/v1/search`, not `/api/v1/memories/{ref}`). Such a request goes straight to
    its endpoint, with the scope Starlette's router would give it (the route, for the metrics'
    label), rather than through Starlette's two middlewares and its router trying each route in
    turn (~9% of the event loop's time a search under 16 clients). A (method, path) is taken only
    when Starlette's own routing sends it to that endpoint (checked once, here); every other
    request (other paths and methods, HEAD, a mount's `root_path`, lifespan) goes to Starlette.
    `unexpected` answers an exception that escapes, as Starlette's handler of `Exception` would."""

    def __init__(self, starlette: Any, unexpected: Callable[[Request, Exception], Awaitable[Response]]) -> None:
        self.starlette = starlette
        self.unexpected = unexpected
        self.table: dict[tuple[str, str], EndpointRoute] = {}
        for route in starlette.routes:
            if isinstance(route, EndpointRoute) and not route.param_convertors:
                key = (route.declared.method, route.path)
                if key not in self.table and first_match(starlette.routes, *key) is route:
                    self.table[key] = route

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        route = self.table.get((scope.get("method", ""), scope.get("path", ""))) \
            if scope["type"] == "http" and not scope.get("root_path") else None
        if route is None:
            await self.starlette(scope, receive, send)
            return
        scope["app"] = self.starlette
        scope["router"] = self.starlette.router
        scope["route"] = route
        scope["endpoint"] = route.endpoint
        scope["path_params"] = {}
        request = Request(scope, receive, send)
        started = False

        async def sending(message: Any) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            response = await route.declared.call(route.context, request)
            await response(scope, receive, sending)
        except Exception as exc:   # as Starlette's outermost middleware: the 500 unless begun, raised on
            if not started:
                await (await self.unexpected(request, exc))(scope, receive, send)
            raise


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str, allow_nan=False)   # json.dumps' own, made once


def json_response(data: Any, status: int = 200) -> Response:
    text = _ENCODER.encode(data)
    return Response(text, status_code=status, media_type="application/json",
                    headers={"cache-control": "no-store"})


def error_response(exc: NmemError, service: Service | None = None) -> Response:
    """The error's JSON body with its class's HTTP status; the database's path never shows."""
    path = str(getattr(service.store, "path", "") or "") if service is not None else ""
    message = exc.message.replace(path, "<database>") if path else exc.message
    body = {"error": {"type": exc.kind, "message": message, "code": exc.mcp_code}}
    response = json_response(body, exc.http_status)
    if exc.retry_after is not None:
        response.headers["retry-after"] = str(exc.retry_after)
    return response


def _is_list(annotation: Any) -> bool:
    if get_origin(annotation) is Annotated:
        return _is_list(get_args(annotation)[0])
    if get_origin(annotation) in (list, tuple):
        return True
    if get_origin(annotation) in (Union, types.UnionType):
        return any(_is_list(a) for a in get_args(annotation) if a is not type(None))
    return False


@functools.cache
def _query_fields(model: type[pydantic.BaseModel]) -> tuple[dict[str, str], frozenset[str]]:
    """A parameter model's aliases (alias -> field) and its list fields, worked out once per model."""
    fields = model.model_fields
    by_alias = {f.alias: name for name, f in fields.items() if f.alias}
    return by_alias, frozenset(name for name, f in fields.items() if _is_list(f.annotation))


def _parse_params(model: type[pydantic.BaseModel], request: Request) -> Any:
    data: dict[str, Any] = dict(request.path_params)
    query = request.query_params
    by_alias, lists = _query_fields(model)
    for key in query:
        if by_alias.get(key, key) in lists:
            # `files=a&files=b` and claude-mem's `files=a,b` both give a list
            data[key] = [part.strip() for value in query.getlist(key) for part in value.split(",") if part.strip()]
        else:
            data[key] = query[key]
    return _validate(model, data, "parameter")


def _json_object(raw: bytes, request: Request) -> dict[str, Any]:
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise InvalidArgument("send the request body as JSON (Content-Type: application/json)")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise InvalidArgument("the request body is not valid JSON") from None
    except RecursionError:
        raise InvalidArgument("the request body is nested too deeply") from None
    if not isinstance(data, dict):
        raise InvalidArgument("the request body must be a JSON object")
    return data


def _validate(model: type[pydantic.BaseModel], data: dict[str, Any], what: str) -> Any:
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        kind = ValidationError if exc.errors()[0]["type"] in RANGE_ERRORS else InvalidArgument
        raise kind(_first_error(exc, what)) from None


def _first_error(exc: pydantic.ValidationError, what: str) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0]
    where = ".".join(str(p) for p in first["loc"]) or "request"
    kind = first["type"]
    if kind == "extra_forbidden":
        return f"unknown {what} {where!r}"
    if kind == "missing":
        return f"{what} {where!r} is required"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"invalid {what} {where!r}: {first['msg']}{more}"


def routes(endpoints: Sequence[Endpoint], context: Context) -> list[EndpointRoute]:
    return [e.route(context) for e in endpoints]
