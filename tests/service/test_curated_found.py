"""A curated memory that matches a search is never lost under the trail: whatever the trail
holds (here forty commands naming the same word, recorded through the hook process), searching
everything by default shows the matching decision, and the user's memory, among the first hits
on every surface: `nmem search` (a real process), the MCP tool (the official client), REST and
claude-mem's search route."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from fixtures.harness import event, hook_env, hook_ok
from http_support import http_client
from mcp_support import structured
from nmem.adapters.mcp.server import NmemServer
from nmem.service.api import Service

pytestmark = pytest.mark.anyio
DECISION = "We keep redis as the cache because memcached loses everything on restart"
HABIT = "redis locally: FLUSHDB before every benchmark run"


@pytest.fixture
def busy(nmem_home: Path, tmp_path: Path) -> Path:
    cwd = tmp_path / "code" / "shop"
    cwd.mkdir(parents=True)
    hook_ok(nmem_home, event("SessionStart", "busy-1", str(cwd), source="startup"))
    hook_ok(nmem_home, event("UserPromptSubmit", "busy-1", str(cwd), prompt="warm the redis cache keys"))
    for n in range(40):
        hook_ok(nmem_home, event("PostToolUse", "busy-1", str(cwd), tool_name="Bash",
                                 tool_input={"command": f"redis-cli GET cache:key{n}"},
                                 tool_response={"stdout": "OK", "stderr": "", "interrupted": False}))
    for args in ((DECISION, "-n", "decisions"), (HABIT, "--domain", "user")):
        nmem(nmem_home, cwd, "remember", *args)
    return cwd


def nmem(home: Path, cwd: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "nmem", *args], cwd=cwd, capture_output=True, text=True,
                          env=hook_env(home), timeout=60, check=False)
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


def first_memories(hits: list[dict[str, object]], shown: int = 6) -> set[object]:
    return {h["summary"] for h in hits[:shown] if h["kind"] == "memory"}


def test_the_cli_search_shows_matching_memories_above_a_busy_trail(busy: Path, nmem_home: Path) -> None:
    hits = json.loads(nmem(nmem_home, busy, "search", "redis", "--format", "json"))
    assert len(hits) == 20 and sum(h["kind"] == "observation" for h in hits) >= 15
    assert first_memories(hits) == {DECISION, HABIT}, [(h["kind"], h.get("summary")) for h in hits]
    assert first_memories(json.loads(nmem(nmem_home, busy, "search", "redis cache", "--limit", "3",
                                          "--format", "json")), 3) == {DECISION}


@pytest.mark.sqlite_only("the hook processes record into the home's SQLite file, which this service reads")
async def test_mcp_rest_and_claude_mem_show_them_too(busy: Path, service: Service) -> None:
    async with Client(NmemServer(service, project="shop").server, mode="legacy") as client:
        found = structured(await client.call_tool("search", {"query": "redis"}))["results"]
    assert first_memories(found) == {DECISION, HABIT}
    async with http_client(service, project="shop") as api:
        rest = (await api.get("/api/v1/search", params={"query": "redis"})).json()["results"]
        worker = (await api.get("/api/search", params={"query": "redis"})).json()["content"][0]["text"]
    assert first_memories(rest) == {DECISION, HABIT}
    assert DECISION in worker and HABIT in worker
