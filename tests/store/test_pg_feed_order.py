"""The change feed reads rows past a cursor in id order, so it must never step over a lower id that
another writer commits after a higher one. On PostgreSQL it can today: a known failure (docs/team.md,
"Why it ships off"), kept strict so it turns into a plain test the day the window is closed."""

from __future__ import annotations

import threading
import time

import pytest

from conftest import record
from nmem.changes import head, read_changes
from nmem.service.api import Service
from store_engines import ENGINES

pytest.importorskip("psycopg")

POSTGRES = [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"]
T0 = 1_790_000_000


def _waiting_for_a_lock(service: Service) -> bool:
    rows = service.store._query("SELECT count(*) FROM pg_locks WHERE NOT granted")  # type: ignore[attr-defined]
    return int(rows[0][0]) > 0


@pytest.mark.xfail(strict=True, reason="PostgreSQL writers can commit out of id order (docs/team.md)")
@pytest.mark.parametrize("engine", POSTGRES)
def test_a_reader_between_two_writers_never_steps_over_the_first(service: Service, engine: str) -> None:
    record(service, "SessionStart", now=T0, session_id="s-feed", source="startup")
    start = head(service.store)
    first_written, let_go = threading.Event(), threading.Event()

    def first() -> None:   # takes the lower id, then holds its transaction open
        with service.store.transaction():
            record(service, "UserPromptSubmit", now=T0 + 1, session_id="s-feed", prompt="the first writer")
            first_written.set()
            let_go.wait(30)

    def second() -> None:  # takes the next id and commits as soon as it may
        record(service, "UserPromptSubmit", now=T0 + 2, session_id="s-feed", prompt="the second writer")

    one = threading.Thread(target=first)
    one.start()
    assert first_written.wait(30)
    two = threading.Thread(target=second)
    two.start()
    deadline = time.monotonic() + 30
    while two.is_alive() and not _waiting_for_a_lock(service) and time.monotonic() < deadline:
        time.sleep(0.01)

    seen, cursor = read_changes(service.store, start)     # a reader between the two commits
    let_go.set()
    one.join(30)
    two.join(30)
    later, _ = read_changes(service.store, cursor)
    prompts = [c.timestamp for c in seen + later if c.kind == "prompt"]
    assert prompts == [T0 + 1, T0 + 2], (seen, later)   # the first writer's, then the second's
