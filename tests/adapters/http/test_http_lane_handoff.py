"""How a lane hands a call to its threads and the answer back to the event loop (`Lane.run`):
the call's result or its exception, in the caller's context; a call whose caller went before a
thread took it never runs; and the thread's answer reaches the loop as one callback of its own,
not through a thread future chained to the loop's."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from nmem.adapters.http.threads import ReadLane
from nmem.errors import NotFound

pytestmark = pytest.mark.anyio

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


@contextmanager
def handoffs(loop: asyncio.AbstractEventLoop) -> Iterator[list[str]]:
    """The callbacks threads hand to `loop` meanwhile (`call_soon_threadsafe`), by name."""
    scheduled: list[str] = []
    plain = loop.call_soon_threadsafe

    def spying(callback: Any, *args: Any, **kwargs: Any) -> Any:
        scheduled.append(getattr(callback, "__qualname__", repr(callback)))
        return plain(callback, *args, **kwargs)

    loop.call_soon_threadsafe = spying   # type: ignore[method-assign]
    try:
        yield scheduled
    finally:
        del loop.call_soon_threadsafe


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def lane() -> Any:
    lane = ReadLane("read", threads=1, max_queue=1024)
    yield lane
    lane.executor.shutdown(wait=True, cancel_futures=True)


async def test_a_call_answers_with_its_result_or_its_error_in_the_callers_context(lane: ReadLane) -> None:
    WHO.set("alice")
    assert await lane.run(lambda: (WHO.get(), threading.current_thread().name)) == ("alice", "nmem-read_0")

    def missing() -> None:
        raise NotFound("no such thing")

    with pytest.raises(NotFound, match="no such thing"):
        await lane.run(missing)

    def cancelled_inside() -> None:
        raise concurrent.futures.CancelledError("a fan-out read was cancelled")

    with pytest.raises(asyncio.CancelledError):
        await lane.run(cancelled_inside)
    assert lane.taken == 0


async def test_a_call_whose_caller_went_before_a_thread_took_it_never_runs(lane: ReadLane) -> None:
    release = threading.Event()
    ran: list[str] = []
    busy = asyncio.ensure_future(lane.run(lambda: release.wait(10)))   # the one thread, held
    await asyncio.sleep(0.05)
    waiting = asyncio.ensure_future(lane.run(lambda: ran.append("ran")))
    await asyncio.sleep(0.05)
    waiting.cancel()                       # its client went while it waited for the thread
    with pytest.raises(asyncio.CancelledError):
        await waiting
    release.set()
    assert await busy is True
    assert await lane.run(lambda: "next") == "next"   # the thread went on to the next call
    assert ran == [] and lane.taken == 0


async def test_the_answer_comes_back_as_one_callback_of_the_lane(lane: ReadLane) -> None:
    """No thread future is chained to the loop's (`run_in_executor`): the loop runs the lane's
    own callback, which settles the caller's future."""
    with handoffs(asyncio.get_running_loop()) as scheduled:
        assert await lane.run(lambda: 42) == 42
    assert scheduled == ["_Handoff.drain"]


async def test_answers_ready_together_come_back_in_one_callback() -> None:
    """Answers that finish while the loop is busy reach it in one callback (one wake-up of the
    loop), each to its own caller, errors included; the next answer asks for a callback again."""
    lane = ReadLane("read", threads=2, max_queue=1024)
    finished = threading.Semaphore(0)

    def call(i: int) -> int:
        try:
            if i == 7:
                raise NotFound("seven")
            return i * i
        finally:
            finished.release()

    try:
        with handoffs(asyncio.get_running_loop()) as scheduled:
            runs = [asyncio.ensure_future(lane.run(lambda i=i: call(i))) for i in range(20)]
            await asyncio.sleep(0)             # each run handed to the threads
            for _ in range(20):                # the loop held until every call finished
                assert finished.acquire(timeout=30)
            answers = await asyncio.gather(*runs, return_exceptions=True)
            assert len(scheduled) == 1         # one callback brought all twenty back
            assert await lane.run(lambda: "next") == "next" and len(scheduled) == 2
    finally:
        lane.executor.shutdown(wait=True, cancel_futures=True)
    assert [a if isinstance(a, int) else str(a) for a in answers] == \
        [i * i if i != 7 else "seven" for i in range(20)]
    assert lane.taken == 0
