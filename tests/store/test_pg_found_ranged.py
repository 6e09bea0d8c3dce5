"""The newest matches a relevance read without a filter ranks on PostgreSQL (`FOUND_RANGED`): the
walk of the key, the fetch of every match off the GIN index, the range above an id estimated
from the kept counts (with the walk below it when the range holds too few), for a question
of phrases joined by OR alone, the union of its terms' kept newest ids, and for a NOT or a
prefix, the kept ids sieved (with the range or the walk below them for the rest), must all
give the same rows, and so the same ranking, for every kind of question."""

from __future__ import annotations

from typing import Any

import pytest

from nmem.store import NewObservation
from nmem.store.protocol import Store
from nmem.store.records import SearchFilters
from store_engines import ENGINES

pytest.importorskip("psycopg")

POSTGRES = [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"]
T0 = 1_790_000_000
# a word in most rows (login), one in a few (cache), a prefix (log*), phrases and a NEAR; the
# newest rows hold login less often than the oldest, so a range sized on the average falls short
TEXTS = ("login redirect fails after the token refresh", "cache timeout on the login page",
         "refresh the token when the login expires", "a redirect loop between login and logout",
         "logout after the cache refresh", "token refresh on the login page")
QUESTIONS = ("login", "login OR cache", "login AND token", "login NOT cache", "log*", "log* NOT redirect",
             '"login page"', '"login page" OR cache', "NEAR(login token, 3)", "token AND refresh*")
WINDOW = 6   # ranked: the newest 6 matches (RELEVANCE_WINDOW), of which the best 3 are returned

# the ways (range_limits: fetch below, walk from est² ≥ this × rows, ids above lo = this × ids ÷ est);
# "kept" leaves the terms' newest ids to a question of ORs alone (`disjunctive`), the walk to the rest;
# "sieve" the kept ids to a NOT or a prefix (`sievable`), with (SIEVE_MARGIN) a range below them
# that holds the rest or one that holds none (the walk below it then finds them)
WAYS = {"walk": (lambda q, w: (0.0, 0.0, 1.0), 1.2),
        "fetch": (lambda q, w: (1e18, 1e18, 1.0), 1.2),
        "range": (lambda q, w: (0.0, 1e18, 1.5 * w), 1.2),
        "range, then the walk below it": (lambda q, w: (0.0, 1e18, 0.01), 1.2),
        "kept": (lambda q, w: (0.0, 0.0, 1.0), 1.2),
        "sieve": (lambda q, w: (0.0, 0.0, 1.0), 1e6),
        "sieve, then the walk below it": (lambda q, w: (0.0, 0.0, 1.0), 1e-6)}
# a NOT whose kept ids hold too few of its newest matches (two of log*'s newest six hold redirect):
# the rest are below them
SHORT = ("log* NOT redirect",)


def _add(store: Store) -> list[int]:
    store.ensure_session("s-ranged", "proj", T0)
    ids = []
    for i in range(60):
        text = TEXTS[i % len(TEXTS)] if i < 40 else TEXTS[4] if i % 3 else TEXTS[i % len(TEXTS)]
        ids.append(store.add_observation(NewObservation("s-ranged", "proj", T0 + i, "command", "PostToolUse",
                                                        f"{text} step {i}", tool_name="Bash")))
    return ids


def _plan_rows(plan: dict[str, Any], name: str) -> int | None:
    """The rows the CTE `name` gave in an EXPLAIN (ANALYZE, FORMAT JSON) plan, None when it did not run."""
    if plan.get("Subplan Name") == f"CTE {name}":
        return int(plan["Actual Rows"]) if plan.get("Actual Loops") else None
    for child in plan.get("Plans", ()):
        found = _plan_rows(child, name)
        if found is not None:
            return found
    return None


def _by_key(plan: dict[str, Any], alias: str = "z") -> bool:
    """Whether the rows were read by their ids off the primary key (the 'kept' way; `sv`: the
    'sieve' way)."""
    if plan.get("Alias") == alias and plan.get("Node Type") != "Tid Scan" and plan.get("Actual Rows"):
        return True
    return any(_by_key(child, alias) for child in plan.get("Plans", ()))


@pytest.mark.parametrize("engine", POSTGRES)
def test_every_way_to_the_newest_matches_ranks_the_same_rows(store: Store, engine: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from nmem.store.postgres import search
    from nmem.store.postgres.tsquery import parse

    monkeypatch.setattr(search, "CUSTOM_PLAN_ROWS", 4)   # planned at every run, as past 10,000 rows
    monkeypatch.setattr(search, "RELEVANCE_WINDOW", WINDOW)
    ids = _add(store)
    newest: dict[str, list[int]] = {}
    for match in QUESTIONS:
        rows = store._query("SELECT id FROM observations WHERE tsv @@ to_tsquery('nmem', ?) "  # type: ignore[attr-defined]
                            "ORDER BY id DESC LIMIT ?", (str(parse(match).text), WINDOW))
        newest[match] = [int(r[0]) for r in rows]
        assert newest[match], match
    ranked: dict[str, dict[str, list[tuple[int, float]]]] = {}
    disjunctive, sievable = search.disjunctive, search.sievable
    for way, (limits, margin) in WAYS.items():
        monkeypatch.setattr(search, "range_limits", limits)
        monkeypatch.setattr(search, "SIEVE_MARGIN", margin)
        monkeypatch.setattr(search, "disjunctive", disjunctive if way == "kept" else lambda parsed: False)
        monkeypatch.setattr(search, "sievable", sievable if way.startswith("sieve") else lambda parsed: False)
        with store.read_snapshot():  # type: ignore[attr-defined]   # one connection: prepared after five runs
            for _ in range(7):
                ranked[way] = {match: store._bm25_newest(  # type: ignore[attr-defined]
                    "observations", parse(match), SearchFilters(), 3) for match in QUESTIONS}
        for match in QUESTIONS:
            sql, params = store._bm25(search.BM25_IDS_SQL, "observations", parse(match),  # type: ignore[attr-defined]
                                      SearchFilters(), 3)
            plan = store._query("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)[0][0][0]["Plan"]  # type: ignore[attr-defined]
            near, far = _plan_rows(plan, "near"), _plan_rows(plan, "far")
            sieved = _plan_rows(plan, "sieved")
            if way.startswith("range"):
                assert near is not None and near < len(newest[match]) + WINDOW, (way, match)
            if way == "range, then the walk below it":   # a range of one id: the rest from the walk
                assert near is not None and far == len(newest[match]) - near, (way, match)
            if way.startswith("sieve") and sievable(parse(match)):   # the rest below the kept ids
                assert sieved and len(newest[match]) - sieved == (near or 0) + (far or 0), (way, match)
                assert (sieved < len(newest[match])) == (match in SHORT), (way, match)
                assert (far or 0) > 0 if match in SHORT and way.endswith("below it") else not far, (way, match)
            elif not way.startswith("range"):
                assert not near and not far, (way, match)
            kept = _by_key(plan)
            assert kept == (way == "kept" and disjunctive(parse(match))), (way, match)
            assert _by_key(plan, "sv") == (way.startswith("sieve") and sievable(parse(match))), (way, match)
    for match in QUESTIONS:
        best = ranked["walk"][match]
        assert best and {i for i, _ in best} <= set(newest[match]), match
        assert all(ranked[way][match] == best for way in WAYS), (match, {w: ranked[w][match] for w in WAYS})
    assert ids
