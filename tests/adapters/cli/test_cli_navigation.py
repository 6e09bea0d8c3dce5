"""Navigation that never misleads: `nmem get` opens every id and URN the CLI prints, sessions
by unique prefix, `nmem sessions`, `nmem trace` without an argument, one path resolution,
and one default project for search."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import record
from nmem.service.api import Service
from test_cli_support import AUTH_FILE, CWD, OTHER_CWD, History, as_json, bash, invoke, ok, seed, stderr_lines

T0 = 1_790_000_000
SID_A = "a1b2c3d4-0000-4000-8000-000000000001"
SID_B = "a1b2ffff-0000-4000-8000-000000000002"
SID_C = "c0ffee00-0000-4000-8000-000000000003"


@pytest.fixture
def history(service: Service) -> History:
    return seed(service)


def three_sessions(service: Service) -> None:
    """Two sessions of project demo sharing the prefix a1b2, one of project other."""
    record(service, "UserPromptSubmit", now=T0, session_id=SID_A, cwd=CWD, prompt="fix the invoice totals")
    bash(service, "pytest tests/test_invoice.py", T0 + 5, session_id=SID_A)
    record(service, "SessionEnd", now=T0 + 600, session_id=SID_A, cwd=CWD, reason="logout")
    record(service, "UserPromptSubmit", now=T0 + 1000, session_id=SID_B, cwd=CWD, prompt="add a refund endpoint")
    record(service, "UserPromptSubmit", now=T0 + 2000, session_id=SID_C, cwd=OTHER_CWD, prompt="style the page")


# -- nmem get opens every id and URN -----------------------------------------------------------

def test_get_opens_every_kind_by_every_form(history: History, service: Service) -> None:
    memory = service.remember("Prefer WAL", namespace="decisions", project="demo")
    [prompt] = as_json("search", "flaky", "--scope", "prompts")
    obs = history.failure
    forms = [str(obs), f"o{obs}", f"#{obs}", f"nmem://project:demo/observations/{obs}",
             prompt["ref"], prompt["urn"], "ss1", "s" + "s1", "nmem://project:demo/sessions/s1",
             memory.id, memory.id.lower(), memory.urn]
    records = as_json("get", *forms)
    assert [(r["kind"], r["id"]) for r in records] == [
        *[("observation", obs)] * 4, *[("prompt", prompt["id"])] * 2, *[("session", "s1")] * 3,
        *[("memory", memory.id)] * 3]
    assert prompt["ref"] == f"p{prompt['id']}"
    session = records[6]
    assert (session["ref"], session["project"], session["urn"]) == ("ss1", "demo", "nmem://project:demo/sessions/s1")
    text = ok("get", "ss1").stdout
    assert "Its prompts and actions: nmem trace ss1" in text


def test_a_bare_number_is_an_observation_and_tables_name_prompts_with_p(service: Service) -> None:
    # prompt 1 and observation 1 both exist: the table must not show a bare "1" for the prompt
    record(service, "UserPromptSubmit", now=T0, session_id="s1", cwd=CWD, prompt="rotate the signing keys")
    oid = bash(service, "make rotate-keys", T0 + 5)
    assert oid == 1
    table = ok("search", "rotate", "--scope", "all").stdout.splitlines()
    ids = [line.split()[0] for line in table[1:]]
    assert sorted(ids) == ["1", "p1"]
    [as_obs] = as_json("get", "1")
    [as_prompt] = as_json("get", "p1")
    assert (as_obs["kind"], as_obs["content"]) == ("observation", "make rotate-keys")
    assert (as_prompt["kind"], as_prompt["content"]) == ("prompt", "rotate the signing keys")


def test_search_ids_pipe_into_get_opens_each_hit(history: History, service: Service) -> None:
    service.remember("auth tokens rotate hourly", namespace="decisions", project="demo")
    record(service, "SessionEnd", session_id="s1", cwd=CWD, reason="logout")  # a summary to find
    hits = as_json("search", "auth", "--scope", "all", "--strict")
    refs = ok("search", "auth", "--scope", "all", "--ids").stdout.split()
    assert refs == [h["ref"] for h in hits]
    assert {h["kind"] for h in hits} == {"observation", "prompt", "session", "memory"}
    opened = as_json("get", *refs)
    assert [(r["kind"], r["id"]) for r in opened] == [(h["kind"], h["id"]) for h in hits]


def test_text_tables_show_unambiguous_ids(history: History, service: Service) -> None:
    three_sessions(service)
    record(service, "SessionEnd", session_id="s1", cwd=CWD, reason="logout")
    rows = ok("search", "--scope", "sessions", "--project", "*").stdout.splitlines()[1:]
    assert {row.split()[0] for row in rows} == {"ss1", "ss2", "sa1b2c3d4", "sa1b2ffff", "sc0ffee00"}
    trace = ok("trace", "sa1b2c3d4").stdout
    assert trace.startswith("Session sa1b2c3d4\n")
    prompt_heading = next(line for line in trace.splitlines() if "user: fix the invoice totals" in line)
    assert prompt_heading.split()[0].startswith("p")
    history_text = ok("file-history", AUTH_FILE).stdout
    assert "Session ss1 (demo," in history_text


def test_get_not_found_and_errors(history: History) -> None:
    result = invoke("get", "p999", "s-nope", "nmem://project:other/observations/1")
    assert result.exit_code == 10
    assert stderr_lines(result) == ["nmem: not found: p999, s-nope, nmem://project:other/observations/1"]
    partial = invoke("get", "p999", str(history.edit), "--format", "json")
    assert partial.exit_code == 0
    assert [r["id"] for r in json.loads(partial.stdout)] == [history.edit]
    assert stderr_lines(partial) == ["nmem: not found: p999"]
    collection = invoke("get", "nmem://project:demo/observations")
    assert collection.exit_code == 2
    assert "names no single record" in collection.stderr


# -- sessions by unique prefix ------------------------------------------------------------------

def test_session_prefixes_in_trace_get_and_search(service: Service) -> None:
    three_sessions(service)
    for ref in ("a1b2c", "sa1b2c", "sa1b2c3d4", SID_A, f"s{SID_A}", f"nmem://project:demo/sessions/{SID_A}"):
        assert as_json("trace", ref)["session_id"] == SID_A, ref
    assert as_json("get", "sa1b2f")[0]["id"] == SID_B
    assert {h["session_id"] for h in as_json("search", "--session", "sc0ff", "--scope", "prompts")} == {SID_C}
    found = as_json("search", "invoice", "--session", "a1b2c3", "--scope", "observations")
    assert [h["session_id"] for h in found] == [SID_A]


def test_an_ambiguous_session_prefix_lists_the_candidates_and_exits_2(service: Service) -> None:
    three_sessions(service)
    for args in (("trace", "a1b2"), ("get", "sa1b2"), ("search", "x", "--session", "sa1b2")):
        result = invoke(*args)
        assert result.exit_code == 2, args
        [line] = stderr_lines(result)
        assert line.startswith("nmem: session ") and "is ambiguous" in line, line
        assert "sa1b2ffff (demo, " in line and "sa1b2c3d4 (demo, " in line
        assert result.stdout == ""


def test_an_unknown_session_exits_10_everywhere(service: Service) -> None:
    three_sessions(service)
    for args in (("trace", "ffff"), ("get", "sffff"), ("search", "x", "--session", "ffff")):
        result = invoke(*args)
        assert result.exit_code == 10, args
        assert stderr_lines(result)[-1] in ("nmem: session not found: ffff", "nmem: not found: sffff")
    # a URN naming another project's session is not that session
    assert invoke("trace", f"nmem://project:other/sessions/{SID_A}").exit_code == 10


def test_trace_without_argument_traces_the_latest_session_of_the_current_project(
        service: Service, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    three_sessions(service)
    (tmp_path / "demo").mkdir()
    monkeypatch.chdir(tmp_path / "demo")
    result = ok("trace", "--format", "json")
    assert json.loads(result.stdout)["session_id"] == SID_B  # SID_C is newer but of project other
    assert stderr_lines(result) == ["nmem: the latest session of project demo: sa1b2ffff"]
    assert "intent:  add a refund endpoint" in ok("trace").stdout  # open: its first prompt
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path / "empty")
    missing = invoke("trace")
    assert missing.exit_code == 10
    assert stderr_lines(missing) == ["nmem: no session recorded for project empty"]


def test_sessions_lists_newest_first_with_counts(service: Service, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    three_sessions(service)
    (tmp_path / "demo").mkdir()
    monkeypatch.chdir(tmp_path / "demo")
    rows = as_json("sessions")
    assert [r["id"] for r in rows] == [SID_B, SID_A]
    b, a = rows
    assert (a["ref"], a["project"], a["prompts"], a["actions"]) == (f"s{SID_A}", "demo", 1, 1)
    assert (a["started_at"], a["ended_at"], a["duration"]) == (T0, T0 + 600, 600)
    assert a["intent"] == "fix the invoice totals"
    assert (b["ended_at"], b["duration"], b["actions"], b["intent"]) == (None, None, 0, "add a refund endpoint")
    assert [r["id"] for r in as_json("sessions", "--all")] == [SID_C, SID_B, SID_A]
    assert [r["id"] for r in as_json("sessions", "--project", "other")] == [SID_C]
    assert [r["id"] for r in as_json("sessions", "--all", "--limit", "1")] == [SID_C]
    assert [r["id"] for r in as_json("sessions", "--all", "--since", str(T0 + 500))] == [SID_C, SID_B, SID_A]
    assert [r["id"] for r in as_json("sessions", "--all", "--since", str(T0 + 900))] == [SID_C, SID_B]
    text = ok("sessions").stdout.splitlines()
    assert text[0].split() == ["SESSION", "PROJECT", "AGENT", "STARTED", "DURATION", "PROMPTS", "ACTIONS", "INTENT"]
    assert text[1].split()[0] == "sa1b2ffff" and " open " in text[1]
    assert text[2].split()[0] == "sa1b2c3d4" and " 10m " in text[2]
    assert invoke("sessions", "--all", "--project", "demo").exit_code == 2


# -- one path resolution ------------------------------------------------------------------------

@pytest.fixture
def repo(service: Service, tmp_path: Path) -> Path:
    """A real git repository with billing/invoice.py and legacy/invoice.py touched, and
    another project's invoice.py."""
    root = tmp_path / "shop"
    (root / "docs").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for i, rel in enumerate(("billing/invoice.py", "legacy/invoice.py", "billing/tax.py")):
        record(service, "PostToolUse", now=T0 + i, session_id="shop-1", cwd=str(root), tool_name="Read",
               tool_input={"file_path": str(root / rel)})
    record(service, "PostToolUse", now=T0 + 9, session_id="elsewhere", cwd="/work/other", tool_name="Read",
           tool_input={"file_path": "/work/other/tax.py"})
    return root


def test_relative_paths_start_at_the_project_root_not_the_subdirectory(repo: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo / "docs")
    data = as_json("file-history", "billing/invoice.py")
    assert data["file_path"] == str(repo / "billing" / "invoice.py")
    assert [s["session_id"] for s in data["sessions"]] == ["shop-1"]
    assert {h["file_path"] for h in as_json("search", "--file", "billing/invoice.py")} == {
        str(repo / "billing" / "invoice.py")}


def test_a_suffix_finds_the_recorded_path_and_the_project_root_wins(repo: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo / "docs")
    # tax.py ends a path in this project and one in another: the project's wins
    assert as_json("file-history", "tax.py")["file_path"] == str(repo / "billing" / "tax.py")
    assert {h["file_path"] for h in as_json("search", "--file", "tax.py")} == {str(repo / "billing" / "tax.py")}
    monkeypatch.chdir("/")
    # from outside any project, the only recorded path that fits
    assert as_json("file-history", "other/tax.py")["file_path"] == "/work/other/tax.py"


def test_an_ambiguous_suffix_lists_the_paths_and_exits_2(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo)
    for args in (("file-history", "invoice.py"), ("search", "--file", "invoice.py")):
        result = invoke(*args)
        assert result.exit_code == 2, args
        [line] = stderr_lines(result)
        assert line == (f"nmem: invoice.py is ambiguous: it ends 2 recorded paths: {repo}/billing/invoice.py, "
                        f"{repo}/legacy/invoice.py; give more of the path")
    assert as_json("file-history", "legacy/invoice.py")["file_path"] == str(repo / "legacy" / "invoice.py")


# -- one default project for search ---------------------------------------------------------------

def test_search_defaults_to_every_project_with_the_current_one_first(history: History, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path / "other")
    hits = as_json("search", "auth", "--scope", "observations")
    assert [h["project"] for h in hits] == ["other", "demo", "demo", "demo"]
    assert hits[0]["id"] == history.other_cmd
    alike = as_json("search", "auth", "--scope", "observations", "--project", "*")
    assert sorted(h["id"] for h in alike) == sorted(h["id"] for h in hits)
    here = as_json("search", "auth", "--scope", "observations", "--project", ".")
    assert [h["id"] for h in here] == [history.other_cmd]
    paged = [h["id"] for h in as_json("search", "auth", "--scope", "observations", "--limit", "2", "--offset", "1")]
    assert paged == [h["id"] for h in hits[1:3]]


def test_pin_takes_the_observation_forms_and_refuses_other_kinds(history: History, service: Service) -> None:
    for ref in (f"o{history.edit}", f"#{history.read}", f"nmem://project:demo/observations/{history.failure}"):
        assert as_json("pin", ref)["kind"] == "observation", ref
    assert {o.id for o in service.get_observations([history.edit, history.read, history.failure]) if o.is_pinned} \
        == {history.edit, history.read, history.failure}
    assert invoke("pin", f"nmem://project:other/observations/{history.edit}").exit_code == 10
    for ref in ("p1", "ss1"):
        refused = invoke("pin", ref)
        assert refused.exit_code == 2
        assert "only observations and memories can be pinned" in refused.stderr


def test_a_whole_session_id_wins_over_a_prefix(service: Service) -> None:
    # "s1" is both a whole id and, read as the s form, the prefix of "1abc": the whole id wins
    record(service, "UserPromptSubmit", now=T0, session_id="s1", cwd=CWD, prompt="first")
    record(service, "UserPromptSubmit", now=T0 + 1, session_id="1abc", cwd=CWD, prompt="second")
    assert as_json("get", "s1")[0]["id"] == "s1"
    assert as_json("get", "s1a")[0]["id"] == "1abc"
    assert as_json("trace", "s1")["session_id"] == "s1"
    assert as_json("trace", "1")["session_id"] == "1abc"


def test_a_project_with_nothing_recorded_gets_every_projects_results(history: History, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "brand-new").mkdir()
    monkeypatch.chdir(tmp_path / "brand-new")
    found = as_json("search", "auth", "--scope", "observations")
    assert {h["id"] for h in found} == {history.read, history.edit, history.test_cmd, history.other_cmd}
    assert as_json("search", "auth", "--project", ".") == []
