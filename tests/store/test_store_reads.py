"""The store's read paths at scale: newest first, oldest first and date ranges stay exact when
rows arrive out of time order, and file history reads newest first, on both engines (checked
against a plain SQL read of every match).

SQLite's own ways of getting there are checked on SQLite alone: full-text reads walk FTS5 by
rowid (date ranges as rowid bounds, relevance over the newest matches), and file history and
navigation read straight off their indexes, seen with EXPLAIN QUERY PLAN on the statements the
store actually runs."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

import nmem.store.sql.context as sql_context
import nmem.store.sqlite.search as sqlite_search
from nmem.store import NewObservation, SearchFilters
from nmem.store.protocol import Store
from nmem.store.sqlite import SqliteStore
from store_engines import sql_rows

T0 = 1_790_000_000
TYPES = ("command", "command_error", "file_edit", "git_commit")
PROJECTS = ("api", "web")
FTS5_ONLY = pytest.mark.sqlite_only("how SQLite gets there: FTS5's rowid walk, bm25 windows, query plans")


def add(store: Store, content: str, at: int, *, session: str = "s1", project: str = "api",
        obs_type: str = "command", file_path: str | None = None) -> int:
    with store.transaction():
        store.ensure_session(session, project, at)
        return store.add_observation(NewObservation(session, project, at, obs_type, "PostToolUse", content,
                                                    "Bash", file_path=file_path))


def populate(store: Store, n: int = 300, seed: int = 1, shuffled: int = 0) -> None:
    """n rows in time order (ids follow time), then `shuffled` more whose times fall anywhere
    in that history: an import of older transcripts."""
    rng = random.Random(seed)
    words = ("deploy", "pytest", "login", "cache", "retry")
    times = [T0 + 60 * i for i in range(n)] + sorted(rng.randrange(T0, T0 + 60 * n) for _ in range(shuffled))
    for i, at in enumerate(times):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))
        add(store, f"{text} #{i}", at, session=f"s{i // 20}", project=PROJECTS[i // 20 % 2],
            obs_type=TYPES[i % len(TYPES)])


def rows(store: SqliteStore, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in store._reader().execute(sql, params).fetchall()]


# The few queries asked here, as PostgreSQL's tsquery reads them (what FTS5 reads from the left)
TSQUERY = {'"pytest"': "pytest", '"deploy" AND "cache"': "deploy & cache", '"login" OR "retry"': "login | retry",
           '"pytest" OR "cache"': "pytest | cache", '"deploy" OR "login"': "deploy | login", '"retry"': "retry"}


def matching(store: Store, match: str, where: str = "1=1", params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """(id, timestamp, bm25) of every match passing `where`, straight from SQL (bm25 on SQLite only)."""
    if isinstance(store, SqliteStore):
        return rows(store, "SELECT o.id, o.timestamp, bm25(observations_fts) FROM observations_fts f "
                           "JOIN observations o ON o.id = f.rowid WHERE observations_fts MATCH ? AND " + where,
                    (match, *params))
    return sql_rows(store, "SELECT o.id, o.timestamp, 0 FROM observations o "
                           "WHERE o.tsv @@ to_tsquery('nmem', ?) AND " + where, TSQUERY[match], *params)


def newest_first(found: list[tuple[Any, ...]]) -> list[int]:
    return [i for i, _, _ in sorted(found, key=lambda r: (-r[1], -r[0]))]


def ids(store: Store, match: str | None, order: str = "relevance", limit: int = 20, offset: int = 0,
        **filters: Any) -> list[int]:
    return [o.id for o, _ in store.search_observations(match, SearchFilters(**filters), order, limit, offset)]


def plans(store: SqliteStore, call: Callable[[], object]) -> list[str]:
    """The query plan of every statement `call` runs on the reader, one string each."""
    conn = store._reader()
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        call()
    finally:
        conn.set_trace_callback(None)
    return ["\n".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql)) for sql in statements
            if sql.lstrip().upper().startswith(("SELECT", "WITH"))]


# -- rows out of time order ---------------------------------------------------------------------------


@FTS5_ONLY
def test_rows_inserted_out_of_time_order_are_listed_as_late(store: SqliteStore) -> None:
    first = add(store, "one", T0 + 100)
    add(store, "two", T0 + 100)                      # same second: in order
    late = add(store, "three", T0 + 50)              # older than a row already stored
    add(store, "four", T0 + 200)
    assert rows(store, "SELECT id, timestamp FROM observations_late") == [(late, T0 + 50)]
    with store.transaction():
        store._writer().execute("UPDATE observations SET timestamp = ? WHERE id = ?", (T0 + 500, first))
    assert rows(store, "SELECT id FROM observations_late ORDER BY id") == [(first,), (late,)]
    store.purge_observations([late, first])
    assert rows(store, "SELECT id FROM observations_late") == []


def test_newest_first_is_exact_when_an_import_adds_older_rows(store: Store) -> None:
    populate(store, n=200, shuffled=60)
    for match in ('"pytest"', '"deploy" AND "cache"', '"login" OR "retry"'):
        expected = newest_first(matching(store, match))
        for limit, offset in ((1, 0), (10, 0), (10, 10), (25, 37), (500, 0)):
            assert ids(store, match, "date_desc", limit, offset) == expected[offset:offset + limit]


def test_newest_first_with_filters_matches_a_full_sort(store: Store) -> None:
    populate(store, n=200, shuffled=40, seed=3)
    match = '"pytest" OR "cache"'
    expected = newest_first(matching(store, match, "o.project = ? AND o.obs_type = ?", ("web", "file_edit")))
    assert ids(store, match, "date_desc", 7, project="web", obs_types=("file_edit",)) == expected[:7]
    session = sql_rows(store, "SELECT session_id FROM observations WHERE id = 150")[0][0]
    expected = newest_first(matching(store, match, "o.session_id = ?", (session,)))
    assert ids(store, match, "date_desc", 5, session_id=session) == expected[:5]


def test_date_ranges_find_late_rows_and_nothing_outside(store: Store) -> None:
    populate(store, n=200, shuffled=60, seed=5)
    match = '"deploy" OR "login"'
    for start, end in ((T0 + 600, T0 + 3000), (T0, T0 + 60), (T0 + 9000, T0 + 99_999), (T0 + 5000, T0 + 5001)):
        expected = matching(store, match, "o.timestamp BETWEEN ? AND ?", (start, end))
        got = ids(store, match, "date_desc", 500, date_start=start, date_end=end)
        assert got == newest_first(expected)
        by_rank = ids(store, match, "relevance", 500, date_start=start, date_end=end)
        assert sorted(by_rank) == sorted(i for i, _, _ in expected)
    assert ids(store, match, date_start=T0 + 10**6) == []
    assert ids(store, match, date_end=T0 - 1) == []


def test_oldest_first_is_unchanged(store: Store) -> None:
    populate(store, n=120, shuffled=30, seed=7)
    found = matching(store, '"retry"')
    expected = [i for i, _, _ in sorted(found, key=lambda r: (r[1], -r[0]))]
    assert ids(store, '"retry"', "date_asc", 15, 5) == expected[5:20]


# -- relevance over the newest matches -------------------------------------------------------------


def by_rank(found: list[tuple[Any, ...]]) -> list[int]:
    return [i for i, _, _ in sorted(found, key=lambda r: (r[2], -r[0]))]


@FTS5_ONLY
def test_relevance_ranks_every_match_when_they_fit_the_window(store: SqliteStore) -> None:
    populate(store, n=150)
    for match in ('"pytest"', '"login" AND "cache"', "deploy NOT retry"):
        expected = by_rank(matching(store, match))
        assert ids(store, match, limit=100) == expected[:100]
        assert ids(store, match, limit=7) + ids(store, match, limit=7, offset=7) == expected[:14]


@FTS5_ONLY
def test_relevance_over_a_huge_match_ranks_its_newest_rows(store: SqliteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    populate(store, n=150)
    monkeypatch.setattr(sqlite_search, "RELEVANCE_WINDOW", 30)
    found = matching(store, '"pytest"')
    newest = sorted(found, key=lambda r: -r[0])[:30]
    assert ids(store, '"pytest"', limit=10) == by_rank(newest)[:10]
    # pages read the same window, so they neither overlap nor skip
    assert ids(store, '"pytest"', limit=5) + ids(store, '"pytest"', limit=5, offset=5) == by_rank(newest)[:10]
    # a page past the window widens it to what was asked for
    assert ids(store, '"pytest"', limit=20, offset=25) == by_rank(sorted(found, key=lambda r: -r[0])[:45])[25:45]


@FTS5_ONLY
@pytest.mark.parametrize("type_ids_min", [0, 10**9])   # type filters checked against the type's ids, or per row
@pytest.mark.parametrize("filters", [
    {"project": "web"}, {"obs_types": ("git_commit",)}, {"obs_types": ("git_commit", "file_edit"), "project": "api"},
    {"obs_types": ("command",), "date_start": T0 + 1200, "date_end": T0 + 6000},
])
def test_filtered_relevance_ranks_the_newest_rows_that_pass(store: SqliteStore, monkeypatch: pytest.MonkeyPatch,
                                                           filters: dict[str, Any], type_ids_min: int) -> None:
    populate(store, n=200, shuffled=20, seed=11)
    monkeypatch.setattr(sqlite_search, "RELEVANCE_WINDOW", 12)
    monkeypatch.setattr(sqlite_search, "TYPE_IDS_MIN_MATCHES", type_ids_min)
    where, params = ["1"], []
    if "project" in filters:
        where.append("o.project = ?")
        params.append(filters["project"])
    if "obs_types" in filters:
        where.append(f"o.obs_type IN ({','.join('?' * len(filters['obs_types']))})")
        params.extend(filters["obs_types"])
    if "date_start" in filters:
        where.append("o.timestamp BETWEEN ? AND ?")
        params.extend([filters["date_start"], filters["date_end"]])
    found = matching(store, '"cache" OR "login"', " AND ".join(where), tuple(params))
    newest = sorted(found, key=lambda r: -r[0])[:12]
    assert ids(store, '"cache" OR "login"', limit=8, **filters) == by_rank(newest)[:8]
    # what ranking asks for: the same rows, as ids only
    assert store.match_ids("observations", '"cache" OR "login"', SearchFilters(**filters), 8) == by_rank(newest)[:8]


@FTS5_ONLY
def test_prompts_and_sessions_rank_their_newest_matches(store: SqliteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    with store.transaction():
        for i in range(40):
            store.ensure_session(f"s{i}", "api", T0 + i)
            store.add_prompt(f"s{i}", T0 + i, "user", "fix the login " + "login " * (i % 5))
            store._writer().execute("UPDATE sessions SET summary = ? WHERE id = ?",
                                    ('{"text": "' + "login " * (1 + i % 4) + 'work"}', f"s{i}"))
    monkeypatch.setattr(sqlite_search, "RELEVANCE_WINDOW", 10)
    prompts = rows(store, "SELECT rowid, bm25(prompts_fts) FROM prompts_fts WHERE prompts_fts MATCH 'login' "
                          "ORDER BY rowid DESC LIMIT 10")
    expected = [i for i, _ in sorted(prompts, key=lambda r: (r[1], -r[0]))]
    assert [p.id for p, _ in store.search_prompts('"login"', SearchFilters(), "relevance", 10, 0)] == expected
    assert store.match_ids("prompts", '"login"', SearchFilters(), 10) == expected
    assert store.match_ids("prompts", '"login"', SearchFilters(session_id="s7"), 10) == [8]
    assert store.match_ids("prompts", '"login"', SearchFilters(project="elsewhere"), 10) == []
    sessions = rows(store, "SELECT s.id, f.rowid, bm25(sessions_fts) FROM sessions_fts f JOIN sessions s "
                           "ON s.rowid = f.rowid WHERE sessions_fts MATCH 'login' ORDER BY f.rowid DESC LIMIT 10")
    expected_s = [i for i, _, _ in sorted(sessions, key=lambda r: (r[2], -r[1]))]
    assert [s.id for s, _ in store.search_sessions('"login"', SearchFilters(), "relevance", 10, 0)] == expected_s


# -- file history and navigation -------------------------------------------------------------------------


def test_file_history_is_newest_first_by_time_then_id(store: Store) -> None:
    path = "/w/api/auth.py"
    touches = [add(store, path, at, obs_type="file_edit", file_path=path) for at in (T0 + 10, T0 + 30, T0 + 30)]
    late = add(store, path, T0 + 20, obs_type="file_read", file_path=path)
    add(store, "/w/api/other.py", T0 + 40, obs_type="file_edit", file_path="/w/api/other.py")

    def history(**kw: Any) -> list[int]:
        return [o.id for o, _ in store.file_touches(path, kw.get("before"), kw.get("after"), kw.get("limit", 10))]

    assert history() == [touches[2], touches[1], late, touches[0]]
    assert history(limit=2) == [touches[2], touches[1]]
    assert history(before=T0 + 30, after=T0 + 10) == [late]


@FTS5_ONLY
def test_file_history_reads_the_file_index_without_sorting(store: SqliteStore) -> None:
    add(store, "/w/a.py", T0, obs_type="file_edit", file_path="/w/a.py")
    (plan,) = plans(store, lambda: store.file_touches("/w/a.py", T0 + 5, None, 10))
    assert "USING INDEX idx_obs_file_time (file_path=? AND timestamp<?)" in plan
    assert "TEMP B-TREE" not in plan


@FTS5_ONLY
def test_dedup_check_and_timeline_use_the_session_index(store: SqliteStore) -> None:
    anchor = add(store, "pytest", T0)
    (dedup,) = plans(store, lambda: store.recent_duplicate("s1", "command", None, "pytest", T0 - 300))
    assert "USING INDEX idx_obs_session (session_id=? AND timestamp>?)" in dedup
    (obs,) = store.get_observations([anchor])
    for plan in plans(store, lambda: store.neighbours(obs, 5, 5)):
        assert "USING INDEX idx_obs_session (session_id=?)" in plan


# -- query plans of the full-text reads -----------------------------------------------------------------


def fts_walk_first(plan: str) -> bool:
    """FTS5 is the outer loop and hands rows over by rowid (no per-row MATCH, no full sort)."""
    lines = [line for line in plan.splitlines() if line.startswith(("SCAN", "SEARCH"))]
    return bool(lines) and lines[0].startswith("SCAN f VIRTUAL TABLE INDEX") and ":=" not in plan


@FTS5_ONLY
@pytest.mark.parametrize("filters", [
    {}, {"project": "api"}, {"obs_types": ("git_commit",), "project": "api"}, {"date_start": T0, "date_end": T0 + 99},
])
def test_full_text_reads_walk_fts5_first(store: SqliteStore, filters: dict[str, Any]) -> None:
    populate(store, n=40)
    for order in ("relevance", "date_desc"):
        found = [p for p in plans(store, lambda o=order: ids(store, '"pytest"', o, **filters)) if "VIRTUAL TABLE" in p]
        assert found and all(fts_walk_first(p) for p in found), found


@FTS5_ONLY
def test_newest_first_stops_at_the_limit(store: SqliteStore) -> None:
    populate(store, n=40)
    (plan,) = [p for p in plans(store, lambda: ids(store, '"pytest"', "date_desc", project="api"))
               if "VIRTUAL TABLE" in p]
    assert "TEMP B-TREE FOR ORDER BY" not in plan


@FTS5_ONLY
def test_type_filters_on_a_large_match_read_their_ids_off_the_type_index(
        store: SqliteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    populate(store, n=40)
    count = rows(store, "SELECT count(*) FROM observations_fts WHERE observations_fts MATCH 'pytest'")[0][0]
    monkeypatch.setattr(sqlite_search, "TYPE_IDS_MIN_MATCHES", count)
    *_, plan = [p for p in plans(store, lambda: ids(store, '"pytest"', obs_types=("git_commit",), project="api"))
                if "VIRTUAL TABLE" in p]
    assert "USING COVERING INDEX idx_obs_type_project (obs_type=? AND project=?)" in plan


@FTS5_ONLY
def test_type_filters_on_a_small_match_check_each_row(store: SqliteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading every id of a common type costs more than checking a few hundred matches."""
    populate(store, n=40)
    count = rows(store, "SELECT count(*) FROM observations_fts WHERE observations_fts MATCH 'pytest'")[0][0]
    monkeypatch.setattr(sqlite_search, "TYPE_IDS_MIN_MATCHES", count + 1)
    found = [p for p in plans(store, lambda: ids(store, '"pytest"', obs_types=("git_commit",), project="api"))
             if "VIRTUAL TABLE" in p]
    assert len(found) == 2   # the bounded count, then the ranking
    assert "idx_obs_type_project" not in found[1]
    assert "SEARCH o USING INTEGER PRIMARY KEY (rowid=?)" in found[1]


@FTS5_ONLY
@pytest.mark.parametrize("type_ids_min", [0, 10**9])
@pytest.mark.parametrize("analyze", [False, True])
def test_a_filter_never_drives_the_match_row_by_row(store: SqliteStore, monkeypatch: pytest.MonkeyPatch,
                                                    analyze: bool, type_ids_min: int) -> None:
    """Left to itself, SQLite starts from (project, timestamp) to read `project = ? ORDER BY
    timestamp DESC` and runs the MATCH once per row (`INDEX 0:=M1`): seconds at a million
    rows. Every full-text read keeps FTS5 the outer loop, late rows (a re-sort) included."""
    monkeypatch.setattr(sqlite_search, "TYPE_IDS_MIN_MATCHES", type_ids_min)
    populate(store, n=40, shuffled=10)
    if analyze:
        store._writer().execute("ANALYZE")
    for filters in ({"project": "web"}, {"obs_types": ("command_error",)}, {"session_id": "s1"}):
        for order in ("relevance", "date_desc", "date_asc"):
            # a page of 3 leaves late rows newer than its oldest: the newest-first re-sort runs
            for plan in plans(store, lambda o=order, f=filters: ids(store, '"pytest"', o, limit=3, **f)):
                if "VIRTUAL TABLE" in plan:
                    assert ":=" not in plan, plan


# -- recent intents (the SessionStart block) --------------------------------------------------------


def intents_by_grouping(store: SqliteStore, project: str, limit: int) -> list[tuple[int, int]]:
    """(prompt id, actions) of the project's newest user prompts with actions: every prompt grouped."""
    return rows(store, "SELECT p.id, COUNT(o.id) FROM prompts p JOIN sessions s ON s.id = p.session_id "
                       "JOIN observations o ON o.prompt_id = p.id WHERE s.project = ? AND p.source = 'user' "
                       "GROUP BY p.id ORDER BY p.timestamp DESC, p.id DESC LIMIT ?", (project, limit))


@FTS5_ONLY
def test_recent_intents_of_a_project_with_few_of_them_group_after_a_bounded_walk(
        store: SqliteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """One user prompt, then a long run of actions that name none (agent work): the walk gives
    up after INTENT_SCAN_LIMIT rows and groups the project's prompts instead."""
    monkeypatch.setattr(sql_context, "INTENT_SCAN_BATCH", 5)
    monkeypatch.setattr(sql_context, "INTENT_SCAN_LIMIT", 20)
    with store.transaction():
        store.ensure_session("s1", "api", T0)
        asked = store.add_prompt("s1", T0, "user", "migrate the billing tables")
        store.add_observation(NewObservation("s1", "api", T0 + 1, "command", "PostToolUse", "alembic upgrade head",
                                             "Bash", prompt_id=asked))
        for i in range(100):
            store.add_observation(NewObservation("s1", "api", T0 + 10 + i, "command", "PostToolUse", f"step {i}",
                                                 "Bash"))
    statements: list[str] = []
    store._reader().set_trace_callback(statements.append)
    found = [(p.id, n) for p, n in store.recent_intents("api", 5)]
    store._reader().set_trace_callback(None)
    assert found == intents_by_grouping(store, "api", 5) == [(asked, 1)]
    assert sum("ORDER BY timestamp DESC, id DESC LIMIT" in s for s in statements) == 4   # 20 rows, then grouping
    assert any("GROUP BY p.id" in s for s in statements)
