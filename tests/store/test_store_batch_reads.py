"""The context block's batch reads give what their one-session forms give, session by session."""

from __future__ import annotations

from conftest import record
from nmem.service.api import Service

T0 = 1_790_000_000


def test_session_tails_and_last_prompts_match_one_session_reads(service: Service) -> None:
    store = service.store
    for n, sid in enumerate(("s-a", "s-b", "s-c")):
        at = T0 + 1000 * n
        record(service, "SessionStart", now=at, session_id=sid, source="startup")
        record(service, "UserPromptSubmit", now=at + 1, session_id=sid, prompt=f"task {sid}")
        for i in range(4 + n):
            record(service, "PostToolUse", now=at + 2 + i, session_id=sid, tool_name="Bash",
                   tool_input={"command": f"echo {sid} {i}"}, tool_response={"stdout": "ok", "exit_code": 0})
        if sid != "s-c":  # s-c never closed: no reply
            record(service, "Stop", now=at + 50, session_id=sid, last_assistant_message=f"done with {sid}")
    ids = ["s-a", "s-b", "s-c", "s-none"]
    tails = store.session_tails(ids, 3)
    for sid in ids:
        assert [o.id for o in tails.get(sid, [])] == [o.id for o in store.session_tail(sid, 3)], sid
    assert "s-none" not in tails and all(len(rows) == 3 for rows in tails.values())
    last = store.last_prompts(ids, "agent")
    for sid in ids:
        one = store.last_prompt(sid, "agent")
        assert (last[sid].id if sid in last else None) == (one.id if one else None), sid
    assert set(last) == {"s-a", "s-b"} and last["s-a"].content == "done with s-a"
    assert store.session_tails([], 3) == {} and store.last_prompts([], "agent") == {}


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
