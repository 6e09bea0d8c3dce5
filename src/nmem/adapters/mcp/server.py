"""The MCP server: nmem's tools, resources, prompts and subscriptions on the official SDK.

Built on the SDK's low-level `Server` for exact control of schemas, pagination, error
codes and subscriptions. Every handler is a thin call into `nmem.service.api.Service`.
Subscriptions work for both protocol eras the SDK serves: 2025-11-25 clients (Claude
Code over stdio) get `notifications/resources/updated` on their session; 2026-07-28
clients get the same events through `subscriptions/listen`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from functools import wraps
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import jsonschema
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourcesListChanged, ResourceUpdated
from mcp.shared.exceptions import MCPError
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from nmem import __version__
from nmem.adapters.mcp import prompts as prompt_specs
from nmem.adapters.mcp import resources
from nmem.adapters.mcp.profiles import exposed
from nmem.adapters.mcp.tools import TEXT_AS, ToolSpec
from nmem.capture import spool as hook_spool
from nmem.changes import ChangeSet, ChangeWatcher, may_hear
from nmem.errors import InternalError, InvalidArgument, NmemError, NotFound, ValidationError
from nmem.service.api import Service
from nmem.team.access import SCOPE_KEY, Viewer, acting_as
from nmem.team.access import current as current_viewer
from nmem.team.accounts import active as users_active

log = logging.getLogger("nmem.mcp")
MAX_SESSIONS = 256  # client connections remembered for notifications
RESOURCE_NOT_FOUND = -32002  # 2025-11-25; the 2026-07-28 spec moved it to -32602 (SEP-2164)
ERROR_META = "nmem/error"  # a tool error's `_meta` key: {"code": -32001, "kind": "not_found"}
# Schema keywords a well-typed value can still fail: out of range, too long, too many.
RANGE_KEYWORDS = frozenset(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                            "minLength", "maxLength", "minItems", "maxItems"))
R = TypeVar("R")
INSTRUCTIONS = (
    "nmem is this developer's local memory of past coding sessions (prompts, files touched, commands, "
    "errors) and of curated decisions and learnings. Search or recall before assuming; remember durable "
    "decisions, gotchas and conventions as you learn them."
)


def _uri_form(urn: str) -> str:
    """The RFC 3986 form of a URN the change watcher wrote; the URN itself when it cannot be
    split again (a project name holding a `/`), rather than losing the rest of the changes."""
    try:
        return resources.as_uri(urn)
    except NotFound:
        return urn


class NmemServer:
    """One server per process; one Service (and its SQLite connections) shared by its sessions."""

    def __init__(self, service: Service, *, project: str | None = None, tools: str = "nmem",
                 poll_interval: float = 0.5) -> None:
        self.service = service
        self.project = project
        self.tools = exposed(tools)
        self.tools_by_name = {t.name: t for t in self.tools}
        # One compiled validator per tool: checking the schema itself on every call costs ~10 ms.
        self.validators = {t.name: jsonschema.Draft202012Validator(t.input_schema) for t in self.tools
                           if t.schema_checked}
        self.poll_interval = poll_interval
        # Told (tool, outcome ok/error/internal, seconds) after each call: the HTTP server's /metrics.
        self.on_tool: Callable[[str, str, float], None] | None = None
        self.bus = InMemorySubscriptionBus()
        # ctx.session is a per-request proxy; the connection behind it is what lives on.
        self.sessions: OrderedDict[int, ServerSession] = OrderedDict()
        self.viewers: dict[int, Viewer | None] = {}  # each client connection's signed-in user (team server)
        # URN as nmem writes it -> {client connection: the URI as that client subscribed to it}
        self.subscriptions: dict[str, dict[int, str]] = {}
        self.watcher = ChangeWatcher(service.store)
        # subcog's `[mcp]` settings: the name clients see, and whether subscriptions and prompts are offered
        settings = service.settings
        subscriptions, prompts = bool(settings["mcp.subscriptions"]), bool(settings["mcp.prompts_enabled"])
        self.server: Server[Any] = Server(
            str(settings["mcp.server_name"]).strip() or "nmem", version=__version__, title="nmem memory",
            instructions=INSTRUCTIONS,
            on_list_tools=self._answering(self.list_tools), on_call_tool=self._answering(self.call_tool),
            on_list_resources=self._answering(self.list_resources),
            on_list_resource_templates=self._answering(self.list_templates),
            on_read_resource=self._answering(self.read_resource),
            on_subscribe_resource=self._answering(self.subscribe) if subscriptions else None,
            on_unsubscribe_resource=self._answering(self.unsubscribe) if subscriptions else None,
            on_list_prompts=self._answering(self.list_prompts) if prompts else None,
            on_get_prompt=self._answering(self.get_prompt) if prompts else None,
            on_subscriptions_listen=ListenHandler(self.bus) if subscriptions else None,
        )
        # The SDK's HTTP and in-memory paths build init options without arguments; advertise
        # resources.listChanged on every transport.
        original = self.server.create_initialization_options

        def with_list_changed(notification_options: NotificationOptions | None = None,
                              *args: Any, **kwargs: Any) -> Any:
            return original(notification_options or NotificationOptions(resources_changed=True), *args, **kwargs)

        self.server.create_initialization_options = with_list_changed  # type: ignore[method-assign]

    def _answering(self, handler: Callable[[ServerRequestContext[Any], Any], Awaitable[R]],
                   ) -> Callable[[ServerRequestContext[Any], Any], Awaitable[R]]:
        """A request handler whose failures reach the client as JSON-RPC errors carrying nmem's
        code, and whose bugs as a bare -32603 (the SDK would send code 0 and the exception text)."""
        @wraps(handler)
        async def answer(ctx: ServerRequestContext[Any], params: Any) -> R:
            try:
                # Over HTTP on a team server: act for the user whose token this request carried,
                # not whoever opened the session (the SDK runs a session in one long task).
                scope = getattr(ctx.request, "scope", None)
                if isinstance(scope, dict) and SCOPE_KEY in scope:
                    with acting_as(scope[SCOPE_KEY]):
                        return await handler(ctx, params)
                return await handler(ctx, params)
            except MCPError:
                raise
            except NmemError as exc:
                raise _protocol_error(exc, _public(exc, self.service)) from None
            except Exception:
                log.exception("%s failed", handler.__name__)
                raise _protocol_error(InternalError("Internal error"), "Internal error") from None
        return answer

    def _seen(self, ctx: ServerRequestContext[Any]) -> int:
        """Remember the client connection (for list_changed) and return its key."""
        key = id(getattr(ctx.session, "_connection", ctx.session))
        self.sessions[key] = ctx.session
        self.viewers[key] = current_viewer()  # whose private changes it may hear of (`may_hear`)
        self.sessions.move_to_end(key)
        while len(self.sessions) > MAX_SESSIONS:
            old, _ = self.sessions.popitem(last=False)
            self.viewers.pop(old, None)
            for subscribers in self.subscriptions.values():
                subscribers.pop(old, None)
        return key

    # -- tools ---------------------------------------------------------------------------

    @staticmethod
    def _tool(spec: ToolSpec) -> types.Tool:
        return types.Tool(
            name=spec.name, title=spec.title, description=spec.description,
            input_schema=spec.input_schema, output_schema=spec.output_schema,
            annotations=types.ToolAnnotations(
                title=spec.title, read_only_hint=spec.read_only, destructive_hint=spec.destructive,
                idempotent_hint=spec.idempotent, open_world_hint=spec.open_world),
        )

    async def list_tools(self, ctx: ServerRequestContext[Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        self._seen(ctx)
        return types.ListToolsResult(tools=[self._tool(t) for t in self.tools])

    async def call_tool(self, ctx: ServerRequestContext[Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        self._seen(ctx)
        spec = self.tools_by_name.get(params.name)
        if spec is None:
            raise InvalidArgument(f"Unknown tool: {params.name}")  # a protocol error (the spec's -32602)
        started, outcome = time.perf_counter(), "internal"
        try:
            text, data = self._run(spec, dict(params.arguments or {}))
            outcome = "ok"
        except NmemError as exc:
            outcome = "error"
            return _error_result(exc, _public(exc, self.service))
        except Exception:  # a bug must still answer the model, not drop the connection
            log.exception("tool %s failed", spec.name)
            message = f"internal error in {spec.name} (details in the server log)"
            return _error_result(InternalError(message), message)
        finally:
            if self.on_tool is not None:
                self.on_tool(spec.name, outcome, time.perf_counter() - started)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=data)

    def _run(self, spec: ToolSpec, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The tool's result as text (its JSON, the markdown a claude-mem tool shows, or ADR-006's
        bare array when the handler gave its text apart) and as JSON data; an `NmemError` when the
        arguments are refused."""
        validator = self.validators.get(spec.name)
        error = jsonschema.exceptions.best_match(validator.iter_errors(args)) if validator else None
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "arguments"
            kind = ValidationError if error.validator in RANGE_KEYWORDS else InvalidArgument
            raise kind(f"invalid arguments for {spec.name}: {where}: {error.message}")
        result = spec.handler(self.service, args, self.project)
        shown = result.pop(TEXT_AS, result) if isinstance(result, dict) else result
        dumped = json.dumps(result, ensure_ascii=False, default=str)
        text = spec.text(result) if spec.text else json.dumps(shown, ensure_ascii=False, default=str)
        return text, json.loads(dumped)

    # -- resources -----------------------------------------------------------------------

    async def list_resources(self, ctx: ServerRequestContext[Any],
                             params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        self._seen(ctx)
        try:
            memories, next_cursor = resources.list_page(self.service, params.cursor if params else None)
        except ValueError:
            raise InvalidArgument("Invalid cursor") from None
        return types.ListResourcesResult(
            resources=[types.Resource(uri=resources.Urn(m.domain, m.namespace, m.id).uri(), name=m.id, title=m.summary,
                                      description=f"[{m.namespace}] {m.summary}", mime_type="application/json")
                       for m in memories],
            next_cursor=next_cursor,
        )

    async def list_templates(self, ctx: ServerRequestContext[Any],
                             params: types.PaginatedRequestParams | None) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[
            types.ResourceTemplate(uri_template=uri, name=name, description=description,
                                   mime_type="application/json")
            for uri, name, description in resources.TEMPLATES
        ])

    async def read_resource(self, ctx: ServerRequestContext[Any],
                            params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        self._seen(ctx)
        uri = str(params.uri)
        try:
            text = resources.read(self.service, uri)
        except NmemError as exc:
            # The spec fixes the code of an unknown resource; nmem's own code rides in `data`.
            if isinstance(exc, NotFound):
                code = types.INVALID_PARAMS if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS else RESOURCE_NOT_FOUND
                raise _protocol_error(exc, "Resource not found", code=code, uri=uri) from None
            raise _protocol_error(exc, _public(exc, self.service), uri=uri) from None
        return types.ReadResourceResult(contents=[
            types.TextResourceContents(uri=uri, mime_type="application/json", text=text)])

    async def subscribe(self, ctx: ServerRequestContext[Any],
                        params: types.SubscribeRequestParams) -> types.EmptyResult:
        key = self._seen(ctx)
        uri = str(params.uri)
        try:
            urn = resources.canonical(uri)
        except NotFound:
            raise InvalidArgument(f"not an nmem:// (or subcog://) URN: {uri}") from None
        if current_viewer() is not None and urn.startswith("nmem://user/"):
            self.service.get_memory(urn)  # NotFound for another user's memory: its changes are not theirs to hear
        self.subscriptions.setdefault(urn, {})[key] = uri
        return types.EmptyResult()

    async def unsubscribe(self, ctx: ServerRequestContext[Any],
                          params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        key = self._seen(ctx)
        try:
            urn = resources.canonical(str(params.uri))
        except NotFound:
            return types.EmptyResult()  # never subscribed: nothing to undo
        self.subscriptions.get(urn, {}).pop(key, None)
        return types.EmptyResult()

    # -- prompts ------------------------------------------------------------------------

    async def list_prompts(self, ctx: ServerRequestContext[Any],
                           params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[
            types.Prompt(name=p.name, title=p.title, description=p.description, arguments=[
                types.PromptArgument(name=a.name, description=a.description, required=a.required)
                for a in p.arguments])
            for p in prompt_specs.PROMPTS
        ])

    async def get_prompt(self, ctx: ServerRequestContext[Any],
                         params: types.GetPromptRequestParams) -> types.GetPromptResult:
        spec = prompt_specs.PROMPTS_BY_NAME.get(params.name)
        if spec is None:
            raise InvalidArgument(f"Unknown prompt: {params.name}")
        arguments = dict(params.arguments or {})
        missing = [a.name for a in spec.arguments if a.required and not arguments.get(a.name)]
        if missing:
            raise InvalidArgument(f"Missing required argument: {', '.join(missing)}")
        text = spec.render(arguments)
        return types.GetPromptResult(description=spec.description, messages=[
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))])

    # -- change notifications -------------------------------------------------------------

    async def notify(self, changes: ChangeSet) -> None:
        """Tell subscribers what changed; a `user`-domain memory's changes only to its writer
        (`nmem.changes.may_hear`), and to the bus's listeners only without users (the bus knows none)."""
        store = self.service.store
        team = bool(changes.private) and users_active(store)
        for uri in sorted(changes.updated | changes.private.keys()):
            private = set() if uri in changes.updated else changes.private.get(uri, set())
            for key, subscribed in list(self.subscriptions.get(uri, {}).items()):
                session = self.sessions.get(key)
                if session is not None and (not private or may_hear(store, self.viewers.get(key), private)):
                    await session.send_resource_updated(subscribed)
            if private and team:
                continue
            # listeners filter by exact URI: publish the URN in both of its forms
            for form in dict.fromkeys((uri, _uri_form(uri))):
                await self.bus.publish(ResourceUpdated(uri=form))
        if changes.list_changed or changes.private_listed:
            for key, session in list(self.sessions.items()):
                if changes.list_changed or may_hear(store, self.viewers.get(key), changes.private_listed):
                    await session.send_resource_list_changed()
            if changes.list_changed or not users_active(store):
                await self.bus.publish(ResourcesListChanged())

    async def watch(self) -> None:
        """Poll the database for commits from any process and notify subscribers.

        Each poll reads on a thread of its own, never on the event loop: it reads every change
        committed since the last one (under `make bench-team`, a batch of hook events each time),
        and on PostgreSQL it first takes the change feed's lock for an instant (`settled_heads`),
        which waits, up to 2 s, for the writer's transaction under way. On the loop that wait
        stopped every request of the server: the first wave of `bench/team.py --pg` (200
        searches, 50 SessionStarts) was answered all at once, 1.2-1.4 s after it came, the loop
        held by the watcher behind the SessionStarts' transaction. One thread, always the same:
        a SQLite change token (`PRAGMA data_version`) only compares on one connection."""
        loop = asyncio.get_running_loop()
        thread = ThreadPoolExecutor(1, thread_name_prefix="nmem-watch")
        self.watcher.token = -1   # the token is read on that thread from now on: the first poll reads
        try:
            while True:
                await anyio.sleep(self.poll_interval)
                try:
                    changes = await loop.run_in_executor(thread, self.watcher.poll)
                    if changes:
                        await self.notify(changes)
                except NmemError as exc:
                    log.warning("change watch failed: %s", exc.message)
                except Exception:  # a bug here must not end the lifespan while the server goes on answering
                    log.exception("change watch failed; still watching")
        finally:   # stopping: a poll under way ends by itself (its store is closed after)
            thread.shutdown(wait=False, cancel_futures=True)

    async def index_embeddings(self) -> None:
        """Embed new records in the background when optional embeddings are on (nmem.service.indexer)."""
        if str(self.service.settings["search.embeddings"]).strip().lower() in ("", "none"):
            return
        from nmem.service.indexer import index_in_background

        await index_in_background(self.service.store.url, self.service.settings)

    async def drain_spool(self) -> None:
        """Store what hooks spool for a server store (PostgreSQL: a hook never loads its driver)
        every `hooks.server_drain_ms`, so their events are searchable within seconds, no cron
        `nmem drain` needed. Claims make it safe beside other servers and `nmem drain`."""
        every = int(self.service.settings["hooks.server_drain_ms"]) / 1000
        if every <= 0 or self.service.store.url.startswith("sqlite:"):
            return
        while True:
            try:
                stored = await anyio.to_thread.run_sync(drain_spooled, self.service, abandon_on_cancel=True)
                if stored:
                    log.info("stored %d spooled hook events", stored)
            except NmemError as exc:
                log.warning("draining the hook spool failed: %s", exc.message)
            except Exception:
                log.exception("draining the hook spool failed; draining on")
            await anyio.sleep(every)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with anyio.create_task_group() as group:
            group.start_soon(self.watch)
            group.start_soon(self.index_embeddings)
            group.start_soon(self.drain_spool)
            try:
                yield
            finally:
                group.cancel_scope.cancel()


SPOOL_DRAIN_BUDGET_MS = 30_000


def drain_spooled(service: Service) -> int:
    """Store every event waiting in the hook spool, oldest first; how many were stored."""
    def waiting() -> int:
        try:
            return sum(1 for n in os.listdir(service.settings.spool_dir) if n.endswith(hook_spool.WAITING))
        except OSError:
            return 0

    before = waiting()
    if not before:
        return 0
    log_file = hook_spool.HookLog(service.settings)
    while not hook_spool.drain(service, log_file, hook_spool.Deadline(SPOOL_DRAIN_BUDGET_MS)):
        pass
    return before - waiting()


def _public(exc: NmemError, service: Service) -> str:
    """An error message without the database's file path (ADR-006: no internal paths)."""
    path = str(getattr(service.store, "path", "") or "")
    return exc.message.replace(path, "<database>") if path else exc.message


def _retry(error: NmemError) -> dict[str, Any]:
    """`retry_after` (seconds) for an error the same call may not meet again, e.g. a dropped database connection."""
    return {} if error.retry_after is None else {"retry_after": error.retry_after}


def _error_result(error: NmemError, message: str) -> types.CallToolResult:
    """A tool execution error: the message for the model, nmem's code and kind for the client."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True,
                                _meta={ERROR_META: {"code": error.mcp_code, "kind": error.kind, **_retry(error)}})


def _protocol_error(error: NmemError, message: str, *, code: int | None = None, **data: Any) -> MCPError:
    """A JSON-RPC error with nmem's code (or the one the spec fixes) and nmem's code and kind in `data`."""
    return MCPError(code=error.mcp_code if code is None else code, message=message,
                    data={"code": error.mcp_code, "kind": error.kind, **_retry(error), **data})


def current_project(service: Service) -> str:
    """Claude Code starts stdio servers with CLAUDE_PROJECT_DIR; otherwise the working directory."""
    return service.project_for(os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd())


async def run_stdio(app: NmemServer) -> None:
    async with app.running(), stdio_server() as (read, write):
        await app.server.run(read, write, app.server.create_initialization_options())
