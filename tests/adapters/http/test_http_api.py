"""The REST API in process: every service operation through `/api/v1`, errors in one shape."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest

from http_support import CSRF, error_of, http_client
from mcp_support import AUTH_FILE, PROJECT, Seeded
from nmem.errors import ALL_ERRORS, ContentBlocked, InvalidArgument, NotFound, StorageError, ValidationError
from nmem.service.api import Service

pytestmark = pytest.mark.anyio


@pytest.fixture
async def api(service: Service, seeded: Seeded) -> AsyncIterator[httpx2.AsyncClient]:
    async with http_client(service) as client:
        yield client


async def test_health_and_openapi(api: httpx2.AsyncClient) -> None:
    health = await api.get("/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    doc = (await api.get("/openapi.json")).json()
    assert doc["openapi"].startswith("3.1")
    assert "/api/v1/search" in doc["paths"] and "/api/v1/memories/{ref}" in doc["paths"]


async def test_search_index_then_full(api: httpx2.AsyncClient, seeded: Seeded) -> None:
    index = (await api.get("/api/v1/search", params={"scope": "observations", "query": "login"})).json()
    assert index["count"] == len(index["results"]) >= 2
    assert [r["project"] for r in index["results"]][:1] == [PROJECT]  # the server's project first
    assert all("content_preview" in r for r in index["results"])
    full = (await api.get("/api/v1/search", params={"scope": "observations", "query": "login",
                                                    "format": "full"})).json()
    assert [r["id"] for r in full["results"]] == [r["id"] for r in index["results"]]
    assert all("content" in r for r in full["results"])


async def test_search_filters(api: httpx2.AsyncClient, seeded: Seeded) -> None:
    errors = (await api.get("/api/v1/search", params={"obs_type": "command_error", "project": "*"})).json()
    assert [r["id"] for r in errors["results"]] == [seeded.failure]
    only_other = (await api.get("/api/v1/search", params={"scope": "observations", "query": "login",
                                                          "project": "other"})).json()
    assert {r["project"] for r in only_other["results"]} == {"other"}
    by_file = (await api.get("/api/v1/search", params={"files": AUTH_FILE, "order_by": "date_asc"})).json()
    assert [r["id"] for r in by_file["results"]] == [seeded.read, seeded.edit]
    memories = (await api.get("/api/v1/search", params=[("scope", "memories"), ("tags", "auth"),
                                                        ("tags", "jwt")])).json()
    assert [r["urn"] for r in memories["results"]] == [seeded.memory_urn]
    paged = (await api.get("/api/v1/search", params={"scope": "observations", "session_id": "s1",
                                                     "order_by": "date_asc", "limit": 2, "offset": 1})).json()
    assert [r["id"] for r in paged["results"]] == [seeded.test_run, seeded.failure]


@pytest.mark.parametrize(("params", "status", "kind"), [
    ({"limit": "ten"}, 400, "invalid_argument"),
    ({"limit": "0"}, 422, "validation"),
    ({"scope": "everything"}, 400, "invalid_argument"),
    ({"obs_type": "nope"}, 400, "invalid_argument"),
    ({"query": '"unbalanced'}, 400, "query_syntax"),
    ({"date_start": "yesterday-ish"}, 400, "invalid_argument"),
    ({"session_id": "s-nope"}, 404, "not_found"),
    ({"colour": "red"}, 400, "invalid_argument"),
])
async def test_bad_search_parameters_are_json_errors(api: httpx2.AsyncClient, params: dict[str, str],
                                                     status: int, kind: str) -> None:
    response = await api.get("/api/v1/search", params=params)
    assert response.status_code == status, response.text
    assert error_of(response)["type"] == kind


async def test_observations_timeline_sessions_trace_history(api: httpx2.AsyncClient, seeded: Seeded) -> None:
    rows = (await api.get("/api/v1/observations", params={"ids": f"{seeded.edit},{seeded.read}"})).json()
    assert [r["id"] for r in rows["results"]] == [seeded.edit, seeded.read]
    one = (await api.get(f"/api/v1/observations/{seeded.failure}")).json()
    assert one["obs_type"] == "command_error"
    missing = await api.get("/api/v1/observations/424242")
    assert missing.status_code == 404 and error_of(missing)["code"] == -32001
    around = (await api.get("/api/v1/timeline", params={"anchor": seeded.failure, "before": 1, "after": 1})).json()
    assert [o["id"] for o in around["before"]] == [seeded.test_run]
    assert [o["id"] for o in around["after"]] == [seeded.read]
    sessions = (await api.get("/api/v1/sessions", params={"project": PROJECT})).json()
    assert {s["id"] for s in sessions["results"]} >= {"s1"}
    trace = (await api.get("/api/v1/sessions/s1/trace")).json()
    assert trace["session_id"] == "s1" and trace["prompts"]
    history = (await api.get("/api/v1/files/history", params={"path": AUTH_FILE})).json()
    touched = [t["observation_id"] for s in history["sessions"] for t in s["touches"]]
    assert set(touched) == {seeded.read, seeded.edit}


async def test_get_by_any_ref(api: httpx2.AsyncClient, seeded: Seeded) -> None:
    many = (await api.get("/api/v1/records", params={"refs": f"{seeded.edit},p{seeded.prompt},ss1,nothing-here"})
            ).json()
    assert [r["kind"] for r in many["results"]] == ["observation", "prompt", "session"]
    assert many["missing"] == ["nothing-here"]
    by_urn = (await api.get(f"/api/v1/records/{seeded.memory_urn}")).json()
    assert by_urn["kind"] == "memory" and by_urn["id"] == seeded.memory_id
    assert (await api.get("/api/v1/records/p999999")).status_code == 404


async def test_memory_lifecycle(api: httpx2.AsyncClient, service: Service) -> None:
    created = await api.post("/api/v1/memories", headers=CSRF, json={
        "content": "Retry the payment webhook at most 3 times.", "namespace": "decisions", "tags": ["payments"]})
    assert created.status_code == 201, created.text
    memory = created.json()
    assert memory["domain"] == f"project:{PROJECT}" and memory["source"] == "http"
    assert (await api.get(f"/api/v1/memories/{memory['urn']}")).json()["id"] == memory["id"]
    recalled = (await api.get("/api/v1/memories", params={"query": "webhook", "project": PROJECT})).json()
    assert [r["id"] for r in recalled["results"]] == [memory["id"]]
    updated = await api.patch(f"/api/v1/memories/{memory['id']}", headers=CSRF, json={"tier": "hot"})
    assert updated.json()["tier"] == "hot"
    pinned = await api.put(f"/api/v1/pins/{memory['id']}", headers=CSRF)
    assert pinned.json()["is_pinned"] is True
    assert service.get_memory(memory["id"]).is_pinned
    assert (await api.delete(f"/api/v1/pins/{memory['id']}", headers=CSRF)).json()["is_pinned"] is False
    forgotten = await api.delete(f"/api/v1/memories/{memory['id']}", headers=CSRF)
    assert forgotten.json()["forgotten"] is True
    gone = await api.get(f"/api/v1/memories/{memory['id']}")
    assert gone.status_code == 404 and error_of(gone)["type"] == "not_found"


async def test_pin_an_observation(api: httpx2.AsyncClient, seeded: Seeded, service: Service) -> None:
    assert (await api.put(f"/api/v1/pins/o{seeded.edit}", headers=CSRF)).json()["is_pinned"] is True
    assert service.get_observations([seeded.edit])[0].is_pinned


@pytest.mark.parametrize(("body", "status", "kind"), [
    ({}, 400, "invalid_argument"),
    ({"content": ""}, 422, "validation"),
    ({"content": "x", "summary": "y" * 101}, 422, "validation"),
    ({"content": "x", "tier": "lukewarm"}, 400, "invalid_argument"),
    ({"content": "x", "namespace": "Not A Slug!"}, 422, "validation"),
    ({"content": "<private>only this</private>"}, 422, "blocked"),
    ({"content": "x", "surprise": 1}, 400, "invalid_argument"),
])
async def test_bad_memories_are_refused_and_nothing_is_stored(api: httpx2.AsyncClient, service: Service,
                                                              body: dict[str, object], status: int,
                                                              kind: str) -> None:
    before = service.status()["memories"]
    response = await api.post("/api/v1/memories", headers=CSRF, json=body)
    assert response.status_code == status, response.text
    assert error_of(response)["type"] == kind
    assert service.status()["memories"] == before


async def test_a_body_that_is_not_json_is_refused(api: httpx2.AsyncClient) -> None:
    response = await api.post("/api/v1/memories", headers={**CSRF, "Content-Type": "text/plain"}, content=b"{}")
    assert response.status_code == 400 and "JSON" in error_of(response)["message"]
    broken = await api.post("/api/v1/memories", headers={**CSRF, "Content-Type": "application/json"},
                            content=b"{not json")
    assert broken.status_code == 400 and "not valid JSON" in error_of(broken)["message"]


async def test_status_settings_and_context(api: httpx2.AsyncClient) -> None:
    status = (await api.get("/api/v1/status")).json()
    assert status["observations"] >= 7
    names = {row["name"] for row in (await api.get("/api/v1/settings")).json()["settings"]}
    assert {"http.token", "search.default_limit"} <= names
    context = (await api.get("/api/v1/context", params={"project": PROJECT})).json()
    assert context["project"] == PROJECT and "<nmem-context>" in context["context"]


async def test_projects_and_the_log(api: httpx2.AsyncClient, service: Service) -> None:
    projects = (await api.get("/api/v1/projects")).json()
    names = [row["name"] for row in projects["results"]]
    assert PROJECT in names and "other" in names and all(row["sessions"] >= 1 for row in projects["results"])
    empty = (await api.get("/api/v1/log")).json()
    assert empty["exists"] is False and empty["lines"] == []
    log = Path(service.settings.log_dir) / "nmem.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("".join(f"2026-11-28 10:00:{i:02d},000 WARNING line {i}\n" for i in range(40)), encoding="utf-8")
    tail = (await api.get("/api/v1/log", params={"limit": 5})).json()
    assert tail["exists"] and tail["lines"] == [f"2026-11-28 10:00:{i:02d},000 WARNING line {i}" for i in range(35, 40)]
    assert (await api.get("/api/v1/log", params={"limit": 0})).status_code == 422


async def test_unknown_paths_and_methods_are_json_errors(api: httpx2.AsyncClient) -> None:
    missing = await api.get("/api/v1/nothing")
    assert missing.status_code == 404 and error_of(missing)["type"] == "not_found"
    wrong = await api.post("/api/v1/status", headers=CSRF)
    assert wrong.status_code == 405 and error_of(wrong)


def test_every_error_class_has_an_http_status_of_its_kind() -> None:
    for error in ALL_ERRORS:
        client_fault = issubclass(error, (InvalidArgument, NotFound, ValidationError, ContentBlocked))
        assert (400 <= error.http_status < 500) if client_fault else (error.http_status >= 400), error
        if issubclass(error, StorageError):
            assert error.http_status >= 500, error


async def test_an_ambiguous_session_prefix_is_409_listing_the_candidates(api: httpx2.AsyncClient) -> None:
    response = await api.get("/api/v1/sessions/s/trace")
    assert response.status_code == 409, response.text
    error = error_of(response)
    assert error["type"] == "ambiguous" and "s1" in error["message"] and "s2" in error["message"]
