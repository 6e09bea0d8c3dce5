"""What every PostgreSQL session nmem opens sets before its first statement, and the search
indexes' options (schema step 8): no JIT and no parallel workers for short concurrent searches, a
short GIN pending list, the sessions' totals read off an index."""

from __future__ import annotations

import threading

import pytest

from store_engines import ENGINES

pytest.importorskip("psycopg")

POSTGRES = [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"]


@pytest.mark.parametrize("engine", POSTGRES)
def test_every_pooled_connection_runs_without_jit_or_parallel_workers(store: object, engine: str) -> None:
    sql = ("SELECT current_setting('jit'), current_setting('max_parallel_workers_per_gather'), "
           "pg_backend_pid()")
    seen: list[tuple[str, str, int]] = []
    with store.read_snapshot():  # type: ignore[attr-defined]
        seen.append(tuple(store._query(sql)[0]))  # type: ignore[attr-defined]
        # while this thread holds its snapshot's connection, another thread reads through another
        other = threading.Thread(target=lambda: seen.append(tuple(store._query(sql)[0])))  # type: ignore[attr-defined]
        other.start()
        other.join(30)
    assert len({pid for _, _, pid in seen}) == 2
    assert [(jit, workers) for jit, workers, _ in seen] == [("off", "0"), ("off", "0")]


@pytest.mark.parametrize("engine", POSTGRES)
def test_the_text_indexes_keep_a_short_pending_list_and_sessions_have_a_totals_index(store: object,
                                                                                     engine: str) -> None:
    rows = store._query("SELECT c.relname, c.reloptions FROM pg_class c "  # type: ignore[attr-defined]
                        "WHERE c.relnamespace = current_schema()::regnamespace "
                        "AND c.relname IN ('idx_obs_tsv', 'idx_prompts_tsv', 'idx_sessions_tsv', 'idx_memories_tsv', "
                        "'idx_sessions_totals')")
    options = {r[0]: list(r[1] or []) for r in rows}
    assert options.pop("idx_sessions_totals") == []
    assert options == {name: ["gin_pending_list_limit=64"] for name in
                       ("idx_obs_tsv", "idx_prompts_tsv", "idx_sessions_tsv", "idx_memories_tsv")}
