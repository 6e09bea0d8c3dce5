"""`memory.enabled = false` and the per-project opt-out (srvrmgr's `memory: false`) reach every
write path: CLI, MCP and hooks. Writes are refused with exit code 3 / the `disabled` kind and
change nothing; deletions (forget, purge) and every read still work."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from conftest import record, run_nmem
from fixtures.harness import FIXTURES, counts, hook_env
from mcp_support import PROJECT, Seeded, tool_error
from nmem.adapters.mcp.server import ERROR_META, NmemServer
from nmem.config import load_settings
from nmem.service.api import Service
from sync_support import bare_remote
from test_cli_support import CWD, invoke, ok

DISABLED = "nmem: memory is disabled (memory.enabled = false): nothing is written; " \
           "`nmem config set memory.enabled true` turns it back on\n"


def snapshot(service: Service) -> list[Any]:
    """Every memory as stored (tombstones too) and the trail's counts."""
    memories = sorted((m.id, m.summary, m.content, m.tags, m.tier, m.is_pinned, m.deleted_at)
                      for m in service.store.export_memories(_all(), deleted=True))
    status = service.store.status()
    return [memories, status.sessions, status.prompts, status.observations]


def _all() -> Any:
    from nmem.store import SearchFilters
    return SearchFilters(include_archived=True)


@pytest.fixture
def written(service: Service, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A memory, an observation and an export file, written while memory was on."""
    monkeypatch.setenv("NMEM_PROJECT", "demo")
    memory = service.remember("Use WAL mode", namespace="decisions", project="demo")
    obs = record(service, "PostToolUse", session_id="s1", cwd=CWD, tool_name="Bash",
                 tool_input={"command": "pytest -q"}, tool_response={"stdout": "ok", "exit_code": 0})
    export = tmp_path / "other.jsonl"
    lines = [{"kind": "nmem_export", "version": 1},
             {"kind": "memory", "uid": "01M84SPMRX8RWJ753S8J0Q9G8R", "domain": "user", "namespace": "learnings",
              "summary": "From elsewhere", "content": "From elsewhere", "created_at": 1795457504,
              "updated_at": 1795457504}]
    export.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return {"memory": memory.id, "observation": str(obs.observation_id), "export": str(export)}


def cli_writes(ids: dict[str, str], remote: str) -> list[tuple[str, ...]]:
    return [
        ("remember", "Never stored"),
        ("remember", "Never stored", "--domain", "user"),
        ("capture", "decisions", "Never stored"),
        ("capture", "decisions", "Never stored", "--stdin"),
        ("update", ids["memory"], "--summary", "changed"),
        ("pin", ids["memory"]),
        ("unpin", ids["memory"]),
        ("pin", ids["observation"]),
        ("import", ids["export"]),
        ("sync", "--remote", remote),
    ]


def test_every_cli_write_is_refused_when_memory_is_off(written: dict[str, str], service: Service,
                                                        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    remote = str(bare_remote(tmp_path / "remote.git"))
    before = snapshot(service)
    monkeypatch.setenv("NMEM_ENABLED", "false")
    for args in cli_writes(written, remote):
        result = invoke(*args, input="body")
        assert (result.exit_code, result.stderr) == (3, DISABLED), args
    assert snapshot(service) == before
    assert not any((tmp_path / "remote.git" / "refs" / "heads").iterdir())  # nothing pushed
    # reads work, and so does deleting
    assert json.loads(ok("recall", "WAL", "--format", "json").stdout)["count"] == 1
    assert ok("status", "--format", "json").stdout
    ok("forget", written["memory"])
    ok("purge", "--id", written["observation"], "--confirm")
    assert service.store.status().memories == 0 and service.store.status().observations == 0


def test_transcript_import_is_refused_when_memory_is_off(tmp_path: Path) -> None:
    home = tmp_path / "home"
    root = tmp_path / "projects" / "-home-dev-code-ledger-api"
    root.mkdir(parents=True)
    shutil.copy(FIXTURES / "transcript_import.jsonl", root / "imp-7f3c2a10-0b1d-4c55-9e2a-5d1f00c0ffee.jsonl")
    off = run_nmem(["import", "claude-code", str(tmp_path / "projects")], env=hook_env(home, NMEM_ENABLED="0"))
    assert (off.returncode, off.stderr) == (3, DISABLED)
    assert counts(home)["observations"] == 0
    on = run_nmem(["import", "claude-code", str(tmp_path / "projects"), "--format", "json"], env=hook_env(home))
    assert on.returncode == 0 and json.loads(on.stdout)["imported_sessions"] == 1  # nothing marked done meanwhile


def test_project_opt_out_refuses_that_project_s_writes(written: dict[str, str], service: Service,
                                                        nmem_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (nmem_home / "config.toml").write_text('[projects."demo"]\nmemory = false\n', encoding="utf-8")
    before = snapshot(service)
    refused = "nmem: memory is disabled for project 'demo' (its [projects] `memory = false` or " \
              "capture.exclude_projects): nothing is written\n"
    for args in (("remember", "x"), ("remember", "x", "--domain", "user"), ("capture", "decisions", "x"),
                 ("update", written["memory"], "--tier", "hot"), ("pin", written["observation"]),
                 ("import", written["export"])):
        result = invoke(*args)
        assert (result.exit_code, result.stderr) == (3, refused), args
    monkeypatch.setenv("NMEM_PROJECT", "billing")  # another project: its own and user writes go through,
    assert invoke("remember", "x", "--domain", "project:demo").exit_code == 3  # the opted-out one's do not
    assert snapshot(service) == before
    ok("remember", "Billing uses cents", "--domain", "user")
    ok("remember", "Billing rounds half-even")
    assert service.store.status().memories == 3


def test_excluded_projects_are_opted_out_too(written: dict[str, str], nmem_home: Path) -> None:
    (nmem_home / "config.toml").write_text('[capture]\nexclude_projects = ["de*"]\n', encoding="utf-8")
    assert invoke("remember", "x").exit_code == 3
    assert invoke("remember", "x", "--project", "billing").exit_code == 0


# -- MCP --------------------------------------------------------------------------------------------

async def _mcp_error(client: Client, name: str, arguments: dict[str, Any]) -> tuple[str, str]:
    result = await client.call_tool(name, arguments)
    assert result.meta is not None
    return tool_error(result), result.meta[ERROR_META]["kind"]


@pytest.mark.anyio
async def test_mcp_writes_are_refused_when_memory_is_off(service: Service, seeded: Seeded, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMEM_ENABLED", "false")
    monkeypatch.setenv("NMEM_SYNC_REMOTE", str(bare_remote(tmp_path / "remote.git")))
    off = Service(service.store, load_settings())
    before = snapshot(off)
    async with Client(NmemServer(off, project=PROJECT).server, mode="legacy") as client:
        for name, arguments in (("remember", {"content": "never stored"}),
                                ("remember", {"content": "never stored", "domain": "user"}),
                                ("sync", {})):
            message, kind = await _mcp_error(client, name, arguments)
            assert (message, kind) == (DISABLED[len("nmem: "):].strip(), "disabled"), name
        assert snapshot(off) == before
        assert (await client.call_tool("recall", {"query": "login"})).structured_content["count"] == 2
        assert not (await client.call_tool("forget", {"id": seeded.memory_id})).is_error


@pytest.mark.anyio
async def test_mcp_writes_of_an_opted_out_project_are_refused(service: Service, seeded: Seeded,
                                                              nmem_home: Path) -> None:
    (nmem_home / "config.toml").write_text(f'[projects."{PROJECT}"]\nmemory = false\n', encoding="utf-8")
    off = Service(service.store, load_settings())
    async with Client(NmemServer(off, project=PROJECT).server, mode="legacy") as client:
        message, kind = await _mcp_error(client, "remember", {"content": "never stored", "domain": "user"})
        assert kind == "disabled" and f"project '{PROJECT}'" in message
    async with Client(NmemServer(off, project="billing").server, mode="legacy") as client:
        assert not (await client.call_tool("remember", {"content": "billing rounds half-even"})).is_error
        message, kind = await _mcp_error(client, "remember", {"content": "x", "domain": f"project:{PROJECT}"})
        assert kind == "disabled"


def test_a_session_of_an_opted_out_project_stays_out_when_resumed_elsewhere(service: Service) -> None:
    record(service, "SessionStart", session_id="s-demo", cwd=CWD, source="startup")
    service.settings.projects["demo"] = {"memory": False}
    out = record(service, "PostToolUse", session_id="s-demo", cwd="/work/other", tool_name="Bash",
                 tool_input={"command": "make deploy"}, tool_response={"stdout": "ok", "exit_code": 0})
    assert (out.stored, out.skipped) == (None, "disabled")
    assert service.store.status().observations == 1  # the SessionStart of before
