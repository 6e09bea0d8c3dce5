"""`nmem serve` (the MCP server over stdio or Streamable HTTP) and `nmem mcp-config`."""

from __future__ import annotations

import functools
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import click

from nmem.adapters.cli.app import State, note, pass_state
from nmem.adapters.cli.params import Integer
from nmem.adapters.net import Limits, is_loopback, listen_per_worker, usable_cores
from nmem.capture.project import project_name
from nmem.config import Settings
from nmem.errors import ConfigError, InvalidArgument
from nmem.service.args import source as read_source
from nmem.setup import mcp_merge
from nmem.setup.claude_code import SERVER_NAME, mcp_entry, nmem_executable
from nmem.team import accounts as team

# subcog's `serve --transport sse|websocket`: both are served by the one HTTP server.
HTTP_ALIASES = ("sse", "websocket")


@click.command("serve")
@click.option("--transport", type=click.Choice(["stdio", "http", *HTTP_ALIASES]), default="stdio", show_default=True,
              help="stdio: one client, spawned by it (Claude Code). http: the HTTP server: REST API at "
                   "/api/v1, claude-mem's worker API at /api, MCP (Streamable HTTP) at /mcp, SSE streams at "
                   "/stream/* and the WebSocket at /ws; sse and websocket (subcog's names) are http.")
@click.option("--host", default=None, help="HTTP listen address (default: the mcp.host setting, 127.0.0.1).")
@click.option("--port", type=Integer(1, 65535), default=None, help="HTTP port (default: the mcp.port setting, 37777).")
@click.option("--token", default=None, envvar="NMEM_MCP_TOKEN", show_envvar=True,
              help="Token HTTP clients must send (default: the http.token setting). Required for any "
                   "non-loopback --host.")
@click.option("--tools", default=None,
              help="Tools to expose: nmem, core, claude-mem, subcog, all, or a comma-separated list.")
@click.option("--project", default=None,
              help="Default project of tool calls (default: $CLAUDE_PROJECT_DIR or the working directory).")
@click.option("--store", default=None, metavar="URL",
              help="Store to serve: sqlite:///path or postgresql://... (default: the store.url setting).")
@click.option("--source", default=None, metavar="NAME",
              help="The source of memories remembered through this server (srvrmgr's rule_name; default: the "
                   "mcp.source setting, `mcp`). A call's own source or rule_name wins.")
@click.option("--workers", type=Integer(0, 256), default=None,
              help="HTTP server processes behind the one port; 0: one per core (default: the http.workers "
                   "setting, 1).")
@pass_state
def serve(state: State, transport: str, host: str | None, port: int | None, token: str | None,
          tools: str | None, project: str | None, store: str | None, source: str | None,
          workers: int | None) -> None:
    """Run nmem's MCP server (stdio) or its HTTP server (REST API, claude-mem's API and MCP).

    stdout carries only MCP messages; logs go to stderr. Stop with Ctrl-C. The HTTP server
    listens on loopback unless told otherwise, and then only with a token (docs/http.md).

    \b
        nmem serve                              # stdio, as Claude Code runs it
        nmem serve --transport http             # http://127.0.0.1:37777/api/v1 and /mcp
        nmem serve --transport http --host 0.0.0.0 --token "$(openssl rand -hex 16)"
        nmem serve --transport http --workers 4  # four processes on one port
        nmem serve --transport http --workers 0  # one process per core (a team server)
    """
    if store:
        state.use_store(store)
    if transport in HTTP_ALIASES:  # one server carries MCP, SSE and the WebSocket
        transport = "http"
    settings = state.settings
    if source is not None:
        settings.values["mcp.source"] = read_source(source, "mcp")
        settings.sources["mcp.source"] = "runtime"
    if workers is not None and workers != 1 and transport != "http":
        raise click.UsageError("--workers needs --transport http (a stdio server has one client)")
    processes = workers if workers is not None else int(settings["http.workers"])
    if processes < 0:
        raise ConfigError(f"http.workers must be 0 (one per core) or more, got {processes}")
    if processes == 0:
        processes = usable_cores()
    # Where to listen is settled first: a busy port or a bad host is one line and exit 3 at once.
    endpoint = _endpoint(settings, host, port, token, lambda: team.active(state.service().store), processes) \
        if transport == "http" else None

    # The SDK takes ~1 s to import; only this command pays for it, not every `nmem` run.
    import anyio

    from nmem.adapters.mcp.server import NmemServer, current_project, run_stdio

    handler = logging.StreamHandler(sys.stderr)  # an HTTP request's log lines carry its X-Request-Id
    handler.setFormatter(logging.Formatter("nmem: %(levelname)s [%(request_id)s] %(message)s",
                                           defaults={"request_id": "-"}))
    logging.basicConfig(level=str(settings["log.level"]).upper(), handlers=[handler])
    service = state.service()
    if endpoint is None:
        app = NmemServer(service, project=project or current_project(service),
                         tools=tools or str(settings["mcp.tools"]),
                         poll_interval=int(settings["mcp.poll_interval_ms"]) / 1000)
        _exit_on_signals(state)
        anyio.run(run_stdio, app)
        return

    from nmem.adapters.http.app import create_app
    from nmem.adapters.http.server import serve as serve_http

    base = f"http://{endpoint.host}:{endpoint.port}"
    note(f"viewer at {base}/, HTTP API at {base}/api/v1, MCP at {base}/mcp (store {settings.store_url})"
         + ("; bearer token required" if endpoint.token else "")
         + (f"; {processes} worker processes" if processes > 1 else ""))
    if processes > 1:
        _serve_workers(state, endpoint, project, tools, processes)
        return
    web = create_app(settings, service=service, host=endpoint.host, token=endpoint.token, project=project,
                     tools=tools, limits=endpoint.limits)

    async def main() -> None:
        await serve_http(web, host=endpoint.host, port=endpoint.port, sockets=endpoint.sockets)

    try:
        anyio.run(main)
    except KeyboardInterrupt:
        note("stopped")


def _exit_on_signals(state: State) -> None:
    """SIGTERM and SIGINT end a stdio server at once, exit 0, the database closed (committed rows
    are on disk; an unfinished call's transaction rolls back). Waiting for the event loop would wait
    for the thread blocked reading stdin, that is until the client closes the pipe."""

    def stop(_signum: int, _frame: object) -> None:
        try:
            state.close()
        finally:
            os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def _serve_workers(state: State, endpoint: Endpoint, project: str | None, tools: str | None, processes: int) -> None:
    """Fork the worker processes (nmem.adapters.http.workers); each opens its own store."""
    import anyio

    from nmem.adapters.http.app import create_app
    from nmem.adapters.http.server import serve as serve_http
    from nmem.adapters.http.workers import Supervisor

    settings = state.settings
    state.close()  # no connection (nor a PostgreSQL pool's threads) may cross the fork

    def work(_: int, sockets: list[socket.socket]) -> None:
        web = create_app(settings, host=endpoint.host, token=endpoint.token, project=project, tools=tools,
                         limits=endpoint.limits, workers=processes)
        anyio.run(functools.partial(serve_http, web, host=endpoint.host, port=endpoint.port, sockets=sockets))

    if Supervisor(endpoint.groups, work).run():
        raise SystemExit(1)
    note("stopped")


class Endpoint(NamedTuple):
    host: str
    port: int
    token: str | None
    limits: Limits
    groups: list[list[socket.socket]]   # the listening sockets of each worker process

    @property
    def sockets(self) -> list[socket.socket]:
        return self.groups[0]


def _endpoint(settings: Settings, host: str | None, port: int | None, token: str | None,
              has_users: Callable[[], bool] = lambda: False, workers: int = 1) -> Endpoint:
    """The HTTP transport's address, token and limits, its sockets already listening. A team
    server (users exist) may listen beyond loopback without a token: its users' tokens guard it."""
    bind = host or str(settings["mcp.host"])
    listen_port = port if port is not None else int(settings["mcp.port"])
    if not 0 < listen_port < 65536:
        raise ConfigError(f"mcp.port: {listen_port} is not a port (1-65535)")
    secret = token or str(settings["http.token"]) or str(settings["mcp.token"]) or None
    if not is_loopback(bind) and not secret and not has_users():
        raise ConfigError(f"refusing to listen on {bind} without a token: pass --token or set NMEM_HTTP_TOKEN "
                          "(or NMEM_MCP_TOKEN)")
    limits = Limits.from_settings(settings)
    return Endpoint(bind, listen_port, secret, limits, listen_per_worker(bind, listen_port, workers))


@click.command("mcp-config")
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True)
@click.option("--url", default=None, help="With --transport http: the server URL (default from mcp.host/port).")
@click.option("--name", default=SERVER_NAME, show_default=True, help="Server name in the config.")
@click.option("--merge", "merge_files", multiple=True, metavar="FILE",
              help="An MCP config file ({\"mcpServers\": ...}) to merge after nmem's entry (a rule's own "
                   "servers; repeatable). The mcp.merge_configs files come last.")
@click.option("--rule", default=None, metavar="NAME",
              help="Attribute what the agent remembers through this config to NAME (nmem serve --source NAME).")
@click.option("--no-memory", is_flag=True, help="Leave nmem out (a rule that opts out of memory); still merges.")
@pass_state
def mcp_config(state: State, transport: str, url: str | None, name: str, merge_files: tuple[str, ...],
               rule: str | None, no_memory: bool) -> None:
    """Print the JSON that registers nmem with an MCP client, merged with other servers' configs.

    The output is a complete `{"mcpServers": {...}}` document: save it as `.mcp.json`, pass
    it to `claude --mcp-config`, or merge its one entry into an existing config. srvrmgr's
    merge order: nmem's server (left out when memory is off: `--no-memory`, `memory.enabled`,
    or the current project's opt-out), then each `--merge` file, then the `mcp.merge_configs`
    files. The first definition of a name wins; each one left out is noted on stderr.

    \b
        claude --mcp-config <(nmem mcp-config --rule organize-downloads --merge ~/.config/mcp/other.json)
    """
    settings = state.settings
    entry: dict[str, Any]
    if transport == "stdio":
        entry = mcp_entry(nmem_executable())
        if rule:
            entry["args"] = [*entry["args"], "--source", rule]
    else:
        if rule:
            raise InvalidArgument("--rule names the source of a stdio server's memories; an HTTP server's "
                                  "clients pass source (or rule_name) to remember")
        entry = {"type": "http", "url": url or f"http://{settings['mcp.host']}:{settings['mcp.port']}/mcp"}
        if settings["mcp.token"]:
            entry["headers"] = {"Authorization": "Bearer ${NMEM_MCP_TOKEN}"}
    here = os.getcwd()
    enabled = not no_memory and settings.project_enabled(
        project_name(here, settings["project.name"], settings.project_dirs), here)
    merged = mcp_merge.merge((name, entry) if enabled else None, list(merge_files),
                             list(settings["mcp.merge_configs"]))
    for server, path, kept in merged.shadowed:
        note(f"{path}: server {server!r} left out, already defined by {kept}")
    click.echo(json.dumps(merged.document(), indent=2))


COMMANDS: tuple[click.Command, ...] = (serve, mcp_config)
