"""Threads sharing one store (a server's request threads): each reads through its own
connection and never sees another thread's uncommitted write; a second writer thread writes
too (on SQLite after waiting for the first's transaction). On both engines."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from nmem.config import Settings
from nmem.service.api import Service
from store_engines import both_engines

__all__ = ["both_engines"]


def test_threads_share_a_store_without_seeing_each_others_open_writes(settings: Settings) -> None:
    service = Service.open(settings)
    try:
        service.remember("committed before anything else", domain="user")
        opened, checked = threading.Event(), threading.Event()
        order: list[str] = []

        def writer() -> None:
            with service.store.transaction():
                service.remember("alpha written in an open transaction", domain="user")
                opened.set()
                assert checked.wait(30)
                order.append("first commit")

        def reader() -> list[str]:
            assert opened.wait(30)
            try:
                return [m.content for m in service.store.iter_memories("user", None)]
            finally:
                checked.set()

        def second_writer() -> None:
            assert checked.wait(30)
            service.remember("beta from another thread", domain="user")  # waits for the first to commit
            order.append("second write")

        with ThreadPoolExecutor(3) as pool:
            first = pool.submit(writer)
            read = pool.submit(reader)
            second = pool.submit(second_writer)
            first.result(60)
            second.result(60)
            assert read.result(60) == ["committed before anything else"]
        if settings.store_url.startswith("sqlite:"):  # one writer connection: the second waited its turn
            assert order == ["first commit", "second write"]
        contents = {m.content for m in service.store.iter_memories("user", None)}
        assert contents == {"committed before anything else", "alpha written in an open transaction",
                            "beta from another thread"}
    finally:
        service.close()


def test_many_threads_read_at_once(settings: Settings) -> None:
    service = Service.open(settings)
    try:
        for i in range(20):
            service.remember(f"note number {i} about caching", domain="user")

        def search(_: int) -> int:
            return len(service.search("caching", scope="memories", limit=50).hits)

        with ThreadPoolExecutor(8) as pool:
            assert list(pool.map(search, range(64))) == [20] * 64
    finally:
        service.close()
