"""`nmem serve` as Claude Code runs it: a real subprocess on stdio, driven by the SDK's stdio client."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client, types

from mcp_support import CWD, PROJECT, Inbox, Seeded, child_env, record_process, structured, tool_error

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ALL_TOOLS = ["search", "get_observations", "get", "timeline", "recent_context", "session_trace", "file_history",
             "remember", "recall", "forget", "status", "configure", "sync", "consolidate"]


def params(home: Path, *args: str, **env: str) -> StdioServerParameters:
    """How Claude Code starts the server: the command, CLAUDE_PROJECT_DIR, a cwd that is not the project."""
    return StdioServerParameters(command=sys.executable, args=["-m", "nmem", "serve", *args],
                                 env={**child_env(home, CLAUDE_PROJECT_DIR=CWD, NMEM_MCP_POLL_MS="100"), **env},
                                 cwd=str(home.parent))


async def test_stdio_initialize_list_search_and_read(nmem_home: Path, seeded: Seeded, tmp_path: Path) -> None:
    inbox = Inbox()
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with stdio_client(params(nmem_home), errlog=errlog) as (read, write), \
                ClientSession(read, write, message_handler=inbox) as session:
            init = await session.initialize()
            assert init.protocol_version == "2025-11-25"
            assert init.server_info.name == "nmem"
            assert init.instructions and "remember" in init.instructions
            assert init.capabilities.resources is not None
            assert init.capabilities.resources.subscribe is True
            assert init.capabilities.resources.list_changed is True

            assert [t.name for t in (await session.list_tools()).tools] == ALL_TOOLS
            found = structured(await session.call_tool("search", {"query": "login"}))
            # CLAUDE_PROJECT_DIR sets the project whose results come first
            assert [r["project"] for r in found["results"] if r["kind"] == "observation"] == [PROJECT, "other"]
            assert seeded.failure in [r["id"] for r in found["results"]]
            assert tool_error(await session.call_tool("get_observations", {"ids": []})) == \
                "ids array must not be empty"

            content = (await session.read_resource(seeded.memory_urn)).contents[0]
            assert isinstance(content, types.TextResourceContents)
            assert json.loads(content.text)["id"] == seeded.memory_id
            kept = structured(await session.call_tool("remember", {"content": "stdio works", "namespace": "testing"}))
            assert kept["urn"].startswith(f"nmem://project:{PROJECT}/testing/")
            assert len((await session.list_prompts()).prompts) == 2
    assert inbox.errors() == []  # a stray line on stdout would arrive here as a parse error


async def test_stdio_subscription_fires_when_another_process_records(nmem_home: Path, seeded: Seeded) -> None:
    inbox = Inbox()
    namespace = f"nmem://project:{PROJECT}/observations"
    async with Client(params(nmem_home), mode="legacy", message_handler=inbox) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await client.subscribe_resource(namespace)
        await record_process(nmem_home, "PostToolUse", session_id="s1", cwd=CWD, tool_name="Bash",
                             tool_input={"command": "pytest -x"}, tool_response={"exit_code": 0})
        await inbox.wait_updated(namespace, timeout=10)
        await record_process(nmem_home, "PostToolUse", session_id="s1", cwd=CWD, tool_name="Bash",
                             tool_input={"command": "pytest -x again"}, tool_response={"exit_code": 0})
        await inbox.wait_updated_count(namespace, 2, timeout=10)
        assert inbox.errors() == []


async def test_stdio_stdout_stays_clean_with_debug_logging_and_core_tools(
        nmem_home: Path, seeded: Seeded, tmp_path: Path) -> None:
    inbox = Inbox()
    log = tmp_path / "stderr.log"
    with log.open("w") as errlog:
        async with stdio_client(params(nmem_home, "--tools", "core", NMEM_LOG_LEVEL="debug"), errlog=errlog) as (
                read, write), ClientSession(read, write, message_handler=inbox) as session:
            await session.initialize()
            assert [t.name for t in (await session.list_tools()).tools] == [
                "search", "get_observations", "get", "timeline", "remember", "recall", "forget"]
            for query in ("login", '"unbalanced', "redirect"):
                await session.call_tool("search", {"query": query})
            with pytest.raises(Exception, match="Unknown tool: status"):
                await session.call_tool("status", {})
            await session.list_resources()
    assert inbox.errors() == []
    assert log.read_text().strip(), "debug logging should go to stderr"
