"""bench/context_replay.py's scenarios hold: what the next session is told after real-shaped Claude Code
sessions (subagents in every layout, slash commands, six compactions, a worktree, idle processes),
whether they arrive through the hooks or through `nmem import claude-code`."""

from __future__ import annotations

import pytest

from conftest import load_bench

replay = load_bench("context_replay")


@pytest.mark.parametrize("scenario", sorted(replay.SCENARIOS))
def test_the_next_session_is_told_what_it_needs(scenario: str) -> None:
    results = replay.run([scenario], show=None)
    assert [r["via"] for r in results] == ["hooks", "import"]
    for r in results:
        failed = [label for label, ok in r["checks"].items() if not ok]
        assert not failed, (r["via"], failed)
        assert r["lifecycle_rows"] == 0 and r["tokens"] <= 1500
    hooks, imported = results
    assert hooks["sections"] == imported["sections"], "both paths give the next session the same block"
