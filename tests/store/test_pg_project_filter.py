"""A relevance read filtered by project on PostgreSQL (`_words_first`): when the words' counts bound
the matches well below the project's rows, the matches come off the words' index alone and the
project is tested on each matched row, not read off the project's index (ANDing 30k index entries
cost 5-15 ms at 100k rows); a small project or a common word keeps the planner's choice. Either
way the rows ranked, and so the answers, are the same."""

from __future__ import annotations

import json

import pytest

from nmem.store.protocol import Store
from nmem.store.records import SearchFilters
from store_engines import ENGINES

pytest.importorskip("psycopg")

WORDS_FIRST = "project || ''::text"   # the filter as EXPLAIN shows it when the words come first
POSTGRES = [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"]
T0 = 1_790_000_000
ROWS = 20_000   # past CUSTOM_PLAN_ROWS: planned for its values at every run, as a team's table is
# (project, share of the rows): 'big' holds most rows, 'small' a few; 'rare' is in 1 row of 199
# (100 rows), 'common' in every other row
PROJECTS = (("big", 70), ("small", 2), ("other", 28))


def _fill(store: Store) -> None:
    for project, _ in PROJECTS:
        store.ensure_session(f"s-{project}", project, T0)
    with store.transaction():
        # project by the row's place in each hundred, words by its number: the rare word's rows
        # fall in every project, in proportion
        store._exec(  # type: ignore[attr-defined]
            "INSERT INTO observations (session_id, project, timestamp, obs_type, source_event, content) "
            "SELECT 's-' || p, p, ? + i, 'command', 'PostToolUse', "
            "'step ' || i || CASE WHEN i % 199 = 7 THEN ' rare' ELSE '' END "
            "|| CASE WHEN i % 2 = 0 THEN ' common' ELSE ' plain' END "
            "FROM (SELECT i, CASE WHEN i % 100 < 70 THEN 'big' WHEN i % 100 < 72 THEN 'small' ELSE 'other' END AS p "
            "      FROM generate_series(1, ?) AS i) AS g", (T0, ROWS))
    store._exec("ANALYZE observations")  # type: ignore[attr-defined]


def _plan(store: Store, match: str, project: str) -> str:
    from nmem.store.postgres import search
    from nmem.store.postgres.tsquery import parse

    sql, params = store._bm25(search.BM25_IDS_SQL, "observations", parse(match),  # type: ignore[attr-defined]
                              SearchFilters(project=project), 10)
    with store.read_snapshot():  # type: ignore[attr-defined]
        store._query("SET LOCAL plan_cache_mode = force_custom_plan")  # type: ignore[attr-defined]
        return json.dumps(store._query("EXPLAIN (FORMAT JSON) " + sql, params)[0][0])  # type: ignore[attr-defined]


def _ranked(store: Store, match: str, project: str) -> list[tuple[int, float]]:
    from nmem.store.postgres.tsquery import parse

    return store._bm25_newest("observations", parse(match), SearchFilters(project=project), 10)  # type: ignore[attr-defined]


@pytest.mark.parametrize("engine", POSTGRES)
def test_rare_words_in_a_big_project_skip_the_project_index(store: Store, engine: str) -> None:
    _fill(store)
    _ranked(store, "rare", "big")   # the first read counts the words (the process keeps the counts)
    assert "idx_obs_project_time" not in _plan(store, "rare", "big")
    assert WORDS_FIRST in _plan(store, "rare", "big")
    # few matches, the project the only filter: one generic plan serves every value
    from nmem.store.postgres.tsquery import parse

    assert store._plan_kept("observations", parse("rare"), SearchFilters(project="big"))  # type: ignore[attr-defined]
    assert not store._plan_kept("observations", parse("common"), SearchFilters(project="big"))  # type: ignore[attr-defined]


@pytest.mark.parametrize("engine", POSTGRES)
def test_common_words_or_a_small_project_keep_the_planners_choice(store: Store, engine: str) -> None:
    _fill(store)
    for match, project in (("common", "big"), ("rare", "small"), ("common", "small")):
        _ranked(store, match, project)
        assert WORDS_FIRST not in _plan(store, match, project), (match, project)


@pytest.mark.parametrize("engine", POSTGRES)
def test_another_filter_beside_the_project_keeps_the_planners_choice(store: Store, engine: str) -> None:
    from nmem.store.postgres import search
    from nmem.store.postgres.tsquery import parse

    _fill(store)
    _ranked(store, "rare", "big")
    sql, _ = store._bm25(search.BM25_IDS_SQL, "observations", parse("rare"),  # type: ignore[attr-defined]
                         SearchFilters(project="big", obs_types=("command",)), 10)
    assert "o.project || " not in sql and "o.project = " in sql


@pytest.mark.parametrize("engine", POSTGRES)
def test_either_way_ranks_the_same_rows(store: Store, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from nmem.store.postgres import search

    _fill(store)
    questions = [(m, p) for m in ("rare", "common", "rare OR step", "rare plain") for p, _ in PROJECTS]
    for match, project in questions:
        _ranked(store, match, project)   # the words counted
    answers = {}
    for ratio in (0, 10**9):   # every read words-first (the project's rows are never 0), then none
        monkeypatch.setattr(search, "WORDS_FIRST_RATIO", ratio)
        answers[ratio] = {q: _ranked(store, *q) for q in questions}
        chosen = [q for q in questions if WORDS_FIRST in _plan(store, *q)]
        assert chosen == (questions if ratio == 0 else []), ratio
    assert all(answers[0][q] for q in questions)
    assert answers[0] == answers[10**9]
