"""claude-mem's worker endpoints over HTTP: its paths, its parameter spellings (query-string
texts, camelCase, comma lists), its bodies, answered by the same `OPERATIONS` table as MCP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from http_support import error_of, http_client
from mcp_support import AUTH_FILE, PROJECT, T0, Seeded
from nmem.compat.claude_mem import OPERATIONS, render
from nmem.service.api import Service
from test_claude_mem import ISSUE_13_ROUTES

pytestmark = pytest.mark.anyio

# Each route with parameters it needs (claude-mem's spellings, as its MCP server forwards them).
ARGS: dict[str, dict[str, str]] = {
    "search": {"query": "login"}, "timeline": {"query": "AssertionError redirect"},
    "decisions": {"query": "login"}, "changes": {"query": "auth"}, "how_it_works": {"query": "pytest"},
    "search_observations": {"query": "redirect"}, "search_sessions": {"query": "login"},
    "search_user_prompts": {"query": "flaky"}, "find_by_concept": {"concepts": "jwt"},
    "find_by_file": {"files": "auth.py"}, "find_by_type": {"type": "bugfix,discovery"},
    "get_recent_context": {"limit": "2"}, "get_context_timeline": {"anchor": "#4", "depth_before": "1"},
    "get_timeline_by_query": {"query": "login", "mode": "interactive"},
}


@pytest.fixture
async def worker(service: Service, seeded: Seeded) -> AsyncIterator[httpx2.AsyncClient]:
    async with http_client(service, project=PROJECT) as client:
        yield client


@pytest.mark.parametrize("name", sorted(ISSUE_13_ROUTES))
async def test_every_worker_route_answers_as_the_shared_operation_does(
        worker: httpx2.AsyncClient, service: Service, name: str) -> None:
    for fmt in ("index", "json"):
        args = {**ARGS[name], "format": fmt}
        response = await worker.get(ISSUE_13_ROUTES[name], params=args)
        assert response.status_code == 200, (name, response.text)
        expected = render.worker_body(name, OPERATIONS[name](service, args, PROJECT))
        assert response.json() == expected


async def test_markdown_by_default_and_json_rows_on_request(worker: httpx2.AsyncClient, seeded: Seeded) -> None:
    text = (await worker.get("/api/search", params={"query": "login"})).json()
    assert text["content"][0]["type"] == "text" and "login" in text["content"][0]["text"].lower()
    rows = (await worker.get("/api/search", params={"query": "login", "format": "json", "type": "observations",
                                                    "obs_type": "bugfix"})).json()
    assert [r["id"] for r in rows["observations"]] == [seeded.failure]


async def test_claude_mem_spellings_in_query_strings(worker: httpx2.AsyncClient, seeded: Seeded) -> None:
    dated = (await worker.get("/api/search", params={
        "type": "observations", "format": "json", "dateStart": str((T0 + 35) * 1000), "date_end": str(T0 + 52),
        "orderBy": "date_asc", "limit": "5", "unknownThing": "ignored"})).json()
    assert [r["id"] for r in dated["observations"]] == [seeded.read, seeded.edit]
    listed = (await worker.get("/api/search/by-file", params=[("files", AUTH_FILE), ("files", "nothing.py"),
                                                             ("format", "json")])).json()
    assert sorted(r["id"] for r in listed["observations"]) == sorted([seeded.read, seeded.edit])
    around = (await worker.get("/api/context/timeline", params={"anchor_id": str(seeded.read), "before": "1",
                                                                "after": "1", "format": "json"})).json()
    assert [o["id"] for o in around["observations"]] == [seeded.failure, seeded.read, seeded.edit]

    recent = (await worker.get("/api/context/recent", params={"limit": "3", "type": "change", "format": "json"})
              ).json()
    assert [r["id"] for r in recent["observations"]] == [seeded.edit] and recent["limit"] == 3
    typed = (await worker.get("/api/timeline", params={"anchor_id": str(seeded.edit), "obs_type": "command",
                                                       "format": "json"})).json()
    assert [o["id"] for o in typed["before"]] == [seeded.test_run]
    by_query = (await worker.get("/api/timeline/by-query", params={
        "query": "auth", "files": "src/auth.py", "dateEnd": str(T0 + 45), "format": "json"})).json()
    assert by_query["anchor"]["id"] == seeded.read  # the best match among rows that pass the filters
    assert (by_query["before"], by_query["after"]) == ([], [])  # the edit is after dateEnd


@pytest.mark.parametrize(("path", "params", "status"), [
    ("/api/search/observations", {}, 422),                      # query is required there
    ("/api/search", {"limit": "many"}, 422),
    ("/api/search", {"format": "yaml"}, 422),
    ("/api/context/timeline", {"anchor": "999999"}, 404),
    ("/api/search/by-type", {"type": "nonsense"}, 422),
    ("/api/timeline", {"anchor_id": "4", "obs_type": "poem"}, 422),
    ("/api/context/recent", {"dateStart": "soon"}, 422),
])
async def test_bad_parameters_are_json_errors(worker: httpx2.AsyncClient, path: str, params: dict[str, Any],
                                              status: int) -> None:
    response = await worker.get(path, params=params)
    assert response.status_code == status, response.text
    assert error_of(response)["message"]


async def test_batch_read_needs_no_csrf_header_but_refuses_a_foreign_origin(worker: httpx2.AsyncClient,
                                                                            seeded: Seeded) -> None:
    found = await worker.post("/api/observations/batch", json={"ids": [seeded.edit, f"#{seeded.read}"]})
    assert found.status_code == 200, found.text
    assert [r["id"] for r in found.json()["observations"]] == [seeded.edit, seeded.read]
    foreign = await worker.post("/api/observations/batch", json={"ids": [seeded.edit]},
                                headers={"Origin": "https://evil.example"})
    assert foreign.status_code == 403 and error_of(foreign)["type"] == "csrf"
