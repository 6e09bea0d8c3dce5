"""A search of everything runs its four parts side by side where the engine gives each read a
connection of its own (PostgreSQL), on the caller's thread where it does not (SQLite) or where
the caller holds a transaction or snapshot those reads must see, and on the caller's thread
again when every spare thread is busy. Whichever way, the hits are the same, in the same order,
and each part runs as the caller (the signed-in viewer is a context variable)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from conftest import record
from nmem.service import fanout
from nmem.service.api import Service

PROBE: ContextVar[str] = ContextVar("fanout_probe", default="nobody")


def where(i: int) -> Callable[[], tuple[int, str, str]]:
    return lambda: (i, threading.current_thread().name, PROBE.get())


@contextmanager
def no_spare_thread() -> Iterator[None]:
    taken = 0
    while fanout._slots.acquire(blocking=False):
        taken += 1
    try:
        yield
    finally:
        for _ in range(taken):
            fanout._slots.release()


def test_reads_leave_the_thread_only_on_a_connection_of_their_own(store: Any, engine: str) -> None:
    if engine == "sqlite":
        assert not store.fan_out_reads()
        return
    assert store.fan_out_reads()
    with store.transaction():
        assert not store.fan_out_reads()   # its reads must see the transaction's writes
    with store.read_snapshot():
        assert not store.fan_out_reads()
    assert store.fan_out_reads()


def test_parts_run_beside_the_caller_as_the_caller(store: Any, engine: str) -> None:
    token = PROBE.set("ann")
    try:
        results = fanout.run_all(store, [where(i) for i in range(4)])
        with no_spare_thread():
            inline = fanout.run_all(store, [where(i) for i in range(4)])
    finally:
        PROBE.reset(token)
    here = threading.current_thread().name
    assert [r[0] for r in results] == [0, 1, 2, 3] == [r[0] for r in inline]
    assert {r[2] for r in results + inline} == {"ann"}
    assert results[0][1] == here and {r[1] for r in inline} == {here}
    if engine == "postgres":
        assert all(name.startswith("nmem-fanout") for _, name, _ in results[1:]), results
    else:
        assert {r[1] for r in results} == {here}


def test_a_part_that_fails_fails_the_search_and_frees_its_thread(store: Any, engine: str) -> None:
    def boom() -> tuple[int, str, str]:
        raise ValueError("part failed")

    for _ in range(fanout.SPARE + 1):
        try:
            fanout.run_all(store, [where(0), boom, where(2)])
        except ValueError as exc:
            assert str(exc) == "part failed"
        else:
            raise AssertionError("the failing part's error was lost")
    with no_spare_thread():   # every spare thread came back: none is still held
        pass
    assert fanout._slots.acquire(blocking=False)
    fanout._slots.release()


def test_everything_searched_side_by_side_ranks_as_one_after_the_other(service: Service) -> None:
    record(service, "SessionStart", source="startup")
    record(service, "UserPromptSubmit", prompt="why does the checkout cache miss after deploy")
    for n in range(12):
        record(service, "PostToolUse", tool_name="Bash", tool_input={"command": f"redis-cli GET checkout:{n}"},
               tool_response={"stdout": "cache miss", "stderr": "", "interrupted": False})
    service.remember("The checkout cache is warmed after every deploy", namespace="decisions")
    for query in ("checkout cache", "cache miss deploy", "redis"):
        side_by_side = [(h.kind, h.record.id, h.score) for h in service.search(query, scope="all").hits]
        with no_spare_thread():
            in_turn = [(h.kind, h.record.id, h.score) for h in service.search(query, scope="all").hits]
        assert side_by_side == in_turn and side_by_side, query
