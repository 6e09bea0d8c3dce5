"""A hook locked out of the database waits its budget (`hooks.busy_budget_ms`) once in all, not
once per write: opening, each spooled event it drains and its own event share one deadline.
Then it spools its event behind the others and exits 0.

The bound is this test's behaviour, so it times a real hook process, with margins far wider
than a loaded machine's noise: waiting twice would take at least twice the budget.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from conftest import load_bench

faults = load_bench("faults")

BUDGET_MS = 1500


def test_a_locked_out_hook_waits_its_budget_once_then_spools(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert faults.run_hook(home, faults.bash("first")) == (0, "")
    lock = faults.hold_write_lock(home)
    try:
        assert faults.run_in_one_process(home, [faults.bash(f"waiting-{i}") for i in range(3)],
                                         NMEM_BUSY_BUDGET_MS="0") == 0
        start = time.monotonic()
        done = faults.run_hook(home, faults.bash("locked-out"), NMEM_BUSY_BUDGET_MS=str(BUDGET_MS))
        elapsed_ms = (time.monotonic() - start) * 1000
        assert done == (0, "")
        waiting = sorted(p.read_text(encoding="utf-8") for p in (home / "spool").glob("*.json"))
    finally:
        lock.rollback()
        lock.close()
    assert elapsed_ms >= 0.8 * BUDGET_MS, "it gives up only once the budget is spent"
    assert elapsed_ms < 2 * BUDGET_MS, f"waited {elapsed_ms:.0f} ms for a budget of {BUDGET_MS} ms"
    assert len(waiting) == 4 and sum("echo locked-out" in text for text in waiting) == 1
    warning = faults.log_lines(home, "WARNING")[-1]
    assert f"database busy past the hook's budget ({BUDGET_MS} ms); spooled PostToolUse event" in warning
    assert faults.run_hook(home, faults.bash("unlocked")) == (0, "")
    contents = [r[0] for r in faults.query(home, "SELECT content FROM observations ORDER BY id")]
    assert contents == [f"echo {t}" for t in ("first", "waiting-0", "waiting-1", "waiting-2", "locked-out", "unlocked")]


def test_a_database_locked_even_for_reading_is_waited_for_then_the_event_spooled(tmp_path: Path) -> None:
    """Opening waits on the lock too: SQLite holds the file exclusively for a moment while the
    last connection folds the WAL back and removes it (with 8 hooks at once this happens), and
    for as long as a connection in exclusive locking mode lives, as here. That is a busy
    database (wait within the budget, then spool), not a failure to log as an error."""
    home = tmp_path / "home"
    assert faults.run_hook(home, faults.bash("first")) == (0, "")
    holder = sqlite3.connect(faults.db_path(home), isolation_level=None)
    try:
        holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("COMMIT")  # the exclusive lock stays until the connection closes
        assert faults.run_hook(home, faults.bash("locked-out"), NMEM_BUSY_BUDGET_MS="400") == (0, "")
    finally:
        holder.close()
    assert faults.log_lines(home, "ERROR") == []
    assert "database busy past the hook's budget (400 ms)" in faults.log_lines(home, "WARNING")[-1]
    assert faults.run_hook(home, faults.bash("unlocked")) == (0, "")
    assert faults.stored_tags(home) == {"first": 1, "locked-out": 1, "unlocked": 1}
