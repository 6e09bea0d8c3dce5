"""The OpenAPI document: generated from the endpoint declarations, checked in as
docs/openapi.json, and fuzzed with schemathesis against a real `nmem serve --transport http` on
loopback: no request it generates gets a 5xx."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import content_type_conformance, not_a_server_error, status_code_conformance

from mcp_support import HttpServer, http_server, seed
from nmem.adapters.http import openapi
from nmem.adapters.http.app import create_app
from nmem.config import load_settings
from nmem.service.api import Service

DOC = Path(__file__).resolve().parents[3] / "docs" / "openapi.json"
EXAMPLES = 16   # per operation, valid and invalid: ~40 operations, a bounded run of ~600 requests


def test_the_checked_in_document_is_the_generated_one() -> None:
    assert DOC.read_text(encoding="utf-8") == openapi.text(), "run `python scripts/docs.py`"


def test_every_route_is_documented_and_every_documented_path_is_routed(service: Service) -> None:
    app = create_app(service.settings, service=service)
    routed = {(m, getattr(r, "path", "")) for r in app.starlette.routes for m in (getattr(r, "methods", None) or ())}
    doc = json.loads(openapi.text())
    documented = {(method.upper(), path) for path, item in doc["paths"].items() for method in item}
    as_routed = {(m, p.replace("{ref}", "{ref:path}")) for m, p in documented}
    assert as_routed <= routed
    streams_and_viewer = ("/", "/viewer/{name}", "/stream/changes", "/stream/recall", "/stream/sync",
                          "/stream/consolidate")  # event streams and static files: docs/streams.md, docs/viewer.md
    undocumented = {(m, p) for m, p in routed
                    if m != "HEAD" and p not in ("/openapi.json", *streams_and_viewer)} - as_routed
    assert undocumented == set()


def test_docs_http_lists_every_endpoint() -> None:
    text = (DOC.parent / "http.md").read_text(encoding="utf-8")
    missing = [f"{e.method} {e.openapi_path}" for e in openapi.endpoints()
               if f"`{e.method} {e.openapi_path}`" not in text]
    assert missing == []


def test_operations_have_unique_ids_and_errors_share_one_schema() -> None:
    doc = json.loads(openapi.text())
    ids = [op["operationId"] for item in doc["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids))
    assert doc["components"]["schemas"]["Error"]["required"] == ["error"]
    assert all("4XX" in op["responses"] for path, item in doc["paths"].items() if path.startswith("/api")
               for op in item.values())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    home = tmp_path_factory.mktemp("schemathesis") / "nmem-home"
    service = Service.open(load_settings({"NMEM_HOME": str(home)}))
    try:
        seed(service)
    finally:
        service.close()
    with http_server(home, "--project", "demo") as running:
        yield running


# The document as checked in: one test per operation, collected without a server running.
SCHEMA = schemathesis.openapi.from_dict(json.loads(openapi.text()))
OPERATIONS = {op.label: op for op in (result.ok() for result in SCHEMA.get_all_operations())}


@pytest.mark.slow
@pytest.mark.parametrize("label", sorted(OPERATIONS))
def test_no_generated_request_gets_a_server_error(server: HttpServer, label: str) -> None:
    """Valid requests (by the document) and invalid ones (wrong types, values out of range,
    missing parameters): every answer a documented status and content type, none a 5xx."""
    base = f"http://127.0.0.1:{server.port}"
    operation = OPERATIONS[label]
    cases = st.one_of(operation.as_strategy(GenerationMode.POSITIVE), operation.as_strategy(GenerationMode.NEGATIVE))

    @given(case=cases)
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def requests_answered_without_5xx(case: Any) -> None:
        response = case.call(base_url=base, timeout=30)
        case.validate_response(response, checks=[not_a_server_error, status_code_conformance,
                                                 content_type_conformance])

    requests_answered_without_5xx()
