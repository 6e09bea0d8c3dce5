"""How many threads a server runs its REST reads on when `http.threads` is 0: one per core on
SQLite, whose reads compute in the process (Python runs one thread at a time, and SQLite hands
that lock back at every step of a statement, so threads past the cores only pass it around), four
per core on PostgreSQL, whose reads wait on the server as much as they compute. bench/http_server.py
measures the difference (docs/http.md, "Read threads")."""

from __future__ import annotations

import os

import pytest

from nmem.adapters.http.app import create_app
from nmem.adapters.http.threads import MAX_AUTO_THREADS, auto_threads
from nmem.adapters.net import usable_cores
from nmem.service.api import Service
from store_engines import both_engines

__all__ = ["both_engines"]
CORES = len(os.sched_getaffinity(0))


def test_a_thread_per_core_for_reads_that_compute_four_for_reads_that_wait() -> None:
    assert auto_threads(0, waits=False) == max(2, CORES)
    assert auto_threads(0, waits=True) == max(2, min(MAX_AUTO_THREADS, 4 * CORES))
    assert auto_threads(0) == auto_threads(0, waits=True)   # the default for a caller that does not say
    assert auto_threads(0, workers=64, waits=True) == 2 == auto_threads(0, workers=64, waits=False)
    assert auto_threads(3, waits=False) == 3 == auto_threads(3, waits=True)   # a set value is taken as it is


def test_without_an_affinity_every_core_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """macOS and Windows have no `sched_getaffinity`: the read threads and `--workers 0` count
    every core there (the read threads' count raised AttributeError before)."""
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    assert usable_cores() == 3
    assert auto_threads(0, waits=False) == 3 and auto_threads(0, waits=True) == min(MAX_AUTO_THREADS, 12)


def test_the_server_sizes_its_read_pool_by_its_engine(service: Service) -> None:
    app = create_app(service.settings, service=service, project="demo")
    threads = app.context.threads
    assert threads is not None
    sqlite = service.store.url.startswith("sqlite:")
    assert threads.reads.threads == (max(2, CORES) if sqlite else max(2, min(MAX_AUTO_THREADS, 4 * CORES)))
