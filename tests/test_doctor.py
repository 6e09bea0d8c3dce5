"""`nmem doctor`'s checks: a fresh home, a wired-up one, and one whose hooks failed lately."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_nmem
from fixtures.harness import event, hook, hook_env, hook_ok
from nmem.doctor import FAIL, OK, WARN, Check, run_checks
from nmem.integrations.claude_code import install


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def test_fresh_home_reports_what_is_missing(nmem_home: Path, tmp_path: Path) -> None:
    user_home = tmp_path / "userhome"
    checks = run_checks(project_dir=tmp_path / "project", home=user_home)
    names = by_name(checks)
    assert all(c.status in (OK, WARN, FAIL) and c.detail for c in checks)
    assert names["config"].status == OK
    assert names["claude code hooks"].status == FAIL
    assert "nmem install claude-code" in names["claude code hooks"].detail
    assert names["mcp server"].status == WARN
    assert names["hook log"].status == OK and names["spool"].status == OK
    assert names["database"].status in (OK, WARN)
    json.dumps([c.to_dict() for c in checks])


def test_after_install_and_use_everything_is_ok(nmem_home: Path, tmp_path: Path) -> None:
    user_home = tmp_path / "userhome"
    install("user", home=user_home)
    hook_ok(nmem_home, event("UserPromptSubmit", "doc", "/home/dev/code/demo", prompt="check the wiring"))
    checks = run_checks(project_dir=tmp_path / "project", home=user_home)
    assert {c.name: c.status for c in checks} == {
        "config": OK, "data dir": OK, "database": OK, "claude code hooks (user)": OK,
        "mcp server (user)": OK, "hook log": OK, "spool": OK,
    }, [c.to_dict() for c in checks]
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
    assert failed.returncode != 0
    log = by_name(run_checks(project_dir=tmp_path / "project", home=user_home))["hook log"]
    assert log.status == WARN
    assert "1 hook errors" in log.detail or "1 hook error" in log.detail
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
    assert [c.name for c in checks] == ["config"]
    assert checks[0].status == FAIL and "config.toml" in checks[0].detail


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
