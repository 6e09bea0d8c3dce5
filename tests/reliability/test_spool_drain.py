"""The spool under concurrent drains and crashed drainers: every spooled event is stored
exactly once, and a hook's own event is never lost because of a drain.

Hooks are real `nmem record` processes; the spool is filled the way hooks fill it (the
database locked by another writer); results are read back from the SQLite file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from conftest import load_bench
from nmem.capture.claude_code import parse
from nmem.service.api import Service

faults = load_bench("faults")


def spooled_while_locked(home: Path, tags: list[str]) -> list[Path]:
    """Spool one event per tag through the hook entry while another writer holds the lock."""
    lock = faults.hold_write_lock(home)
    try:
        assert faults.run_in_one_process(home, [faults.bash(t) for t in tags], NMEM_BUSY_BUDGET_MS="0") == 0
    finally:
        lock.rollback()
        lock.close()
    files = sorted((home / "spool").glob("*.json"))
    assert len(files) == len(tags)
    return files


def first_hook(home: Path) -> None:
    assert faults.run_hook(home, faults.bash("first")) == (0, "")


def dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(proc.stdout)


def assert_clean(home: Path) -> None:
    assert faults.spool_left(home) == []
    assert faults.log_lines(home, "ERROR") == []
    assert faults.integrity(home) == "ok"


def test_parallel_drains_while_a_long_transaction_holds_the_lock_store_every_event_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first_hook(home)
    spool_tags = [f"spooled-{i}" for i in range(120)]
    spooled_while_locked(home, spool_tags)
    drain_tags = [f"drainer-{i}" for i in range(8)]
    lock = faults.hold_write_lock(home)
    try:
        procs = [faults.start_hook(home, faults.bash(t)) for t in drain_tags]
        time.sleep(0.5)
        # No drainer got through: each waits for the lock within its budget (2 s by default).
        assert [p.poll() for p in procs] == [None] * len(procs)
    finally:
        lock.rollback()
        lock.close()
    assert [faults.finish(p) for p in procs] == [(0, "")] * len(procs)
    settled = faults.settle(home, "test")  # a drainer out of time leaves the rest for the next hook
    stored = faults.stored_tags(home)
    assert sorted(stored.elements()) == sorted(["first", *spool_tags, *drain_tags, *settled])
    assert_clean(home)


def test_a_claim_left_by_a_killed_drainer_is_stored_by_the_next_hook(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first_hook(home)
    (waiting,) = spooled_while_locked(home, ["orphan"])
    spool_id = waiting.name.removesuffix(".json")
    waiting.rename(waiting.with_name(f"{spool_id}.{dead_pid()}.claim.json"))  # claimed, then killed
    assert faults.run_hook(home, faults.bash("next")) == (0, "")
    assert faults.stored_tags(home) == {"first": 1, "orphan": 1, "next": 1}
    assert_clean(home)


def test_a_drainer_killed_between_commit_and_unlink_is_not_stored_twice(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first_hook(home)
    (waiting,) = spooled_while_locked(home, ["stored-once"])
    copy = tmp_path / "claimed-copy.json"
    shutil.copy(waiting, copy)
    assert faults.run_hook(home, faults.bash("drainer")) == (0, "")
    assert faults.stored_tags(home)["stored-once"] == 1
    # The drainer committed, then died before its unlink: its claim is still there.
    shutil.copy(copy, waiting.with_name(f"{waiting.name.removesuffix('.json')}.{dead_pid()}.claim.json"))
    assert faults.run_hook(home, faults.bash("next")) == (0, "")
    assert faults.stored_tags(home) == {"first": 1, "stored-once": 1, "drainer": 1, "next": 1}
    assert_clean(home)


def test_a_claim_held_by_a_live_hook_is_left_to_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first_hook(home)
    (waiting,) = spooled_while_locked(home, ["in-flight"])
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        claim = waiting.with_name(f"{waiting.name.removesuffix('.json')}.{holder.pid}.claim.json")
        waiting.rename(claim)
        assert faults.run_hook(home, faults.bash("other")) == (0, "")
        assert claim.exists() and faults.stored_tags(home)["in-flight"] == 0
    finally:
        holder.kill()
        holder.wait()
    assert faults.run_hook(home, faults.bash("after")) == (0, "")
    assert faults.stored_tags(home) == {"first": 1, "other": 1, "in-flight": 1, "after": 1}
    assert_clean(home)


def test_an_unstorable_spooled_event_is_set_aside_and_the_hooks_own_event_stored(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first_hook(home)
    (waiting,) = spooled_while_locked(home, ["poisoned"])
    payload = json.loads(waiting.read_text(encoding="utf-8"))
    payload["_nmem_received_at"] = 1e30  # a time SQLite cannot hold (64-bit integers)
    waiting.write_text(json.dumps(payload), encoding="utf-8")
    assert faults.run_hook(home, faults.bash("own")) == (0, "")
    assert faults.stored_tags(home) == {"first": 1, "own": 1}
    assert faults.spool_left(home) == [waiting.name.replace(".json", ".bad")]
    (error,) = faults.log_lines(home, "ERROR")
    assert "set aside spool file" in error and "OverflowError" in error


def test_events_beyond_one_drain_keep_their_order(tmp_path: Path) -> None:
    """A hook drains at most 200 events; with more waiting, its own event queues behind them."""
    home = tmp_path / "home"
    first_hook(home)
    spool_tags = [f"queued-{i}" for i in range(205)]
    spooled_while_locked(home, spool_tags)
    for tag in ("one", "two"):
        assert faults.run_hook(home, faults.bash(tag)) == (0, "")
    contents = [r[0] for r in faults.query(home, "SELECT content FROM observations ORDER BY id")]
    assert contents == [f"echo {t}" for t in ("first", *spool_tags, "one", "two")]
    assert_clean(home)


def test_a_spool_file_whose_writer_was_killed_mid_write_is_dropped(tmp_path: Path) -> None:
    """`.<id>.json.tmp` is renamed into place once written; a writer killed before that never
    acknowledged its event, and left a file that may be cut short."""
    home = tmp_path / "home"
    first_hook(home)
    (waiting,) = spooled_while_locked(home, ["complete"])
    abandoned = home / "spool" / f".{waiting.stem.split('-')[0]}-{dead_pid()}.json.tmp"
    abandoned.write_text(waiting.read_text(encoding="utf-8")[:40], encoding="utf-8")
    writing = home / "spool" / f".{waiting.stem.split('-')[0]}-{os.getpid()}.json.tmp"
    writing.write_text("{", encoding="utf-8")  # its writer (this test's process) is alive: left alone
    assert faults.run_hook(home, faults.bash("next")) == (0, "")
    assert faults.stored_tags(home) == {"first": 1, "complete": 1, "next": 1}
    assert faults.spool_left(home) == [writing.name]


def test_a_replayed_spool_id_is_stored_once(service: Service) -> None:
    """The service side of a replay: the event and its spool id commit together, and the same
    id again stores nothing."""
    event = parse(faults.bash("replayed"), now=1_790_000_000)
    first = service.record_event(event, spool_id="1790000000000000000-42")
    again = service.record_event(event, spool_id="1790000000000000000-42")
    other = service.record_event(event, spool_id="1790000000000000001-42")
    assert (first.stored, again.skipped, other.stored) == ("observation", "duplicate", "observation")
    assert service.status()["observations"] == 2
