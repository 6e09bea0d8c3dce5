"""Where the REST handlers' store calls run: off the event loop, so one server uses every core.

Reads go to a pool of `http.threads` threads (each with its own SQLite reader connection, or a
pooled PostgreSQL connection while it reads); writes go to one thread, the server's one writer
path, in the order they arrive. The loop only parses, streams and answers: event streams and
WebSockets stay on it.

Admission: a request is answered 503 with Retry-After at once, rather than waiting behind a queue
that only grows, when the wait it would have passes `http.max_wait_ms`, or when it finds
`http.max_queue` others already waiting (a hard cap). The wait is the requests ahead of it times
the time one place in the queue recently took to clear, as measured: each read that waited tells,
when a thread takes it, how long it waited and how many were ahead of it. That measure holds
whatever the calls cost and however the machine's cores are shared (a read's own time on its
thread, under load mostly spent waiting for a core, says little of how fast the queue moves);
while no read has waited yet, the recent mean time of one call shared by the threads stands in.
The writer thread counts each waiting write at its kind's recent time (`WriteLane.kind_wait`: a
SessionStart opening a session costs more than a prompt; its context block is rendered after the
commit, on a read thread, `routing.ThenRead`). Counting time rather than requests lets cheap
requests queue deep and sheds expensive ones early: 200 quick searches waiting are a fraction of
a second, 200 slow ones are many. A shed request comes back after its Retry-After second, so
shedding one that would have waited less than that only makes it later.

Group commit: a commit waits for the disk (PostgreSQL flushes its WAL, ~10 ms under load), so
writes one at a time queue behind their commits. When the writer takes a hook event and more are
waiting, it stores up to `http.write_batch` of them in one transaction, each in its own savepoint
(an error undoes that write alone and answers its caller with it), commits once, and only then
answers each caller: nobody hears "stored" before the commit is durable. The change feed reads
committed rows, so no stream sees a write the batch undid. A lone write, and every write not
marked for grouping, runs exactly as before: alone, in its own transaction.

A batch that failed stored nothing, so each of its writes runs again alone, with one exception: a
COMMIT whose answer was lost (the connection dropped after PostgreSQL received it). The store asks
the server what became of the transaction (`transaction()`'s contract): committed, the batch's
answers stand; aborted, an ordinary failure; unknown within its wait, CommitUnknown (503, Retry-After)
for each write and none runs again, since each may be stored already and a keyless one (a Claude
Code HTTP hook's event) would be stored twice. SQLite's COMMIT runs in this process: its outcome
is what it returned, never unknown.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from nmem.adapters.net import usable_cores
from nmem.errors import CommitUnknown, NmemError, TransactionLost

T = TypeVar("T")
log = logging.getLogger("nmem.http")
MAX_AUTO_THREADS = 32
WARM_SECONDS = 5.0   # longest the read threads' warming (`StoreThreads.warm`) may delay a server's start
# How much one call's time moves the lane's mean (an exponentially weighted mean: recent calls count most)
CALL_TIME_WEIGHT = 0.1


def moved(mean: float, sample: float) -> float:
    """A recent mean moved toward `sample` (the first sample, when there is no mean yet, stands)."""
    return sample if not mean else mean + CALL_TIME_WEIGHT * (sample - mean)


class Overloaded(NmemError):
    """More requests wait for the store than `http.max_queue`: try again shortly."""

    http_status = 503
    kind = "busy"
    retry_after = 1


def auto_threads(setting: int, workers: int = 1, waits: bool = True) -> int:
    """`http.threads`, or for 0 a number per core shared by the `workers` processes serving on the
    same cores (at least two each): four when a read `waits` on a database server as much as it
    computes (PostgreSQL), one when it computes in this process (SQLite). There Python runs one
    thread at a time and SQLite hands the GIL back at every step of a statement, so threads past
    the cores only pass it around: at 100k observations 8 threads spent 24 ms of CPU a search, 2
    spent 13.5 (bench/http_server.py, docs/http.md). More threads are also more database
    connections, each planning and caching its statements apart."""
    if setting > 0:
        return setting
    per_core = 4 if waits else 1
    return max(2, min(MAX_AUTO_THREADS, per_core * usable_cores() // max(1, workers)))


@functools.cache
def _prctl() -> Callable[..., int] | None:
    try:
        import ctypes

        return ctypes.CDLL(None).prctl
    except (OSError, AttributeError):
        return None


def name_os_thread(name: str) -> None:
    """The calling thread's name in the OS too (Linux: 15 bytes), so `top -H`, profilers and
    /proc/<pid>/task/*/comm tell the loop, the read threads and the writer apart (bench/team.py
    reports each kind's CPU and run-queue wait from there)."""
    prctl = _prctl() if sys.platform == "linux" else None
    if prctl is not None:
        prctl(15, name.encode()[:15], 0, 0, 0)   # PR_SET_NAME


class Lane:
    """One executor and the requests it has taken: running plus waiting."""

    def __init__(self, name: str, threads: int, max_queue: int, max_wait: float = float("inf")) -> None:
        self.name = name
        self.threads = threads
        self.max_queue = max_queue
        self.max_wait = max_wait
        os_name = f"nmem-{name.rsplit(maxsplit=1)[-1]}"   # nmem-read, nmem-write, nmem-check
        self.executor = ThreadPoolExecutor(threads, thread_name_prefix=f"nmem-{name}",
                                           initializer=name_os_thread, initargs=(os_name,))
        self.taken = 0
        self.call_time = 0.0   # seconds one call takes on its thread, recent mean
        self._handoff: _Handoff | None = None   # answers on their way to the loop

    @property
    def waiting(self) -> int:
        return max(0, self.taken - self.threads)

    def expected_wait(self, kind: str = "") -> float:
        """Seconds the next request (of `kind`) would wait for a thread: none while one is free,
        else the calls ahead of it (the waiting ones and one of the running) at the recent mean,
        shared by the threads."""
        if self.taken < self.threads:
            return 0.0
        return (self.waiting + 1) * self.call_time / self.threads

    def admit(self, wait: float | None = None, kind: str = "") -> None:
        if self.waiting >= self.max_queue:
            raise Overloaded(f"the server is busy: {self.waiting} {self.name} requests are waiting "
                             f"(http.max_queue = {self.max_queue}); try again shortly")
        wait = self.expected_wait(kind) if wait is None else wait
        if wait > self.max_wait and self.worth_shedding(wait):
            raise Overloaded(f"the server is busy: a {self.name} request would wait about {wait * 1000:.0f} ms "
                             f"(http.max_wait_ms = {self.max_wait * 1000:.0f}); try again shortly")

    def worth_shedding(self, wait: float) -> bool:
        """Whether a request that would wait `wait` (past `max_wait`) is better told to come back."""
        return True

    async def run(self, call: Callable[[], T], admitted: bool = False, kind: str = "") -> T:
        """`admitted`: the request was let in already (a write's read once it is stored): not shed.

        The thread hands the answer straight to the loop (`_answer`), one callback, rather than
        through `run_in_executor`'s chained futures: those copy a finished thread future's state
        into the loop's, a lock taken four times, ~20% of the event loop's time under
        `make bench-team`. A call whose caller went (its request cancelled) before a thread took
        it does not run, as with `run_in_executor`."""
        if not admitted:
            self.admit(kind=kind)
        self.taken += 1
        cost = self._queued(kind)
        try:
            loop = asyncio.get_running_loop()
            handoff = self._handoff
            if handoff is None or handoff.loop is not loop:
                handoff = self._handoff = _Handoff(loop)
            answer: asyncio.Future[T] = loop.create_future()
            # The call acts for the request's signed-in user: the thread runs in a copy of this context.
            self.executor.submit(self._answer, handoff, answer, contextvars.copy_context(), call, time.perf_counter(),
                                 kind, cost)
            return await answer
        finally:
            self.taken -= 1

    def _answer(self, handoff: _Handoff, answer: asyncio.Future[T], context: contextvars.Context,
                call: Callable[[], T], queued: float, kind: str = "", cost: float = 0.0) -> None:
        """On a thread: run `call` unless its caller went meanwhile, and settle `answer` on the loop."""
        if answer.cancelled():   # read without the loop's lock: at worst a call cancelled just now runs
            self._dequeued(cost)
            return
        try:
            result = self._timed(context, call, queued, kind, cost)
        except BaseException as exc:   # the caller raises it, as with run_in_executor
            settle: tuple[Any, BaseException | None] = (None, exc)
        else:
            settle = (result, None)
        handoff.put(answer, *settle)

    def _timed(self, context: contextvars.Context, call: Callable[[], T], queued: float = 0.0, kind: str = "",
               cost: float = 0.0) -> T:
        began = time.perf_counter()
        self._dequeued(cost)
        self._started(began, began - queued, kind)
        try:
            return context.run(call)
        finally:
            self._spent(time.perf_counter() - began, kind)

    def _queued(self, kind: str) -> float:
        """A request of `kind` joins the queue (on the loop): what it counts there (`ReadLane`)."""
        return 0.0

    def _dequeued(self, cost: float) -> None:
        """A request that counted `cost` in the queue left it (a thread took it, or its caller went)."""

    def _started(self, now: float, waited: float, kind: str = "") -> None:
        """A thread took a request of `kind` at `now` that had waited `waited` seconds for it."""

    def _spent(self, seconds: float, kind: str = "") -> None:
        # a float store is atomic under the GIL; a lost update among threads only delays the mean
        self.call_time = moved(self.call_time, seconds)


class _Handoff:
    """Answers from a lane's threads to the loop, as many as are ready in one callback. Each
    `call_soon_threadsafe` writes a byte to the loop's self-pipe, a system call that wakes the
    loop (8.7% of the read threads' samples under `make bench-team`, py-spy); an answer that finds
    a callback already on its way joins it instead."""

    __slots__ = ("loop", "ready", "lock", "scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.ready: deque[tuple[asyncio.Future[Any], Any, BaseException | None]] = deque()
        self.lock = threading.Lock()
        self.scheduled = False   # a drain() is on its way to the loop

    def put(self, answer: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
        """On a thread: `answer`'s outcome, settled on the loop."""
        self.ready.append((answer, result, error))
        with self.lock:
            if self.scheduled:
                return   # the drain on its way takes this one too: it empties `ready` after it was asked for
            self.scheduled = True
        try:
            self.loop.call_soon_threadsafe(self.drain)
        except RuntimeError:   # the loop closed meanwhile: nobody is left to answer
            pass

    def drain(self) -> None:
        """On the loop: settle every answer ready."""
        with self.lock:
            self.scheduled = False   # from here on a new answer asks for a drain of its own
        ready = self.ready
        while ready:
            _settle(*ready.popleft())


def _settle(answer: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """On the loop: a thread's outcome for its caller, unless the caller went."""
    if answer.cancelled():
        return
    if error is None:
        answer.set_result(result)
    elif isinstance(error, concurrent.futures.CancelledError):   # as asyncio converts a thread future's
        answer.set_exception(asyncio.CancelledError(*error.args))
    else:
        answer.set_exception(error)


class ReadLane(Lane):
    """A pool of threads whose queue speed is measured rather than derived: the requests its
    threads took in the last `RATE_WINDOW` seconds are the rate the queue clears at, so a new
    request waits about the requests ahead of it at that rate. Under load a call's own time on its
    thread is mostly time spent waiting for a core, shared with the other threads and the database,
    so the mean call divided by the threads says little of how fast the queue moves; and in a
    server just started the first calls, slowed by the whole burst that woke them, would refuse a
    burst that clears in a fraction of a second: so nothing is shed for time until the lane has run a
    whole window (the hard cap holds meanwhile). When the threads took too few requests within the
    window to tell a rate (fewer than two each: the lane idle, or its threads stuck), the mean call,
    shared by the threads, stands in.

    A shed request comes back after its Retry-After second and waits again, about as long as the
    recent ones waited (`waited`, the mean wait of the requests the threads took, measured): so a
    request past `max_wait` is shed when the queue has been that slow for a while, or when it would
    wait longer than coming back takes. One just past `max_wait` at a crest of a queue that usually
    clears in half of it is served, not sent back to return with the others a second later.

    Requests differ in cost (a search over every scope takes ten times a recall's time), so the
    rate is weighed by what is waiting: each kind of request (its route) has its recent time on a
    thread, and the time per place is scaled by the mean cost of the requests waiting (the new one
    included) over the mean cost of those the threads took in the window. Under `bench/team.py`
    the searchers' recalls come in a wave right after their searches; counted at the rate the
    searches cleared, 200 recalls looked like 1.3 s of wait and were shed, while they cleared in
    well under a second. A kind not measured yet counts as nothing until one of it has run (as the
    writer's kinds: `WriteLane.kind_wait`), the hard cap holding meanwhile."""

    RATE_WINDOW = 1.0
    RATE_KEPT = 4096

    def __init__(self, name: str, threads: int, max_queue: int, max_wait: float = float("inf")) -> None:
        super().__init__(name, threads, max_queue, max_wait)
        # when the threads took requests: the last RATE_WINDOW seconds' (at most RATE_KEPT of them),
        # with what each counted (its kind's cost then)
        self.starts: deque[tuple[float, float]] = deque(maxlen=self.RATE_KEPT)
        self.waited = 0.0                     # seconds the requests taken waited for a thread, recent mean
        self.first_start = 0.0                # when a thread first took a request
        self.costs: dict[str, float] = {}     # each kind's seconds on a thread, recent mean
        self.warmed: set[tuple[str, int]] = set()   # (kind, thread) whose first call ran
        self.queued_cost = 0.0                # what the requests waiting for a thread count, in all
        self.queued_counted = 0               # how many of them count (their kind measured)
        self.window_cost = 0.0                # what the requests in `starts` count, in all
        self._queue_lock = threading.Lock()   # the loop adds to those, the threads take away

    def expected_wait(self, kind: str = "") -> float:
        if self.taken < self.threads:
            return 0.0
        now = time.perf_counter()
        starts = self.starts
        while starts and starts[0][0] < now - self.RATE_WINDOW:   # trimmed here alone (on the loop)
            _, cost = starts.popleft()
            with self._queue_lock:
                self.window_cost -= cost
        if not self.first_start or now - self.first_start < self.RATE_WINDOW:
            return 0.0   # warming up: no rate measured over a whole window yet, nothing shed for time
        if len(starts) >= 2 * self.threads:   # each thread took two at least: a rate to go by
            return (self.waiting + 1) * (now - starts[0][0]) / len(starts) * self._weight(kind)
        return super().expected_wait()   # the threads all but stopped taking requests: the mean call

    def _weight(self, kind: str) -> float:
        """The mean cost of the requests waiting and of the next one (`kind`) over the mean cost of
        those taken in the window; 1 while no kind is measured, nor what the window took."""
        taken = max(0.0, self.window_cost)
        if not self.costs or not taken:
            return 1.0
        new = self.costs.get(kind)
        counted = self.queued_counted + (new is not None)
        if not counted:
            return 0.0   # nothing waiting is measured yet: it counts as nothing
        waiting = (self.queued_cost + (new or 0.0)) / counted
        return waiting / (taken / len(self.starts))

    def worth_shedding(self, wait: float) -> bool:
        return self.waited >= self.max_wait or wait > Overloaded.retry_after + self.waited

    def _queued(self, kind: str) -> float:
        cost = self.costs.get(kind)
        if cost is None:
            return 0.0
        with self._queue_lock:
            self.queued_cost += cost
            self.queued_counted += 1
        return cost

    def _dequeued(self, cost: float) -> None:
        if cost:
            with self._queue_lock:
                self.queued_cost = max(0.0, self.queued_cost - cost)
                self.queued_counted = max(0, self.queued_counted - 1)

    def _started(self, now: float, waited: float, kind: str = "") -> None:
        self.first_start = self.first_start or now
        cost = self.costs.get(kind, self.call_time)
        with self._queue_lock:   # the sum with the deque: the loop trims both together
            if len(self.starts) == self.RATE_KEPT:   # the oldest drops out
                self.window_cost -= self.starts[0][1]
            self.starts.append((now, cost))
            self.window_cost += cost
        self.waited = moved(self.waited, waited)

    def _spent(self, seconds: float, kind: str = "") -> None:
        """A call of `kind` took `seconds` on this thread. A kind's first call on each thread is
        not its cost: it pays what is done once per thread and connection (statements prepared,
        caches filled), and a fresh store's first recalls recompute the tiers, one thread
        storing them while the others wait for it (`Lifecycle.refresh_tiers`): as the first
        samples of the mean, those would count every recall behind them at that time."""
        super()._spent(seconds)
        first = (kind, threading.get_ident())
        if first not in self.warmed:
            self.warmed.add(first)   # a set's add is atomic under the GIL
            return
        self.costs[kind] = moved(self.costs.get(kind, 0.0), seconds)   # one float store: atomic under the GIL


@dataclass
class _Write:
    context: contextvars.Context
    call: Callable[[], Any]
    grouped: bool
    kind: str = ""   # what tells its cost: the route, and a hook event's name (`Endpoint.write_kind`)
    future: Future[Any] = field(default_factory=Future)


class WriteLane(Lane):
    """The one writer thread, storing waiting grouped writes in one transaction (group commit)."""

    def __init__(self, store: Any, batch: int, max_queue: int, max_wait: float,
                 forget: Callable[[], None] = lambda: None) -> None:
        super().__init__("write", 1, max_queue, max_wait)
        self.store = store
        self.batch = max(1, batch)
        self.forget = forget   # drops what the service cached of writes a failed commit undid
        self.pending: deque[_Write] = deque()   # appended on the loop, taken on the writer thread
        # Each kind of write's own part of a transaction, and a transaction's own part (BEGIN, the
        # commit's flush), in seconds, recent means; written on the writer thread alone.
        self.costs: dict[str, float] = {}
        self.overhead = 0.0
        self.first_seen: set[str] = set()   # kinds whose first write ran: its time is not their cost
        self.waited = 0.0   # seconds from admission to answer of the recent writes, recent mean
        self.running: tuple[Sequence[_Write], float] = ((), 0.0)   # the writes being stored, since when
        # for /metrics: writes run alone, transactions shared by several, the writes those held
        self.alone = self.commits = self.shared = 0

    def kind_wait(self, kind: str, grouped: bool) -> float:
        """Seconds until a write of `kind` would be stored: what is left of the transaction
        running, then each waiting write at its own kind's cost, grouped into transactions as the
        writer will take them (a transaction's own part once each), its own the last. Fifty
        SessionStarts opening sessions make a slow batch, but the prompts that follow
        are counted at a prompt's cost, not at that batch's: a burst the writer clears within
        `max_wait` is admitted, while a queue of costly writes, or of many, is shed at once. A
        kind not measured yet counts as nothing until one of it is stored (as a read lane warming
        up sheds nothing for time; the hard cap, `max_queue`, holds meanwhile): a server's first
        burst is not shed for its first write's time, which pays what is done once."""
        if not self.taken:
            return 0.0
        costs, overhead = self.costs, self.overhead
        running, began = self.running
        total = 0.0
        if running:
            # past its expected time, a running transaction is taken to need as long again as it overran
            expected = overhead + sum(costs.get(w.kind, 0.0) for w in running)
            total = abs(expected - (time.perf_counter() - began))
        size, shared = 0, False
        # A copy taken in one step: the writer thread takes writes from the queue meanwhile, and
        # iterating it in Python ("deque mutated during iteration") failed the request (a 500).
        waiting = tuple(self.pending)
        for each_grouped, each_kind in [*((w.grouped, w.kind) for w in waiting), (grouped, kind)]:
            if shared and each_grouped and size < self.batch:
                size += 1
            else:
                size, shared = 1, each_grouped
                total += overhead
            total += costs.get(each_kind, 0.0)
        return total

    def _learn(self, kind: str, seconds: float) -> None:
        """A write of `kind` took `seconds`. The first of each kind is not counted: it pays what is
        done once (imports, statements prepared, caches filled; a server's first SessionStart
        took 0.2 s, the next ones 10 ms), and as the first sample of a mean it would stand for
        all of them: the burst of SessionStarts right behind it would be shed for it."""
        if kind not in self.first_seen:
            self.first_seen.add(kind)
            return
        self.costs[kind] = moved(self.costs.get(kind, 0.0), max(0.0, seconds))

    def worth_shedding(self, wait: float) -> bool:
        """As for reads: a shed write comes back after its Retry-After second and waits again, so
        one past `max_wait` is shed when the recent writes took that long too, or when it would
        wait longer than coming back takes: not at a crest of a queue that clears in time."""
        return self.waited >= self.max_wait or wait > Overloaded.retry_after + self.waited

    async def run(self, call: Callable[[], T], grouped: bool = False, kind: str = "") -> T:
        self.admit(self.kind_wait(kind, grouped))
        self.taken += 1
        admitted = time.perf_counter()
        try:
            write = _Write(contextvars.copy_context(), call, grouped, kind)
            self.pending.append(write)
            self.executor.submit(self._next)
            result: T = await asyncio.wrap_future(write.future)
            return result
        finally:
            self.taken -= 1
            self.waited = moved(self.waited, time.perf_counter() - admitted)

    def _next(self) -> None:
        """On the writer thread: the oldest waiting write, with the grouped ones right behind it."""
        batch = self._take()
        if len(batch) == 1:
            self._alone(batch[0])
        elif batch:
            self._together(batch)

    def _take(self) -> list[_Write]:
        batch: list[_Write] = []
        while self.pending and len(batch) < self.batch:
            if batch and not (batch[0].grouped and self.pending[0].grouped):
                break   # an ungrouped write runs alone, in its turn
            write = self.pending.popleft()
            if write.future.set_running_or_notify_cancel():  # else its caller is gone: skip it
                batch.append(write)
        return batch

    def _alone(self, write: _Write) -> None:
        began = time.perf_counter()
        self.running = ((write,), began)
        self.alone += 1
        try:
            write.future.set_result(write.context.run(write.call))
        except BaseException as exc:
            write.future.set_exception(exc)
        finally:
            took = time.perf_counter() - began
            self.running = ((), 0.0)
            self._spent(took)
            # its transaction's own part is in `took` too: the rest is its kind's
            self._learn(write.kind, took - self.overhead)

    def _learn_batch(self, batch: list[_Write], parts: list[float], took: float) -> None:
        """A committed transaction teaches each kind its writes' times and itself its own part."""
        for write, seconds in zip(batch, parts, strict=True):
            self._learn(write.kind, seconds)
        self.overhead = moved(self.overhead, max(0.0, took - sum(parts)))

    def close(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)
        while self.pending:  # their turn will not come: their callers hear so, as a cancelled call
            self.pending.popleft().future.cancel()

    def _together(self, batch: list[_Write]) -> None:
        try:
            self._commit_together(batch)
        except BaseException as exc:  # not an error of a write (an interrupt): nobody is left waiting
            for write in batch:
                if not write.future.done():
                    write.future.set_exception(exc)
            raise

    def _commit_together(self, batch: list[_Write]) -> None:
        began = time.perf_counter()
        self.running = (batch, began)
        outcomes: list[tuple[bool, Any]] = []
        parts: list[float] = []   # each write's own time in the transaction
        try:
            with self.store.transaction():
                for write in batch:
                    part = time.perf_counter()
                    try:
                        with self.store.savepoint():
                            outcomes.append((True, write.context.run(write.call)))
                    except TransactionLost:
                        raise
                    except Exception as exc:
                        self.forget()   # what the service cached of the undone part (a session's project)
                        outcomes.append((False, exc))
                    parts.append(time.perf_counter() - part)
            self.commits += 1
            self.shared += len(batch)
            self._learn_batch(batch, parts, time.perf_counter() - began)
        except CommitUnknown as unknown:
            # The COMMIT's answer was lost and the server could not say whether it committed: it
            # may have stored every write, so none runs again (a keyless one would be stored twice).
            self.forget()
            outcomes += [(False, unknown)] * (len(batch) - len(outcomes))
            outcomes = [(False, unknown) if ok else (ok, value) for ok, value in outcomes]
        except Exception:
            # Nothing of the batch is stored (a failed BEGIN or COMMIT, a part that took the
            # transaction with it): each write runs again alone, as it would have without grouping.
            self.forget()
            for write in batch:
                self._alone(write)
            return
        finally:
            self.running = ((), 0.0)
            took = time.perf_counter() - began
            self._spent(took / len(batch))
        for write, (ok, value) in zip(batch, outcomes, strict=True):
            if ok:
                write.future.set_result(value)
            else:
                write.future.set_exception(value)


class Touches:
    """Accesses of memories (a recall, a get: `Service.touch`) counted on the writer thread, many
    requests' in one transaction, instead of a write transaction of its own on the read thread
    that answered each: under 200 concurrent recalls those were a third of the server's CPU a
    request and a commit each, row locks on the same few memories included. A memory recalled n
    times since the last count gains n accesses and the latest time; a request is answered before
    its access is stored (the count is bookkeeping: lifecycle tiers read it), and whatever is
    waiting when the server stops is stored then."""

    def __init__(self, store: Any, submit: Callable[[Callable[[], None]], Any]) -> None:
        self.store = store
        self.submit = submit          # runs a call on the writer thread
        self.lock = threading.Lock()
        self.pending: dict[str, list[int]] = {}   # uid -> [accesses, latest time]
        self.queued = False            # a flush is waiting on the writer thread

    def add(self, uids: Sequence[str], at: int) -> None:
        with self.lock:
            for uid in uids:
                seen = self.pending.setdefault(uid, [0, at])
                seen[0] += 1
                seen[1] = max(seen[1], at)
            if self.queued:
                return
            self.queued = True
        try:
            self.submit(self.flush)
        except RuntimeError:   # the writer thread stopped (shutting down): close() stores them
            with self.lock:
                self.queued = False

    def flush(self) -> None:
        """Store what is waiting: one transaction, one UPDATE for each (accesses, time) among them."""
        with self.lock:
            pending, self.pending, self.queued = self.pending, {}, False
        if not pending:
            return
        groups: dict[tuple[int, int], list[str]] = {}
        for uid, (times, at) in pending.items():
            groups.setdefault((times, at), []).append(uid)
        try:
            with self.store.transaction():
                for (times, at), uids in sorted(groups.items()):
                    self.store.touch_memories(uids, at, times)
        except NmemError as exc:   # a read-only store, the database gone: accesses are not worth an error
            log.warning("access counts not stored: %s", exc.message)


class StoreThreads:
    """The read pool, the writer thread and the token checks of one server process."""

    CHECK_THREADS = 2

    def __init__(self, store: Any, threads: int, max_queue: int, max_wait_ms: int | None = None,
                 write_batch: int = 1, forget: Callable[[], None] = lambda: None) -> None:
        max_wait = float("inf") if max_wait_ms is None else max_wait_ms / 1000
        self.reads = ReadLane("read", threads, max_queue, max_wait)
        self.writes = WriteLane(store, write_batch, max_queue, max_wait, forget)
        # A team server looks a request's token up when it kept no answer for it (TeamAuth): on
        # threads of their own, so a request does not take a search's place twice.
        self.checks = Lane("token check", self.CHECK_THREADS, max_queue, max_wait)
        # A PostgreSQL store's pool must have a connection for each thread (and for the loop's own
        # calls: the streams' poller, MCP): else threads queue for connections instead of work.
        # The read threads' and the writer's are opened now, before the first burst of requests.
        reserve = getattr(store, "reserve_connections", None)
        if reserve is not None:
            reserve(threads + 1 + self.CHECK_THREADS + 4, ready=threads + 1)
        self.touches = Touches(store, self.writes.executor.submit)

    async def run(self, call: Callable[[], T], *, write: bool, grouped: bool = False, kind: str = "",
                  admitted: bool = False) -> T:
        """`grouped`: a write that may share its transaction with others waiting (group commit);
        `kind`: what tells a write's cost (its route, a hook event's name), for its expected wait;
        `admitted`: a read for a request already let in (`routing.ThenRead`), never shed."""
        if write:
            return await self.writes.run(call, grouped, kind)
        return await self.reads.run(call, admitted, kind)

    async def check(self, call: Callable[[], T]) -> T:
        return await self.checks.run(call)

    async def warm(self, call: Callable[[], Any], seconds: float = WARM_SECONDS) -> None:
        """Run `call` (a search) once on each read thread before the server answers: a server's
        first burst otherwise meets every thread, its connection and its database backend cold
        (statements parsed and planned, catalogs and the store's statistics read, modules
        imported, all at once on every thread): a fresh server's first search on PostgreSQL took
        ~340 ms under load, ~130 ms with its threads warmed. What it finds is dropped; an error
        or a store slower than `seconds` leaves the rest cold, nothing more."""
        lane = self.reads
        together = threading.Barrier(lane.threads)

        def each() -> None:
            try:
                together.wait(seconds)   # one call on each thread: none takes two while one is idle
                call()
            except (threading.BrokenBarrierError, NmemError):
                pass

        loop = asyncio.get_running_loop()
        calls = [loop.run_in_executor(lane.executor, each) for _ in range(lane.threads)]
        await asyncio.wait(calls, timeout=2 * seconds)

    def close(self) -> None:
        for lane in (self.reads, self.checks):
            lane.executor.shutdown(wait=True, cancel_futures=True)
        self.writes.close()
        self.touches.flush()   # the accesses still waiting (the writer thread has stopped)
