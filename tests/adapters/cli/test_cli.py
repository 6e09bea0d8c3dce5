"""CLI read commands (search, get, timeline, trace, file-history, context, status), output
formats, and the error handling every command shares."""

from __future__ import annotations

import json
from datetime import date, datetime
from datetime import time as dtime
from pathlib import Path
from typing import Any

import pytest
import yaml

from nmem.adapters.cli import main
from nmem.service.api import Service
from test_cli_support import AUTH_FILE, History, as_json, invoke, ok, seed, stderr_lines

ADR_INDEX_KEYS = {"id", "timestamp", "obs_type", "content_preview", "file_path", "session_id"}
ADR_FULL_KEYS = ADR_INDEX_KEYS - {"content_preview"} | {"source_event", "tool_name", "content", "metadata",
                                                        "project"}


@pytest.fixture
def history(service: Service) -> History:
    return seed(service)


# -- search -------------------------------------------------------------------------------

def test_search_text_is_an_aligned_table_with_the_count_on_stderr(history: History) -> None:
    result = ok("search", "pytest")
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["ID", "WHEN", "TYPE", "PROJECT", "PREVIEW"]
    assert len(lines) == 3
    # columns line up: every row's type starts where the header's TYPE does
    type_col = lines[0].index("TYPE")
    assert {line[type_col:].split()[0] for line in lines[1:]} == {"command", "command_error"}
    assert stderr_lines(result) == ['nmem: 2 results for "pytest"']


def test_search_json_is_the_adr_array_of_index_entries(history: History) -> None:
    result = ok("search", "pytest", "--format", "json")
    hits = json.loads(result.stdout)
    assert isinstance(hits, list)
    assert {h["id"] for h in hits} == {history.test_cmd, history.failure}
    for hit in hits:
        assert set(hit) >= ADR_INDEX_KEYS
        assert "content" not in hit and "metadata" not in hit
        assert len(hit["content_preview"]) <= 120
        assert hit["urn"] == f"nmem://project:demo/observations/{hit['id']}"
    assert stderr_lines(result) == ['nmem: 2 results for "pytest"']


def test_search_full_includes_every_observation_field(history: History) -> None:
    hits = as_json("search", "login", "--full")
    assert len(hits) == 1
    hit = hits[0]
    assert set(hit) >= ADR_FULL_KEYS
    assert hit["obs_type"] == "command_error"
    assert hit["tool_name"] == "Bash"
    assert hit["metadata"]["exit_code"] == 1
    assert "token expired" in hit["content"]


def test_search_ids_prints_one_id_per_line_and_the_count(history: History) -> None:
    result = ok("search", "auth", "--ids", "--scope", "observations")
    assert sorted(int(line) for line in result.stdout.split()) == sorted(
        [history.read, history.edit, history.test_cmd, history.other_cmd])
    assert stderr_lines(result) == ['nmem: 4 results for "auth"']


def test_search_yaml_carries_the_same_data_as_json(history: History) -> None:
    as_yaml = yaml.safe_load(ok("search", "pytest", "--format", "yaml").stdout)
    assert as_yaml == as_json("search", "pytest")


def test_search_markdown_is_a_table(history: History) -> None:
    lines = ok("search", "pytest", "--format", "markdown").stdout.splitlines()
    assert lines[0] == "| id | when | type | project | preview |"
    assert lines[1] == "|---|---|---|---|---|"
    assert len(lines) == 4
    assert all(line.startswith("| ") and line.endswith(" |") for line in lines[2:])


def test_search_full_text_shows_whole_records(history: History) -> None:
    out = ok("search", "login", "--full").stdout
    assert "source_event:" in out and "PostToolUse" in out
    assert "AssertionError: token expired" in out


def test_format_comes_from_the_global_option_then_the_setting(history: History,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(json.loads(ok("--format", "json", "search", "pytest").stdout), list)
    monkeypatch.setenv("NMEM_FORMAT", "yaml")
    assert isinstance(yaml.safe_load(ok("search", "pytest").stdout), list)
    assert ok("search", "pytest", "--format", "text").stdout.startswith("ID ")
    monkeypatch.setenv("NMEM_FORMAT", "xml")
    result = invoke("search", "pytest")
    assert result.exit_code == 3
    assert "cli.format" in result.stderr


def test_search_filters(history: History) -> None:
    def ids(*args: str) -> set[int]:
        return {h["id"] for h in as_json("search", "--scope", "observations", *args)}

    assert ids("auth", "--project", "demo") == {history.read, history.edit, history.test_cmd}
    assert ids("auth", "--project", "other") == {history.other_cmd}
    assert ids("auth", "--type", "file_read,file_edit") == {history.read, history.edit}
    assert ids("auth", "--type", "file_read", "--type", "command") == {history.read, history.test_cmd,
                                                                        history.other_cmd}
    assert ids("--file", "src/auth.py") == {history.read, history.edit}
    assert ids("auth", "--session", "s2") == {history.other_cmd}
    assert ids("auth", "--since", "2999-01-01") == set()
    assert ids("auth", "--until", "2000-01-01") == set()
    everything = {history.read, history.edit, history.test_cmd, history.other_cmd}
    assert ids("auth", "--since", "1d") == everything
    # local days: recorded an hour ago, so today, or yesterday when the test runs in the day's first hour
    midnight = datetime.combine(date.today(), dtime.min).timestamp()
    when = {h["id"]: h["timestamp"] for h in as_json("search", "--scope", "observations", "auth")}
    today = {i for i in everything if when[i] >= midnight}
    assert ids("auth", "--since", "today") == today
    assert ids("auth", "--since", "yesterday", "--until", "today") == everything
    assert ids("auth", "--until", "yesterday") == everything - today
    assert ids("auth", "--until", "now") == everything
    assert ids("nothing-matches-this") == set()


def test_search_project_dot_is_the_current_project(history: History, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path / "other")
    assert [h["id"] for h in as_json("search", "auth", "--project", ".")] == [history.other_cmd]


def test_search_order_limit_and_offset(history: History) -> None:
    newest = [h["id"] for h in as_json("search", "auth", "--order", "date_desc")]
    oldest = [h["id"] for h in as_json("search", "auth", "--order", "date_asc")]
    assert newest == list(reversed(oldest))
    assert newest[0] == history.other_cmd
    assert [h["id"] for h in as_json("search", "auth", "--order", "date_desc", "--limit", "2")] == newest[:2]
    assert [h["id"] for h in as_json("search", "auth", "--order", "date_desc", "--offset", "2")] == newest[2:]
    assert len(as_json("search", "auth", "--limit", "0")) == 1  # clamped to 1


def test_search_without_query_lists_newest_first(history: History) -> None:
    result = ok("search", "--project", "demo", "--format", "json")
    hits = json.loads(result.stdout)
    assert hits[0]["id"] == history.edit
    assert stderr_lines(result) == [f"nmem: {len(hits)} results"]


def test_search_other_scopes(history: History, service: Service) -> None:
    memory = service.remember("Auth tokens live for an hour", namespace="decisions", tags=["auth"],
                              project="demo")
    prompts = as_json("search", "flaky", "--scope", "prompts")
    assert [(h["kind"], h["content_preview"]) for h in prompts] == [("prompt", "fix the flaky auth test")]
    memories = as_json("search", "tokens", "--scope", "memories", "--namespace", "decisions", "--tag", "auth")
    assert [h["id"] for h in memories] == [memory.id]
    kinds = {h["kind"] for h in as_json("search", "auth", "--scope", "all")}
    assert kinds == {"observation", "prompt", "memory"}
    lines = ok("search", "auth", "--scope", "all", "--ids").stdout.split()
    assert memory.id in lines
    assert any(line.startswith("p") and line[1:].isdigit() for line in lines)


def test_malformed_fts_query_is_one_line_and_exit_2(history: History) -> None:
    result = invoke("search", '"unbalanced')
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = stderr_lines(result)
    assert len(lines) == 1
    assert lines[0].startswith("nmem: invalid search query")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args", [
    ("timeline", "--query", "auth", "--since", "garbage"), ("timeline", "--query", "auth", "--until", "garbage"),
    ("trace", "s1", "--before", "garbage"), ("trace", "s1", "--after", "garbage"),
    ("file-history", AUTH_FILE, "--before", "garbage"), ("file-history", AUTH_FILE, "--after", "garbage"),
    ("sessions", "--since", "garbage"), ("export", "--since", "garbage"),
], ids=" ".join)
def test_an_unreadable_date_names_the_option_typed(history: History, service: Service, args: tuple[str, ...]) -> None:
    def counts() -> dict[str, Any]:
        return {k: v for k, v in service.status().items() if k != "size_bytes"}   # the WAL's size moves

    before = counts()
    result = invoke(*args)
    assert (result.exit_code, result.stdout) == (2, "")
    assert stderr_lines(result) == [f"nmem: {args[-2]}: cannot read 'garbage' as a date "
                                    "(use 2026-05-01, an ISO time or epoch seconds)"]
    assert counts() == before


def test_timeline_dates_out_of_order_name_the_options(history: History) -> None:
    result = invoke("timeline", "--query", "auth", "--since", "today", "--until", "yesterday")
    assert (result.exit_code, stderr_lines(result)) == (2, ["nmem: --since is after --until"])


def test_invalid_search_arguments_exit_2(history: History) -> None:
    assert invoke("search", "x", "--type", "not_a_type").exit_code == 2
    assert invoke("search", "x", "--offset", "-1").exit_code == 11  # well-formed, out of range: validation
    assert invoke("search", "x", "--since", "yesterday-ish").exit_code == 2
    result = invoke("search", "x", "--scope", "everything")
    assert result.exit_code == 2
    assert "Usage:" in result.stderr


# -- get ----------------------------------------------------------------------------------

def test_get_returns_full_records_in_the_order_asked(history: History, service: Service) -> None:
    memory = service.remember("Prefer WAL", namespace="decisions", project="demo")
    records = as_json("get", str(history.edit), f"nmem://project:demo/observations/{history.failure}", memory.urn)
    assert [r["id"] for r in records] == [history.edit, history.failure, memory.id]
    assert records[0]["file_path"] == AUTH_FILE
    assert set(records[0]) >= ADR_FULL_KEYS
    assert records[2]["content"] == "Prefer WAL"


def test_get_text_shows_fields_and_content(history: History) -> None:
    out = ok("get", str(history.failure)).stdout
    assert out.startswith(f"nmem://project:demo/observations/{history.failure}\n")
    assert "obs_type:" in out and "command_error" in out
    assert "token expired" in out


def test_get_names_missing_ids_and_exits_10_when_none_exist(history: History) -> None:
    partial = invoke("get", str(history.edit), "9999", "--format", "json")
    assert partial.exit_code == 0
    assert [r["id"] for r in json.loads(partial.stdout)] == [history.edit]
    assert stderr_lines(partial) == ["nmem: not found: 9999"]
    missing = invoke("get", "9999", "01NOTAMEMORY")
    assert missing.exit_code == 10
    assert stderr_lines(missing) == ["nmem: not found: 9999, 01NOTAMEMORY"]


def test_get_argument_errors(history: History) -> None:
    assert invoke("get").exit_code == 2
    too_many = invoke("get", *[str(i) for i in range(1, 102)])
    assert too_many.exit_code == 2
    assert "at most 100" in too_many.stderr


# -- timeline, trace, file-history ----------------------------------------------------------

def test_timeline_around_an_anchor(history: History) -> None:
    data = as_json("timeline", str(history.failure), "--before", "1", "--after", "1")
    assert data["anchor"]["id"] == history.failure
    assert [o["id"] for o in data["before"]] == [history.test_cmd]
    assert [o["id"] for o in data["after"]] == [history.read]
    text = ok("timeline", str(history.failure)).stdout
    marked = [line for line in text.splitlines() if line.startswith("→")]
    assert len(marked) == 1 and str(history.failure) in marked[0]
    assert str(history.other_cmd) not in text.split()  # other session


def test_timeline_by_query_and_errors(history: History) -> None:
    assert as_json("timeline", "--query", "login")["anchor"]["id"] == history.failure
    assert invoke("timeline", "9999").exit_code == 10
    assert invoke("timeline", "--query", "zzzznothing").exit_code == 10
    assert invoke("timeline").exit_code == 2


def test_trace_groups_observations_under_prompts(history: History) -> None:
    data = as_json("trace", "s1")
    assert data["session_id"] == "s1" and data["project"] == "demo"
    by_source = {p["source"]: p for p in data["prompts"]}
    assert by_source["user"]["content"] == "fix the flaky auth test"
    assert [o["id"] for o in by_source["user"]["observations"]] == [history.test_cmd, history.failure,
                                                                     history.read, history.edit]
    text = ok("trace", "s1").stdout
    assert "user: fix the flaky auth test  (4 actions)" in text
    md = ok("trace", "s1", "--format", "markdown").stdout
    assert md.startswith("# Session ss1")  # the `s` form of session "s1"
    assert "| id | when | type | content |" in md


def test_trace_unknown_session_exits_10(history: History) -> None:
    result = invoke("trace", "nope")
    assert result.exit_code == 10
    assert stderr_lines(result) == ["nmem: session not found: nope"]


def test_file_history(history: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = as_json("file-history", AUTH_FILE)
    assert data["file_path"] == AUTH_FILE
    [session] = data["sessions"]
    assert session["session_id"] == "s1"
    assert {t["observation_id"] for t in session["touches"]} == {history.read, history.edit}
    assert {t["prompt_content"] for t in session["touches"]} == {"fix the flaky auth test"}
    text = ok("file-history", AUTH_FILE).stdout
    assert text.startswith(f"History of src/auth.py ({AUTH_FILE})"), "relative to the project root, then whole"
    assert "fix the flaky auth test" in text
    assert as_json("file-history", "/nowhere/else.py")["sessions"] == []
    assert len(as_json("file-history", AUTH_FILE, "--limit", "1")["sessions"][0]["touches"]) == 1
    # a relative path no recorded path ends with is taken from the project root
    monkeypatch.chdir(tmp_path)
    assert as_json("file-history", "src/nothing.py")["file_path"] == str(tmp_path / "src" / "nothing.py")
    # one that a recorded path ends with is that path
    assert as_json("file-history", "src/auth.py")["file_path"] == AUTH_FILE


# -- context and status ---------------------------------------------------------------------

def test_context_defaults_to_the_current_project(history: History, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    project_dir = tmp_path / "demo"
    project_dir.mkdir()
    monkeypatch.chdir(project_dir)
    result = ok("context")
    assert result.stdout.startswith("<nmem-context>")
    assert "## Last session s" in result.stdout
    assert "fix the flaky auth test" in result.stdout
    data = as_json("context", "--project", "other", "--recovery")
    assert data["project"] == "other" and data["mode"] == "recovery"
    assert "docker compose up auth-proxy" in data["context"]


def test_context_for_an_empty_project_says_so_on_stderr(nmem_home: Path) -> None:
    result = ok("context", "--project", "ghost")
    assert result.stdout == ""
    assert stderr_lines(result) == ["nmem: nothing recorded yet for project 'ghost'"]


def test_status_text_json_and_markdown(history: History, service: Service) -> None:
    service.remember("Prefer WAL", namespace="decisions", project="demo")
    data = as_json("status")
    assert data["observations"] == 6 and data["sessions"] == 2 and data["memories"] == 1
    assert data["by_obs_type"]["command"] == 2
    assert data["schema_version"] >= 1
    text = ok("status").stdout
    assert text.startswith("nmem status\n═══════════\n")
    assert f"v{data['schema_version']}" in text
    assert "2 sessions, 1 prompts, 6 observations" in text
    command_line = next(line for line in text.splitlines() if line.strip().startswith("command "))
    assert "█" in command_line and " 2 " in command_line
    md = ok("status", "--format", "markdown").stdout
    assert "| By namespace | count |" in md and "| decisions | 1 |" in md
    assert "By tier: " not in md  # tiers exist (warm)


# -- errors at the edge ---------------------------------------------------------------------

def test_help_lists_every_command(nmem_home: Path) -> None:
    out = ok("--help").stdout
    for name in ("record", "hook", "search", "get", "timeline", "trace", "file-history", "context",
                 "remember", "capture", "recall", "update", "forget", "pin", "unpin", "purge", "status",
                 "config"):
        assert f"\n  {name} " in out, name


def test_main_maps_errors_to_exit_codes(history: History, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "pytest", "--ids"]) == 0
    captured = capsys.readouterr()
    assert sorted(int(i) for i in captured.out.split()) == sorted([history.test_cmd, history.failure])
    assert main(["search", '"unbalanced']) == 2
    assert capsys.readouterr().err.startswith("nmem: invalid search query")
    assert main(["forget", "01NOTAMEMORY"]) == 10
    assert capsys.readouterr().err == "nmem: memory not found: 01NOTAMEMORY\n"
    assert main(["remember", "x", "--summary", "y" * 101]) == 11
    assert "limit is 100" in capsys.readouterr().err
    assert main(["no-such-command"]) == 2
    assert "No such command" in capsys.readouterr().err
    assert main(["--help"]) == 0
    assert "Usage: nmem" in capsys.readouterr().out


def test_storage_and_config_errors_are_one_line(nmem_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nmem_home.mkdir(parents=True)
    (nmem_home / "config.toml").write_text("search = [broken", encoding="utf-8")
    assert main(["status"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("nmem: cannot read") and err.count("\n") == 1
    (nmem_home / "config.toml").unlink()
    (nmem_home / "nmem.db").write_bytes(b"this is not a database" * 100)
    assert main(["status"]) == 4
    err = capsys.readouterr().err
    assert err.startswith("nmem: ") and err.count("\n") == 1 and "Traceback" not in err


def test_home_option_points_at_another_data_dir(history: History, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    assert as_json("status")["observations"] == 6
    data = json.loads(ok("--home", str(elsewhere), "status", "--format", "json").stdout)
    assert data["observations"] == 0
    assert (elsewhere / "nmem.db").exists()
