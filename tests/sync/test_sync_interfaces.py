"""`nmem sync` as a process, the MCP `sync` tool, and the hooks' detached syncs (`sync.auto`)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from mcp import Client

from conftest import run_nmem
from fixtures.harness import event, hook_env, hook_ok
from mcp_support import check_output, structured, tool_error
from nmem.adapters.mcp.server import NmemServer
from nmem.config import load_settings
from nmem.service.api import Service
from sync_support import bare_remote, remote_lines
from test_hook_imports import check_hook_imports, importtime

CWD = "/home/dev/code/shop"


def nmem(home: Path, *args: str, **env: str) -> tuple[int, str, str]:
    done = run_nmem(list(args), env=hook_env(home, **env))
    return done.returncode, done.stdout, done.stderr


def test_cli_sync_moves_a_memory_between_two_machines_and_reports_json(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path / "remote.git")
    laptop, desktop = tmp_path / "laptop", tmp_path / "desktop"
    code, _, err = nmem(laptop, "remember", "--domain", "user", "--namespace", "learnings", "pytest -x stops early")
    assert code == 0, err
    code, out, err = nmem(laptop, "sync", "--remote", str(remote), "--format", "json")
    assert code == 0, err
    pushed = json.loads(out)
    assert (pushed["pushed"], pushed["pending"], pushed["direction"]) == (1, 0, "both")
    code, _, err = nmem(desktop, "config", "set", "sync.remote", str(remote))
    assert code == 0, err
    code, out, err = nmem(desktop, "sync", "--fetch")
    assert code == 0, err
    assert "applied:            1" in out and "conflicts resolved: 0" in out
    code, out, _ = nmem(desktop, "recall", "pytest", "--domain", "user", "--format", "json")
    assert "pytest -x stops early" in out


def test_cli_sync_exit_codes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    code, _, err = nmem(home, "sync")
    assert (code, err.strip()) == (3, "nmem: no sync remote: pass --remote URL, or set it once with "
                                      "`nmem config set sync.remote URL`")
    code, _, err = nmem(home, "sync", "--remote", str(tmp_path / "nowhere.git"))
    assert code == 5 and "cannot fetch from" in err
    code, _, err = nmem(home, "sync", "--remote", str(tmp_path / "x.git"), "--domain", "galaxy")
    assert code == 2 and "invalid domain" in err
    code, _, err = nmem(home, "sync", "--remote", "--upload-pack=touch /tmp/pwned")
    assert code == 3 and "invalid sync remote" in err


@pytest.mark.anyio
async def test_mcp_sync_tool_syncs_with_the_configured_remote(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path / "remote.git")
    settings = load_settings({"NMEM_HOME": str(tmp_path / "home"), "NMEM_SYNC_REMOTE": str(remote)})
    service = Service.open(settings)
    try:
        service.remember("tool-made memory", domain="user")
        async with Client(NmemServer(service, project="shop").server, mode="legacy") as client:
            tool = next(t for t in (await client.list_tools()).tools if t.name == "sync")
            result = structured(await client.call_tool("sync", {"direction": "push"}))
            check_output(tool, result)
            assert (result["pushed"], result["direction"]) == (1, "push")
            bad = tool_error(await client.call_tool("sync", {"domain": "galaxy"}))
            assert "invalid domain" in bad
    finally:
        service.close()
    assert [line["memory"]["content"] for line in remote_lines(remote)] == ["tool-made memory"]


@pytest.mark.anyio
async def test_mcp_sync_tool_without_a_remote_is_a_tool_error(tmp_path: Path) -> None:
    service = Service.open(load_settings({"NMEM_HOME": str(tmp_path / "home")}))
    try:
        async with Client(NmemServer(service, project="shop").server, mode="legacy") as client:
            assert "no sync remote" in tool_error(await client.call_tool("sync", {}))
    finally:
        service.close()


def wait_for(condition: object, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.1)
    return False


def test_stop_pushes_and_session_start_fetches_in_the_background_when_auto_is_on(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path / "remote.git")
    laptop, desktop = tmp_path / "laptop", tmp_path / "desktop"
    auto = {"NMEM_SYNC_REMOTE": str(remote), "NMEM_SYNC_AUTO": "1"}
    hook_ok(laptop, event("UserPromptSubmit", "s1", CWD, prompt="[decision] invoices are immutable once sent"),
            **auto)
    hook_ok(laptop, event("Stop", "s1", CWD), **auto)
    assert wait_for(lambda: len(remote_lines(remote)) == 1), (laptop / "logs" / "sync.log").read_text()
    assert "sync push: pulled 0" in (laptop / "logs" / "sync.log").read_text()
    hook_ok(desktop, event("SessionStart", "s2", CWD, source="startup"), **auto)

    def fetched() -> bool:
        log = desktop / "logs" / "sync.log"
        return log.exists() and "sync fetch:" in log.read_text()

    assert wait_for(fetched)
    assert "applied 1" in (desktop / "logs" / "sync.log").read_text()
    code, out, _ = nmem(desktop, "recall", "invoices", "--domain", "all", "--project", "*", "--format", "json")
    assert code == 0
    assert "invoices are immutable once sent" in out


def test_hooks_start_no_sync_when_auto_is_off_or_nothing_waits(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path / "remote.git")
    home = tmp_path / "home"
    hook_ok(home, event("UserPromptSubmit", "s1", CWD, prompt="[learned] off by default"),
            NMEM_SYNC_REMOTE=str(remote))
    hook_ok(home, event("Stop", "s1", CWD), NMEM_SYNC_REMOTE=str(remote))
    hook_ok(home, event("SessionStart", "s2", CWD, source="startup"), NMEM_SYNC_REMOTE=str(remote))
    other = tmp_path / "other"
    hook_ok(other, event("Stop", "s3", CWD), NMEM_SYNC_REMOTE=str(remote), NMEM_SYNC_AUTO="1")  # outbox empty
    time.sleep(0.5)
    assert not (home / "logs" / "sync.log").exists() and not (other / "logs" / "sync.log").exists()
    assert remote_lines(remote) == []


@pytest.mark.parametrize("name", ["SessionStart", "Stop"])
def test_the_sync_trigger_keeps_the_hook_path_stdlib_only(tmp_path: Path, name: str) -> None:
    home = tmp_path / "home"
    env = hook_env(home, NMEM_SYNC_REMOTE=str(bare_remote(tmp_path / "remote.git")), NMEM_SYNC_AUTO="1")
    hook_ok(home, event("UserPromptSubmit", "s1", CWD, prompt="[decision] something to push"),
            NMEM_SYNC_AUTO="0")
    payload = event(name, "s1", CWD, source="startup") if name == "SessionStart" else event(name, "s1", CWD)
    done, modules = importtime(["-m", "nmem", "record"], json.dumps(payload), env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "nmem.sync.trigger" in modules
    _, startup = importtime(["-c", "pass"], "", hook_env(tmp_path / "bare"))
    check_hook_imports(modules, set(startup))
    assert not {"subprocess", "nmem.sync.engine", "nmem.sync.git"} & set(modules)
    log = home / "logs" / "sync.log"
    assert wait_for(lambda: log.exists() and " sync " in log.read_text())  # the detached sync has run


def test_status_shows_when_the_last_sync_completed(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path / "remote.git")
    home = tmp_path / "laptop"
    code, out, err = nmem(home, "status", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["last_sync"] is None
    assert "last sync: never" in nmem(home, "status")[1]
    before = int(time.time())
    assert nmem(home, "sync", "--remote", str(remote))[0] == 0
    code, out, err = nmem(home, "status", "--format", "json")
    assert code == 0, err
    assert before <= json.loads(out)["last_sync"] <= int(time.time())
    assert nmem(home, "sync", "--remote", str(tmp_path / "nowhere.git"))[0] == 5
    assert before <= json.loads(nmem(home, "status", "--format", "json")[1])["last_sync"]  # a failed one keeps it
    assert "last sync: never" not in nmem(home, "status")[1]
