"""Where the REST handlers' store calls run: off the event loop, so one server uses every core.

Reads go to a pool of `http.threads` threads (each with its own SQLite reader connection, or a
pooled PostgreSQL connection while it reads); writes go to one thread, the server's one writer
path, in the order they arrive. The loop only parses, streams and answers: event streams and
WebSockets stay on it.

Admission: a request is answered 503 with Retry-After at once, rather than waiting behind a queue
that only grows, when the wait it would have passes `http.max_wait_ms` (the requests ahead of it
times the recent mean time of one call, shared by the lane's threads), or when it finds
`http.max_queue` others already waiting (a hard cap). Counting time rather than requests lets
cheap requests queue deep and sheds expensive ones early: 200 quick searches waiting are a
fraction of a second, 200 slow ones are many.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from nmem.errors import NmemError

T = TypeVar("T")
MAX_AUTO_THREADS = 32
# How much one call's time moves the lane's mean (an exponentially weighted mean: recent calls count most)
CALL_TIME_WEIGHT = 0.1


class Overloaded(NmemError):
    """More requests wait for the store than `http.max_queue`: try again shortly."""

    http_status = 503
    kind = "busy"
    retry_after = 1


def auto_threads(setting: int, workers: int = 1) -> int:
    """`http.threads`, or for 0 four per core (a read waits on the database as much as it computes),
    shared by the `workers` processes serving on the same cores (at least two each): more threads
    are more database connections, each planning and caching its statements apart."""
    if setting > 0:
        return setting
    return max(2, min(MAX_AUTO_THREADS, 4 * len(os.sched_getaffinity(0)) // max(1, workers)))


class Lane:
    """One executor and the requests it has taken: running plus waiting."""

    def __init__(self, name: str, threads: int, max_queue: int, max_wait: float = float("inf")) -> None:
        self.name = name
        self.threads = threads
        self.max_queue = max_queue
        self.max_wait = max_wait
        self.executor = ThreadPoolExecutor(threads, thread_name_prefix=f"nmem-{name}")
        self.taken = 0
        self.call_time = 0.0   # seconds one call takes on its thread, recent mean

    @property
    def waiting(self) -> int:
        return max(0, self.taken - self.threads)

    def expected_wait(self) -> float:
        """Seconds the next request would wait for a thread: none while one is free, else the
        calls ahead of it (the waiting ones and one of the running) at the recent mean, shared
        by the threads."""
        if self.taken < self.threads:
            return 0.0
        return (self.waiting + 1) * self.call_time / self.threads

    def admit(self) -> None:
        if self.waiting >= self.max_queue:
            raise Overloaded(f"the server is busy: {self.waiting} {self.name} requests are waiting "
                             f"(http.max_queue = {self.max_queue}); try again shortly")
        wait = self.expected_wait()
        if wait > self.max_wait:
            raise Overloaded(f"the server is busy: a {self.name} request would wait about {wait * 1000:.0f} ms "
                             f"(http.max_wait_ms = {self.max_wait * 1000:.0f}); try again shortly")

    async def run(self, call: Callable[[], T]) -> T:
        self.admit()
        self.taken += 1
        try:
            # The call acts for the request's signed-in user: the thread runs in a copy of this context.
            context = contextvars.copy_context()
            return await asyncio.get_running_loop().run_in_executor(self.executor, self._timed, context, call)
        finally:
            self.taken -= 1

    def _timed(self, context: contextvars.Context, call: Callable[[], T]) -> T:
        began = time.perf_counter()
        try:
            return context.run(call)
        finally:
            spent = time.perf_counter() - began
            # a float store is atomic under the GIL; a lost update among threads only delays the mean
            self.call_time = spent if not self.call_time else \
                self.call_time + CALL_TIME_WEIGHT * (spent - self.call_time)


class StoreThreads:
    """The read pool, the writer thread and the token checks of one server process."""

    CHECK_THREADS = 2

    def __init__(self, store: Any, threads: int, max_queue: int, max_wait_ms: int | None = None) -> None:
        max_wait = float("inf") if max_wait_ms is None else max_wait_ms / 1000
        self.reads = Lane("read", threads, max_queue, max_wait)
        self.writes = Lane("write", 1, max_queue, max_wait)
        # A team server looks each request's token up (two short reads): on threads of their own,
        # so a request does not take a search's place twice.
        self.checks = Lane("token check", self.CHECK_THREADS, max_queue, max_wait)
        # A PostgreSQL store's pool must have a connection for each thread (and for the loop's own
        # calls: the streams' poller, MCP): else threads queue for connections instead of work.
        reserve = getattr(store, "reserve_connections", None)
        if reserve is not None:
            reserve(threads + 1 + self.CHECK_THREADS + 4)

    async def run(self, call: Callable[[], T], *, write: bool) -> T:
        return await (self.writes if write else self.reads).run(call)

    async def check(self, call: Callable[[], T]) -> T:
        return await self.checks.run(call)

    def close(self) -> None:
        for lane in (self.reads, self.writes, self.checks):
            lane.executor.shutdown(wait=True, cancel_futures=True)
