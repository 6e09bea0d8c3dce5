"""subcog's observability (§6.3) on a real server (uvicorn on loopback): a request id on every
response, refusals included, and on the log lines written while answering; `/metrics` in
Prometheus's text format (parsed by its reference parser) counting routes, MCP tool calls made
with the official client, hook events, the spool and the store; access like any route, an
admin's on a team server."""

from __future__ import annotations

import http.client
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from prometheus_client.parser import text_string_to_metric_families

from http_support import CSRF, http_client
from mcp_support import PROJECT, Seeded, seed
from nmem.adapters.http import observe
from nmem.config import load_settings
from nmem.service.api import Service
from nmem.team import accounts as team
from stream_support import running_server

NOW = 1_790_000_000


def get(port: int, path: str, headers: dict[str, str] | None = None, method: str = "GET",
        body: Any = None) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data, headers={**(headers or {}),
                                                  **({"Content-Type": "application/json"} if data else {})})
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.mark.anyio
async def test_every_response_carries_a_request_id_and_so_do_its_log_lines(
        service: Service, seeded: Seeded, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="nmem.http.access")
    async with http_client(service, project=PROJECT, token="s3cret") as api:
        ok = await api.get("/api/v1/search", params={"query": "login"}, headers={"Authorization": "Bearer s3cret"})
        refused = await api.get("/api/v1/search", params={"query": "login"})  # the guard's 401
        missing = await api.get("/no/such/page", headers={"Authorization": "Bearer s3cret"})
        echoed = await api.get("/health", headers={"X-Request-Id": "trace-42.a"})
        hostile = await api.get("/health", headers={"X-Request-Id": "evil id;" + "x" * 80})
    assert (ok.status_code, refused.status_code, missing.status_code) == (200, 401, 404)
    ids = [r.headers["x-request-id"] for r in (ok, refused, missing, echoed, hostile)]
    assert len(set(ids)) == 5 and all(ids)
    assert echoed.headers["x-request-id"] == "trace-42.a"  # a caller's own id is kept
    assert hostile.headers["x-request-id"] != "" and "evil" not in hostile.headers["x-request-id"]
    lines = [r for r in caplog.records if r.name == "nmem.http.access"]
    assert [getattr(r, "request_id", None) for r in lines] == ids
    assert lines[1].getMessage().startswith("GET /api/v1/search 401")
    outside = logging.getLogger("nmem.test").makeRecord("nmem.test", logging.INFO, __file__, 1, "x", (), None)
    assert getattr(outside, "request_id", None) == "-"


@pytest.mark.anyio
async def test_metrics_count_routes_tools_hooks_spool_and_store(nmem_home: Path) -> None:
    settings = load_settings({"NMEM_HOME": str(nmem_home)})
    with Service.open(settings) as service:
        seed(service)
    spool = Path(settings.spool_dir)
    spool.mkdir(parents=True, exist_ok=True)
    (spool / "1790000000-1-a.json").write_text("{}")
    (spool / "1790000000-2-b.json.bad").write_text("{")
    with running_server(settings) as server:
        for query in ("login", "redirect"):
            assert get(server.port, f"/api/v1/search?query={query}").status == 200
        assert get(server.port, "/api/v1/memories/no-such-memory").status == 404
        event = {"hook_event_name": "UserPromptSubmit", "session_id": "m1", "cwd": str(nmem_home),
                 "prompt": "count me"}
        assert get(server.port, "/api/v1/hook", CSRF, "POST", event).status == 200
        assert get(server.port, "/api/v1/hook", CSRF, "POST", {"nothing": 1}).status in (400, 422)
        async with create_mcp_http_client() as client_http, \
                Client(streamable_http_client(f"{server.base}/mcp", http_client=client_http)) as client:
            assert not (await client.call_tool("search", {"query": "login"})).is_error
            assert not (await client.call_tool("status", {})).is_error
            assert (await client.call_tool("get_observations", {"ids": []})).is_error
        scraped = get(server.port, "/metrics")
        assert scraped.status == 200
        assert scraped.getheader("content-type", "").startswith("text/plain; version=0.0.4")
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
    found = samples(text)
    assert value(found, "nmem_http_requests_total", route="/api/v1/search", method="GET", status="200") == 2
    assert value(found, "nmem_http_requests_total", route="/api/v1/memories/{ref}", method="GET",
                 status="404") == 1
    assert value(found, "nmem_http_request_duration_seconds_count", route="/api/v1/search") == 2
    assert value(found, "nmem_http_request_duration_seconds_bucket", route="/api/v1/search", le="+Inf") == 2
    assert value(found, "nmem_http_requests_total", route="/metrics", method="GET", status="200") == 1
    assert value(found, "nmem_mcp_tool_calls_total", tool="search", outcome="ok") == 1
    assert value(found, "nmem_mcp_tool_calls_total", tool="status", outcome="ok") == 1
    assert value(found, "nmem_mcp_tool_calls_total", tool="get_observations", outcome="error") == 1
    assert value(found, "nmem_mcp_tool_duration_seconds_count", tool="search") == 1
    assert value(found, "nmem_hook_events_total", route="/api/v1/hook", outcome="recorded") == 1
    assert value(found, "nmem_hook_events_total", route="/api/v1/hook", outcome="refused") == 1
    assert value(found, "nmem_spool_events", state="pending") == 1
    assert value(found, "nmem_spool_events", state="set_aside") == 1
    assert value(found, "nmem_store_size_bytes") > 0
    assert value(found, "nmem_store_rows", table="prompts") >= 3  # seeded, plus the hook's prompt
    assert not any(name == "nmem_http_requests_total" and dict(labels).get("route") == "/no/such"
                   for name, labels in found)


def test_metrics_need_the_token_and_an_admin_on_a_team_server(nmem_home: Path) -> None:
    settings = load_settings({"NMEM_HOME": str(nmem_home)})
    with Service.open(settings) as service:
        team.add_user(service.store, "root", True, NOW)
        team.add_user(service.store, "bob", False, NOW)
        root = team.create_token(service.store, "root", NOW)["token"]
        bob = team.create_token(service.store, "bob", NOW)["token"]
    with running_server(settings) as server:
        anonymous = get(server.port, "/metrics")
        member = get(server.port, "/metrics", {"Authorization": f"Bearer {bob}"})
        admin = get(server.port, "/metrics", {"Authorization": f"Bearer {root}"})
    assert anonymous.status == 401 and anonymous.getheader("x-request-id")
    assert member.status == 403 and member.getheader("x-request-id")
    assert admin.status == 200


def test_the_metrics_text_is_the_table_rendered_in_prometheus_format(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every family of observe.FAMILIES, byte for byte as fixtures/metrics.prom holds it (what the
    hand-built families printed for the same counts, but for the store's size, which `:g` cut to
    six digits), and read alike by Prometheus's parser."""
    monkeypatch.setattr(observe, "__version__", "9.9.9")
    metrics = observe.Metrics()
    metrics.started = 1000.0
    for route, method, status, seconds in [
            ("/api/v1/search", "GET", 200, 0.003), ("/api/v1/search", "GET", 200, 0.2),
            ("/api/v1/memories/{ref}", "GET", 404, 0.02), ("/api/v1/hook", "POST", 200, 0.04),
            ("/api/v1/hook", "POST", 422, 12.0), ("/metrics", "GET", 200, 0.001)]:
        metrics.request(route, method, status, seconds)
    for tool, outcome, seconds in [("search", "ok", 0.03), ("status", "ok", 0.5), ("get_observations", "error", 1e-4)]:
        metrics.tool_call(tool, outcome, seconds)
    reading = observe.Reading(1_234_567_890, {"sessions": 4, "prompts": 12, "observations": 250_000, "memories": 7},
                              3, 1, 1234.5678, (5, 2, 9),
                              {"pool_size": 11, "pool_available": 4, "pool_max": 15, "requests_waiting": 0,
                               "requests_num": 5210, "requests_queued": 17, "requests_wait_ms": 1250})
    text = metrics.text(reading)
    assert text == (Path(__file__).parents[2] / "fixtures" / "metrics.prom").read_text()
    found = samples(text)
    assert [f.name for f in text_string_to_metric_families(text)] == [
        f.name.removesuffix("_total") for f in observe.FAMILIES]
    assert value(found, "nmem_http_request_duration_seconds_bucket", route="/api/v1/search", le="0.005") == 1
    assert value(found, "nmem_hook_events_total", route="/api/v1/hook", outcome="refused") == 1
    assert value(found, "nmem_uptime_seconds") == 234.568 and value(found, "nmem_store_rows", table="memories") == 7
    assert value(found, "nmem_store_size_bytes") == 1_234_567_890
    assert value(found, "nmem_write_transactions_total", kind="shared") == 2
    assert value(found, "nmem_shared_transaction_writes_total") == 9
    assert value(found, "nmem_store_pool_connections", state="open") == 11
    assert value(found, "nmem_store_pool_requests_total", outcome="waited") == 17
    assert value(found, "nmem_store_pool_wait_seconds_total") == 1.25
