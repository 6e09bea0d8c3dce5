"""What every MCP failure tells the client: nmem's error code, never a traceback.

Tool failures are `isError` results (the model reads the message) carrying nmem's code and
kind in `_meta["nmem/error"]`; failures of other requests are JSON-RPC errors whose `data`
carries the same. Driven in memory through the official SDK client, in both protocol eras.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from mcp import Client, MCPError, types

from mcp_support import Seeded, tool_error
from nmem.adapters.mcp.server import ERROR_META, NmemServer
from nmem.service.api import Service

pytestmark = pytest.mark.anyio

NOT_FOUND, VALIDATION, BLOCKED, INVALID_PARAMS, INTERNAL = -32001, -32002, -32003, -32602, -32603
SECRET = "s3cret-internal-detail"


def code_of(result: types.CallToolResult) -> tuple[int, str]:
    """The code and kind a tool error carries; its message must be there too."""
    assert tool_error(result)
    assert result.meta is not None, result
    error = result.meta[ERROR_META]
    return error["code"], error["kind"]


@pytest.mark.parametrize(("tool", "arguments", "expected"), [
    # not found
    ("timeline", {"anchor": 999_999}, (NOT_FOUND, "not_found")),
    ("timeline", {"query": "nonexistentword"}, (NOT_FOUND, "not_found")),
    ("session_trace", {"session_id": "no-such-session"}, (NOT_FOUND, "not_found")),
    ("forget", {"id": "01NOSUCHMEMORY0000000000000"}, (NOT_FOUND, "not_found")),
    # validation: well-formed, not acceptable
    ("remember", {"content": "   "}, (VALIDATION, "validation")),
    ("remember", {"content": "x", "summary": "s" * 101}, (VALIDATION, "validation")),
    ("remember", {"content": "x", "namespace": "Bad Name!"}, (VALIDATION, "validation")),
    ("search", {"query": "login", "offset": -1}, (VALIDATION, "validation")),
    # integers beyond SQLite's 64 bits, wherever an integer is taken
    ("get_observations", {"ids": [2**64]}, (VALIDATION, "validation")),
    ("get_observations", {"ids": [1, -(2**63)]}, (VALIDATION, "validation")),
    ("timeline", {"anchor": 2**63}, (VALIDATION, "validation")),
    ("timeline", {"anchor_id": 2**70}, (VALIDATION, "validation")),
    ("timeline", {"anchor": 1, "before": 2**64}, (VALIDATION, "validation")),
    ("timeline", {"anchor": 1, "after": 2**64}, (VALIDATION, "validation")),
    ("search", {"query": "login", "limit": 2**63}, (VALIDATION, "validation")),
    ("search", {"query": "login", "offset": 2**64}, (VALIDATION, "validation")),
    ("search", {"query": "login", "date_start": -(2**64)}, (VALIDATION, "validation")),
    ("search", {"query": "login", "dateEnd": "99999999999999999999"}, (VALIDATION, "validation")),
    ("recent_context", {"limit": 2**64}, (VALIDATION, "validation")),
    ("file_history", {"file_path": "/x", "limit": 2**64}, (VALIDATION, "validation")),
    ("recall", {"limit": 2**64}, (VALIDATION, "validation")),
    ("session_trace", {"session_id": "s1", "after": 10**30}, (VALIDATION, "validation")),
    # blocked by the security filter
    ("remember", {"content": "<private>the root password</private>"}, (BLOCKED, "blocked")),
    # malformed arguments
    ("search", {"limit": "ten"}, (INVALID_PARAMS, "invalid_argument")),
    ("search", {"limit": True}, (INVALID_PARAMS, "invalid_argument")),
    ("search", {"limit": 1.5}, (INVALID_PARAMS, "invalid_argument")),
    ("search", {"limit": float("inf")}, (INVALID_PARAMS, "invalid_argument")),  # JSON's 1e400
    ("get_observations", {}, (INVALID_PARAMS, "invalid_argument")),
    ("get_observations", {"ids": []}, (INVALID_PARAMS, "invalid_argument")),
    ("timeline", {}, (INVALID_PARAMS, "invalid_argument")),
    ("search", {"query": '"unbalanced'}, (INVALID_PARAMS, "query_syntax")),
    ("search", {"format": "verbose"}, (INVALID_PARAMS, "invalid_argument")),
])
async def test_each_tool_failure_carries_its_code(client: Client, tool: str, arguments: dict[str, Any],
                                                  expected: tuple[int, str]) -> None:
    assert code_of(await client.call_tool(tool, arguments)) == expected


async def test_integral_floats_are_integers(client: Client, seeded: Seeded) -> None:
    """JSON Schema counts 2.0 as an integer, so the service takes it as one too."""
    result = await client.call_tool("get_observations", {"ids": [float(seeded.failure)]})
    assert not result.is_error, result
    assert [r["id"] for r in (result.structured_content or {})["results"]] == [seeded.failure]


async def test_range_errors_name_the_argument_and_the_bound(client: Client) -> None:
    message = tool_error(await client.call_tool("timeline", {"anchor_id": 2**70}))
    assert message == (f"invalid arguments for timeline: anchor_id: {2**70} is greater than the maximum "
                       f"of {2**63 - 1}")
    message = tool_error(await client.call_tool("search", {"dateEnd": "99999999999999999999"}))
    assert message == "date_end: '99999999999999999999' is out of range (a date from year 1 to 9999)"


async def test_a_successful_result_carries_no_error_code(client: Client, seeded: Seeded) -> None:
    result = await client.call_tool("search", {"query": "login"})
    assert not result.is_error
    assert not (result.meta or {}).get(ERROR_META)


async def test_the_modern_era_carries_the_same_codes(app: NmemServer) -> None:
    async with Client(app.server) as modern:
        assert modern.protocol_version == "2026-07-28"
        assert code_of(await modern.call_tool("timeline", {"anchor": 999_999})) == (NOT_FOUND, "not_found")
        assert code_of(await modern.call_tool("remember", {"content": " "})) == (VALIDATION, "validation")
        assert code_of(await modern.call_tool("remember", {"content": "<private>pw</private>"})) == \
            (BLOCKED, "blocked")
        assert code_of(await modern.call_tool("search", {"limit": "ten"})) == (INVALID_PARAMS, "invalid_argument")


# -- protocol errors ------------------------------------------------------------------------------


async def test_unknown_tool_and_prompt_are_invalid_params_with_nmem_data(client: Client) -> None:
    for call in (client.call_tool("no_such_tool", {}), client.get_prompt("no-such-prompt", {})):
        with pytest.raises(MCPError) as err:
            await call
        assert err.value.code == INVALID_PARAMS
        assert err.value.data == {"code": INVALID_PARAMS, "kind": "invalid_argument"}


async def test_missing_resource_keeps_the_spec_code_with_nmem_code_in_data(client: Client) -> None:
    with pytest.raises(MCPError) as err:
        await client.read_resource("nmem://project:demo/observations/999999")
    assert err.value.code == -32002  # the 2025-11-25 spec's resource-not-found
    assert err.value.data["code"] == NOT_FOUND
    assert err.value.data["kind"] == "not_found"


@pytest.mark.parametrize("cursor", ["99999999999999999999", str(2**63 - 1), "9" * 5000])
async def test_a_cursor_beyond_any_page_is_invalid_params(client: Client, cursor: str) -> None:
    with pytest.raises(MCPError) as err:
        await client.list_resources(cursor=cursor)
    assert (err.value.code, err.value.message) == (INVALID_PARAMS, "Invalid cursor")


# -- bugs -----------------------------------------------------------------------------------------


def _broken(*_args: Any, **_kwargs: Any) -> Any:
    raise RuntimeError(f"{SECRET} at /home/someone/.nmem/nmem.db")


async def test_a_bug_in_a_tool_is_a_generic_internal_error_logged_on_the_server(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, client: Client) -> None:
    monkeypatch.setattr(Service, "status", _broken)
    with caplog.at_level(logging.ERROR, logger="nmem.adapters.mcp"):
        result = await client.call_tool("status", {})
    assert code_of(result) == (INTERNAL, "internal")
    text = tool_error(result)
    assert text == "internal error in status (details in the server log)"
    assert SECRET in caplog.text and "Traceback" in caplog.text  # the server keeps what the client is not told


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_bug_in_a_resource_read_is_internal_error_without_its_text(
        monkeypatch: pytest.MonkeyPatch, app: NmemServer, seeded: Seeded, mode: str) -> None:
    """The SDK alone answers a legacy handler's exception with code 0 and the exception text."""
    monkeypatch.setattr(Service, "session_trace", _broken)
    async with Client(app.server, mode=mode) as c:  # type: ignore[arg-type]
        with pytest.raises(MCPError) as err:
            await c.read_resource("nmem://project:demo/sessions/s1")
    assert (err.value.code, err.value.message) == (INTERNAL, "Internal error")
    assert SECRET not in str(err.value.data)
