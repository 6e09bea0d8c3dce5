"""The change feed's reads and activity by day (nmem.store.sql.changes), on both engines."""

from __future__ import annotations

from nmem.store import NewObservation
from nmem.store.protocol import Store

DAY = 86_400
T0 = 1_790_000_000 - 1_790_000_000 % DAY   # a UTC midnight: 2026-09-21


def test_activity_counts_each_utc_day_per_table_and_project(store: Store) -> None:
    with store.transaction():
        store.ensure_session("s1", "api", T0)
        store.ensure_session("s2", "web", T0)
        for at, session, project in ((T0 + 10, "s1", "api"), (T0 + DAY - 1, "s1", "api"), (T0 + DAY, "s2", "web"),
                                     (T0 + 2 * DAY + 5, "s1", "api")):
            store.add_observation(NewObservation(session, project, at, "command", "PostToolUse", "ran it", "Bash"))
        store.add_prompt("s2", T0 + DAY + 60, "user", "and now the web side")
    assert store.activity_by_day(T0, None) == [("2026-09-21", 2, 0), ("2026-09-22", 1, 1), ("2026-09-23", 1, 0)]
    assert store.activity_by_day(T0 + DAY, "web") == [("2026-09-22", 1, 1)]
    assert store.activity_by_day(T0 + 3 * DAY, None) == []


def test_the_feed_reads_what_came_after_a_cursor(store: Store) -> None:
    with store.transaction():
        store.ensure_session("s1", "api", T0)
        first = store.add_observation(NewObservation("s1", "api", T0, "command", "PostToolUse", "one", "Bash"))
        second = store.add_observation(NewObservation("s1", "api", T0 + 1, "command", "PostToolUse", "two", "Bash"))
        prompt = store.add_prompt("s1", T0 + 2, "user", "three")
    heads = store.change_heads()
    assert heads[:2] == (second, prompt)
    assert [o.id for o in store.observations_since(first, 10)] == [second]
    assert [(p.id, p.project) for p in store.prompts_since(0, 10)] == [(prompt, "api")]
