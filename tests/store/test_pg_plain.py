"""What a plain-words search reads on PostgreSQL (issue 25: PostgreSQL at 1M rows within 2x of
SQLite's p50): the turns of agent replies from the user prompts' ids alone (`user_prompt_ids`, on
both engines), not from those prompts read whole and built; each candidate's row read by key once."""

from __future__ import annotations

import re
from typing import Any

import pytest

from nmem.models import Prompt
from nmem.service.api import Service
from nmem.store import NewObservation
from store_engines import ENGINES
from trail_support import T0, Without, chat_trail

POSTGRES = [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"]
WORDS = ("deploy", "retry", "ledger", "cache", "invoice", "export")


def test_user_prompt_ids_are_those_of_the_user_prompts_read_whole(service: Service) -> None:
    """Each window's user prompts, as `sessions_prompts(source="user")` reads them, by id alone;
    a session named twice has the prompts of either window, a session with none an empty list."""
    chat_trail(service, WORDS)
    windows = [("chat-0", T0 + 650, T0 + 150), ("chat-3", T0 + 2000, T0 - 1), ("chat-3", T0 + 300, T0 + 100),
               ("chat-5", T0 + 500, T0 + 500), ("nobody", T0 + 9999, T0)]
    store = service.store
    whole = store.sessions_prompts(windows, source="user")
    ids = store.user_prompt_ids(windows)
    assert ids == {session: [p.id for p in prompts] for session, prompts in whole.items()}
    assert len(ids["chat-0"]) == 5 and len(ids["chat-3"]) == 12 and ids["chat-5"] == ids["nobody"] == []
    assert store.user_prompt_ids([]) == {}


@pytest.mark.parametrize("scope", ["prompts", "all"])
def test_a_page_of_prompts_builds_only_its_prompts(service: Service, scope: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Arranging places each agent reply in its user's turn by the ids of the user prompts before
    it: a search of 10 hits builds the 10 prompts it shows, on both engines, PostgreSQL's turns read
    apart from its rows (before, PostgreSQL had no `user_prompt_ids` and the service read every user
    prompt of the replies' sessions whole: 70; SQLite did so before search-cpu2)."""
    chat_trail(service, WORDS)
    service.store = Without(service.store, "prompt_turns")   # type: ignore[assignment]
    service.search("deploy step", scope=scope, project="*", limit=10)   # the words' counts cached
    built: list[int] = []
    original = Prompt.from_row.__func__   # type: ignore[attr-defined]

    def counted(cls: type[Prompt], row: Any) -> Prompt:
        built.append(int(row["id"]))
        return original(cls, row)

    monkeypatch.setattr(Prompt, "from_row", classmethod(counted))
    found = service.search("deploy step", scope=scope, project="*", limit=10)
    assert found.hits and any(h.record.source == "agent" for h in found.hits)
    assert sorted(built) == sorted(h.record.id for h in found.hits if h.kind == "prompt")


def _read_by_key(plan: dict[str, Any]) -> int:
    """Rows of observations a plan read as x or a (x_1, …: EXPLAIN's names for the others), over
    every loop: the candidates' and the named rows' reads by id, and the kept counts' (none once
    the words' counts are kept); not the matches (o, z, sv) nor the walks of the sessions (n)."""
    mine = (plan.get("Relation Name") == "observations"
            and re.fullmatch(r"[ax](_\d+)?", str(plan.get("Alias", ""))) is not None)
    own = int(plan.get("Actual Rows", 0)) * int(plan.get("Actual Loops", 0)) if mine else 0
    return own + sum(_read_by_key(child) for child in plan.get("Plans", ()))


@pytest.mark.parametrize("engine", POSTGRES)
def test_the_ranking_read_reads_each_candidate_by_key_once(service: Service, engine: str) -> None:
    """The ranking statement reads each candidate's row by its id once (its record, text, session and
    the anchor of its window) and each neighbour's row on the walk of its session that finds it:
    no row is read again by key for its text (before: each candidate twice, as its window's anchor
    and as its record, and every row the windows named again for its text: 253 rows here)."""
    store = service.store
    with store.transaction():
        for s in range(40):
            sid = f"w-{s}"
            store.ensure_session(sid, "proj", T0 + 100 * s)
            for k in range(9):
                text = f"deploy the release step {s}.{k}" if k % 3 == 1 else f"plain work step {s}.{k}"
                store.add_observation(NewObservation(sid, "proj", T0 + 100 * s + k, "command", "PostToolUse", text))
    service.search("deploy release", limit=10)   # the words' counts cached: one statement below
    sent: list[tuple[str, list[Any]]] = []
    original = store._query_kept   # type: ignore[attr-defined]

    def kept(table: str, sql: str, params: Any, generic: bool = False) -> Any:
        sent.append((sql, list(params)))
        return original(table, sql, params, generic)

    store._query_kept = kept   # type: ignore[attr-defined]
    found = service.search("deploy release", limit=10)
    assert len(found.hits) == 10
    [(sql, params)] = [(s, p) for s, p in sent if "nbr" in s or "windows" in s]
    plan = store._query("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)[0][0][0]["Plan"]  # type: ignore[attr-defined]
    assert _read_by_key(plan) == 50   # the pool's 50 candidates, once each


def _merged_kept_ids(plan: dict[str, Any]) -> int:
    """Rows of the terms' kept ids the plan unnested to merge them (KEPT_ROWS' `unnest(tm.newest) AS
    u`; EXPLAIN names the others u_1, …), over every loop."""
    mine = plan.get("Node Type") == "Function Scan" and re.fullmatch(r"u(_\d+)?", str(plan.get("Alias", "")))
    own = int(plan.get("Actual Rows", 0)) * int(plan.get("Actual Loops", 0)) if mine else 0
    return own + sum(_merged_kept_ids(child) for child in plan.get("Plans", ()))


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_question_that_does_not_take_the_kept_ids_does_not_merge_them(
        store: Any, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The 'kept' way's rows are read by the ids of the union of its terms' kept ids; a question that
    takes another way (an AND: it is not `disjunctive`) does not build that union. Before, the
    union's sub-select ran whatever the way (its index condition was evaluated though the scan
    under it never ran): a sort of every term's kept ids, 0.5-0.9 ms of an empty AND at 1M rows."""
    from psycopg import sql as psql

    from nmem.store.postgres import search
    from nmem.store.postgres.connection import pg_sql
    from nmem.store.postgres.tsquery import parse
    from nmem.store.records import SearchFilters
    from pg_kept_support import until_listed

    monkeypatch.setattr(search, "CUSTOM_PLAN_ROWS", 4)   # planned as past 10,000 rows
    monkeypatch.setattr(search, "RELEVANCE_WINDOW", 5)
    store.ensure_session("s-kept", "proj", T0)
    texts = ("login redirect fails after the token refresh", "cache timeout on the login page",
             "refresh the token when the login expires", "logout after the cache refresh")
    for i in range(40):
        store.add_observation(NewObservation("s-kept", "proj", T0 + i, "command", "PostToolUse",
                                             f"{texts[i % len(texts)]} step {i}", tool_name="Bash"))

    def ask(s: Any, match: str) -> Any:
        return s.search_observations(match, SearchFilters(), "relevance", 3, 0)

    until_listed(store, ask, "login OR cache", ("login", "cach"))
    plans = {}
    with store._pool.connection() as conn:   # the statement's generic plan, its scans as at 1M rows
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET plan_cache_mode = force_generic_plan")
        for n, match in enumerate(("login OR cache", "login AND cache")):
            sql, params = store._bm25(search.BM25_IDS_SQL, "observations", parse(match), SearchFilters(), 3)
            conn.execute(f"PREPARE q{n} AS {pg_sql(sql)}")
            run = psql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE {}({})").format(
                psql.Identifier(f"q{n}"), psql.SQL(", ").join(psql.Literal(p) for p in params))
            plans[match] = conn.execute(run).fetchone()[0][0]["Plan"]
            conn.execute(f"DEALLOCATE q{n}")
        conn.execute("RESET enable_seqscan")
        conn.execute("RESET plan_cache_mode")
    assert _merged_kept_ids(plans["login OR cache"]) > 0   # the 'kept' way merges them (an equivalence guard)
    assert _merged_kept_ids(plans["login AND cache"]) == 0
