"""Service API: recording hook events (sessions, prompts, observations, dedup, Stop) and status."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Clock, record
from nmem.config import load_settings
from nmem.service.api import Service
from nmem.store.postgres.schema import LATEST_VERSION as PG_LATEST_VERSION
from nmem.store.sqlite.schema import LATEST_VERSION
from store_engines import sql_rows

T0 = 1_790_000_000


def obs(service: Service, obs_id: int) -> Any:
    rows = service.get_observations([obs_id])
    assert len(rows) == 1
    return rows[0]


def rows(service: Service, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    return sql_rows(service.store, sql, *params)


@pytest.fixture
def open_service(nmem_home: Path) -> Iterator[Any]:
    """Open services after a test has set its environment; closes them all."""
    opened: list[Service] = []

    def factory() -> Service:
        svc = Service.open(load_settings())
        svc.clock = Clock(T0)
        opened.append(svc)
        return svc

    yield factory
    for svc in opened:
        svc.close()


# -- sessions and prompt linking --------------------------------------------------------------


def test_first_event_creates_the_session_row_with_project_from_cwd(service: Service, tmp_path: Path) -> None:
    cwd = tmp_path / "billing-api"
    out = record(service, "SessionStart", now=T0, session_id="s-a", cwd=str(cwd), source="startup")
    assert out.project == "billing-api"
    assert out.stored == "observation"
    session = service.store.get_session("s-a")
    assert session is not None
    assert (session.project, session.started_at, session.ended_at) == ("billing-api", T0, None)
    start = obs(service, out.observation_id)
    assert (start.obs_type, start.source_event, start.prompt_id) == ("session_start", "SessionStart", None)


def test_later_events_keep_the_session_project_and_start_time(service: Service, tmp_path: Path) -> None:
    record(service, "SessionStart", now=T0, session_id="s-a", cwd=str(tmp_path / "alpha"))
    out = record(service, "PostToolUse", now=T0 + 60, session_id="s-a", cwd=str(tmp_path / "beta"),
                 tool_name="Bash", tool_input={"command": "make"}, tool_response={"exit_code": 0})
    assert out.project == "alpha"
    assert obs(service, out.observation_id).project == "alpha"
    assert rows(service, "SELECT id, project, started_at FROM sessions") == [("s-a", "alpha", T0)]


def test_a_git_checkout_names_the_project_after_its_top_level(service: Service, tmp_path: Path) -> None:
    top = tmp_path / "my-repo"
    (top / ".git").mkdir(parents=True)
    (top / "src" / "pkg").mkdir(parents=True)
    out = record(service, "UserPromptSubmit", now=T0, cwd=str(top / "src" / "pkg"), prompt="hello")
    assert out.project == "my-repo"


def test_observations_link_to_the_most_recent_prompt(service: Service) -> None:
    def bash(cmd: str, at: int) -> int:
        out = record(service, "PostToolUse", now=at, tool_name="Bash", tool_input={"command": cmd},
                     tool_response={"exit_code": 0})
        return out.observation_id

    before = bash("ls", T0)
    p1 = record(service, "UserPromptSubmit", now=T0 + 1, prompt="run the tests").prompt_id
    a = bash("pytest", T0 + 2)
    b = bash("pytest -x", T0 + 3)
    p2 = record(service, "UserPromptSubmit", now=T0 + 4, prompt="now lint").prompt_id
    c = bash("ruff check", T0 + 5)
    assert p1 is not None and p2 is not None and p2 > p1
    assert [obs(service, i).prompt_id for i in (before, a, b, c)] == [None, p1, p1, p2]
    assert rows(service, "SELECT source, content FROM prompts ORDER BY id") == [
        ("user", "run the tests"), ("user", "now lint")]


def test_prompt_links_inside_one_transaction_match_one_event_at_a_time(service: Service, tmp_path: Path) -> None:
    # A bulk import records many events in one write transaction, where the store remembers each
    # session's latest user prompt; the links must be what event-by-event recording gives.
    def bash(cmd: str, at: int, session_id: str = "sess-1") -> int:
        return record(service, "PostToolUse", now=at, session_id=session_id, tool_name="Bash",
                      tool_input={"command": cmd}, tool_response={"exit_code": 0}).observation_id

    with service.store.transaction():
        before = bash("ls", T0)
        p1 = record(service, "UserPromptSubmit", now=T0 + 1, prompt="run the tests").prompt_id
        a = bash("pytest", T0 + 2)
        other = bash("echo other", T0 + 2, session_id="s2")
        record(service, "Stop", now=T0 + 3, last_assistant_message="All green.")   # agent text: no new intent
        b = bash("pytest -x", T0 + 4)
        p2 = record(service, "UserPromptSubmit", now=T0 + 5, prompt="now lint").prompt_id
        c = bash("ruff check", T0 + 6)
    assert [obs(service, i).prompt_id for i in (before, a, other, b, c)] == [None, p1, None, p1, p2]
    # A prompt another process adds between two transactions is seen by the next one.
    with Service.open(load_settings({"NMEM_HOME": str(service.settings.home),
                                     "NMEM_STORE_URL": service.settings.store_url})) as elsewhere:
        p3 = record(elsewhere, "UserPromptSubmit", now=T0 + 7, prompt="and format").prompt_id
    with service.store.transaction():
        d = bash("ruff format", T0 + 8)
    assert obs(service, d).prompt_id == p3
    # A transaction that fails leaves nothing remembered.
    with pytest.raises(RuntimeError), service.store.transaction():
        record(service, "UserPromptSubmit", now=T0 + 9, prompt="rolled back")
        raise RuntimeError("abort")
    assert obs(service, bash("make", T0 + 10)).prompt_id == p3


def test_prompt_linking_is_per_session(service: Service) -> None:
    p = record(service, "UserPromptSubmit", now=T0, session_id="s-1", prompt="first session intent").prompt_id
    out = record(service, "PostToolUse", now=T0 + 1, session_id="s-2", tool_name="Bash",
                 tool_input={"command": "echo hi"}, tool_response={"exit_code": 0})
    assert p is not None
    assert obs(service, out.observation_id).prompt_id is None


def test_empty_prompt_is_ignored_and_stores_nothing(service: Service) -> None:
    out = record(service, "UserPromptSubmit", now=T0, prompt="   ")
    assert (out.stored, out.skipped) == (None, "ignored")
    assert rows(service, "SELECT COUNT(*) FROM prompts") == [(0,)]


@pytest.mark.parametrize(("source", "obs_type"), [
    ("startup", "session_start"), ("resume", "session_resume"),
    ("compact", "session_compact"), ("clear", "session_clear"),
])
def test_session_start_source_maps_to_obs_type(service: Service, source: str, obs_type: str) -> None:
    out = record(service, "SessionStart", now=T0, source=source)
    o = obs(service, out.observation_id)
    assert (o.obs_type, o.metadata) == (obs_type, {"source": source})


def test_failed_tool_call_is_a_command_error_with_the_error_text(service: Service) -> None:
    out = record(service, "PostToolUseFailure", now=T0, tool_name="Bash",
                 tool_input={"command": "cargo build"}, error="error[E0425]: cannot find value `x`")
    o = obs(service, out.observation_id)
    assert o.obs_type == "command_error"
    assert o.source_event == "PostToolUseFailure"
    assert "cargo build" in o.content and "E0425" in o.content


# -- dedup window ----------------------------------------------------------------------------------


def read(service: Service, path: str, at: int, session_id: str = "sess-1") -> Any:
    return record(service, "PostToolUse", now=at, session_id=session_id, tool_name="Read",
                  tool_input={"file_path": path})


def test_repeated_read_within_the_window_is_collapsed(service: Service) -> None:
    first = read(service, "/w/app.py", T0)
    again = read(service, "/w/app.py", T0 + 299)
    assert first.stored == "observation"
    assert (again.stored, again.skipped, again.observation_id) == (None, "duplicate", first.observation_id)
    assert rows(service, "SELECT COUNT(*) FROM observations WHERE obs_type = 'file_read'") == [(1,)]


def test_read_after_the_window_is_stored_again(service: Service) -> None:
    first = read(service, "/w/app.py", T0)
    later = read(service, "/w/app.py", T0 + 301)
    assert later.stored == "observation"
    assert later.observation_id != first.observation_id


def test_dedup_is_scoped_to_session_and_target(service: Service) -> None:
    read(service, "/w/app.py", T0)
    other_file = read(service, "/w/db.py", T0 + 1)
    other_session = read(service, "/w/app.py", T0 + 2, session_id="sess-2")
    assert other_file.stored == "observation"
    assert other_session.stored == "observation"


def test_repeated_search_is_collapsed_but_a_new_pattern_is_not(service: Service) -> None:
    def grep(pattern: str, at: int) -> Any:
        return record(service, "PostToolUse", now=at, tool_name="Grep",
                      tool_input={"pattern": pattern, "path": "/w"})

    assert grep("TODO", T0).stored == "observation"
    assert grep("TODO", T0 + 10).skipped == "duplicate"
    assert grep("FIXME", T0 + 11).stored == "observation"


def test_repeated_edits_are_never_collapsed(service: Service) -> None:
    payload = {"tool_name": "Edit", "tool_input": {"file_path": "/w/a.py", "old_string": "x", "new_string": "y"}}
    a = record(service, "PostToolUse", now=T0, **payload)
    b = record(service, "PostToolUse", now=T0 + 1, **payload)
    assert a.stored == b.stored == "observation"
    assert a.observation_id != b.observation_id


def test_dedup_window_comes_from_settings(monkeypatch: pytest.MonkeyPatch, open_service: Any) -> None:
    monkeypatch.setenv("NMEM_DEDUP_WINDOW", "5")
    svc = open_service()
    read(svc, "/w/app.py", T0)
    assert read(svc, "/w/app.py", T0 + 5).skipped == "duplicate"
    assert read(svc, "/w/app.py", T0 + 11).stored == "observation"


# -- closing a session -----------------------------------------------------------------------------


def _busy_session(service: Service) -> None:
    record(service, "SessionStart", now=T0, source="startup")
    record(service, "UserPromptSubmit", now=T0 + 1, prompt="fix the login redirect\nmore detail")
    record(service, "PostToolUse", now=T0 + 2, tool_name="Read", tool_input={"file_path": "/w/auth.py"})
    record(service, "PostToolUse", now=T0 + 3, tool_name="Edit",
           tool_input={"file_path": "/w/auth.py", "old_string": "a", "new_string": "b"})
    record(service, "PostToolUse", now=T0 + 4, tool_name="Bash", tool_input={"command": "pytest -q"},
           tool_response={"stdout": "3 passed", "exit_code": 0})
    record(service, "PostToolUse", now=T0 + 5, tool_name="Bash", tool_input={"command": "mypy src"},
           tool_response={"stderr": "error: bad type", "exit_code": 1})


def test_stop_closes_the_session_with_signature_and_summary(service: Service) -> None:
    _busy_session(service)
    out = record(service, "Stop", now=T0 + 9, last_assistant_message="Fixed the redirect.")
    assert out.stored == "session_end"
    session = service.store.get_session("sess-1")
    assert session is not None
    assert session.ended_at == T0 + 9
    assert session.signature == {
        "events": {"command": 1, "command_error": 1, "file_edit": 1, "file_read": 1, "session_start": 1},
        "observations": 5, "prompts": 1, "compactions": 0,
    }
    assert session.summary["intent"] == "fix the login redirect"
    assert session.summary["files_changed"] == ["/w/auth.py"]
    assert session.summary["commands"] == ["pytest -q"]
    assert len(session.summary["errors"]) == 1 and session.summary["errors"][0].startswith("mypy src")


def test_stop_stores_the_last_assistant_message_as_an_agent_prompt(service: Service) -> None:
    _busy_session(service)
    out = record(service, "Stop", now=T0 + 9, last_assistant_message="Fixed the redirect.")
    assert out.prompt_id is not None
    prompt = service.store.get_prompts([out.prompt_id])[0]
    assert (prompt.source, prompt.content, prompt.timestamp) == ("agent", "Fixed the redirect.", T0 + 9)
    # the signature counts user prompts only
    session = service.store.get_session("sess-1")
    assert session is not None and session.signature["prompts"] == 1


def test_session_end_stores_an_observation_and_closes(service: Service) -> None:
    record(service, "SessionStart", now=T0)
    out = record(service, "SessionEnd", now=T0 + 50, reason="logout")
    o = obs(service, out.observation_id)
    assert (o.obs_type, o.metadata) == ("session_end", {"reason": "logout"})
    session = service.store.get_session("sess-1")
    assert session is not None and session.ended_at == T0 + 50
    assert session.signature["events"] == {"session_end": 1, "session_start": 1}


def test_subagent_stop_does_not_close_the_session(service: Service) -> None:
    record(service, "SessionStart", now=T0)
    record(service, "SubagentStop", now=T0 + 5)
    session = service.store.get_session("sess-1")
    assert session is not None and session.ended_at is None


def test_a_later_stop_recomputes_the_summary(service: Service) -> None:
    record(service, "UserPromptSubmit", now=T0, prompt="first task")
    record(service, "Stop", now=T0 + 1)
    record(service, "PostToolUse", now=T0 + 2, tool_name="Write",
           tool_input={"file_path": "/w/new.py", "content": "print(1)\n"})
    record(service, "Stop", now=T0 + 3)
    session = service.store.get_session("sess-1")
    assert session is not None
    assert session.ended_at == T0 + 3
    assert session.summary["files_changed"] == ["/w/new.py"]


# -- opt-outs ---------------------------------------------------------------------------------------


def test_disabled_memory_records_nothing(monkeypatch: pytest.MonkeyPatch, open_service: Any) -> None:
    monkeypatch.setenv("NMEM_ENABLED", "false")
    svc = open_service()
    out = record(svc, "UserPromptSubmit", now=T0, prompt="secret plans")
    assert (out.stored, out.skipped) == (None, "disabled")
    assert rows(svc, "SELECT (SELECT COUNT(*) FROM sessions) + (SELECT COUNT(*) FROM prompts)") == [(0,)]


def test_excluded_tool_records_nothing(monkeypatch: pytest.MonkeyPatch, open_service: Any) -> None:
    monkeypatch.setenv("NMEM_EXCLUDE_TOOLS", "mcp__vault__*")
    svc = open_service()
    out = record(svc, "PostToolUse", now=T0, tool_name="mcp__vault__get", tool_input={"key": "x"})
    assert out.skipped == "excluded"
    kept = record(svc, "PostToolUse", now=T0, tool_name="mcp__github__list", tool_input={})
    assert kept.stored == "observation"
    assert obs(svc, kept.observation_id).obs_type == "mcp_call"


# -- status ----------------------------------------------------------------------------------------


def test_status_counts_by_type_namespace_tier_and_project(service: Service, clock: Clock) -> None:
    _busy_session(service)
    record(service, "SessionStart", now=T0, session_id="other", cwd="/w/other-proj")
    service.remember("Use WAL mode", namespace="decisions", project="demo")
    service.remember("FTS5 needs triggers", namespace="learnings", project="demo", tier="hot")
    gone = service.remember("to be forgotten", namespace="learnings", project="demo")
    service.forget(gone.urn)
    st = service.status()
    assert st["schema_version"] == service.store.schema_version() == (
        LATEST_VERSION if service.settings.store_url.startswith("sqlite:") else PG_LATEST_VERSION)
    assert (st["sessions"], st["prompts"], st["observations"], st["memories"]) == (2, 1, 6, 2)
    assert st["by_obs_type"] == {"session_start": 2, "command": 1, "command_error": 1,
                                 "file_edit": 1, "file_read": 1}
    assert st["by_namespace"] == {"decisions": 1, "learnings": 1}
    assert st["by_tier"] == {"hot": 1, "warm": 1, "cold": 0, "archived": 0}   # every tier, in order
    assert list(st["by_tier"]) == ["hot", "warm", "cold", "archived"]
    assert st["by_project"] == {"demo": 1, "other-proj": 1}
    assert st["enabled"] is True
    assert st["database"] == service.settings.store_url


def counted(service: Service) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The trail counted row by row, in status's order: (type, rows) and (source, rows)."""
    return (rows(service, "SELECT obs_type, COUNT(*) FROM observations GROUP BY 1 ORDER BY 2 DESC, 1"),
            rows(service, "SELECT source, COUNT(*) FROM prompts GROUP BY 1 ORDER BY 2 DESC, 1"))


def test_status_counts_stay_exact_through_writes_and_every_delete(service: Service) -> None:
    """Status's trail counts (which the SQLite engine keeps as rows change) agree with counting
    every row, after captures and after each way observations are deleted."""
    def agrees() -> dict[str, Any]:
        st, (by_type, by_source) = service.status(), counted(service)
        assert list(st["by_obs_type"].items()) == [tuple(r) for r in by_type]
        assert st["observations"] == sum(n for _, n in by_type)
        assert sum(st["prompts_by_role"].values()) == sum(n for _, n in by_source)
        assert st["prompts"] == sum(n for source, n in by_source if source == "user")
        return st

    _busy_session(service)
    record(service, "Stop", now=T0 + 9, last_assistant_message="Fixed the redirect.")
    for i in range(3):
        record(service, "PostToolUse", now=T0 + 20 + i, session_id="other", cwd="/w/other-proj", tool_name="Bash",
               tool_input={"command": f"make deploy-{i}"}, tool_response={"stdout": "ok", "exit_code": 0})
    st = agrees()
    assert st["by_obs_type"]["command"] == 4 and st["agent_replies"] == 1
    first = rows(service, "SELECT MIN(id) FROM observations WHERE obs_type = 'command'")[0][0]
    assert service.purge(ids=[first], confirm=True) == 1
    assert agrees()["by_obs_type"]["command"] == 3
    assert service.purge(query="deploy", confirm=True) == 3
    assert service.purge(obs_type="file_read", confirm=True) == 1
    assert service.store.delete_expired({"command_error": T0 + 100}) == {"command_error": 1}
    st = agrees()
    assert list(st["by_obs_type"].items()) == [("file_edit", 1), ("session_start", 1)], "a type gone is not listed"


def test_status_size_is_the_database_size(service: Service) -> None:
    before = service.status()["size_bytes"]
    if service.settings.store_url.startswith("sqlite:"):
        pages, page_size = (rows(service, "PRAGMA page_count")[0][0], rows(service, "PRAGMA page_size")[0][0])
        assert before >= pages * page_size > 0
    else:
        assert before == rows(service, "SELECT SUM(pg_total_relation_size(c.oid)) FROM pg_class c "
                                       "JOIN pg_namespace n ON n.oid = c.relnamespace "
                                       "WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname IN "
                                       "('sessions', 'prompts', 'observations', 'memories', 'vectors', "
                                       "'sync_ops')")[0][0]
    for i in range(200):
        service.remember(f"memory number {i} " + "x" * 400, project="demo")
    assert service.status()["size_bytes"] > before + 200 * 400


def test_status_on_an_empty_database(service: Service) -> None:
    st = service.status()
    assert (st["sessions"], st["prompts"], st["observations"], st["memories"]) == (0, 0, 0, 0)
    assert st["by_obs_type"] == st["by_namespace"] == st["by_project"] == {}
    assert st["by_tier"] == {"hot": 0, "warm": 0, "cold": 0, "archived": 0}
