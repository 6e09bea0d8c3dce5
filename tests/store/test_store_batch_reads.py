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
