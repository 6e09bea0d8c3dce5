"""PostgreSQL functions counted by their calls. A test's schema gets its own `ts_rank_cd` (or
`ts_filter`) that tells each call to the client as a notice, then answers as pg_catalog's does;
a store whose search path names pg_catalog after the test's schema (`counting_store`) calls it,
one opened as usual calls pg_catalog's."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from nmem.store import open_store
from nmem.store.protocol import Store
from nmem.store.records import SearchFilters

COUNTED_RANK_CD = """
CREATE OR REPLACE FUNCTION ts_rank_cd(w real[], v tsvector, q tsquery) RETURNS real LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE 'nmem_test ts_rank_cd';
    RETURN pg_catalog.ts_rank_cd(w, v, q);
END $$
"""

COUNTED_FILTER = """
CREATE OR REPLACE FUNCTION ts_filter(v tsvector, w "char"[]) RETURNS tsvector LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE 'nmem_test ts_filter';
    RETURN pg_catalog.ts_filter(v, w);
END $$
"""


def notices(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The notices (their primary messages) of every store connection opened from now on."""
    from nmem.store.postgres import connection

    told: list[str] = []
    configure = connection._configure

    def with_notices(conn: Any) -> None:
        configure(conn)
        conn.add_notice_handler(lambda diag: told.append(str(diag.message_primary or "")))

    monkeypatch.setattr(connection, "_configure", with_notices)
    return told


def counting_store(store_url: str, schema: str) -> Store:
    """The store at `store_url` with pg_catalog after its schema: the counted functions answer."""
    return open_store(store_url.replace(quote(f"search_path={schema}", safe=""),
                                        quote(f"search_path={schema},pg_catalog", safe="")))


def counted_newest(store_url: str, schema: str, question: str, want: int) -> list[tuple[int, float]]:
    """The best `want` observations for `question` (ids and scores), ranked through the counted functions."""
    from nmem.store.postgres.tsquery import parse

    counted = counting_store(store_url, schema)
    try:
        return counted._bm25_newest("observations", parse(question), SearchFilters(), want)  # type: ignore[attr-defined, no-any-return]
    finally:
        counted.close()
