"""The batch reads behind the context block and search (`get_sessions`, `session_tails`,
`last_prompts`) checked against plain SQL reads, session by session; their one-session forms
are thin calls of them, so they are checked too."""

from __future__ import annotations

import pytest

from conftest import record
from nmem.service.api import Service
from store_engines import sql_rows

T0 = 1_790_000_000


def seed(service: Service, sessions: list[str]) -> None:
    for n, sid in enumerate(sessions):
        at = T0 + 1000 * n
        record(service, "SessionStart", now=at, session_id=sid, source="startup")
        record(service, "UserPromptSubmit", now=at + 1, session_id=sid, prompt=f"task {sid}")
        for i in range(4 + n % 3):
            record(service, "PostToolUse", now=at + 2 + i, session_id=sid, tool_name="Bash",
                   tool_input={"command": f"echo {sid} {i}"}, tool_response={"stdout": "ok", "exit_code": 0})
        if n % 3 != 2:  # every third never closed: no reply
            record(service, "Stop", now=at + 50, session_id=sid, last_assistant_message=f"done with {sid}")


def test_batch_reads_give_each_sessions_rows_as_plain_sql_reads_them(service: Service,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    store = service.store
    monkeypatch.setattr(store.dialect, "keys_per_statement", 2)  # compound statements, the last one partly full
    sessions = ["s-a", "s-b", "s-c", "s-d", "s-e"]
    seed(service, sessions)
    ids = [*sessions, "s-none", "s-a"]
    tails = store.session_tails(ids, 3)
    last = store.last_prompts(ids, "agent")
    for sid in sessions:
        newest = sql_rows(store, "SELECT id FROM observations WHERE session_id = ? ORDER BY timestamp DESC, id DESC "
                                 "LIMIT 3", sid)
        assert [o.id for o in tails[sid]] == [r[0] for r in reversed(newest)], sid
        assert [o.id for o in store.session_tail(sid, 2)] == [r[0] for r in reversed(newest[:2])], sid
        reply = sql_rows(store, "SELECT max(id) FROM prompts WHERE session_id = ? AND source = 'agent'", sid)[0][0]
        assert (last[sid].id if sid in last else None) == reply, sid
        one = store.last_prompt(sid, "agent")
        assert (one.id if one else None) == reply and (one is None or one.project == last[sid].project)
    assert set(tails) == set(sessions) and set(last) == {"s-a", "s-b", "s-d", "s-e"}
    assert last["s-a"].content == "done with s-a"
    assert store.session_tail("s-none", 3) == [] and store.last_prompt("s-c", "agent") is None
    assert store.session_tails([], 3) == {} and store.last_prompts([], "agent") == {}


def test_get_session_is_get_sessions_of_one(service: Service) -> None:
    store = service.store
    seed(service, ["s-a", "s-b"])
    both = store.get_sessions(["s-b", "s-a", "s-missing", "s-a"])
    assert sorted(both) == ["s-a", "s-b"] and both["s-a"].started_at == T0
    assert store.get_session("s-a") == both["s-a"] and store.get_session("s-missing") is None
    assert store.get_sessions([]) == {}


def test_session_tails_of_some_types_keep_the_window_counted_over_every_type(service: Service) -> None:
    store = service.store
    sid = "s-types"
    record(service, "SessionStart", now=T0, session_id=sid, source="startup")
    for i in range(3):
        record(service, "PostToolUse", now=T0 + 1 + 2 * i, session_id=sid, tool_name="Bash",
               tool_input={"command": f"make step-{i}"}, tool_response={"stdout": "ok", "exit_code": 0})
        record(service, "PostToolUse", now=T0 + 2 + 2 * i, session_id=sid, tool_name="Read",
               tool_input={"file_path": f"/tmp/p/f{i}.py"}, tool_response={"type": "text"})
    window = store.session_tail(sid, 4)
    types = {o.obs_type for o in window}
    assert "command" in types and len(types) > 1, "the test needs a window of several types"
    only = store.session_tails([sid], 4, ("command",))[sid]
    assert [o.id for o in only] == [o.id for o in window if o.obs_type == "command"]


def test_sessions_prompts_gives_each_sessions_window_as_session_prompts_does(service: Service) -> None:
    store = service.store
    for n, sid in enumerate(("s-a", "s-b")):
        at = T0 + 1000 * n
        record(service, "SessionStart", now=at, session_id=sid, source="startup")
        for i in range(5):
            record(service, "UserPromptSubmit", now=at + 10 * (i + 1), session_id=sid, prompt=f"{sid} step {i}")
            record(service, "Stop", now=at + 10 * (i + 1) + 5, session_id=sid, last_assistant_message=f"{sid} did {i}")
    windows = [("s-a", T0 + 36, T0 + 10), ("s-b", T0 + 1000 + 60, T0 + 1000 + 20), ("s-none", T0 + 9999, 0)]
    batched = store.sessions_prompts(windows)
    for sid, before, after in windows:
        one = store.session_prompts(sid, before, after)
        assert [p.id for p in batched[sid]] == [p.id for p in one], sid
    assert [p.content for p in batched["s-a"]] == ["s-a did 0", "s-a step 1", "s-a did 1", "s-a step 2", "s-a did 2"]
    assert batched["s-none"] == [] and store.sessions_prompts([]) == {}
    users = store.sessions_prompts(windows, source="user")
    for sid, _, _ in windows:
        assert [p.id for p in users[sid]] == [p.id for p in batched[sid] if p.source == "user"], sid
    assert [p.content for p in users["s-a"]] == ["s-a step 1", "s-a step 2"]


def test_prompt_time_is_the_stored_prompts_timestamp(service: Service) -> None:
    """What a Stop reads of its turn's prompt (the trail's read, not the search concern's `get_prompts`)."""
    store = service.store
    seed(service, ["s-a", "s-b"])
    for sid in ("s-a", "s-b"):
        asked = store.latest_prompt_id(sid)
        assert asked is not None
        assert store.prompt_time(asked) == store.get_prompts([asked])[0].timestamp
        assert store.prompt_time(asked) == sql_rows(store, "SELECT timestamp FROM prompts WHERE id = ?", asked)[0][0]
    unknown = sql_rows(store, "SELECT max(id) FROM prompts")[0][0] + 1
    assert store.prompt_time(unknown) is None


def test_session_origins_are_each_sessions_agent_and_root_in_one_read(service: Service) -> None:
    store = service.store
    seed(service, ["s-a", "s-b"])
    store.ensure_session("s-r", "shop", T0, root="/code/shop", agent="codex")
    store.ensure_session("s-n", "shop", T0, agent=None)
    ids = ["s-a", "s-b", "s-r", "s-n", "s-none", "s-r"]
    origins = store.session_origins(ids)
    sessions, roots = store.get_sessions(ids), store.session_roots(ids)
    assert set(origins) == set(sessions) == {"s-a", "s-b", "s-r", "s-n"}, "an unknown id is left out"
    for sid, (agent, root) in origins.items():
        assert agent == sessions[sid].agent and root == roots.get(sid), sid
    assert origins["s-r"] == ("codex", "/code/shop") and origins["s-n"] == (None, None)
    assert store.session_origins([]) == {}
