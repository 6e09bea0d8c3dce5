"""`nmem doctor`'s checks: a fresh home, a wired-up one, and one whose hooks failed lately."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

from conftest import run_nmem
from fixtures.harness import event, hook, hook_env, hook_ok
from nmem.setup.claude_code import DIST_NAME, hooks_off, install, nmem_executable
from nmem.setup.doctor import FAIL, OK, WARN, Check, run_checks


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def test_fresh_home_reports_what_is_missing(nmem_home: Path, tmp_path: Path) -> None:
    """The checks a fresh machine fails say what to run, in full."""
    user_home = tmp_path / "userhome"
    checks = run_checks(project_dir=tmp_path / "project", home=user_home)
    names = by_name(checks)
    assert all(c.status in (OK, WARN, FAIL) and c.detail for c in checks)
    assert names["config"].status == OK
    assert names["claude code hooks"].status == FAIL
    assert "nmem install claude-code" in names["claude code hooks"].hint
    assert names["mcp server"].status == WARN
    assert names["hook log"].status == OK and names["spool"].status == OK
    assert names["database"].status in (OK, WARN)
    json.dumps([c.to_dict() for c in checks])


def test_after_install_and_use_everything_is_ok(nmem_home: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{Path(nmem_executable()).parent}{os.pathsep}/usr/bin:/bin")
    user_home = tmp_path / "userhome"
    install("user", home=user_home)
    hook_ok(nmem_home, event("UserPromptSubmit", "doc", "/home/dev/code/demo", prompt="check the wiring"))
    checks = run_checks(project_dir=tmp_path / "project", home=user_home)
    assert {c.name: c.status for c in checks} == {
        "install": OK, "nmem on PATH": OK, "nmem-memory on PATH": OK, "config": OK, "data dir": OK, "database": OK,
        "claude code hooks (user)": OK, "mcp server (user)": OK, "hook log": OK, "spool": OK,
    }, [c.to_dict() for c in checks]
    assert all(c.hint == "" for c in checks)
    names = by_name(checks)
    assert "1 sessions" in names["database"].detail or "1 session" in names["database"].detail
    assert "8 events" in names["claude code hooks (user)"].detail


def test_recent_hook_error_in_the_log_is_a_warning(nmem_home: Path, tmp_path: Path) -> None:
    user_home = tmp_path / "userhome"
    install("user", home=user_home)
    hook_ok(nmem_home, event("UserPromptSubmit", "doc", "/home/dev/code/demo", prompt="first"))
    broken = tmp_path / "db-dir"
    broken.mkdir()
    failed = hook(nmem_home, event("UserPromptSubmit", "doc", "/home/dev/code/demo", prompt="second"),
                  NMEM_DB=str(broken))
    assert failed.returncode == 4 and failed.stderr.endswith("; the event is kept in the spool\n")
    log = by_name(run_checks(project_dir=tmp_path / "project", home=user_home))["hook log"]
    assert log.status == WARN
    assert log.detail.startswith("1 error in the last 24 h")  # one line: the error, and where the event went
    assert "nmem.log" in log.detail


def test_old_errors_and_warnings_do_not_warn(nmem_home: Path, tmp_path: Path) -> None:
    (nmem_home / "logs").mkdir(parents=True)
    (nmem_home / "logs" / "nmem.log").write_text(
        "2020-01-01 10:00:00,123 ERROR hook failed: long ago\n"
        "2099-01-01 10:00:00,123 WARNING database busy; spooled PostToolUse event\n"
        "a line in some other format\n", encoding="utf-8")
    log = by_name(run_checks(project_dir=tmp_path / "project", home=tmp_path / "userhome"))["hook log"]
    assert log.status == OK


def test_missing_hook_executable_and_events_are_reported(nmem_home: Path, tmp_path: Path) -> None:
    user_home = tmp_path / "userhome"
    install("user", home=user_home)
    settings = user_home / ".claude" / "settings.json"
    data = json.loads(settings.read_text(encoding="utf-8"))
    del data["hooks"]["PreCompact"]
    data["hooks"]["Stop"][-1]["hooks"][0]["command"] = "/opt/gone/bin/python -S /opt/gone/nmem/hook_entry.py record"
    data["hooks"]["SessionEnd"][-1]["hooks"][0]["command"] = "/opt/gone/bin/nmem record"
    settings.write_text(json.dumps(data), encoding="utf-8")
    checks = run_checks(project_dir=tmp_path / "project", home=user_home)
    names = by_name(checks)
    assert names["claude code hooks (user)"].status == WARN
    assert "PreCompact" in names["claude code hooks (user)"].detail
    missing = [c.detail for c in checks if c.name == "hook executable"]
    assert all(c.status == FAIL for c in checks if c.name == "hook executable")
    assert sorted(d.split()[0] for d in missing) == ["/opt/gone/bin/nmem", "/opt/gone/bin/python",
                                                      "/opt/gone/nmem/hook_entry.py"]


def test_pending_spool_is_a_warning(nmem_home: Path, tmp_path: Path) -> None:
    hook_ok(nmem_home, event("UserPromptSubmit", "doc", "/home/dev/code/demo", prompt="first"))
    (nmem_home / "spool").mkdir(mode=0o700)
    (nmem_home / "spool" / "1-1.json").write_text("{}", encoding="utf-8")
    spool = by_name(run_checks(project_dir=tmp_path / "project", home=tmp_path / "userhome"))["spool"]
    assert spool.status == WARN and "1 events waiting" in spool.detail


def test_bad_config_fails_clearly(nmem_home: Path, tmp_path: Path) -> None:
    nmem_home.mkdir(parents=True)
    (nmem_home / "config.toml").write_text("[context\n", encoding="utf-8")
    checks = run_checks(project_dir=tmp_path / "project", home=tmp_path / "userhome")
    assert checks[-1].name == "config" and "database" not in by_name(checks)
    assert checks[-1].status == FAIL and "config.toml" in checks[-1].detail and checks[-1].hint


def test_cli_doctor_exit_codes(tmp_path: Path) -> None:
    home, user_home = tmp_path / "nmem-home", tmp_path / "userhome"
    env = hook_env(home, HOME=str(user_home))
    before = run_nmem(["doctor", "--format", "json"], env=env)
    assert before.returncode == 1, "a failing check (hooks not installed) exits 1"
    assert "Traceback" not in before.stderr
    assert run_nmem(["install", "claude-code"], env=env).returncode == 0
    hook_ok(home, event("UserPromptSubmit", "doc", "/home/dev/code/demo", prompt="hello"))
    after = run_nmem(["doctor", "--format", "json"], env=env)
    assert after.returncode == 0, after.stdout + after.stderr
    assert "claude code hooks (user)" in after.stdout


def test_the_registered_mcp_command_must_exist_and_run(nmem_home: Path, tmp_path: Path) -> None:
    user_home = tmp_path / "userhome"
    install("user", home=user_home)
    claude_json = user_home / ".claude.json"
    config = json.loads(claude_json.read_text(encoding="utf-8"))
    config["mcpServers"]["nmem"]["command"] = "/opt/gone/bin/nmem"
    claude_json.write_text(json.dumps(config), encoding="utf-8")
    server = by_name(run_checks(project_dir=tmp_path / "project", home=user_home))["mcp server (user)"]
    assert server.status == FAIL and "/opt/gone/bin/nmem does not exist" in server.detail
    assert server.hint.startswith("run: nmem install claude-code")

    not_executable = tmp_path / "bin" / "nmem"
    not_executable.parent.mkdir()
    not_executable.write_text("#!/bin/sh\n", encoding="utf-8")
    config["mcpServers"]["nmem"]["command"] = str(not_executable)
    claude_json.write_text(json.dumps(config), encoding="utf-8")
    server = by_name(run_checks(project_dir=tmp_path / "project", home=user_home))["mcp server (user)"]
    assert server.status == FAIL and "is not executable" in server.detail
    assert f"chmod +x {not_executable}" in server.hint
    not_executable.chmod(not_executable.stat().st_mode | stat.S_IXUSR)
    assert by_name(run_checks(project_dir=tmp_path / "project", home=user_home))["mcp server (user)"].status == OK


def test_project_wiring_is_found_in_the_local_files_and_scope(nmem_home: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    project, user_home = tmp_path / "app", tmp_path / "userhome"
    project.mkdir()
    install("project", project_dir=project, home=user_home)
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"nmem": {"command": "nmem", "args": ["serve"]}}}),
                                       encoding="utf-8")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    names = by_name(run_checks(project_dir=project, home=user_home))
    assert names["claude code hooks (project)"].status == OK
    assert "settings.local.json" in names["claude code hooks (project)"].detail
    assert names["mcp server (local)"].status == OK
    shared = names["mcp server (project)"]
    assert shared.status == WARN and "'nmem' is not on PATH" in shared.detail
    assert "the local entry of the same name wins" in shared.detail
    bin_dir = Path(nmem_executable()).parent
    assert shared.hint == f"put `nmem` on PATH: add {bin_dir} to PATH, or pipx install {DIST_NAME}"

    install("project", project_dir=project, home=user_home, shared_mcp=True)
    config = json.loads((user_home / ".claude.json").read_text(encoding="utf-8"))
    del config["projects"][str(project.resolve())]
    (user_home / ".claude.json").write_text(json.dumps(config), encoding="utf-8")
    alone = by_name(run_checks(project_dir=project, home=user_home))["mcp server (project)"]
    assert alone.status == FAIL, "with no local entry, the .mcp.json one is what Claude Code starts"


def write_log(home: Path, *lines: str) -> None:
    (home / "logs").mkdir(parents=True, exist_ok=True)
    with (home / "logs" / "nmem.log").open("a", encoding="utf-8") as fh:
        fh.writelines(line + "\n" for line in lines)


def stamp(seconds_ago: float) -> str:
    when = time.time() - seconds_ago
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when)) + ",042"


def test_recent_hook_input_warnings_are_reported_in_full(nmem_home: Path, tmp_path: Path) -> None:
    long_tail = "x" * 300
    write_log(nmem_home,
              f"{stamp(90000)} WARNING hook input: missing required field 'session_id' (yesterday)",
              f"{stamp(120)} WARNING hook input: expected a JSON object; got 512 bytes starting {long_tail}",
              f"{stamp(60)} WARNING hook input: UserPromptSubmit without 'prompt'",
              f"{stamp(30)} ERROR hook failed: OSError: disk full",
              "Traceback (most recent call last):")
    log = by_name(run_checks(project_dir=tmp_path / "project", home=tmp_path / "userhome"))["hook log"]
    assert log.status == WARN
    assert log.detail.startswith("1 error, 2 warnings in the last 24 h")
    assert long_tail in log.detail, "messages are shown whole"
    assert "UserPromptSubmit without 'prompt'" in log.detail and "yesterday" not in log.detail

    text = run_nmem(["doctor"], env=hook_env(nmem_home, HOME=str(tmp_path / "userhome"))).stdout
    assert long_tail in text
    hint = log.hint
    assert len(hint) > 80 and f"fix: {hint}" in text, "hints are printed whole, not cut to a column"


def test_the_unrelated_pypi_nmem_in_the_same_environment_fails(nmem_home: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    info = site / "nmem-0.6.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.4\nName: nmem\nVersion: 0.6.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[console_scripts]\nnmem = nmem.adapters.cli.main:app\n", encoding="utf-8")
    env = hook_env(nmem_home, HOME=str(tmp_path / "userhome"), PYTHONPATH=str(site))
    done = run_nmem(["doctor", "--format", "json"], env=env)
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert done.returncode == 1
    conflict = checks["conflicting package"]
    assert conflict["status"] == FAIL and "unrelated PyPI project `nmem` 0.6.0" in conflict["detail"]
    assert conflict["hint"] == f"pip uninstall nmem, then reinstall this nmem: pipx install {DIST_NAME}"
    assert checks["install"]["status"] == OK and DIST_NAME in checks["install"]["detail"]


def test_another_programs_nmem_first_on_path_is_named(nmem_home: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """neural-memory installs an `nmem` console script too; doctor says which program it is."""
    other = tmp_path / "other-bin"
    other.mkdir()
    script = other / "nmem"
    script.write_text("#!/opt/neural/bin/python3\n# -*- coding: utf-8 -*-\nimport re\nimport sys\n"
                      "from neural_memory.cli import main\nif __name__ == '__main__':\n    sys.exit(main())\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{other}{os.pathsep}{Path(nmem_executable()).parent}{os.pathsep}/usr/bin:/bin")
    names = by_name(run_checks(project_dir=tmp_path / "project", home=tmp_path / "userhome"))
    check = names["nmem on PATH"]
    assert check.status == WARN
    assert str(script) in check.detail and "neural_memory.cli" in check.detail and "neural-memory" in check.detail
    assert "nmem-memory" in check.detail  # the plugin's command, which the other package does not shadow
    assert names["nmem-memory on PATH"].status == OK


def test_claude_codes_switch_that_turns_every_hook_off_fails(nmem_home: Path, tmp_path: Path) -> None:
    """`disableAllHooks: true` in any settings file (managed settings: also `allowManagedHooksOnly`)
    makes Claude Code skip nmem's hooks silently (seen with Claude Code 2.1.197)."""
    user_home, project = tmp_path / "userhome", tmp_path / "project"
    install("user", home=user_home)
    assert "claude code hooks off" not in by_name(run_checks(project_dir=project, home=user_home))
    local = project / ".claude" / "settings.local.json"
    local.parent.mkdir(parents=True)
    local.write_text(json.dumps({"disableAllHooks": True}), encoding="utf-8")
    found = by_name(run_checks(project_dir=project, home=user_home))["claude code hooks off"]
    assert found.status == FAIL and "disableAllHooks: true" in found.detail and str(local) in found.detail
    local.write_text(json.dumps({"disableAllHooks": False}), encoding="utf-8")
    assert "claude code hooks off" not in by_name(run_checks(project_dir=project, home=user_home))
    managed = tmp_path / "managed-settings.json"
    managed.write_text(json.dumps({"allowManagedHooksOnly": True}), encoding="utf-8")
    assert hooks_off(project, user_home, managed=(managed,)) == f"allowManagedHooksOnly: true in {managed}"
    settings = user_home / ".claude" / "settings.json"
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "allowManagedHooksOnly": True}))
    assert hooks_off(project, user_home, managed=()) is None  # only managed settings can say so
