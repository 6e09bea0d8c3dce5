"""Replies, thinking and subagent answers are labelled and counted as such on every surface.

A session is written as Claude Code writes its transcript, and its hooks run as real processes
with Claude Code's payloads (a Stop reads the turn's replies and thinking; a SubagentStop and the
subagent's own tool calls carry `agent_id` and `agent_type`). Then `nmem status`, `nmem search`
and `nmem trace` (real processes), the MCP tools (the official client) and REST answer about it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from conftest import load_bench
from fixtures.harness import hook_env, hook_ok
from http_support import http_client
from mcp_support import structured
from nmem.adapters.mcp.server import NmemServer
from nmem.service.api import Service

pytestmark = pytest.mark.anyio
cc = load_bench("cc_transcripts")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    here = tmp_path / "code" / "ledger"
    here.mkdir(parents=True)
    return here


@pytest.fixture
def recorded(nmem_home: Path, tmp_path: Path, workdir: Path) -> str:
    tree = cc.Projects(tmp_path / "projects", seed=21)
    s = tree.session(str(workdir), start=time.time() - 600)
    s.prompt("where are the month helpers?")
    s.thinking("A subagent can search while I read the failing test.")
    with s.subagent("Find date helpers", "List every helper that builds month ranges",
                    subagent_type="Explore") as agent:
        agent.say("Looking at the ledger dates module now.")
        agent.tool("Grep", {"pattern": "monthrange"}, result="src/ledger/dates.py")
    s.say("The helpers are in src/ledger/dates.py; February is hard-coded to 28 days.")
    sent = flush(s, nmem_home, 0)         # the hooks run as the turn ends, its transcript written so far
    s.prompt("fix February")
    s.say("February now uses calendar.monthrange.")
    flush(s, nmem_home, sent)
    return str(s.session_id)


def flush(session: Any, home: Path, sent: int) -> int:
    session.save()
    payloads = session.hook_payloads()
    for payload in payloads[sent:]:
        hook_ok(home, payload)
    return len(payloads)


def cli(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "nmem", *args], cwd=cwd, capture_output=True, text=True,
                          env=hook_env(home), timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done


def test_status_counts_user_prompts_apart_from_what_the_agent_wrote(recorded: str, nmem_home: Path,
                                                                    workdir: Path) -> None:
    data = json.loads(cli(nmem_home, workdir, "status", "--format", "json").stdout)
    assert (data["prompts"], data["agent_replies"], data["thinking"], data["subagent_replies"]) == (2, 2, 1, 1)
    assert data["prompts_by_role"] == {"user": 2, "reply": 2, "thinking": 1, "subagent": 1}
    assert data["subagent_replies_by_type"] == {"Explore": 1}
    text = cli(nmem_home, workdir, "status").stdout
    assert "2 prompts" in text and "2 replies, 1 thinking, 1 subagent answers (1 ↳ Explore)" in text


def test_search_and_trace_in_the_cli_name_each_writer(recorded: str, nmem_home: Path, workdir: Path) -> None:
    hits = json.loads(cli(nmem_home, workdir, "search", "ledger dates", "--format", "json").stdout)
    by_role = {h["role"]: h for h in hits if h["kind"] == "prompt"}
    assert by_role["subagent"]["label"] == "↳ Explore" and by_role["subagent"]["agent_type"] == "Explore"
    table = cli(nmem_home, workdir, "search", "ledger dates").stdout
    assert any("↳ Explore" in line and "Looking at the ledger" in line for line in table.splitlines()), table
    trace = cli(nmem_home, workdir, "trace").stdout
    headings = [line for line in trace.splitlines() if line[:1] == "p" and line[1:2].isdigit()]
    writers = [line.split("  ", 2)[2].split(":", 1)[0] for line in headings]
    assert sorted(writers) == sorted(["user", "thinking", "↳ Explore", "reply", "user", "reply"]), headings
    grep = next(line for line in trace.splitlines() if " search " in line)
    assert '↳ Explore "monthrange"' in grep, "the subagent's Grep is marked as its"


@pytest.mark.sqlite_only("the hook processes record into the home's SQLite file, which this service reads")
async def test_mcp_and_rest_give_each_row_its_role(recorded: str, service: Service) -> None:
    async with Client(NmemServer(service, project="ledger").server, mode="legacy") as client:
        trace = structured(await client.call_tool("session_trace", {"session_id": recorded}))
        found = structured(await client.call_tool("search", {"query": "ledger dates"}))["results"]
    roles = [(p["role"], p["label"]) for p in trace["prompts"] if p["prompt_id"] is not None]
    assert sorted(roles) == sorted([("user", "user"), ("thinking", "thinking"), ("subagent", "↳ Explore"),
                                    ("reply", "reply"), ("user", "user"), ("reply", "reply")])
    assert {p["role"] for p in trace["prompts"] if p["prompt_id"] is None} <= {"system"}
    grep = next(o for p in trace["prompts"] for o in p["observations"] if o["obs_type"] == "search")
    assert grep["subagent"] == "Explore"
    assert {h.get("role") for h in found if h["kind"] == "prompt"} >= {"subagent"}
    async with http_client(service, project="ledger") as api:
        rest: Any = (await api.get(f"/api/v1/sessions/{recorded}/trace")).json()
        status = (await api.get("/api/v1/status")).json()
        searched = (await api.get("/api/v1/search", params={"query": "ledger dates"})).json()["results"]
        worker = (await api.get("/api/search", params={"query": "ledger dates"})).json()["content"][0]["text"]
        worker_rows = (await api.get("/api/search", params={"query": "ledger dates", "format": "json"})).json()
    assert [p["role"] for p in rest["prompts"] if p["prompt_id"] is not None] == [r for r, _ in roles]
    assert (status["prompts"], status["subagent_replies"]) == (2, 1)
    assert [h["label"] for h in searched if h["kind"] == "prompt"] == [h["label"] for h in found
                                                                       if h["kind"] == "prompt"]
    # claude-mem's search (its worker route): the T column names the writer, user prompts stay `prompt`
    kinds = {line.split(" | ")[2] for line in worker.splitlines() if line.startswith("| p")}
    assert "↳ Explore" in kinds and kinds <= {"prompt", "reply", "thinking", "↳ Explore"}, worker
    assert {row["label"] for row in worker_rows["prompts"]} <= {"user", "reply", "thinking", "↳ Explore"}
    assert "↳ Explore" in {row["label"] for row in worker_rows["prompts"]}


def test_an_imported_session_names_each_writer_and_marks_the_subagents_calls(nmem_home: Path, tmp_path: Path,
                                                                            workdir: Path) -> None:
    """`nmem import claude-code` labels as the hooks do: the subagent's replies and its own tool
    calls (read from its file, typed by the file's meta.json) are `↳ Explore`."""
    tree = cc.Projects(tmp_path / "projects", seed=22)
    s = tree.session(str(workdir), start=time.time() - 600)
    s.prompt("where are the month helpers?")
    with s.subagent("Find date helpers", "List every helper that builds month ranges",
                    subagent_type="Explore") as agent:
        agent.say("Looking at the ledger dates module now.")
        agent.tool("Grep", {"pattern": "monthrange"}, result="src/ledger/dates.py")
    s.say("The helpers are in src/ledger/dates.py.")
    s.save()
    cli(nmem_home, workdir, "import", "claude-code", str(tree.root))
    trace = cli(nmem_home, workdir, "trace").stdout
    grep = next(line for line in trace.splitlines() if " search " in line)
    assert '↳ Explore "monthrange"' in grep, trace
    assert any(line.startswith("p") and "↳ Explore: Looking at the ledger" in line for line in trace.splitlines())
    data = json.loads(cli(nmem_home, workdir, "status", "--format", "json").stdout)
    assert data["subagent_replies_by_type"] == {"Explore": 1}
