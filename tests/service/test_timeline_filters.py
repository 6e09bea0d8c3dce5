"""Timelines narrowed by every filter the seeds document (agent, types, concepts/tags, files,
date bounds), together, on both engines: the service lists the nearest neighbours that pass;
the CLI (a real `nmem` process), the MCP tool (the official client), REST and claude-mem's
worker routes ask the same questions and get the same records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import httpx2
import pytest
from mcp import Client

from conftest import record
from http_support import http_client
from mcp_support import PROJECT, child_env, structured, tool_error
from nmem.errors import NotFound
from nmem.service.api import Service

pytestmark = pytest.mark.anyio
T0 = 1_790_000_000
CWD = f"/work/{PROJECT}"
CODEX, GEMINI = "sx-codex", "sg-gemini"


class Trail(NamedTuple):
    """Ids of one session's observations, in the order recorded."""

    start: int
    read_invoice: int
    failure: int
    read_tax: int
    edit_invoice: int
    passed: int
    reread_invoice: int


def session(service: Service, sid: str, agent: str, t: int) -> Trail:
    """One session of `agent` about invoice rounding: reads, a failing and a passing test, an edit."""
    service.store.ensure_session(sid, PROJECT, t, agent=agent)

    def tool(at: int, name: str, **tool_input: Any) -> int:
        response = {"stdout": "AssertionError: invoice rounding", "exit_code": 1} if tool_input.get("fail") else {}
        tool_input.pop("fail", None)
        return int(record(service, "PostToolUse", now=at, session_id=sid, cwd=CWD, tool_name=name,
                          tool_input=tool_input, tool_response=response or {"stdout": "ok"}).observation_id)

    start = int(record(service, "SessionStart", now=t, session_id=sid, cwd=CWD, source="startup").observation_id)
    record(service, "UserPromptSubmit", now=t + 1, session_id=sid, cwd=CWD, prompt="fix the invoice rounding")
    return Trail(start, tool(t + 2, "Read", file_path=f"{CWD}/src/invoice.py"),
                 tool(t + 3, "Bash", command="pytest tests/test_invoice.py", fail=True),
                 tool(t + 4, "Read", file_path=f"{CWD}/src/tax.py"),
                 tool(t + 5, "Edit", file_path=f"{CWD}/src/invoice.py", old_string="round(x)",
                      new_string="round(x, 2)"),
                 tool(t + 6, "Bash", command="pytest tests/test_invoice.py"),
                 tool(t + 400, "Read", file_path=f"{CWD}/src/invoice.py"))  # past capture.dedup_window


class Seeded(NamedTuple):
    codex: Trail
    gemini: Trail


@pytest.fixture
def seeded(service: Service) -> Seeded:  # the MCP `client` fixture's app reads this store
    return Seeded(session(service, CODEX, "codex", T0), session(service, GEMINI, "gemini", T0 + 1000))


@pytest.fixture
async def api(service: Service, seeded: Seeded) -> Any:
    async with http_client(service, project=PROJECT) as client:
        yield client


def around(answer: dict[str, Any]) -> tuple[Any, list[Any], list[Any]]:
    return answer["anchor"]["id"], [o["id"] for o in answer["before"]], [o["id"] for o in answer["after"]]


def test_the_service_lists_the_nearest_neighbours_that_pass_every_filter(service: Service, seeded: Seeded) -> None:
    codex = seeded.codex
    anchor = codex.edit_invoice
    assert around(service.timeline(anchor, before=2, after=1)) == (anchor, [codex.failure, codex.read_tax],
                                                                   [codex.passed])
    reads = service.timeline(anchor, agent="codex", obs_type="file_read", before=2, after=2)
    assert around(reads) == (anchor, [codex.read_invoice, codex.read_tax], [codex.reread_invoice])
    assert reads["agent"] == "codex"
    on_file = service.timeline(anchor, agent=["codex", "gemini"], obs_type="file_read", files="invoice.py")
    assert around(on_file) == (anchor, [codex.read_invoice], [codex.reread_invoice])
    dated = service.timeline(anchor, obs_type=["file_read", "command_error"], date_start=T0 + 3, date_end=T0 + 6)
    assert around(dated) == (anchor, [codex.failure, codex.read_tax], [])
    assert around(service.timeline(anchor, tags="invoice")) == (anchor, [], [])  # tags: memories' only
    by_query = service.timeline(query="pytest invoice", agent="gemini", obs_type="command_error", before=3)
    assert around(by_query) == (seeded.gemini.failure, [], []) and by_query["agent"] == "gemini"
    with pytest.raises(NotFound, match="recorded by codex, not gemini"):
        service.timeline(anchor, agent="gemini", obs_type="file_read")
    with pytest.raises(NotFound, match="with those filters"):
        service.timeline(query="pytest invoice", tags="invoice")


class Question(NamedTuple):
    cli: list[str]
    mcp: dict[str, Any]
    rest: dict[str, Any]
    claude_mem: tuple[str, dict[str, Any]] | None  # a worker route, where it has the parameters


def questions(seeded: Seeded) -> list[Question]:
    anchor = str(seeded.codex.edit_invoice)
    return [
        Question([anchor, "--agent", "codex", "--type", "file_read", "--file", "invoice.py"],
                 {"anchor": int(anchor), "agent": "codex", "obs_type": "file_read", "files": "invoice.py"},
                 {"anchor": anchor, "agent": "codex", "obs_type": "file_read", "files": "invoice.py"},
                 ("/api/timeline", {"anchor_id": anchor, "agent": "codex", "obs_type": "file_read",
                                    "files": "invoice.py", "before": "5", "after": "5"})),
        Question([anchor, "--type", "file_read,command_error", "--since", str(T0 + 3), "--until", str(T0 + 6)],
                 {"anchor": int(anchor), "obs_type": ["file_read", "command_error"], "date_start": T0 + 3,
                  "date_end": T0 + 6},
                 {"anchor": anchor, "obs_type": ["file_read", "command_error"], "date_start": str(T0 + 3),
                  "date_end": str(T0 + 6)}, None),
        Question(["--query", "pytest invoice", "--agent", "gemini", "--type", "command_error", "--until",
                  str(T0 + 1100)],
                 {"query": "pytest invoice", "agent": "gemini", "obs_type": "command_error", "dateEnd": T0 + 1100},
                 {"query": "pytest invoice", "agent": "gemini", "obs_type": "command_error",
                  "date_end": str(T0 + 1100)},
                 ("/api/timeline/by-query", {"query": "pytest invoice", "agent": "gemini", "type": "command_error",
                                             "dateEnd": str(T0 + 1100), "before": "5", "after": "5"})),
        Question([anchor, "--tag", "invoice", "--agent", "codex"], {"anchor": int(anchor), "concepts": "invoice",
                                                                     "agent": "codex"},
                 {"anchor": anchor, "tags": "invoice", "agent": "codex"},
                 ("/api/context/timeline", {"anchor": anchor, "concepts": "invoice", "agent": "codex",
                                            "before": "5", "after": "5"})),
    ]


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    here = home.parent / PROJECT
    here.mkdir(exist_ok=True)
    store = {"NMEM_STORE_URL": os.environ["NMEM_STORE_URL"]} if "NMEM_STORE_URL" in os.environ else {}  # PostgreSQL's
    return subprocess.run([sys.executable, "-m", "nmem", "timeline", *args], cwd=here, capture_output=True,
                          text=True, env=child_env(home, **store), timeout=60, check=False)


async def test_every_surface_answers_a_narrowed_timeline_alike(client: Client, api: httpx2.AsyncClient,
                                                               nmem_home: Path, seeded: Seeded) -> None:
    expected = [(seeded.codex.edit_invoice, [seeded.codex.read_invoice], [seeded.codex.reread_invoice]),
                (seeded.codex.edit_invoice, [seeded.codex.failure, seeded.codex.read_tax], []),
                (seeded.gemini.failure, [], []),
                (seeded.codex.edit_invoice, [], [])]
    for question, want in zip(questions(seeded), expected, strict=True):
        done = cli(nmem_home, *question.cli, "--format", "json")
        assert done.returncode == 0, done.stderr
        assert around(json.loads(done.stdout)) == want, question.cli
        assert around(structured(await client.call_tool("timeline", question.mcp))) == want, question.mcp
        rest = await api.get("/api/v1/timeline", params=question.rest)
        assert rest.status_code == 200 and around(rest.json()) == want, question.rest
        if question.claude_mem is not None:
            path, params = question.claude_mem
            worker = await api.get(path, params={**params, "format": "json"})
            assert worker.status_code == 200 and around(worker.json()) == want, path


async def test_an_anchor_another_agent_recorded_is_not_found_everywhere(client: Client, api: httpx2.AsyncClient,
                                                                       nmem_home: Path, seeded: Seeded) -> None:
    anchor = str(seeded.codex.edit_invoice)
    done = cli(nmem_home, anchor, "--agent", "gemini", "--type", "file_read")
    assert done.returncode == 10 and "not gemini" in done.stderr
    refused = await client.call_tool("timeline", {"anchor": int(anchor), "agent": "gemini", "obs_type": "file_read"})
    assert "not gemini" in tool_error(refused)
    for path, params in (("/api/v1/timeline", {"anchor": anchor, "agent": "gemini", "obs_type": "file_read"}),
                         ("/api/timeline", {"anchor_id": anchor, "agent": "gemini", "obs_type": "file_read"}),
                         ("/api/context/timeline", {"anchor": anchor, "agent": "gemini", "type": "file_read"})):
        response = await api.get(path, params=params)
        assert response.status_code == 404 and "not gemini" in response.text, path
