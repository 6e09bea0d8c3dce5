"""Store reads behind navigation: session prefixes and listings, recorded paths, purge selections."""

from __future__ import annotations

from nmem.service.api import Service
from nmem.store import NewObservation, SearchFilters

T0 = 1_790_000_000


def add(service: Service, session: str, project: str, at: int, obs_type: str = "file_read",
        path: str | None = None, content: str = "x") -> int:
    store = service.store
    with store.transaction():
        store.ensure_session(session, project, at)
        return store.add_observation(NewObservation(session, project, at, obs_type, "PostToolUse",
                                                    content if path is None else path, None, path))


def test_sessions_by_prefix_is_a_bounded_key_range(service: Service) -> None:
    for i, sid in enumerate(("ab", "abc", "abd", "b", "a%", "a_c")):
        add(service, sid, "demo", T0 + i)
    store = service.store
    assert sorted(s.id for s in store.sessions_by_prefix("ab", 10)) == ["ab", "abc", "abd"]
    assert [s.id for s in store.sessions_by_prefix("a%", 10)] == ["a%"]  # no LIKE wildcards
    assert [s.id for s in store.sessions_by_prefix("a_", 10)] == ["a_c"]
    assert [s.id for s in store.sessions_by_prefix("ab", 2)] == ["abd", "abc"]  # newest first, limited
    assert store.sessions_by_prefix("z", 10) == []


def test_list_sessions_counts_user_prompts_and_actions_not_lifecycle_events(service: Service) -> None:
    store = service.store
    add(service, "s1", "demo", T0, "session_start")
    add(service, "s1", "demo", T0 + 1, "command")
    add(service, "s1", "demo", T0 + 2, "session_compact")
    with store.transaction():
        store.add_prompt("s1", T0 + 1, "user", "first ask")
        store.add_prompt("s1", T0 + 3, "agent", "thinking")
        store.ensure_session("empty", "demo", T0 + 10)
    listed = store.list_sessions("demo", None, 10)
    assert [(r.session.id, r.prompts, r.actions, r.first_prompt) for r in listed] == [
        ("empty", 0, 0, None), ("s1", 1, 1, "first ask")]
    assert [r.session.id for r in store.list_sessions("demo", None, 10, active=True)] == ["s1"]
    assert store.list_sessions("other", None, 10) == []


def test_recorded_paths_match_whole_components_per_project(service: Service) -> None:
    add(service, "s1", "demo", T0, path="/repo/src/auth.py")
    add(service, "s1", "demo", T0 + 1, path="/repo/src/oauth.py")
    add(service, "s1", "demo", T0 + 2, path="/repo/src/auth.py")
    add(service, "s2", "other", T0 + 3, path="/else/auth.py")
    store = service.store
    assert store.recorded_paths("auth.py", None, 10) == ["/else/auth.py", "/repo/src/auth.py"]
    assert store.recorded_paths("auth.py", "demo", 10) == ["/repo/src/auth.py"]
    assert store.recorded_paths("src/auth.py", None, 10) == ["/repo/src/auth.py"]
    assert store.recorded_paths("/repo/src/auth.py", None, 10) == ["/repo/src/auth.py"]
    assert store.recorded_paths("/repo/src/auth.py", "other", 10) == []
    assert store.recorded_paths("/src/auth.py", None, 10) == []  # absolute: only itself
    assert store.recorded_paths("uth.py", None, 10) == []


def test_purge_matching_takes_what_observation_ids_selects_and_keeps_pins(service: Service) -> None:
    ids = [add(service, "s1", "demo", T0 + i, "command", content=f"make target{i % 2}") for i in range(6)]
    store = service.store
    store.set_observation_pin(ids[2], True)
    selected = store.observation_ids('"target0"', SearchFilters())
    assert selected == [ids[0], ids[4]]
    assert store.observation_ids('"target0"', SearchFilters(), unpinned=False) == [ids[0], ids[2], ids[4]]
    assert store.purge_observations_matching('"target0"', SearchFilters()) == 2
    assert [o.id for o in store.get_observations(ids)] == [ids[1], ids[2], ids[3], ids[5]]


def test_neighbours_are_the_nearest_of_the_session_that_pass_the_filters(service: Service) -> None:
    store = service.store
    with store.transaction():  # one transaction: `add`'s own nest in it
        store.ensure_session("s1", "demo", T0, agent="codex")
        store.ensure_session("s2", "demo", T0, agent="gemini")
        first = add(service, "s1", "demo", T0, "file_read", "/repo/src/auth.py")
        for i in range(130):  # more commands between than any fixed window would read
            add(service, "s1", "demo", T0 + 1 + i, "command", content=f"pytest #{i}")
            add(service, "s2", "demo", T0 + 1 + i, "file_read", "/repo/src/auth.py")
        anchor_id = add(service, "s1", "demo", T0 + 200, "file_edit", "/repo/src/auth.py")
        last = add(service, "s1", "demo", T0 + 201, "file_read", "/repo/src/db.py")
    (anchor,) = store.get_observations([anchor_id])

    def around(**filters: object) -> tuple[list[int], list[int]]:
        before, after = store.neighbours(anchor, 3, 3, SearchFilters(**filters))  # type: ignore[arg-type]
        return [o.id for o in before], [o.id for o in after]

    before, after = store.neighbours(anchor, 2, 3)
    assert [o.timestamp for o in before] == [T0 + 129, T0 + 130] and [o.id for o in after] == [last]
    assert around(obs_types=("file_read",)) == ([first], [last])
    assert around(files=("auth.py",)) == ([first], [])
    assert around(files=("/repo/src/db.py",), obs_types=("file_read",)) == ([], [last])
    assert around(obs_types=("file_read",), date_start=T0 + 1) == ([], [last])
    assert around(obs_types=("file_read",), date_end=T0 + 200) == ([first], [])
    assert around(obs_types=("file_read",), agents=("codex",)) == ([first], [last])
    assert around(agents=("gemini",)) == ([], [])
    assert around(tags=("auth",)) == ([], []) and around(namespaces=("decisions",)) == ([], [])
    assert around(obs_types=("file_read",), session_id="s2") == ([first], [last])  # the anchor's session, always
