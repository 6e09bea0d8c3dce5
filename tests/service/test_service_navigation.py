"""Service API: get_observations, timeline, session_trace, file_history, recent_context."""

from __future__ import annotations

import math
from typing import Any

import pytest

from conftest import Clock, record
from nmem.errors import InvalidArgument, NotFound
from nmem.service.api import Service
from nmem.store import NewObservation

T0 = 1_790_000_000
DAY = 86400


def bash(service: Service, cmd: str, at: int, session_id: str = "s1", cwd: str = "/w/demo") -> int:
    out = record(service, "PostToolUse", now=at, session_id=session_id, cwd=cwd, tool_name="Bash",
                 tool_input={"command": cmd}, tool_response={"exit_code": 0})
    return int(out.observation_id)


def touch(service: Service, tool: str, path: str, at: int, session_id: str = "s1", cwd: str = "/w/demo") -> int:
    tool_input: dict[str, Any] = {"file_path": path}
    if tool == "Edit":
        tool_input.update(old_string=f"old {at}", new_string=f"new {at}")
    out = record(service, "PostToolUse", now=at, session_id=session_id, cwd=cwd, tool_name=tool,
                 tool_input=tool_input)
    return int(out.observation_id)


def prompt(service: Service, text: str, at: int, session_id: str = "s1", cwd: str = "/w/demo") -> int:
    return int(record(service, "UserPromptSubmit", now=at, session_id=session_id, cwd=cwd, prompt=text).prompt_id)


# -- get_observations ----------------------------------------------------------------------------------


def test_get_observations_keeps_input_order_and_omits_missing(service: Service) -> None:
    a, b, c = (bash(service, f"step {i}", T0 + i) for i in range(3))
    got = service.get_observations([c, 999, a, b])
    assert [o.id for o in got] == [c, a, b]
    assert [o.content for o in got] == ["step 2", "step 0", "step 1"]


def test_get_observations_returns_full_records(service: Service) -> None:
    p = prompt(service, "why", T0)
    oid = bash(service, "make build", T0 + 1)
    o = service.get_observations([str(oid)])[0]
    assert o.to_dict() == {
        "id": oid, "session_id": "s1", "project": "demo", "prompt_id": p, "timestamp": T0 + 1,
        "obs_type": "command", "source_event": "PostToolUse", "tool_name": "Bash", "file_path": None,
        "content": "make build", "metadata": {"exit_code": 0}, "is_pinned": False,
        "urn": f"nmem://project:demo/observations/{oid}", "ref": str(oid),
    }


def test_get_observations_accepts_exactly_50_ids(service: Service) -> None:
    oid = bash(service, "x", T0)
    assert [o.id for o in service.get_observations([oid, *range(10_000, 10_049)])] == [oid]


def test_get_observations_rejects_51_ids(service: Service) -> None:
    with pytest.raises(InvalidArgument, match=r"at most 50 ids per request \(got 51\)"):
        service.get_observations(list(range(1, 52)))


def test_get_observations_rejects_non_integer_ids(service: Service) -> None:
    with pytest.raises(InvalidArgument, match="id must be an integer, got 'abc'"):
        service.get_observations(["abc"])


# -- timeline ----------------------------------------------------------------------------------------


@pytest.fixture
def two_sessions(service: Service) -> dict[str, list[int]]:
    """Ten observations in s1 interleaved with five in s2 (ids alternate between sessions)."""
    s1: list[int] = []
    s2: list[int] = []
    for i in range(10):
        s1.append(bash(service, f"alpha step {i}", T0 + 10 * i, session_id="s1"))
        if i % 2 == 0:
            s2.append(bash(service, f"beta step {i}", T0 + 10 * i + 1, session_id="s2", cwd="/w/other"))
    return {"s1": s1, "s2": s2}


def test_timeline_around_an_anchor_stays_in_the_session(service: Service, two_sessions: dict[str, list[int]]) -> None:
    s1 = two_sessions["s1"]
    out = service.timeline(s1[5], before=2, after=3)
    assert out["anchor"]["id"] == s1[5]
    assert [o["id"] for o in out["before"]] == s1[3:5]
    assert [o["id"] for o in out["after"]] == s1[6:9]
    assert {o["session_id"] for o in out["before"] + out["after"]} == {"s1"}
    assert out["before"][0]["content"] == "alpha step 3"  # full records


def test_timeline_defaults_to_five_each_side(service: Service, two_sessions: dict[str, list[int]]) -> None:
    s1 = two_sessions["s1"]
    out = service.timeline(s1[5])
    assert [o["id"] for o in out["before"]] == s1[0:5]
    assert [o["id"] for o in out["after"]] == s1[6:10]


def test_timeline_is_shorter_near_session_boundaries(service: Service, two_sessions: dict[str, list[int]]) -> None:
    s1 = two_sessions["s1"]
    first = service.timeline(s1[0], before=3, after=2)
    assert (first["before"], [o["id"] for o in first["after"]]) == ([], s1[1:3])
    last = service.timeline(s1[9], before=2, after=3)
    assert ([o["id"] for o in last["before"]], last["after"]) == (s1[7:9], [])


def test_timeline_by_query_anchors_on_the_best_match(service: Service, two_sessions: dict[str, list[int]]) -> None:
    s2 = two_sessions["s2"]
    out = service.timeline(query='"beta step 4"', before=1, after=1)
    assert out["anchor"]["id"] == s2[2]
    assert [o["id"] for o in out["before"]] == [s2[1]]
    assert [o["id"] for o in out["after"]] == [s2[3]]


def test_timeline_by_query_with_project_filter(service: Service, two_sessions: dict[str, list[int]]) -> None:
    out = service.timeline(query="step", project="other", before=0, after=0)
    assert out["anchor"]["session_id"] == "s2"


def test_timeline_by_query_without_match_is_not_found(service: Service, two_sessions: dict[str, list[int]]) -> None:
    with pytest.raises(NotFound, match="no observation matches 'gamma'"):
        service.timeline(query="gamma")


def test_timeline_needs_an_anchor_or_a_query(service: Service) -> None:
    with pytest.raises(InvalidArgument, match="timeline needs an anchor id or a query"):
        service.timeline()


def test_timeline_clamps_negative_windows_to_zero(service: Service, two_sessions: dict[str, list[int]]) -> None:
    out = service.timeline(two_sessions["s1"][4], before=-3, after=0)
    assert (out["before"], out["after"]) == ([], [])


# -- session_trace -------------------------------------------------------------------------------------


@pytest.fixture
def traced(service: Service) -> dict[str, int]:
    ids: dict[str, int] = {}
    ids["start"] = record(service, "SessionStart", now=T0, session_id="s1", cwd="/w/demo",
                          source="startup").observation_id
    ids["p1"] = prompt(service, "Fix the login bug", T0 + 10)
    ids["read"] = touch(service, "Read", "/w/demo/src/auth.py", T0 + 20)
    ids["edit"] = touch(service, "Edit", "/w/demo/src/auth.py", T0 + 30)
    ids["p2"] = prompt(service, "now run the tests", T0 + 40)
    ids["test"] = bash(service, "pytest -q", T0 + 50)
    ids["p3"] = prompt(service, "thanks", T0 + 60)
    return ids


def test_session_trace_lists_prompts_with_their_observations(service: Service, traced: dict[str, int]) -> None:
    out = service.session_trace("s1")
    assert (out["session_id"], out["project"], out["started_at"], out["ended_at"]) == ("s1", "demo", T0, None)
    assert [(p["prompt_id"], p["source"], p["observation_count"]) for p in out["prompts"]] == [
        (None, "system", 1), (traced["p1"], "user", 2), (traced["p2"], "user", 1), (traced["p3"], "user", 0)]
    p1 = out["prompts"][1]
    assert (p1["timestamp"], p1["content"]) == (T0 + 10, "Fix the login bug")
    assert p1["observations"] == [
        {"id": traced["read"], "timestamp": T0 + 20, "obs_type": "file_read", "file_path": "/w/demo/src/auth.py",
         "content_preview": "src/auth.py", "is_pinned": False, "rel_path": "src/auth.py"},
        {"id": traced["edit"], "timestamp": T0 + 30, "obs_type": "file_edit", "file_path": "/w/demo/src/auth.py",
         "content_preview": "src/auth.py", "is_pinned": False, "rel_path": "src/auth.py"},
    ]
    assert out["prompts"][3]["observations"] == []


def test_session_trace_orphans_are_a_system_entry(service: Service, traced: dict[str, int]) -> None:
    orphan = service.session_trace("s1")["prompts"][0]
    assert (orphan["prompt_id"], orphan["source"]) == (None, "system")
    assert [o["id"] for o in orphan["observations"]] == [traced["start"]]
    assert orphan["observations"][0]["obs_type"] == "session_start"


def test_session_trace_after_window(service: Service, traced: dict[str, int]) -> None:
    out = service.session_trace("s1", after=T0 + 25)
    prompts = {p["prompt_id"]: p for p in out["prompts"]}
    # p1 (T0+10) is outside the window, but its in-window edit still belongs to the trace
    assert traced["p1"] not in {p["prompt_id"] for p in out["prompts"] if p["source"] == "user"}
    assert [o["id"] for p in out["prompts"] for o in p["observations"]] == [traced["edit"], traced["test"]]
    assert prompts[traced["p2"]]["observation_count"] == 1
    assert None not in prompts  # the session_start observation is before the window


def test_session_trace_before_window_keeps_a_prompt_without_later_observations(
        service: Service, traced: dict[str, int]) -> None:
    out = service.session_trace("s1", before=T0 + 25)
    assert [(p["prompt_id"], [o["id"] for o in p["observations"]]) for p in out["prompts"]] == [
        (None, [traced["start"]]), (traced["p1"], [traced["read"]])]


def test_session_trace_empty_window_gives_empty_prompts(service: Service, traced: dict[str, int]) -> None:
    out = service.session_trace("s1", after=T0 + 1000)
    assert out["prompts"] == []
    assert out["session_id"] == "s1"


def test_session_trace_after_stop_has_summary_and_agent_prompt(service: Service, traced: dict[str, int]) -> None:
    record(service, "Stop", now=T0 + 70, session_id="s1", cwd="/w/demo", last_assistant_message="All tests pass.")
    out = service.session_trace("s1")
    assert out["ended_at"] == T0 + 70
    assert out["summary"]["intent"] == "Fix the login bug"
    assert (out["prompts"][-1]["source"], out["prompts"][-1]["content"]) == ("agent", "All tests pass.")


def test_session_trace_unknown_session(service: Service) -> None:
    with pytest.raises(NotFound, match=r"^session not found: nope$"):
        service.session_trace("nope")


# -- file_history ----------------------------------------------------------------------------------------


@pytest.fixture
def file_trail(service: Service) -> dict[str, int]:
    ids: dict[str, int] = {}
    prompt(service, "Fix the login bug", T0, session_id="old")
    ids["old_read"] = touch(service, "Read", "/w/demo/src/auth.py", T0 + 1, session_id="old")
    ids["old_edit"] = touch(service, "Edit", "/w/demo/src/auth.py", T0 + 2, session_id="old")
    touch(service, "Edit", "/w/demo/src/other.py", T0 + 3, session_id="old")
    record(service, "Stop", now=T0 + 4, session_id="old", cwd="/w/demo",
           last_assistant_message="I fixed it, let me also tidy auth.py")
    ids["after_stop_edit"] = touch(service, "Edit", "/w/demo/src/auth.py", T0 + 5, session_id="old")
    store = service.store
    with store.transaction():
        agent_prompt = store.add_prompt("old", T0 + 6, "agent", "I will refactor auth.py")
        ids["agent_edit"] = store.add_observation(NewObservation(
            "old", "demo", T0 + 7, "file_edit", "PostToolUse", "/w/demo/src/auth.py", "Edit",
            "/w/demo/src/auth.py", prompt_id=agent_prompt))
    prompt(service, "add rate limiting", T0 + DAY, session_id="new")
    ids["new_edit"] = touch(service, "Edit", "/w/demo/src/auth.py", T0 + DAY + 1, session_id="new")
    return ids


def test_file_history_groups_touches_by_session_newest_first(service: Service, file_trail: dict[str, int]) -> None:
    out = service.file_history("/w/demo/src/auth.py")
    assert out["file_path"] == "/w/demo/src/auth.py"
    assert [s["session_id"] for s in out["sessions"]] == ["new", "old"]
    new, old = out["sessions"]
    assert (new["project"], new["started_at"]) == ("demo", T0 + DAY)
    assert [t["observation_id"] for t in new["touches"]] == [file_trail["new_edit"]]
    assert [t["observation_id"] for t in old["touches"]] == [
        file_trail["agent_edit"], file_trail["after_stop_edit"], file_trail["old_edit"], file_trail["old_read"]]
    touch0 = new["touches"][0]
    assert (touch0["obs_type"], touch0["timestamp"], touch0["content_preview"], touch0["is_pinned"]) == (
        "file_edit", T0 + DAY + 1, "src/auth.py", False), "previews are relative to the project root"
    assert new["rel_path"] == "src/auth.py" and out["file_path"] == "/w/demo/src/auth.py"


def test_file_history_summary_intent_comes_from_the_session_summary(service: Service,
                                                                    file_trail: dict[str, int]) -> None:
    new, old = service.file_history("/w/demo/src/auth.py")["sessions"]
    assert old["summary_intent"] == "Fix the login bug"
    assert new["summary_intent"] is None  # never closed, no summary yet


def test_file_history_prompt_content_only_from_user_prompts(service: Service, file_trail: dict[str, int]) -> None:
    old = service.file_history("/w/demo/src/auth.py")["sessions"][1]
    by_id = {t["observation_id"]: t["prompt_content"] for t in old["touches"]}
    assert by_id[file_trail["old_edit"]] == "Fix the login bug"
    # after Stop stored the agent's message, observations still point at the user's directive
    assert by_id[file_trail["after_stop_edit"]] == "Fix the login bug"
    assert by_id[file_trail["agent_edit"]] is None  # linked to an agent prompt: no human intent


def test_file_history_time_window(service: Service, file_trail: dict[str, int]) -> None:
    out = service.file_history("/w/demo/src/auth.py", after=T0 + 1, before=T0 + DAY)
    assert [t["observation_id"] for s in out["sessions"] for t in s["touches"]] == [
        file_trail["agent_edit"], file_trail["after_stop_edit"], file_trail["old_edit"]]


def test_file_history_relative_path_resolves_against_cwd(service: Service, file_trail: dict[str, int]) -> None:
    out = service.file_history("src/auth.py", cwd="/w/demo")
    assert out["file_path"] == "/w/demo/src/auth.py"
    assert len(out["sessions"]) == 2


def test_file_history_limit_is_capped_at_50(service: Service) -> None:
    store = service.store
    with store.transaction():
        store.ensure_session("bulk", "demo", T0)
        for i in range(60):
            store.add_observation(NewObservation("bulk", "demo", T0 + i, "file_edit", "PostToolUse",
                                                 "/w/f.py", "Edit", "/w/f.py"))
    assert sum(len(s["touches"]) for s in service.file_history("/w/f.py", limit=500)["sessions"]) == 50
    assert sum(len(s["touches"]) for s in service.file_history("/w/f.py")["sessions"]) == 10
    assert sum(len(s["touches"]) for s in service.file_history("/w/f.py", limit=3)["sessions"]) == 3


def test_file_history_unknown_file_is_empty_sessions(service: Service, file_trail: dict[str, int]) -> None:
    assert service.file_history("/nowhere/x.py") == {"file_path": "/nowhere/x.py", "sessions": []}


# -- recent_context ---------------------------------------------------------------------------------------


def add(service: Service, project: str, obs_type: str, at: int, content: str, file_path: str | None = None) -> int:
    store = service.store
    with store.transaction():
        store.ensure_session(f"s-{project}", project, at)
        return store.add_observation(NewObservation(f"s-{project}", project, at, obs_type, "PostToolUse",
                                                    content, None, file_path))


def decay(age_days: float) -> float:
    return math.exp(-math.log(2) * age_days / 7.0)


def test_recent_context_scores_with_project(service: Service, clock: Clock) -> None:
    clock.now = T0 + 14 * DAY
    edit_now = add(service, "demo", "file_edit", T0 + 14 * DAY, "edit", "/w/a.py")
    cmd_week = add(service, "other", "command", T0 + 7 * DAY, "cmd")
    compact = add(service, "demo", "session_compact", T0, "compact")
    mcp = add(service, "demo", "mcp_call", T0 + 14 * DAY, "mcp")
    read_other = add(service, "other", "file_read", T0, "read", "/w/b.py")
    got = {r["id"]: r["score"] for r in service.recent_context(project="demo")}
    assert got[edit_now] == pytest.approx(1.0 * 0.5 + 1.0 * 0.3 + 1.0 * 0.2, abs=1e-4)
    assert got[cmd_week] == pytest.approx(0.5 * 0.5 + 0.67 * 0.3 + 0.3 * 0.2, abs=1e-4)
    assert got[compact] == pytest.approx(0.25 * 0.5 + 0.5 * 0.3 + 1.0 * 0.2, abs=1e-4)
    assert got[mcp] == pytest.approx(1.0 * 0.5 + 0.33 * 0.3 + 1.0 * 0.2, abs=1e-4)
    assert got[read_other] == pytest.approx(0.25 * 0.5 + 0.17 * 0.3 + 0.3 * 0.2, abs=1e-4)


def test_recent_context_scores_without_project(service: Service, clock: Clock) -> None:
    clock.now = T0 + 21 * DAY
    old_cmd = add(service, "demo", "command", T0, "cmd")
    new_search = add(service, "other", "search", T0 + 21 * DAY - DAY // 2, "grep")
    got = {r["id"]: r["score"] for r in service.recent_context()}
    assert got[old_cmd] == pytest.approx(0.125 * 0.6 + 0.67 * 0.4, abs=1e-4)
    assert got[new_search] == pytest.approx(decay(0.5) * 0.6 + 0.17 * 0.4, abs=1e-4)


def test_recent_context_orders_by_score_and_returns_full_records(service: Service, clock: Clock) -> None:
    clock.now = T0
    read = add(service, "demo", "file_read", T0, "r", "/w/r.py")
    edit = add(service, "demo", "file_edit", T0 - DAY, "e", "/w/e.py")
    cmd = add(service, "demo", "command", T0, "c")
    out = service.recent_context(project="demo")
    assert [r["id"] for r in out] == [edit, cmd, read]
    assert {"urn", "content", "metadata", "source_event", "score"} <= set(out[0])


def test_recent_context_project_is_a_boost_not_a_filter(service: Service, clock: Clock) -> None:
    clock.now = T0
    mine = add(service, "demo", "command", T0 - DAY, "mine")
    theirs = add(service, "other", "command", T0, "theirs")
    assert [r["id"] for r in service.recent_context(project="demo")] == [mine, theirs]
    assert [r["id"] for r in service.recent_context(project="other")] == [theirs, mine]
    assert [r["id"] for r in service.recent_context()] == [theirs, mine]


def test_recent_context_dedups_file_paths_keeping_the_highest(service: Service, clock: Clock) -> None:
    clock.now = T0
    old_read = add(service, "demo", "file_read", T0 - 3 * DAY, "/w/a.py", "/w/a.py")
    edit = add(service, "demo", "file_edit", T0 - 2 * DAY, "/w/a.py", "/w/a.py")
    new_read = add(service, "demo", "file_read", T0, "/w/a.py", "/w/a.py")
    other = add(service, "demo", "file_read", T0, "/w/b.py", "/w/b.py")
    got = [r["id"] for r in service.recent_context(project="demo")]
    assert got == [edit, other]
    assert old_read not in got and new_read not in got


def test_recent_context_never_dedups_null_file_paths(service: Service, clock: Clock) -> None:
    clock.now = T0
    cmds = [add(service, "demo", "command", T0 - i, "make test") for i in range(4)]
    assert sorted(r["id"] for r in service.recent_context(project="demo")) == sorted(cmds)


def test_recent_context_limit_default_30_and_capped_at_100(service: Service, clock: Clock) -> None:
    clock.now = T0 + 200
    for i in range(120):
        add(service, "demo", "command", T0 + i, f"c{i}")
    assert len(service.recent_context()) == 30
    assert len(service.recent_context(limit=500)) == 100
    assert len(service.recent_context(limit=0)) == 1


def test_recent_context_future_timestamps_count_as_now(service: Service, clock: Clock) -> None:
    clock.now = T0
    oid = add(service, "demo", "file_edit", T0 + DAY, "future", "/w/f.py")
    assert service.recent_context()[0] == {**service.get_observations([oid])[0].to_dict(), "score": 1.0}


def test_recent_context_empty(service: Service) -> None:
    assert service.recent_context(project="demo") == []


@pytest.mark.parametrize(("obs_type", "weight"), [
    ("file_edit", 1.0), ("file_write", 1.0), ("command", 0.67), ("command_error", 0.67), ("git_commit", 0.67),
    ("session_compact", 0.5), ("mcp_call", 0.33), ("file_read", 0.17), ("search", 0.17), ("web_fetch", 0.17),
    ("session_start", 0.17),
])
def test_recent_context_type_weights(service: Service, clock: Clock, obs_type: str, weight: float) -> None:
    clock.now = T0
    add(service, "demo", obs_type, T0, "x")
    assert service.recent_context()[0]["score"] == pytest.approx(0.6 + weight * 0.4, abs=1e-4)


def test_get_observations_never_reads_a_string_of_ids_digit_by_digit(service: Service) -> None:
    for i in range(12):
        bash(service, f"cmd {i}", T0 + i)
    try:
        got = [o.id for o in service.get_observations("12")]  # type: ignore[arg-type]
    except InvalidArgument:
        got = [12]
    assert got == [12]
