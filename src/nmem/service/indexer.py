"""Vectors for search: embed what lacks one, in short write transactions beside the hooks
(`nmem index`, the MCP server's background pass, and recall's memories before it compares)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nmem.search.embedders import INDEX_BATCH, MAX_TEXT_CHARS, PLURAL, VECTOR_KINDS, Embedder, active_embedder, pack

if TYPE_CHECKING:
    from nmem.config import Settings
    from nmem.store.protocol import Store

log = logging.getLogger("nmem.embeddings")


def embed_memories(store: Store, embedder: Embedder) -> int:
    """Give every memory lacking one its vector (memories are few; the trail waits for `nmem index`)."""
    done = after = 0
    while rows := store.missing_vectors("memory", embedder.name, after, INDEX_BATCH):
        vectors = embedder.embed([text[:MAX_TEXT_CHARS] for _, text in rows])
        store.put_vectors("memory", embedder.name, embedder.dimension,
                          [(row_id, pack(vec)) for (row_id, _), vec in zip(rows, vectors, strict=True)])
        after = rows[-1][0]
        done += len(rows)
    return done


@dataclass
class IndexReport:
    model: str
    dimension: int
    embedded: dict[str, int] = field(default_factory=dict)   # vectors computed, by kind
    removed: int = 0                                          # dropped by --rebuild or as orphans
    vectors: dict[str, int] = field(default_factory=dict)    # stored for this model afterwards
    seconds: float = 0.0
    stopped: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "dimension": self.dimension, "embedded": self.embedded,
                "removed": self.removed, "vectors": self.vectors, "seconds": round(self.seconds, 3)}


def pending(store: Store, embedder: Embedder) -> dict[str, int]:
    """Records of each kind without a vector for this embedder."""
    return {kind: store.count_missing_vectors(kind, embedder.name) for kind in VECTOR_KINDS}


def build_index(store: Store, embedder: Embedder, *, rebuild: bool = False, batch: int = INDEX_BATCH,
                progress: Callable[[int], None] | None = None,
                should_stop: Callable[[], bool] | None = None,
                marks: dict[str, int] | None = None) -> IndexReport:
    """Embed every observation, prompt and memory lacking a vector for `embedder`.

    Each batch is embedded outside any transaction and written in one short one, so
    hooks recording meanwhile wait at most a few milliseconds. `rebuild` first drops every
    stored vector (all models). `should_stop` is checked between batches. `marks` (kind →
    last row id seen) makes repeated passes incremental: they start past the mark and
    move it on.
    """
    started = time.perf_counter()
    report = IndexReport(embedder.name, embedder.dimension)
    report.removed = store.delete_vectors(None) if rebuild else store.prune_vectors()
    for kind in VECTOR_KINDS:
        done = 0
        after = marks.get(kind, 0) if marks is not None else 0
        while True:
            if should_stop is not None and should_stop():
                report.stopped = True
                break
            rows = store.missing_vectors(kind, embedder.name, after, batch)
            if not rows:
                break
            texts = [text[:MAX_TEXT_CHARS] for _, text in rows]
            vectors = embedder.embed(texts)
            store.put_vectors(kind, embedder.name, embedder.dimension,
                              [(row_id, pack(vec)) for (row_id, _), vec in zip(rows, vectors, strict=True)])
            after = rows[-1][0]
            if marks is not None:
                marks[kind] = after
            done += len(rows)
            if progress is not None:
                progress(len(rows))
        report.embedded[PLURAL[kind]] = done
        if report.stopped:
            break
    report.vectors = {PLURAL[kind]: store.count_vectors(kind, embedder.name) for kind in VECTOR_KINDS}
    report.seconds = time.perf_counter() - started
    return report


def index_pass(url: str, settings: Settings, stop: threading.Event, marks: dict[str, int]) -> IndexReport | None:
    """One background pass on a store of its own (own connections: safe beside the caller's)."""
    embedder = active_embedder(settings)
    if embedder is None:
        return None
    from nmem.store import open_store
    from nmem.store.keys import database_key

    store = open_store(url, key=database_key(settings))
    try:
        return build_index(store, embedder, should_stop=stop.is_set, marks=marks)
    finally:
        store.close(checkpoint=False)


async def index_in_background(url: str, settings: Settings, interval: float = 120.0) -> None:
    """Embed new records every `interval` seconds until cancelled (the MCP server runs this).

    The first pass covers everything; later ones start past the last row they saw
    (memories, which change in place, are always looked at whole).
    """
    import anyio
    import anyio.to_thread

    stop = threading.Event()
    marks: dict[str, int] = {}
    try:
        while True:
            try:
                report = await anyio.to_thread.run_sync(index_pass, url, settings, stop, marks,
                                                        abandon_on_cancel=True)
                marks.pop("memory", None)
                if report is not None and any(report.embedded.values()):
                    log.info("embedded %s with %s in %.1f s", report.embedded, report.model, report.seconds)
            except Exception as exc:  # never take the server down for an optional index
                log.warning("background embedding pass failed: %s: %s", type(exc).__name__, exc)
            await anyio.sleep(interval)
    finally:
        stop.set()
