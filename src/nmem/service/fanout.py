"""Independent reads of one request side by side, where the engine serves each from a
connection of its own (PostgreSQL: a search of everything is three reads, the observations', the
prompts' and the curated scopes' (sessions and memories together, a round trip a tier), each mostly the
server's time). The caller's thread runs the first read; each other read runs on a spare thread
when one is free, else after it on the caller's, so a busy server's requests (which already fill
the cores) gain no extra threads. Each read runs in a copy of the caller's context: the signed-in
viewer goes with it (nmem.team.access)."""

from __future__ import annotations

import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from concurrent.futures import Future, ThreadPoolExecutor
    from typing import Any, TypeVar

    T = TypeVar("T")

SPARE = 3   # threads a process lends to reads beside their callers', all requests together
_slots = threading.BoundedSemaphore(SPARE)
_lock = threading.Lock()
_pools: list[ThreadPoolExecutor] = []   # made on first use: a process that never fans out has none


def run_all(store: Any, calls: Sequence[Callable[[], T]]) -> list[T]:
    """Each call's result, in the calls' order; side by side when `store.fan_out_reads()` says
    this thread's reads may leave it (no transaction or snapshot of its own is open)."""
    if len(calls) < 2 or not store.fan_out_reads():
        return [call() for call in calls]
    import contextvars

    lent: list[Future[T] | None] = []
    for call in calls[1:]:
        if _slots.acquire(blocking=False):
            try:
                lent.append(_executor().submit(contextvars.copy_context().run, _returning, call))
            except BaseException:
                _slots.release()
                raise
        else:
            lent.append(None)
    results = [calls[0]()]
    for call, future in zip(calls[1:], lent, strict=True):
        results.append(call() if future is None else future.result())
    return results


def _returning(call: Callable[[], T]) -> T:
    try:
        return call()
    finally:
        _slots.release()


def _executor() -> ThreadPoolExecutor:
    with _lock:
        if not _pools:
            from concurrent.futures import ThreadPoolExecutor

            _pools.append(ThreadPoolExecutor(max_workers=SPARE, thread_name_prefix="nmem-fanout"))
        return _pools[0]
