"""The change feed reads rows past a cursor in id order, so it must never step over a lower id that
another writer commits after a higher one. On PostgreSQL two writers can commit out of id order; the
feed reads only up to the ids drawn before every write transaction then open had ended
(`settled_heads`): a reader between the two commits waits for the first, or leaves both for later."""

from __future__ import annotations

import threading
import time

import pytest

from conftest import record
from nmem.changes import Change, Cursor, head, read_changes
from nmem.service.api import Service
from store_engines import ENGINES

pytest.importorskip("psycopg")

POSTGRES = [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"]
T0 = 1_790_000_000


def _someone_waits_for_a_lock(service: Service) -> bool:
    rows = service.store._query("SELECT count(*) FROM pg_locks WHERE NOT granted")  # type: ignore[attr-defined]
    return int(rows[0][0]) > 0


def _first_writer_holds_open(service: Service, sid: str) -> tuple[threading.Thread, threading.Event]:
    """A writer that draws the lower id (a prompt at T0 + 1) and holds its transaction open until
    the returned event is set; then another commits the next id (T0 + 2) at once: writers never
    wait for each other."""
    written, let_go = threading.Event(), threading.Event()

    def first() -> None:
        with service.store.transaction():
            record(service, "UserPromptSubmit", now=T0 + 1, session_id=sid, prompt="the first writer")
            written.set()
            let_go.wait(30)

    one = threading.Thread(target=first)
    one.start()
    assert written.wait(30)
    record(service, "UserPromptSubmit", now=T0 + 2, session_id=sid, prompt="the second writer")
    return one, let_go


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_reader_between_two_writers_never_steps_over_the_first(service: Service, engine: str) -> None:
    record(service, "SessionStart", now=T0, session_id="s-feed", source="startup")
    start = head(service.store)
    one, let_go = _first_writer_holds_open(service, "s-feed")

    read: list[tuple[list[Change], Cursor]] = []
    reader = threading.Thread(target=lambda: read.append(read_changes(service.store, start)))
    reader.start()   # between the two commits
    deadline = time.monotonic() + 30
    while reader.is_alive() and not _someone_waits_for_a_lock(service) and time.monotonic() < deadline:
        time.sleep(0.01)
    let_go.set()
    one.join(30)
    reader.join(30)
    seen, cursor = read[0]
    later, _ = read_changes(service.store, cursor)
    prompts = [c.timestamp for c in seen + later if c.kind == "prompt"]
    assert prompts == [T0 + 1, T0 + 2], (seen, later)   # the first writer's, then the second's


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_reader_that_outwaits_its_budget_reads_nothing_yet(service: Service, engine: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from nmem.store.postgres import connection

    monkeypatch.setattr(connection, "FEED_WAIT_MS", 50)
    record(service, "SessionStart", now=T0, session_id="s-wait", source="startup")
    start = head(service.store)
    one, let_go = _first_writer_holds_open(service, "s-wait")
    seen, cursor = read_changes(service.store, start)
    let_go.set()
    one.join(30)
    assert seen == [] and cursor == start   # nothing is read past an id that may still commit
    later, _ = read_changes(service.store, cursor)
    assert [c.timestamp for c in later if c.kind == "prompt"] == [T0 + 1, T0 + 2]
