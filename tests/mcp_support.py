"""Shared helpers for the MCP tests: a seeded database, result checks, real server processes.

Every test drives nmem through the official SDK client (`mcp.Client`, `ClientSession`,
`stdio_client`, `streamable_http_client`); only the HTTP guard tests send raw requests.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import jsonschema
from mcp import types

from conftest import hook_payload, record
from nmem.service.api import Service

T0 = 1_790_000_000
CWD = "/work/demo"              # project "demo"
OTHER_CWD = "/work/other"       # project "other"
PROJECT = "demo"
AUTH_FILE = "/work/demo/src/auth.py"
# Every NMEM_* variable a developer's shell might carry; child processes must not see them.
NMEM_VARS = ("NMEM_DB", "NMEM_CONFIG", "NMEM_STORE_URL", "NMEM_PROJECT", "NMEM_ENABLED", "NMEM_FORMAT",
             "NMEM_MCP_TOKEN", "NMEM_MCP_TOOLS", "NMEM_MCP_HOST", "NMEM_MCP_PORT", "NMEM_MCP_ALLOWED_HOSTS",
             "NMEM_MCP_CORS_ORIGINS", "NMEM_MCP_POLL_MS", "NMEM_HTTP_HEADER_TIMEOUT", "NMEM_HTTP_BODY_TIMEOUT",
             "NMEM_HTTP_KEEP_ALIVE", "NMEM_HTTP_MAX_BODY", "NMEM_HTTP_MAX_HEADER", "NMEM_HTTP_MAX_CONNECTIONS",
             "NMEM_KEY", "NMEM_KEY_FILE", "NMEM_KEYRING")


@dataclass(frozen=True)
class Seeded:
    """Ids of the records `seed` writes."""

    start: int          # SessionStart of s1
    prompt: int         # the first user prompt of s1 (a prompt id)
    test_run: int       # pytest ok
    failure: int        # pytest failed (command_error)
    read: int           # Read AUTH_FILE
    edit: int           # Edit AUTH_FILE
    lonely: int         # the only observation of session s-lonely
    other: int          # a command in project "other" (session s2)
    memory_urn: str     # decisions memory of project demo
    memory_id: str
    user_memory_urn: str


def bash(service: Service, command: str, at: int, *, code: int = 0, session_id: str = "s1", cwd: str = CWD,
         stdout: str = "ok") -> int:
    out = record(service, "PostToolUse", now=at, session_id=session_id, cwd=cwd, tool_name="Bash",
                 tool_input={"command": command}, tool_response={"stdout": stdout, "exit_code": code})
    return int(out.observation_id)


def seed(service: Service) -> Seeded:
    """Session s1 in project demo, s2 in project other, a one-event session, and two memories."""
    t = T0
    start = record(service, "SessionStart", now=t, session_id="s1", cwd=CWD, source="startup").observation_id
    prompt = record(service, "UserPromptSubmit", now=t + 10, session_id="s1", cwd=CWD,
                    prompt="fix the flaky login redirect test").prompt_id
    test_run = bash(service, "pytest tests/test_auth.py -q", t + 20, stdout="3 passed")
    failure = bash(service, "pytest tests/test_login.py", t + 30, code=1,
                   stdout="AssertionError: login redirect token expired")
    read = record(service, "PostToolUse", now=t + 40, session_id="s1", cwd=CWD, tool_name="Read",
                  tool_input={"file_path": AUTH_FILE}).observation_id
    edit = record(service, "PostToolUse", now=t + 50, session_id="s1", cwd=CWD, tool_name="Edit",
                  tool_input={"file_path": AUTH_FILE, "old_string": "ttl = 60", "new_string": "ttl = 3600"}
                  ).observation_id
    lonely = bash(service, "echo lonely heartbeat", t + 55, session_id="s-lonely")
    record(service, "UserPromptSubmit", now=t + 60, session_id="s2", cwd=OTHER_CWD,
           prompt="style the login page of the other app")
    other = bash(service, "npm run login-e2e", t + 70, session_id="s2", cwd=OTHER_CWD)
    memory = service.remember("Login sessions use JWT with a one hour ttl; refresh tokens rotate.",
                              summary="JWT for login sessions", namespace="decisions", tags=["auth", "jwt"],
                              project=PROJECT, at=t + 80)
    user_memory = service.remember("Prefer pytest -x -q when iterating on a failing login test.",
                                   namespace="learnings", domain="user", tags=["pytest"], at=t + 90)
    return Seeded(int(start), int(prompt), test_run, failure, int(read), int(edit), lonely, other,
                  memory.urn, memory.id, user_memory.urn)


# -- results -------------------------------------------------------------------------------------

def text_of(result: types.CallToolResult) -> str:
    assert len(result.content) == 1, result.content
    block = result.content[0]
    assert isinstance(block, types.TextContent), block
    return block.text


def structured(result: types.CallToolResult) -> Any:
    """The structured result of a successful call; its text content must be the same JSON."""
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    assert json.loads(text_of(result)) == result.structured_content
    return result.structured_content


def tool_error(result: types.CallToolResult) -> str:
    """The message of a tool execution error (isError result, no structured content)."""
    assert result.is_error, result
    assert result.structured_content is None
    return text_of(result)


def check_output(tool: types.Tool, value: Any) -> None:
    assert tool.output_schema is not None
    jsonschema.validate(value, tool.output_schema)


# -- processes ------------------------------------------------------------------------------------

def child_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of an nmem child process: this one, minus NMEM_*, plus NMEM_HOME and `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in NMEM_VARS}
    return {**env, "NMEM_HOME": str(home), **extra}


def nmem_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "nmem", *args]


async def run_nmem_async(home: Path, args: list[str], *, stdin: str = "", **extra: str) -> str:
    """Run `nmem ARGS` as a separate process without blocking the event loop; its stdout."""
    done = await anyio.run_process(nmem_argv(*args), input=stdin.encode(), env=child_env(home, **extra),
                                   check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


async def record_process(home: Path, event: str, **fields: Any) -> None:
    """A hook firing: a real `nmem record` process reading one event from stdin."""
    await run_nmem_async(home, ["record"], stdin=json.dumps(hook_payload(event, **fields)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}: {log.read_text(errors='replace')}")
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"server did not listen on {port} within {timeout} s: {log.read_text(errors='replace')}")


def wait_healthy(port: int, timeout: float = 60) -> None:
    """Until the server on `port` answers /health with 200 (a server whose port is open may still
    be starting its workers or warming its threads)."""
    deadline = time.monotonic() + timeout
    while True:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        finally:
            conn.close()
        assert time.monotonic() < deadline, "the server did not answer /health"
        time.sleep(0.1)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@dataclass(frozen=True)
class HttpServer:
    url: str
    port: int
    home: Path
    proc: subprocess.Popen[bytes]
    log: Path


@contextmanager
def http_server(home: Path, *args: str, env: Mapping[str, str] | None = None) -> Iterator[HttpServer]:
    """`nmem serve --transport http` on a free loopback port, killed on exit whatever happens."""
    port = free_port()
    home.mkdir(parents=True, exist_ok=True)
    log = home / f"serve-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(nmem_argv("serve", "--transport", "http", "--port", str(port), *args),
                                env=child_env(home, **(env or {})), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, proc, log)
        yield HttpServer(f"http://127.0.0.1:{port}/mcp", port, home, proc, log)
    finally:
        stop(proc)


async def wait_until(condition: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    """Poll `condition`; an AssertionError naming `what` if it is still false after `timeout` seconds."""
    with anyio.move_on_after(timeout):
        while not condition():
            await anyio.sleep(0.02)
    assert condition(), f"timed out after {timeout} s waiting for {what}"


class Inbox:
    """A message_handler that keeps every server notification (and transport exception)."""

    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def __call__(self, message: Any) -> None:
        self.messages.append(message)

    def updated(self) -> list[str]:
        return [str(m.params.uri) for m in self.messages if isinstance(m, types.ResourceUpdatedNotification)]

    def list_changed(self) -> int:
        return sum(isinstance(m, types.ResourceListChangedNotification) for m in self.messages)

    def errors(self) -> list[Exception]:
        return [m for m in self.messages if isinstance(m, Exception)]

    async def wait_updated(self, uri: str, timeout: float = 5.0) -> None:
        await wait_until(lambda: uri in self.updated(), timeout, f"resources/updated for {uri}: {self.messages}")

    async def wait_updated_count(self, uri: str, count: int, timeout: float = 5.0) -> None:
        await wait_until(lambda: self.updated().count(uri) >= count, timeout,
                         f"{count} resources/updated for {uri}: {self.messages}")

    async def wait_list_changed(self, count: int = 1, timeout: float = 5.0) -> None:
        await wait_until(lambda: self.list_changed() >= count, timeout, f"list_changed: {self.messages}")

