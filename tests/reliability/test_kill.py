"""SIGKILL at random moments: during hook runs (while the write lock comes and goes, so hooks
also spool and drain) and during `nmem import claude-code`. Afterwards the database passes
`PRAGMA integrity_check`, every acknowledged event (its hook exited 0) is stored exactly
once, no event is stored twice, and an import run again completes without duplicates.

The scenarios are bench/faults.py's, run here at a small scale (`make faults` runs them at
200 kills).
"""

from __future__ import annotations

from pathlib import Path

from conftest import load_bench

faults = load_bench("faults")


def test_hooks_killed_at_random_lose_no_acknowledged_event_and_store_none_twice(tmp_path: Path) -> None:
    outcome = faults.killed_hooks(tmp_path / "home", kills=24, parallel=4, seed=12)
    assert (outcome.lost, outcome.duplicated, outcome.errors) == (0, 0, 0), outcome.notes
    assert outcome.killed >= 24 and outcome.stored >= outcome.tried - outcome.killed


def test_imports_killed_at_random_complete_without_duplicates(tmp_path: Path) -> None:
    outcome = faults.killed_imports(tmp_path, kills=4, sessions=12, calls=40, seed=21)
    assert (outcome.lost, outcome.duplicated, outcome.errors) == (0, 0, 0), outcome.notes
    assert outcome.killed == 4 and outcome.stored == outcome.tried > 0
