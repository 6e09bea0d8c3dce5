"""What the SessionStart block reads (nmem.store.sql.context), on both engines: recent intents."""

from __future__ import annotations

import random

import pytest

import nmem.store.sql.context as sql_context
from nmem.store import NewObservation
from nmem.store.protocol import Store
from store_engines import sql_rows

T0 = 1_790_000_000
TYPES = ("command", "command_error", "file_edit", "git_commit")
PROJECTS = ("api", "web")


def intents_by_grouping(store: Store, project: str, limit: int) -> list[tuple[int, int]]:
    """(prompt id, actions) of the project's newest user prompts with actions: every prompt grouped."""
    return [(int(r[0]), int(r[1])) for r in sql_rows(
        store, "SELECT p.id, COUNT(o.id) FROM prompts p JOIN sessions s ON s.id = p.session_id "
               "JOIN observations o ON o.prompt_id = p.id WHERE s.project = ? AND p.source = 'user' "
               "GROUP BY p.id ORDER BY p.timestamp DESC, p.id DESC LIMIT ?", project, limit)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_recent_intents_match_grouping_every_prompt(store: Store, monkeypatch: pytest.MonkeyPatch,
                                                     seed: int) -> None:
    """Sessions overlap (a prompt's actions interleave with other sessions' and projects'), some
    prompts lead to nothing, some are the agent's; read in small steps so the walk has to stop early."""
    monkeypatch.setattr(sql_context, "INTENT_SCAN_BATCH", 7)
    rng = random.Random(seed)
    open_prompts: list[tuple[str, str, int]] = []
    at = T0
    with store.transaction():
        for i in range(600):
            at += rng.randint(0, 30)    # ties in time too
            if not open_prompts or rng.random() < 0.25:
                session, project = f"s{rng.randrange(12)}", PROJECTS[rng.randrange(2)]
                store.ensure_session(session, store.get_session(session).project if store.get_session(session)
                                     else project, at)
                project = store.get_session(session).project  # type: ignore[union-attr]
                source = "user" if rng.random() < 0.8 else "agent"
                prompt = store.add_prompt(session, at, source, f"prompt {i}")
                if rng.random() < 0.2:
                    continue            # a prompt that led to no action
                open_prompts = [*open_prompts[-3:], (session, project, prompt)]
            session, project, prompt = rng.choice(open_prompts)
            stamped = at - rng.randint(0, 300) if rng.random() < 0.1 else at   # a clock that stepped back
            store.add_observation(NewObservation(session, project, stamped, TYPES[i % len(TYPES)], "PostToolUse",
                                                 f"action {i}", "Bash", prompt_id=prompt))
    for project in PROJECTS:
        for limit in (1, 3, 10, 1000):
            found = [(p.id, n) for p, n in store.recent_intents(project, limit)]
            assert found == intents_by_grouping(store, project, limit), (project, limit)
    assert store.recent_intents("nowhere", 5) == []
    assert store.recent_intents("api", 0) == []




def test_recent_intents_survive_a_clock_that_stepped_back(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The newest prompt's only action is stamped before an older prompt's actions."""
    monkeypatch.setattr(sql_context, "INTENT_SCAN_BATCH", 1)
    with store.transaction():
        store.ensure_session("s1", "api", T0)
        older = store.add_prompt("s1", T0 + 60, "user", "run the tests")
        newer = store.add_prompt("s1", T0 + 100, "user", "fix the flaky one")
        for at, prompt in ((T0 + 70, older), (T0 + 55, older), (T0 + 50, newer)):
            store.add_observation(NewObservation("s1", "api", at, "command", "PostToolUse", f"at {at}", "Bash",
                                                 prompt_id=prompt))
    assert [(p.id, n) for p, n in store.recent_intents("api", 1)] == intents_by_grouping(store, "api", 1) \
        == [(newer, 1)]


def test_project_roots_are_each_projects_project_root(store: Store) -> None:
    """One read of several projects' roots gives what `project_root` gives for each: the root of
    the project's newest session that recorded one; a project without any is left out."""
    for sid, project, at, root in [("a1", "alpha", 100, "/w/alpha-old"), ("a2", "alpha", 200, "/w/alpha"),
                                   ("a3", "alpha", 300, None), ("b1", "beta", 100, None),
                                   ("g1", "gamma", 50, "/w/gamma")]:
        store.ensure_session(sid, project, at, root=root)
    asked = ["alpha", "beta", "gamma", "delta", "alpha"]
    roots = store.project_roots(asked)
    assert roots == {"alpha": "/w/alpha", "gamma": "/w/gamma"}
    assert roots == {p: r for p in asked if (r := store.project_root(p)) is not None}
    assert store.project_roots([]) == {}
