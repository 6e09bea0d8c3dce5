"""CLI housekeeping: purge, config, and the record/hook entry points run through click."""

from __future__ import annotations

import json
import time
import tomllib
from pathlib import Path

import pytest
import yaml

from conftest import hook_payload
from nmem.config import SETTINGS
from nmem.service.api import Service
from test_cli_support import CWD, History, as_json, bash, invoke, ok, seed, stderr_lines


def count(service: Service) -> int:
    return int(service.status()["observations"])


# -- purge --------------------------------------------------------------------------------

def test_purge_without_confirm_deletes_nothing_and_exits_2(service: Service) -> None:
    history = seed(service)
    before = count(service)
    result = invoke("purge", "--id", str(history.edit))
    assert result.exit_code == 2
    assert stderr_lines(result) == ["nmem: nothing deleted: 1 observation would go; add --confirm to delete it"]
    [row] = result.stdout.splitlines()[1:]  # the row that would go, under the table's header
    assert row.split()[0] == str(history.edit) and "file_edit" in row
    by_type = invoke("purge", "--type", "command")
    assert by_type.exit_code == 2
    assert stderr_lines(by_type) == ["nmem: nothing deleted: 2 observations would go; add --confirm to delete them"]
    assert count(service) == before


def test_purge_by_id_reports_the_count_on_stderr(service: Service) -> None:
    history = seed(service)
    result = ok("purge", "--id", str(history.edit), "--id", str(history.read), "--confirm")
    assert result.stdout == ""
    assert stderr_lines(result) == ["nmem: purged 2 observations"]
    assert service.get_observations([history.edit, history.read]) == []
    again = ok("purge", "--id", str(history.edit), "--confirm", "--format", "json")
    assert json.loads(again.stdout) == {"deleted": 0}
    assert stderr_lines(again) == ["nmem: purged 0 observations"]


def test_purge_by_type_and_age_keeps_pinned_rows(service: Service) -> None:
    now = int(time.time())
    old = [bash(service, f"make old{i}", now - 40 * 86400) for i in range(3)]
    recent = bash(service, "make recent", now - 60)
    ok("pin", f"o{old[0]}")
    result = ok("purge", "--type", "command", "--older-than", "30d", "--confirm")
    assert stderr_lines(result) == ["nmem: purged 2 observations"]
    remaining = {o.id for o in service.get_observations([*old, recent])}
    assert remaining == {old[0], recent}


def test_purge_project_scope_and_argument_errors(service: Service) -> None:
    history: History = seed(service)
    result = ok("purge", "--type", "command", "--project", "other", "--older-than", "0s", "--confirm",
                "--format", "yaml")
    assert yaml.safe_load(result.stdout) == {"deleted": 1}
    assert service.get_observations([history.other_cmd]) == []
    assert service.get_observations([history.test_cmd]) != []
    assert invoke("purge", "--confirm").exit_code == 2                       # no selector
    assert invoke("purge", "--older-than", "soon", "--confirm").exit_code == 2
    assert invoke("purge", "--type", "nonsense", "--confirm").exit_code == 2
    assert invoke("purge", "--id", "abc", "--confirm").exit_code == 2
    assert invoke("purge", "--id", "1", "--type", "command", "--confirm").exit_code == 2
    assert invoke("purge", "--id", "1", "--project", "demo", "--confirm").exit_code == 2


# -- config -------------------------------------------------------------------------------

def test_config_show_lists_every_setting_with_its_source(nmem_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMEM_SEARCH_LIMIT", "7")
    data = as_json("config", "show")
    assert [row["name"] for row in data["settings"]] == [s.name for s in SETTINGS]
    rows = {row["name"]: row for row in data["settings"]}
    assert rows["search.default_limit"] == {"name": "search.default_limit", "value": 7, "source": "env",
                                            "env": "NMEM_SEARCH_LIMIT"}
    assert rows["cli.format"]["source"] == "default"
    assert data["config_file"] == str(nmem_home / "config.toml")
    text = ok("config", "show").stdout
    line = next(x for x in text.splitlines() if x.startswith("search.default_limit"))
    assert line.split() == ["search.default_limit", "7", "env", "$NMEM_SEARCH_LIMIT"]


def test_config_set_get_and_path(nmem_home: Path) -> None:
    assert ok("config", "path").stdout == f"{nmem_home / 'config.toml'}\n"
    assert ok("config", "get", "search.default_limit").stdout == "20\n"
    assert ok("config", "set", "search.default_limit", "50").stdout.startswith("search.default_limit = 50")
    ok("config", "set", "memory.enabled", "false")
    with (nmem_home / "config.toml").open("rb") as fh:
        assert tomllib.load(fh) == {"memory": {"enabled": False}, "search": {"default_limit": 50}}
    assert ok("config", "get", "memory.enabled").stdout == "false\n"
    assert as_json("config", "get", "search.default_limit") == {"name": "search.default_limit", "value": 50,
                                                                "source": "file"}
    text = ok("config", "show").stdout
    line = next(x for x in text.splitlines() if x.startswith("search.default_limit"))
    assert line.split() == ["search.default_limit", "50", "file"]
    paths = as_json("config", "path")
    assert paths["home"] == str(nmem_home) and paths["database"].endswith("nmem.db")


def test_config_set_warns_when_the_environment_wins(nmem_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMEM_FORMAT", "json")
    result = ok("config", "set", "cli.format", "yaml", "--format", "text")
    assert stderr_lines(result) == ["nmem: $NMEM_FORMAT is set and overrides the file while it stays set"]


def test_config_errors_exit_3(nmem_home: Path) -> None:
    unknown = invoke("config", "get", "no.such")
    assert unknown.exit_code == 3
    assert stderr_lines(unknown) == ["nmem: unknown setting: no.such (see `nmem config show`)"]
    assert invoke("config", "set", "no.such", "1").exit_code == 3
    bad = invoke("config", "set", "memory.enabled", "maybe")
    assert bad.exit_code == 3
    assert "expected bool" in bad.stderr
    assert not (nmem_home / "config.toml").exists()


def test_config_never_prints_a_store_password(nmem_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMEM_STORE_URL", "postgresql://nmem:hunter2@db.internal/nmem")
    for args in (("config", "show"), ("config", "show", "--format", "json"), ("config", "get", "store.url"),
                 ("config", "path", "--format", "yaml")):
        result = ok(*args)
        assert "hunter2" not in result.stdout, args
        assert "nmem:***@db.internal" in result.stdout, args


def test_config_show_lists_project_overrides(nmem_home: Path) -> None:
    nmem_home.mkdir(parents=True)
    (nmem_home / "config.toml").write_text('[projects."secret-client"]\nmemory = false\n', encoding="utf-8")
    assert as_json("config", "show")["projects"] == {"secret-client": {"memory": False}}
    assert "secret-client" in ok("config", "show", "--format", "markdown").stdout


# -- record and hook through click --------------------------------------------------------

def test_record_stores_a_hook_event(service: Service) -> None:
    payload = hook_payload("PostToolUse", cwd=CWD, tool_name="Bash", tool_input={"command": "cargo build"},
                           tool_response={"exit_code": 0})
    result = invoke("record", input=json.dumps(payload))
    assert result.exit_code == 0 and result.stdout == ""
    assert [h["content_preview"] for h in as_json("search", "cargo")] == ["cargo build"]


def test_hook_names_the_event_and_session_start_prints_context(service: Service) -> None:
    seed(service)
    payload = {"session_id": "s9", "cwd": CWD, "source": "startup"}
    result = invoke("hook", "session-start", input=json.dumps(payload))
    assert result.exit_code == 0
    assert result.stdout.startswith("<nmem-context>")
    assert "fix the flaky auth test" in result.stdout


def test_record_input_and_output_files(service: Service, tmp_path: Path) -> None:
    seed(service)
    event = tmp_path / "event.json"
    event.write_text(json.dumps(hook_payload("SessionStart", session_id="s8", cwd=CWD, source="resume")))
    out = tmp_path / "context.md"
    result = invoke("record", "--input", str(event), "--output", str(out))
    assert result.exit_code == 0 and result.stdout == ""
    assert out.read_text().startswith("<nmem-context>")


def test_bad_hook_input_exits_1_with_one_line(nmem_home: Path) -> None:
    result = invoke("record", input="not json")
    assert result.exit_code == 1
    assert len(stderr_lines(result)) == 1 and stderr_lines(result)[0].startswith("nmem: hook input")
    missing = invoke("hook", "post-tool-use", input=json.dumps({"cwd": CWD}))
    assert missing.exit_code == 1
    assert "session_id" in missing.stderr
