"""The OpenAPI 3.1 document, generated from the endpoint declarations (`nmem.adapters.http.routing`).

`/openapi.json` serves it; `docs/openapi.json` is the same document checked in, kept in sync
by `python scripts/docs.py` and a test.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

import pydantic

from nmem import __version__
from nmem.adapters.http.routing import Endpoint
from nmem.adapters.http.security import COOKIE

ERROR = {
    "type": "object", "required": ["error"],
    "properties": {"error": {
        "type": "object", "required": ["type", "message", "code"],
        "properties": {
            "type": {"type": "string", "description": "nmem's error kind: not_found, invalid_argument, "
                                                      "validation, unauthorized, csrf..."},
            "message": {"type": "string", "description": "What went wrong and what to do about it."},
            "code": {"type": "integer", "description": "nmem's error code, as MCP carries it (-32001 not found)."},
        },
    }},
}
ERROR_REF = {"description": "An error: its kind, a message and nmem's code.",
             "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
CSRF_PARAMETER = {
    "name": "X-Nmem-CSRF", "in": "header", "required": True, "schema": {"type": "string", "enum": ["1"]},
    "description": "Any value: proves the request is not a cross-site form (a request with an "
                   "Authorization header needs none).",
}
DESCRIPTION = (
    "nmem's HTTP API: the REST mirror of its service (`/api/v1`), claude-mem's worker endpoints "
    "(`/api/...`), and MCP over Streamable HTTP at `/mcp` (not described here). Errors are "
    "`{\"error\": {\"type\", \"message\", \"code\"}}` with the error kind's HTTP status. Beyond "
    "loopback every request needs the token (`Authorization: Bearer`, or the cookie `/login` sets); "
    "requests that change data need `X-Nmem-CSRF: 1` or an Authorization header. See docs/http.md."
)
EXTRA_PATHS: dict[str, Any] = {
    "/health": {"get": {
        "operationId": "health", "summary": "Liveness: the server answers and can read its database",
        "tags": ["server"], "security": [{}],
        "responses": {"200": {"description": "Healthy.", "content": {"application/json": {"schema": {
            "type": "object", "required": ["status"],
            "properties": {"status": {"type": "string"}, "version": {"type": "string"}}}}}},
            "503": ERROR_REF},
    }},
    "/metrics": {"get": {
        "operationId": "metrics", "summary": "Counters and latencies in Prometheus's text format (an admin's on a "
                                             "team server)",
        "tags": ["server"],
        "description": "Requests and latencies per route and per MCP tool, hook events by outcome, the spool's "
                       "depth, the store's size and rows. Every response also carries `X-Request-Id`.",
        "responses": {"200": {"description": "The metrics.", "content": {"text/plain": {"schema": {
            "type": "string"}}}}, "401": ERROR_REF, "403": ERROR_REF},
    }},
    "/login": {"get": {
        "operationId": "login", "summary": "Set the viewer's session cookie from the token, then redirect",
        "tags": ["server"], "security": [{}],
        "parameters": [
            {"name": "token", "in": "query", "required": False, "schema": {"type": "string"}},
            {"name": "next", "in": "query", "required": False,
             "schema": {"type": "string"}, "description": "Where to go next: a path on this server (default /)."},
        ],
        "responses": {"303": {"description": "The cookie is set (when a token is configured); on to `next`."},
                      "401": ERROR_REF},
    }},
}


def _parameters(endpoint: Endpoint, components: dict[str, Any]) -> list[dict[str, Any]]:
    if endpoint.params is not None:
        schema = _schema(endpoint.params, components)
    elif endpoint.query_schema is not None:
        schema = endpoint.query_schema
    else:
        return []
    required = set(schema.get("required", []))
    out = []
    for name, declared in schema.get("properties", {}).items():
        prop = dict(declared)
        prop.pop("title", None)
        description = prop.pop("description", None)
        where = "path" if name in endpoint.path_params else "query"
        param: dict[str, Any] = {"name": name, "in": where, "required": where == "path" or name in required,
                                 "schema": prop}
        if description:
            param["description"] = description
        out.append(param)
    return out


def _schema(model: type[pydantic.BaseModel], components: dict[str, Any]) -> dict[str, Any]:
    """The model's JSON schema; its nested definitions go to `components.schemas`."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, definition in schema.pop("$defs", {}).items():
        components.setdefault(name, definition)
    return schema


def _operation(endpoint: Endpoint, components: dict[str, Any]) -> dict[str, Any]:
    operation: dict[str, Any] = {"operationId": endpoint.operation_id, "summary": endpoint.summary,
                                 "tags": [endpoint.tag]}
    if endpoint.description:
        operation["description"] = endpoint.description
    if endpoint.deprecated:
        operation["deprecated"] = True
    parameters = _parameters(endpoint, components)
    if endpoint.method not in ("GET", "HEAD") and not endpoint.reads_only:
        parameters.append(copy.deepcopy(CSRF_PARAMETER))
    if parameters:
        operation["parameters"] = parameters
    if endpoint.body is not None:
        body = _schema(endpoint.body, components)
        components[endpoint.body.__name__] = body
        operation["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": {"$ref": f"#/components/schemas/{endpoint.body.__name__}"}}}}
    elif endpoint.body_schema is not None:
        operation["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": endpoint.body_schema}}}
    success = endpoint.response or {"type": "object"}
    operation["responses"] = {
        str(endpoint.status): {"description": endpoint.summary + ".",
                               "content": {"application/json": {"schema": success}}},
        "4XX": ERROR_REF, "5XX": ERROR_REF,
    }
    return operation


def endpoints() -> tuple[Endpoint, ...]:
    """Every declared endpoint: what the server routes and the document describes."""
    from nmem.adapters.http import api, claude_mem, live_api, team

    return (*api.ENDPOINTS, *team.ENDPOINTS, *live_api.ENDPOINTS, *claude_mem.ENDPOINTS)


def text() -> str:
    """The document as `/openapi.json` serves it and `docs/openapi.json` holds it."""
    return json.dumps(document(endpoints()), indent=2, ensure_ascii=False) + "\n"


def document(endpoints: Sequence[Endpoint]) -> dict[str, Any]:
    components: dict[str, Any] = {"Error": ERROR}
    paths: dict[str, Any] = {}
    for endpoint in endpoints:
        paths.setdefault(endpoint.openapi_path, {})[endpoint.method.lower()] = _operation(endpoint, components)
    for path, item in EXTRA_PATHS.items():
        paths.setdefault(path, {}).update(copy.deepcopy(item))
    return {
        "openapi": "3.1.0",
        "info": {"title": "nmem", "version": __version__, "description": DESCRIPTION,
                 "license": {"name": "MIT", "identifier": "MIT"}},
        "servers": [{"url": "http://127.0.0.1:37777", "description": "`nmem serve --transport http`"}],
        "security": [{}, {"bearer": []}, {"cookie": []}],
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": dict(sorted(components.items())),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer",
                           "description": "The `http.token` setting (NMEM_HTTP_TOKEN, or --token)."},
                "cookie": {"type": "apiKey", "in": "cookie", "name": COOKIE,
                           "description": "Set by GET /login?token=… for the web viewer."},
            },
        },
    }
