"""subcog's cross-interface observability (§6.3) for the HTTP server: a request id on every
response and log line, and `/metrics` in Prometheus's text exposition format.

`Observe` is the outermost ASGI layer (outside the guard, so refusals carry an id too). Each
request gets the caller's `X-Request-Id` when it is a sane token, else a new one; it is sent
back in the response header, set in a context variable every log record reads (`request_id`,
`-` outside a request), and named in one access line per request (logger `nmem.http.access`).

`Metrics` counts requests and their latencies per route template (not per raw path, so a
scanner cannot grow the label set), MCP tool calls and latencies per tool and outcome, and
hook events received over HTTP per outcome; a scrape adds the spool's depth and the store's
size and rows. Nothing here imports the MCP SDK: the MCP server reports tool calls through
the callback `create_app` gives it.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from typing import Any, NamedTuple

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match

from nmem import __version__
from nmem.adapters.http.routing import Context, error_response
from nmem.errors import NmemError
from nmem.service.api import Service
from nmem.team.accounts import require_admin

HEADER = "x-request-id"
_HEADER_BYTES = HEADER.encode()
REQUEST_ID: ContextVar[str] = ContextVar("nmem_request_id", default="-")
_CONVERTER = re.compile(r"\{(\w+):\w+\}")  # `{ref:path}` is shown as `{ref}`
_SANE_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
HOOK_ROUTES = frozenset(("/api/v1/events", "/api/v1/hook"))
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
access_log = logging.getLogger("nmem.http.access")
_factory_lock = threading.Lock()


def install_log_ids() -> None:
    """Every log record carries `request_id` (the current request's, else `-`); once per process."""
    with _factory_lock:
        previous = logging.getLogRecordFactory()
        if getattr(previous, "nmem_request_ids", False):
            return

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            record.request_id = REQUEST_ID.get()
            return record

        factory.nmem_request_ids = True  # type: ignore[attr-defined]
        logging.setLogRecordFactory(factory)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    inner = ",".join(f'{k}="{_label(v)}"' for k, v in pairs)
    return "{" + inner + "}" if inner else ""


def _number(value: float) -> str:
    """A sample's value in full: a whole number without a fraction (a 1.2 GB store's bytes, not 1.23457e+09)."""
    number = float(value)
    return str(int(number)) if number.is_integer() and abs(number) < 2**53 else repr(number)


class _Histogram:
    __slots__ = ("buckets", "count", "total")

    def __init__(self) -> None:
        self.buckets = [0] * len(BUCKETS)
        self.count = 0
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.count += 1
        self.total += seconds
        i = bisect.bisect_left(BUCKETS, seconds)  # the first bucket it fits; cumulated when rendered
        if i < len(BUCKETS):
            self.buckets[i] += 1

    def lines(self, name: str, labels: tuple[tuple[str, str], ...]) -> list[str]:
        cumulative = list(itertools.accumulate(self.buckets))
        out = [f"{name}_bucket{_labels((*labels, ('le', str(b))))} {n}" for b, n in zip(BUCKETS, cumulative,
                                                                                         strict=True)]
        out.append(f"{name}_bucket{_labels((*labels, ('le', '+Inf')))} {self.count}")
        out.append(f"{name}_sum{_labels(labels)} {self.total:.6f}")
        out.append(f"{name}_count{_labels(labels)} {self.count}")
        return out


class Metrics:
    """The server's counters; `text` renders every family of FAMILIES with a scrape's `Reading`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started = time.time()
        # label values (route, method, status; tool, outcome; ...) -> count or histogram
        self.requests: dict[tuple[str, ...], int] = {}
        self.latency: dict[tuple[str, ...], _Histogram] = {}
        self.tools: dict[tuple[str, ...], int] = {}
        self.tool_latency: dict[tuple[str, ...], _Histogram] = {}
        self.hooks: dict[tuple[str, ...], int] = {}

    def request(self, route: str, method: str, status: int, seconds: float) -> None:
        with self._lock:
            key = (route, method, str(status))
            self.requests[key] = self.requests.get(key, 0) + 1
            self.latency.setdefault((route,), _Histogram()).observe(seconds)
            if route in HOOK_ROUTES and method == "POST":
                outcome = "recorded" if status < 300 else "refused" if status < 500 else "failed"
                self.hooks[(route, outcome)] = self.hooks.get((route, outcome), 0) + 1

    def tool_call(self, tool: str, outcome: str, seconds: float) -> None:
        with self._lock:
            self.tools[(tool, outcome)] = self.tools.get((tool, outcome), 0) + 1
            self.tool_latency.setdefault((tool,), _Histogram()).observe(seconds)

    def text(self, reading: Reading) -> str:
        lines: list[str] = []
        with self._lock:
            for family in FAMILIES:
                lines += family.lines(self, reading)
        return "\n".join(lines) + "\n"


class Reading(NamedTuple):
    """What a scrape reads beside the counters (on the store's threads): the store's size and
    rows per record kind, the spool's depth, and when."""

    size_bytes: int
    rows: dict[str, int]
    pending: int
    set_aside: int
    at: float
    writes: tuple[int, int, int] = (0, 0, 0)   # the writer's: run alone, shared transactions, writes in them
    pool: Mapping[str, int] = {}   # a PostgreSQL store's connection pool (`pool_stats`); none on SQLite


STORE_KINDS = ("sessions", "prompts", "observations", "memories")


def read_now(service: Service) -> Reading:
    """What a scrape reads now: the store's size and rows, the spool's depth."""
    pending, set_aside = spool_depth(service.settings.spool_dir)
    st = service.store.status()
    pool_stats = getattr(service.store, "pool_stats", None)
    return Reading(st.size_bytes, {kind: getattr(st, kind) for kind in STORE_KINDS}, pending, set_aside, time.time(),
                   pool=pool_stats() if pool_stats is not None else {})


Samples = Mapping[tuple[str, ...], Any]   # label values -> a count, a gauge's value or a _Histogram


class Family(NamedTuple):
    """One metric family: its name, type and help, the names of its labels, and where its
    samples come from. Counters and histograms list theirs sorted by label; gauges in their
    source's order."""

    name: str
    kind: str   # counter, histogram or gauge
    help: str
    labels: tuple[str, ...]
    source: Callable[[Metrics, Reading], Samples]

    def lines(self, metrics: Metrics, reading: Reading) -> list[str]:
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]
        found = self.source(metrics, reading)
        for key, value in (found.items() if self.kind == "gauge" else sorted(found.items())):
            labels = tuple(zip(self.labels, key, strict=True))
            if self.kind == "histogram":
                out += value.lines(self.name, labels)
            else:
                out.append(f"{self.name}{_labels(labels)} {_number(value)}")
        return out


# nmem_store_pool_connections' states and the psycopg_pool measures they show
POOL_GAUGES = (("open", "pool_size"), ("idle", "pool_available"), ("max", "pool_max"), ("waiting", "requests_waiting"))

FAMILIES: tuple[Family, ...] = (
    Family("nmem_http_requests_total", "counter", "HTTP requests answered, by route template, method and status.",
           ("route", "method", "status"), lambda m, _: m.requests),
    Family("nmem_http_request_duration_seconds", "histogram", "HTTP request latency by route template.",
           ("route",), lambda m, _: m.latency),
    Family("nmem_mcp_tool_calls_total", "counter", "MCP tool calls by tool and outcome (ok, error, internal).",
           ("tool", "outcome"), lambda m, _: m.tools),
    Family("nmem_mcp_tool_duration_seconds", "histogram", "MCP tool call latency by tool.",
           ("tool",), lambda m, _: m.tool_latency),
    Family("nmem_hook_events_total", "counter", "Hook events received over HTTP, by route and outcome "
                                                "(recorded, refused, failed).",
           ("route", "outcome"), lambda m, _: m.hooks),
    Family("nmem_write_transactions_total", "counter", "Write transactions of the REST writer thread: a write "
                                                       "alone, or several hook events sharing one commit "
                                                       "(group commit, `http.write_batch`).",
           ("kind",), lambda m, r: {("alone",): r.writes[0], ("shared",): r.writes[1]}),
    Family("nmem_shared_transaction_writes_total", "counter", "Hook events stored in shared write transactions "
                                                              "(divided by their count: the mean batch).",
           (), lambda m, r: {(): r.writes[2]}),
    Family("nmem_info", "gauge", "This server's nmem version.", ("version",), lambda m, r: {(__version__,): 1.0}),
    Family("nmem_uptime_seconds", "gauge", "Seconds since this server started.", (),
           lambda m, r: {(): round(r.at - m.started, 3)}),
    Family("nmem_spool_events", "gauge", "Hook events waiting in the spool for the database (pending) or set "
                                         "aside as unreadable (set_aside).",
           ("state",), lambda m, r: {("pending",): float(r.pending), ("set_aside",): float(r.set_aside)}),
    Family("nmem_store_size_bytes", "gauge", "The database's size in bytes.", (),
           lambda m, r: {(): float(r.size_bytes)}),
    Family("nmem_store_rows", "gauge", "Rows per record kind.", ("table",),
           lambda m, r: {(kind,): float(n) for kind, n in r.rows.items()}),
    Family("nmem_store_pool_connections", "gauge", "A PostgreSQL store's pooled connections: open, idle (free "
                                                   "now), max (the most it opens), waiting (requests waiting "
                                                   "for one now).",
           ("state",), lambda m, r: {(state,): float(r.pool.get(key, 0)) for state, key in POOL_GAUGES} if r.pool
           else {}),
    Family("nmem_store_pool_requests_total", "counter", "Connections taken from a PostgreSQL store's pool (one "
                                                        "for each statement outside a transaction or snapshot, "
                                                        "one for each of those): all of them (taken), and those "
                                                        "that waited for one (waited).",
           ("outcome",), lambda m, r: {("taken",): float(r.pool.get("requests_num", 0)),
                                       ("waited",): float(r.pool.get("requests_queued", 0))} if r.pool else {}),
    Family("nmem_store_pool_wait_seconds_total", "counter", "Seconds requests waited for a connection of a "
                                                            "PostgreSQL store's pool.",
           (), lambda m, r: {(): r.pool.get("requests_wait_ms", 0) / 1000} if r.pool else {}),
)


def spool_depth(spool_dir: str) -> tuple[int, int]:
    """Events waiting in the spool (the database was busy, or a remote server down) and those set aside."""
    pending = bad = 0
    for _root, _dirs, files in os.walk(spool_dir):
        pending += sum(1 for f in files if f.endswith(".json") and f[:1].isdigit())
        bad += sum(1 for f in files if f.endswith(".bad"))
    return pending, bad


_LABELS: dict[int, tuple[BaseRoute, str]] = {}  # routes live as long as their app; the route is kept to check


def _label_of(route: BaseRoute) -> str:
    """A route's template as a label (`{ref:path}` shown as `{ref}`), worked out once per route."""
    known = _LABELS.get(id(route))
    if known is not None and known[0] is route:
        return known[1]
    label = _CONVERTER.sub(r"{\1}", str(getattr(route, "path", "other")))
    if len(_LABELS) < 4096:
        _LABELS[id(route)] = (route, label)
    return label


def route_of(routes: Iterable[BaseRoute], scope: dict[str, Any]) -> str:
    """The route template a request matched (`/api/v1/memories/{ref}`), `other` when none did."""
    for route in routes:
        match, _ = route.matches(scope)
        if match == Match.FULL:
            return _label_of(route)
    return "other"


def new_request_id() -> str:
    """32 random hex digits naming a request in the log. From `random` (reseeded in each forked
    worker), not `os.urandom`: a system call, around which the event loop lets go of Python's
    lock and then waits for a read thread to hand it back, up to the switch interval (5 ms); the
    id names a request, it guards nothing."""
    return f"{random.getrandbits(128):032x}"


def _given_id(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The caller's `X-Request-Id`, when it is a sane token."""
    for key, value in headers:
        if key.lower() == _HEADER_BYTES:
            given = value.decode("latin-1")
            return given if _SANE_ID.fullmatch(given) else None
    return None


class Observe:
    """ASGI middleware: request id in and out, one access line, the request's metrics."""

    def __init__(self, app: Callable[..., Any], metrics: Metrics, routes: Callable[[], Iterable[BaseRoute]],
                 on_error: Callable[[NmemError], Response] | None = None) -> None:
        """`on_error`: the answer to an NmemError the app raised before an HTTP response began
        (else it propagates)."""
        self.app = app
        self.metrics = metrics
        self.routes = routes
        self.on_error = on_error

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        rid = _given_id(scope.get("headers", ())) or new_request_id()
        rid_bytes = rid.encode()
        token = REQUEST_ID.set(rid)
        started = time.perf_counter()
        status = 0

        async def with_id(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                message["headers"] = [*message.get("headers", ()), (_HEADER_BYTES, rid_bytes)]
            await send(message)

        try:
            await self.app(scope, receive, with_id)
        except NmemError as exc:
            if status or scope["type"] != "http" or self.on_error is None:
                raise
            await self.on_error(exc)(scope, receive, with_id)
        finally:
            seconds = time.perf_counter() - started
            method = scope.get("method", "WEBSOCKET")
            matched = scope.get("route")  # Starlette's router leaves the route it chose in the scope
            route = _label_of(matched) if hasattr(matched, "path") \
                else route_of(self.routes(), scope)  # refused before routing: match it here
            self.metrics.request(route, method, status or 500, seconds)
            access_log.info("%s %s %s %.1f ms", method, scope.get("path", ""), status or "-", seconds * 1000)
            REQUEST_ID.reset(token)


def metrics_endpoint(metrics: Metrics, context: Context) -> Callable[[Request], Any]:
    """`GET /metrics`: behind the guard's token like every route, and an admin's on a team server.
    The store's counts are read on the server's store threads, as every route reads."""

    async def endpoint(_: Request) -> Response:
        try:
            require_admin("reading the server's metrics")
            read = functools.partial(read_now, context.service)
            found = await context.threads.run(read, write=False) if context.threads else read()
            if context.threads:
                lane = context.threads.writes
                found = found._replace(writes=(lane.alone, lane.commits, lane.shared))
            body = metrics.text(found)
        except NmemError as exc:
            return error_response(exc, context.service)
        return Response(body, media_type=CONTENT_TYPE)

    return endpoint
