"""An oversized search query is refused with a clear error on every surface, before any search:
a 1 MB query cost a server 4 s of CPU, a 15 MB one sent over the WebSocket (which took messages
beyond the HTTP body limit) 55 s. A real `nmem serve` process, the official MCP client and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from conftest import run_nmem
from mcp_support import child_env, http_server
from nmem.service.args import QUERY_CHARS

pytestmark = pytest.mark.anyio
QUERY = "why does the deploy fail " * (QUERY_CHARS // 25 + 40)   # just past the limit
LIMIT = f"the limit is {QUERY_CHARS}"


def test_the_query_is_past_the_limit_and_within_the_body_limit() -> None:
    assert QUERY_CHARS < len(QUERY) < QUERY_CHARS + 2000


async def test_every_surface_refuses_an_oversized_query(tmp_path: Path) -> None:
    with http_server(tmp_path / "home") as server:
        base = f"http://127.0.0.1:{server.port}"
        for path in ("/api/v1/search", "/api/v1/memories", "/api/search", "/api/timeline/by-query"):
            response = httpx2.get(base + path, params={"query": QUERY}, timeout=60)
            assert 400 <= response.status_code < 500 and LIMIT in response.text, (path, response.text[:300])
        response = httpx2.post(base + "/stream/recall", json={"query": QUERY}, timeout=60)
        answer = response.text
        assert (400 <= response.status_code < 500 or "event: error" in answer) and LIMIT in answer, answer[-300:]
        assert "event: complete" not in answer and QUERY not in answer
        with connect(f"ws://127.0.0.1:{server.port}/ws", open_timeout=30) as ws:
            ws.send(json.dumps({"op": "recall", "id": 1, "query": QUERY}))
            message = json.loads(ws.recv(timeout=60))
            assert message["event"] == "error" and LIMIT in message["data"]["message"], message
            # a message past the HTTP body limit is refused as a body is, never read whole
            ws.send(json.dumps({"op": "recall", "id": 2, "query": "x " * (3 << 20)}))
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=60)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
        async with Client(streamable_http_client(server.url)) as client:
            for tool in ("search", "recall"):
                result = await client.call_tool(tool, {"query": QUERY})
                assert result.is_error and LIMIT in json.dumps(result.model_dump(mode="json")), tool
    for args in (["search", QUERY], ["recall", QUERY]):
        done = run_nmem(args, env=child_env(tmp_path / "home"))
        assert done.returncode == 2 and LIMIT in done.stderr, (args[0], done.returncode, done.stderr[-300:])
