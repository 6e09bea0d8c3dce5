"""What the PostgreSQL kept-ids tests share (test_pg_fts_kept_newest, test_pg_fts_sieve): the
ids `word_counts` keeps per word, a question ranked with the key walked (no kept ids taken), and
searching until the writer has kept a question's terms."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nmem.store.records import SearchFilters

if TYPE_CHECKING:
    from collections.abc import Callable

    import pytest

    from nmem.store.protocol import Store


def kept_lists(store: Store) -> dict[str, list[int] | None]:
    """Each observation word's kept newest ids (None: counted, but too common to keep them)."""
    rows = store._query("SELECT word, newest FROM word_counts WHERE tbl = 'observations' AND word <> ''")  # type: ignore[attr-defined]
    return {str(r[0]): (None if r[1] is None else [int(i) for i in r[1]]) for r in rows}


def walked(store: Store, match: str, monkeypatch: pytest.MonkeyPatch, want: int = 3) -> list[tuple[int, float]]:
    """The question ranked with the key walked (no kept ids taken: neither the 'kept' way nor the
    'sieve' way)."""
    from nmem.store.postgres import search
    from nmem.store.postgres.tsquery import parse

    with monkeypatch.context() as patched:
        patched.setattr(search, "sievable", lambda parsed: False)
        patched.setattr(search, "disjunctive", lambda parsed: False)
        patched.setattr(search, "range_limits", lambda q, w: (0.0, 0.0, 1.0))
        return store._bm25_newest("observations", parse(match), SearchFilters(), want)  # type: ignore[attr-defined]


def until_listed(store: Store, ask: Callable[[Store, str], Any], match: str, terms: tuple[str, ...]) -> None:
    """Ask the question (`ask`) until the terms' ids are kept (a write-back waits for a moment no
    other test process's write is in flight: SETTLED)."""
    for _ in range(200):
        ask(store, match)
        lists = kept_lists(store)
        if all(lists.get(t) is not None for t in terms):
            return
    raise AssertionError(f"ids of {terms} never kept")
