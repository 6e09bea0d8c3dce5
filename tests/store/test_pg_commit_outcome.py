"""What became of a PostgreSQL COMMIT whose connection was cut (a real TCP relay between the store
and the server, `pg_proxy`): the store and the server's writer lane answer from what the server
did, never from a guess. Committed: the writes stand, answered as stored. Cut before it reached
the server: nothing stored, and grouped writes run again alone. Still running when the answer was
lost, past the store's wait: `CommitUnknown`, and nothing is written again (keyless writes, a
Claude Code HTTP hook's event or a REST memory, would be stored twice)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from http_support import queued_behind_one_write
from nmem.adapters.http.threads import WriteLane
from nmem.capture.agents import parse
from nmem.config import load_settings
from nmem.errors import CommitUnknown, NmemError, StoreDisconnected
from nmem.service.api import Service
from nmem.store import open_store
from nmem.store.records import NewMemory
from pg_proxy import PgProxy, SlowCommits, proxy_for
from store_engines import ENGINES

psycopg = pytest.importorskip("psycopg")

POSTGRES = [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"]
pytestmark = pytest.mark.parametrize("engine", POSTGRES)
CWD = "/home/dev/code/outcome"


@pytest.fixture
def proxy(pg_url: str) -> Iterator[PgProxy]:
    relay = proxy_for(pg_url)
    yield relay
    relay.close()


def _admin(pg_url: str) -> Any:
    return psycopg.connect(pg_url, autocommit=True)


def _rows(pg_url: str, sql: str) -> list[Any]:
    with _admin(pg_url) as conn:
        return [r[0] for r in conn.execute(sql)]


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except NmemError as exc:
        return exc


def _wait_for(check: Callable[[], bool], what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.02)


# -- the store ---------------------------------------------------------------------------------

def _remember(store: Any, content: str) -> None:
    with store.transaction():
        store.insert_memory(NewMemory(uid=uuid.uuid4().hex, domain="user", namespace="notes",
                                      summary=content, content=content, timestamp=1))


def _memories(pg_url: str) -> list[str]:
    return [str(c) for c in _rows(pg_url, "SELECT content FROM memories ORDER BY id")]


def test_a_commit_whose_answer_is_cut_off_is_answered_as_committed(pg_url: str, proxy: PgProxy,
                                                                   engine: str) -> None:
    store = open_store(proxy.url(pg_url), busy_timeout_ms=2000)
    try:
        proxy.arm("after")
        assert _outcome(lambda: _remember(store, "committed, answer cut off")) is None
        assert proxy.done.is_set()
        assert _memories(pg_url) == ["committed, answer cut off"]
        _remember(store, "the next write")   # and the store goes on
        assert _memories(pg_url) == ["committed, answer cut off", "the next write"]
    finally:
        store.close()


def test_a_commit_cut_before_it_reached_the_server_stored_nothing(pg_url: str, proxy: PgProxy,
                                                                  engine: str) -> None:
    store = open_store(proxy.url(pg_url), busy_timeout_ms=2000)
    try:
        proxy.arm("before")
        outcome = _outcome(lambda: _remember(store, "never committed"))
        assert proxy.done.is_set()
        assert isinstance(outcome, StoreDisconnected) and "nothing was stored" in outcome.message, outcome
        assert _memories(pg_url) == []
        _remember(store, "written again")
        assert _memories(pg_url) == ["written again"]
    finally:
        store.close()


def test_a_commit_still_running_when_its_answer_is_lost_is_unknown_not_guessed(pg_url: str, proxy: PgProxy,
                                                                               engine: str) -> None:
    """Its answer cut off while the server still runs it, past the store's wait: `CommitUnknown`
    (told "disconnected", which promises nothing was stored, a caller writes it again)."""
    slow = SlowCommits(pg_url, "memories")
    store = open_store(proxy.url(pg_url), busy_timeout_ms=500)
    try:
        slow.hold()
        proxy.arm("after")
        outcome = _outcome(lambda: _remember(store, "committed later"))
        assert isinstance(outcome, CommitUnknown), outcome
        assert outcome.http_status == 503 and outcome.retry_after
        slow.release()
        _wait_for(lambda: _memories(pg_url) == ["committed later"], "the COMMIT finishing on the server")
    finally:
        store.close()
        slow.close()


# -- the server's writer lane: grouped writes ----------------------------------------------------

def _event(session: str, i: int) -> dict[str, Any]:
    if i == 0:
        return {"hook_event_name": "SessionStart", "session_id": session, "cwd": CWD, "source": "startup",
                "transcript_path": ""}
    return {"hook_event_name": "UserPromptSubmit", "session_id": session, "cwd": CWD,
            "prompt": f"{session} prompt {i}", "transcript_path": ""}


def _prompts(pg_url: str) -> dict[str, int]:
    with _admin(pg_url) as conn:
        return {str(c): int(n) for c, n in conn.execute("SELECT content, COUNT(*) FROM prompts GROUP BY content")}


def _grouped(service: Service, calls: list[Callable[[], Any]]) -> tuple[list[Any], WriteLane]:
    """`calls` as grouped writes queued behind one that holds the writer thread, so the lane takes
    them in one transaction; their answers (or errors) and the lane."""
    lane = WriteLane(service.store, 64, 1000, float("inf"), service.forget_uncommitted)
    try:
        return asyncio.run(queued_behind_one_write(lane, calls)), lane
    finally:
        lane.close()


@pytest.fixture
def proxied_service(pg_url: str, proxy: PgProxy, nmem_home: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Service]:
    monkeypatch.setenv("NMEM_STORE_URL", proxy.url(pg_url))
    service = Service.open(load_settings(), busy_timeout_ms=500)
    try:
        yield service
    finally:
        service.close()


def _keyless_events(service: Service) -> list[Callable[[], Any]]:
    """A Claude Code HTTP hook's events: no key, so only the writer's care keeps them single."""
    def record(session: str, i: int) -> Callable[[], Any]:
        return lambda: service.record_event(parse(_event(session, i)))
    return [record("s1", 0), record("s1", 1), record("s2", 0), record("s1", 2), record("s2", 1)]


EXPECTED = {"s1 prompt 1": 1, "s1 prompt 2": 1, "s2 prompt 1": 1}


def test_grouped_writes_whose_commit_answer_is_cut_off_stand_as_stored(pg_url: str, proxy: PgProxy,
                                                                       proxied_service: Service,
                                                                       engine: str) -> None:
    proxy.arm("after")
    answers, lane = _grouped(proxied_service, _keyless_events(proxied_service))
    assert proxy.done.is_set()
    assert not [a for a in answers if isinstance(a, BaseException)], answers
    assert (lane.commits, lane.shared, lane.alone) == (1, 5, 1)   # the holder ran alone, the five together
    assert _prompts(pg_url) == EXPECTED


def test_grouped_writes_whose_commit_never_reached_the_server_run_again_alone(pg_url: str, proxy: PgProxy,
                                                                              proxied_service: Service,
                                                                              engine: str) -> None:
    proxy.arm("before")
    answers, lane = _grouped(proxied_service, _keyless_events(proxied_service))
    assert proxy.done.is_set()
    assert not [a for a in answers if isinstance(a, BaseException)], answers
    assert (lane.commits, lane.alone) == (0, 6)   # each ran again alone
    assert _prompts(pg_url) == EXPECTED


def test_grouped_writes_whose_commit_outcome_is_unknown_are_not_written_again(pg_url: str, proxy: PgProxy,
                                                                              proxied_service: Service,
                                                                              engine: str) -> None:
    """The batch's COMMIT still runs when its answer is lost: each write hears CommitUnknown (503,
    try again later; a keyed event's retry is harmless) and none runs again: they were stored once,
    by that COMMIT. Run again alone, as any failed batch was, every keyless event was stored twice."""
    slow = SlowCommits(pg_url, "prompts")
    try:
        slow.hold()
        proxy.arm("after")
        answers: list[Any] = []
        scenario = threading.Thread(target=lambda: answers.extend(
            _grouped(proxied_service, _keyless_events(proxied_service))[0]))
        scenario.start()
        scenario.join(10)   # an old lane's runs alone would wait on the held lock: let them finish
        slow.release()
        scenario.join(30)
        _wait_for(lambda: sum(_prompts(pg_url).values()) >= 3, "the batch's COMMIT finishing")
        time.sleep(0.2)
        assert _prompts(pg_url) == EXPECTED
        assert len(answers) == 5 and all(isinstance(a, CommitUnknown) for a in answers), answers
    finally:
        slow.close()
