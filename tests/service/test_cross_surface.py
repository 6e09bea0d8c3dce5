"""The same questions through every surface get the same records in the same order: the CLI
(a real `nmem` process in the project's directory), the MCP tools (the official client), the
REST API and claude-mem's worker routes (where a surface has the parameters). Each surface
leaves `project` and `scope` out unless the question narrows them, so the defaults are
compared too: search covers every kind in every project, the current one's first; recall
covers the current project's memories plus the user's and the org's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client

from http_support import http_client
from mcp_support import PROJECT, Seeded, child_env, structured
from nmem.service.api import Service

pytestmark = pytest.mark.anyio
Key = tuple[str, Any]

SEARCHES: list[dict[str, Any]] = [  # the parameters every surface spells alike
    {"query": "login"},                                          # defaults: every kind, every project
    {"query": "login", "project": "*"},
    {"query": "login", "project": "other"},
    {"query": "pytest", "scope": "observations", "order_by": "date_desc"},
    {"query": "login", "scope": "memories"},
    {"query": "auth", "scope": "observations", "project": PROJECT, "limit": 2, "offset": 1},
]
CLI_FLAGS = {"scope": "--scope", "project": "--project", "order_by": "--order", "limit": "--limit",
             "offset": "--offset"}


def keys(rows: list[dict[str, Any]]) -> list[Key]:
    return [(row["kind"], row["id"]) for row in rows]


def cli(home: Path, cwd: Path, *args: str) -> Any:
    """`nmem ARGS` as a process in `cwd`, on the test's store (NMEM_STORE_URL names PostgreSQL's)."""
    store = {"NMEM_STORE_URL": os.environ["NMEM_STORE_URL"]} if "NMEM_STORE_URL" in os.environ else {}
    done = subprocess.run([sys.executable, "-m", "nmem", *args, "--format", "json"], cwd=cwd, capture_output=True,
                          text=True, env=child_env(home, **store), timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    here = tmp_path / PROJECT  # the CLI's current project is its directory's
    here.mkdir()
    return here


@pytest.fixture
async def api(service: Service, seeded: Seeded) -> Any:
    async with http_client(service, project=PROJECT) as client:
        yield client


@pytest.mark.parametrize("question", SEARCHES, ids=lambda q: "-".join(f"{k}={v}" for k, v in q.items()))
async def test_search_answers_alike_everywhere(question: dict[str, Any], client: Client, api: httpx2.AsyncClient,
                                               nmem_home: Path, project_dir: Path) -> None:
    flags = [arg for name, value in question.items() if name != "query"
             for arg in (CLI_FLAGS[name], str(value))]
    by_cli = keys(cli(nmem_home, project_dir, "search", question["query"], *flags))
    by_mcp = keys(structured(await client.call_tool("search", question))["results"])
    by_rest = keys((await api.get("/api/v1/search", params=question)).json()["results"])
    assert by_cli, "the question finds nothing: the comparison would prove nothing"
    assert by_mcp == by_cli
    assert by_rest == by_cli


async def test_the_default_search_covers_every_kind_with_the_current_project_first(
        client: Client, seeded: Seeded) -> None:
    rows = structured(await client.call_tool("search", {"query": "login"}))["results"]
    assert {"observation", "prompt", "memory"} <= {row["kind"] for row in rows}
    projects = [row.get("project") for row in rows if row["kind"] in ("observation", "prompt")]
    assert projects == sorted(projects, key=lambda p: p != PROJECT) and projects[-1] == "other"


async def test_claude_mem_search_answers_as_the_others(client: Client, api: httpx2.AsyncClient) -> None:
    for project in (None, "other"):
        asked = {"query": "login", "scope": "observations", "limit": 10, **({"project": project} if project else {})}
        by_mcp = keys(structured(await client.call_tool("search", asked))["results"])
        worker = {"query": "login", "type": "observations", "format": "json", "limit": "10",
                  **({"project": project} if project else {})}
        by_worker = keys((await api.get("/api/search", params=worker)).json()["observations"])
        assert by_mcp and by_worker == by_mcp, project


@pytest.mark.parametrize("question", [{"query": "login"}, {"query": "pytest"}, {"query": "login", "project": "*"},
                                      {"query": "login", "project": "other"}], ids=str)
async def test_recall_answers_alike_everywhere(question: dict[str, Any], client: Client, api: httpx2.AsyncClient,
                                               nmem_home: Path, project_dir: Path) -> None:
    flags = ["--project", question["project"]] if "project" in question else []
    by_cli = [row["id"] for row in cli(nmem_home, project_dir, "recall", question["query"], *flags)["results"]]
    by_mcp = [row["id"] for row in structured(await client.call_tool("recall", question))["results"]]
    by_rest = [row["id"] for row in (await api.get("/api/v1/memories", params=question)).json()["results"]]
    assert by_mcp == by_cli
    assert by_rest == by_cli


async def test_recall_defaults_to_this_project_plus_user_and_org(client: Client, seeded: Seeded,
                                                                 service: Service) -> None:
    service.remember("login for the other app goes through SSO", project="other")
    found = structured(await client.call_tool("recall", {"query": "login"}))["results"]
    assert {row["domain"] for row in found} == {f"project:{PROJECT}", "user"}


async def test_timeline_by_query_answers_alike_everywhere(client: Client, api: httpx2.AsyncClient,
                                                          nmem_home: Path, project_dir: Path) -> None:
    def ids(data: dict[str, Any]) -> list[int]:
        return [row["id"] for row in (*data["before"], data["anchor"], *data["after"])]

    by_cli = ids(cli(nmem_home, project_dir, "timeline", "--query", "login", "--before", "2", "--after", "2"))
    by_mcp = ids(structured(await client.call_tool("timeline", {"query": "login", "before": 2, "after": 2})))
    by_rest = ids((await api.get("/api/v1/timeline", params={"query": "login", "before": 2, "after": 2})).json())
    assert by_mcp == by_cli
    assert by_rest == by_cli
