"""`nmem serve --transport http --workers N`: N server processes behind one port.

The parent binds the port (`nmem.adapters.net.listen_per_worker`: a socket set per worker with
SO_REUSEPORT, so the kernel spreads connections), then forks the workers and only watches them:
each worker opens its own store connections and runs its own app, threads and stream poller.
Nothing is shared between workers but the database, which is what keeps them consistent: a
change any worker commits is read by every worker's poller (`PRAGMA data_version` on SQLite,
the `nmem_changes` sequence on PostgreSQL), so an SSE or WebSocket subscriber sees it whichever
worker it is connected to.

A worker that dies is started again on the same sockets (connections waiting in its queue are
kept by the parent's copy); SIGTERM or SIGINT to the parent stops every worker gracefully.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable

log = logging.getLogger("nmem.http")
# A worker that dies this soon after it started, this many times in a row, is not started again:
# it fails for a reason a restart does not change (the database is gone, the code is broken).
QUICK_DEATH_SECONDS = 5.0
QUICK_DEATHS = 3
STOP_SECONDS = 10.0


class Supervisor:
    """Forks and watches the workers; `run()` returns the exit status for the command."""

    def __init__(self, groups: list[list[socket.socket]], work: Callable[[int, list[socket.socket]], None]) -> None:
        self.groups = groups
        self.work = work   # (worker index, its sockets) -> serves until stopped; runs in the child
        self.children: dict[int, tuple[int, float]] = {}   # pid -> (worker index, started at)
        self.stopping = False
        self.quick_deaths = 0

    def _fork(self, index: int) -> None:
        pid = os.fork()
        if pid == 0:  # the worker
            code = 1
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                mine = {id(s) for s in self.groups[index]}
                for group in self.groups:
                    for sock in group:
                        if id(sock) not in mine:
                            sock.close()
                _follow_parent(os.getppid())
                self.work(index, self.groups[index])
                code = 0
            except KeyboardInterrupt:
                code = 0
            except BaseException:
                log.exception("worker %d failed", index)
            finally:
                os._exit(code)
        self.children[pid] = (index, time.monotonic())

    def _stop(self, signum: int, _frame: object) -> None:
        self.stopping = True
        for pid in list(self.children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def run(self) -> int:
        previous = {s: signal.signal(s, self._stop) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            for index in range(len(self.groups)):
                self._fork(index)
            return self._watch()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            for group in self.groups:
                for sock in group:
                    sock.close()

    def _watch(self) -> int:
        status = 0
        stop_by: float | None = None
        while self.children:
            if self.stopping and stop_by is None:
                stop_by = time.monotonic() + STOP_SECONDS
            if stop_by is not None and time.monotonic() > stop_by:
                for pid in list(self.children):  # a worker that ignores SIGTERM
                    os.kill(pid, signal.SIGKILL)
            try:
                pid, code = os.waitpid(-1, os.WNOHANG if stop_by is not None else 0)
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            if pid == 0:
                time.sleep(0.05)
                continue
            index, started = self.children.pop(pid)
            if self.stopping:
                continue
            status = self._restart(index, started, code)
            if status:
                self._stop(signal.SIGTERM, None)
        return status

    def _restart(self, index: int, started: float, code: int) -> int:
        """Start a dead worker again; 1 when it keeps dying at once (then everything stops)."""
        self.quick_deaths = self.quick_deaths + 1 if time.monotonic() - started < QUICK_DEATH_SECONDS else 0
        log.error("worker %d exited (%s); %s", index, _describe(code),
                  "giving up" if self.quick_deaths >= QUICK_DEATHS else "starting it again")
        if self.quick_deaths >= QUICK_DEATHS:
            return 1
        self._fork(index)
        return 0


def _follow_parent(parent: int) -> None:
    """A worker whose parent died (SIGKILL leaves it no time to stop them) stops itself."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="nmem-parent-watch", daemon=True).start()


def _describe(code: int) -> str:
    if os.WIFSIGNALED(code):
        return f"signal {os.WTERMSIG(code)}"
    return f"status {os.waitstatus_to_exitcode(code)}"
