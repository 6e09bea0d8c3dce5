"""ADR-006 "Error Handling" table, one test per row, at the service level.

| Tool | Error condition | Behavior |  — each test name is `test_<tool>_<condition>`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import record
from nmem.config import load_settings
from nmem.errors import InvalidArgument, NmemError, NotFound, QuerySyntaxError, StorageError
from nmem.service.api import Service

T0 = 1_790_000_000


def bash(service: Service, cmd: str, at: int, session_id: str = "s1") -> int:
    out = record(service, "PostToolUse", now=at, session_id=session_id, tool_name="Bash",
                 tool_input={"command": cmd}, tool_response={"exit_code": 0})
    return int(out.observation_id)


# -- search ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("query", "sqlite_says"), [
    ('"unbalanced', "unterminated string"),
    ('login "redirect', "unterminated string"),
    ("login AND", "syntax error"),
    ("(login OR redirect", "syntax error"),
    ("NOT", "syntax error"),
])
def test_search_malformed_fts5_query_is_an_error_describing_the_syntax_issue(
        service: Service, query: str, sqlite_says: str) -> None:
    bash(service, "login redirect check", T0)
    with pytest.raises(QuerySyntaxError) as err:
        service.search(query)
    assert err.value.message.startswith("invalid search query: ")
    assert sqlite_says in err.value.message
    assert isinstance(err.value, InvalidArgument)
    assert (err.value.exit_code, err.value.mcp_code, err.value.kind) == (2, -32602, "query_syntax")


@pytest.mark.parametrize("scope", ["observations", "prompts", "sessions", "memories", "all"])
def test_search_malformed_fts5_query_is_an_error_in_every_scope(service: Service, scope: str) -> None:
    with pytest.raises(QuerySyntaxError, match="unterminated string"):
        service.search('"unbalanced', scope=scope)


def test_search_no_results_is_an_empty_array(service: Service) -> None:
    bash(service, "cargo build", T0)
    result = service.search("nonexistentword")
    assert result.hits == []
    assert result.to_list() == []
    assert service.search('"exact phrase nowhere"').to_list() == []


def test_get_observations_empty_ids_array_is_an_error(service: Service) -> None:
    for empty in ([], ()):
        with pytest.raises(InvalidArgument) as err:
            service.get_observations(empty)
        assert err.value.message == "ids array must not be empty"
        assert err.value.exit_code == 2


def test_get_observations_all_ids_missing_is_an_empty_array(service: Service) -> None:
    oid = bash(service, "make", T0)
    service.purge(ids=[oid], confirm=True)  # deleted by retention
    assert service.get_observations([oid, oid + 1, 4242]) == []


def test_get_observations_some_ids_missing_is_a_partial_array(service: Service) -> None:
    a = bash(service, "make a", T0)
    b = bash(service, "make b", T0 + 1)
    service.purge(ids=[a], confirm=True)
    got = service.get_observations([a, b, 777])
    assert [o.id for o in got] == [b]
    assert got[0].content == "make b"


def test_timeline_anchor_id_does_not_exist_is_not_found(service: Service) -> None:
    bash(service, "make", T0)
    with pytest.raises(NotFound) as err:
        service.timeline(999)
    assert err.value.message == "anchor observation not found"
    assert (err.value.exit_code, err.value.mcp_code) == (10, -32001)


def test_timeline_anchor_without_surrounding_context_has_empty_before_and_after(service: Service) -> None:
    bash(service, "other session", T0, session_id="s0")
    oid = bash(service, "lonely", T0 + 1, session_id="s1")
    bash(service, "other session later", T0 + 2, session_id="s2")
    out = service.timeline(oid)
    assert out["anchor"]["id"] == oid
    assert out["anchor"]["content"] == "lonely"
    assert (out["before"], out["after"]) == ([], [])


def test_recent_context_no_observations_for_project_is_an_empty_array(service: Service) -> None:
    assert service.recent_context(project="demo") == []
    assert service.recent_context() == []


def test_recent_context_no_observations_for_project_is_empty_even_when_others_have_some(service: Service) -> None:
    bash(service, "make build", T0)  # recorded in the test cwd's project
    assert service.recent_context() != []
    assert service.recent_context(project="never-recorded") == []


def test_session_trace_session_id_does_not_exist_is_not_found(service: Service) -> None:
    bash(service, "make", T0, session_id="real")
    with pytest.raises(NotFound) as err:
        service.session_trace("d4f8a2b1-missing")
    assert err.value.message == "session not found: d4f8a2b1-missing"
    assert (err.value.exit_code, err.value.mcp_code) == (10, -32001)


def test_session_trace_session_exists_but_no_prompts_in_window_is_empty_prompts(service: Service) -> None:
    record(service, "UserPromptSubmit", now=T0, session_id="s1", prompt="do it")
    bash(service, "make", T0 + 1)
    out = service.session_trace("s1", before=T0 - 100)
    assert out["session_id"] == "s1"
    assert out["prompts"] == []


def test_file_history_file_path_not_found_is_empty_sessions(service: Service) -> None:
    record(service, "PostToolUse", now=T0, tool_name="Read", tool_input={"file_path": "/w/real.py"})
    assert service.file_history("/w/never-touched.py") == {"file_path": "/w/never-touched.py", "sessions": []}


def test_database_error_is_a_storage_error_with_the_sqlite_message(nmem_home: Path) -> None:
    nmem_home.mkdir(parents=True)
    (nmem_home / "nmem.db").write_bytes(b"this is not a database" * 100)
    with pytest.raises(StorageError) as err:
        Service.open(load_settings())
    assert "file is not a database" in err.value.message
    assert (err.value.exit_code, err.value.mcp_code) == (4, -32603)
    assert isinstance(err.value, NmemError)
