"""What a ranked search reads of SQLite, statement by statement (issue 25: the team server's
searches were CPU-bound on these reads): the candidates' windows come in one row for every
anchor, with each anchor's session, so arranging the ranked pool reads no keys the windows
brought; the texts are read by a join on the ids. The hits stay those of the same search
ranked with the keys read apart (an equivalence guard: it passes on the code before too)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import pytest

from nmem.service.api import Service
from nmem.store import NewObservation
from trail_support import chat_trail

T0 = 1_790_000_000
WORDS = ("deploy", "cache", "migration", "token", "index", "retry", "schema", "budget", "spool", "audit")
SQLITE = pytest.mark.sqlite_only("counts SQLite's statements (set_trace_callback)")


def team_trail(service: Service, writers: int = 12, prompts: int = 20) -> None:
    """bench/team.py's trail in small (each writer's session says each word every tenth prompt), with a
    command after every other prompt."""
    store = service.store
    with store.transaction():
        for w in range(writers):
            sid = f"bench-{w}"
            store.ensure_session(sid, f"proj{w % 5}", T0 + w)
            store.add_observation(NewObservation(sid, f"proj{w % 5}", T0 + w, "session_start", "SessionStart",
                                                 "startup"))
            for i in range(1, prompts + 1):
                word = WORDS[(w + i) % len(WORDS)]
                said = store.add_prompt(sid, T0 + 100 * i + w, "user", f"writer {w} prompt {i} about the {word} path")
                if i % 2:
                    store.add_observation(NewObservation(sid, f"proj{w % 5}", T0 + 100 * i + w + 1, "command",
                                                         "PostToolUse", f"make {word} check", prompt_id=said))


def traced(service: Service, call: Any) -> tuple[Any, list[str]]:
    statements: list[str] = []
    reader = service.store._reader()   # type: ignore[attr-defined]
    assert isinstance(reader, sqlite3.Connection)
    reader.set_trace_callback(statements.append)
    try:
        return call(), [s for s in statements if not s.startswith("--")]   # FTS5's own statements left out
    finally:
        reader.set_trace_callback(None)


class _KeysApart:
    """The store with its windows' sessions dropped: arranging then reads every key (`trail_keys`)."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def rank_candidates(self, *args: Any) -> Any:
        read = self._store.rank_candidates(*args)
        return read.replace(sessions=None)


def hits(service: Service, query: str, scope: str) -> list[tuple[str, str, str]]:
    found = service.search(query, scope=scope, limit=10)
    return [(h.kind, str(h.record.id), h.score.hex()) for h in found.hits]


def ranked_alike(service: Service, scope: str, questions: list[str], wrap: Callable[[Any], Any]) -> None:
    """The same hits, ids and scores to the bit, with the store as it is and wrapped by `wrap`
    (which takes a light read away), over questions that find more than 50 hits in all."""
    light = [hits(service, q, scope) for q in questions]
    service.store = wrap(service.store)
    assert light == [hits(service, q, scope) for q in questions]
    assert sum(len(h) for h in light) > 50


@SQLITE
@pytest.mark.parametrize("scope", ["prompts", "all"])
def test_arranging_reads_no_key_the_windows_brought(service: Service, scope: str) -> None:
    team_trail(service)
    found, statements = traced(service, lambda: service.search("deploy", scope=scope, project="*", limit=10))
    assert len(found.hits) == 10
    keys = [s for s in statements if s.startswith("SELECT id, session_id, NULL, source, timestamp FROM prompts")]
    assert keys == []   # before: one read of the pool's 50 keys, beside the windows that had their sessions
    windows = [s for s in statements if "json_group_array" in s and "FROM prompts n" in s]
    assert len(windows) == 1


@SQLITE
@pytest.mark.parametrize("scope", ["observations", "prompts", "all"])
def test_keys_from_the_windows_rank_as_keys_read_apart(service: Service, scope: str) -> None:
    """Equivalence guard (passes before and after): the same hits, ids and scores to the bit."""
    team_trail(service)
    ranked_alike(service, scope, [*WORDS, "deploy cache", "writer 3 prompt", "the retry path"], _KeysApart)


@SQLITE
def test_windows_come_in_one_row_with_each_anchors_session(service: Service) -> None:
    team_trail(service, writers=3, prompts=12)
    store = service.store
    ids = [p.id for p, _ in store.search_prompts('"deploy"', _filters(), "relevance", 50, 0)]
    windows, statements = traced(service, lambda: store.session_windows("prompts", ids, 4))
    assert len(statements) == 1
    sessions = {p.id: p.session_id for p in store.get_prompts(ids)}
    assert windows.sessions == {i: (sessions[i], None) for i in ids}   # type: ignore[attr-defined]
    reader = store._reader()   # type: ignore[attr-defined]
    for i in ids:
        line = [r[0] for r in reader.execute("SELECT id FROM prompts WHERE session_id = ? ORDER BY id", (sessions[i],))]
        at = line.index(i)
        assert windows[i] == [(n, d - at) for d, n in enumerate(line) if n != i and abs(d - at) <= 4]


def _filters() -> Any:
    from nmem.store import SearchFilters

    return SearchFilters()


class _PromptsRead:
    """The store whose turns read takes the user prompts' ids off the prompts read whole and built
    (`sessions_prompts`), as arranging did before `user_prompt_ids`."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def user_prompt_ids(self, windows: Any) -> dict[str, list[int]]:
        return {session: [int(p.id) for p in prompts]
                for session, prompts in self._store.sessions_prompts(windows, source="user").items()}


@SQLITE
@pytest.mark.parametrize("scope", ["prompts", "all"])
def test_turns_from_ids_rank_as_turns_from_whole_prompts(service: Service, scope: str) -> None:
    """Equivalence guard (passes before and after): the same hits, ids and scores to the bit."""
    chat_trail(service, WORDS)
    ranked_alike(service, scope, [*WORDS, "deploy step", "what about turn 3", "the retry step done"], _PromptsRead)


def tied_trail(service: Service) -> list[int]:
    """Two sessions whose observations share seconds (ids out of time order within a session),
    interleaved; the ids of one of them."""
    store = service.store
    mine: list[int] = []
    with store.transaction():
        for s in ("tie-a", "tie-b"):
            store.ensure_session(s, "proj", T0)
        for i in range(40):
            at = T0 + i // 3 + (i % 5 == 0)   # three a second, every fifth a second late
            for s in ("tie-a", "tie-b"):
                o = store.add_observation(NewObservation(s, "proj", at, "command", "PostToolUse", f"make deploy {i}"))
                if s == "tie-a":
                    mine.append(o)
    return mine


@SQLITE
def test_observation_windows_sort_nothing_in_sqlite(service: Service) -> None:
    """Each observation's window is its `span` nearest in the session by (time, id), ties of a second
    included, as a walk of the session's rows says (an equivalence guard in itself); read without a
    temporary b-tree (the old statement sorted each side of each anchor in one)."""
    ids = tied_trail(service)
    store = service.store
    reader = store._reader()   # type: ignore[attr-defined]
    line = [r[0] for r in reader.execute("SELECT id FROM observations WHERE session_id = 'tie-a' "
                                         "ORDER BY timestamp, id")]
    assert sorted(line) == sorted(ids) and line != sorted(ids)   # ids out of time order
    times = [r[0] for r in reader.execute("SELECT timestamp FROM observations WHERE session_id = 'tie-a'")]
    assert len(set(times)) < len(times) - 10   # many ties
    for span in (1, 2, 4):
        windows, statements = traced(service, lambda span=span: store.session_windows("observations", ids, span))
        assert len(statements) == 1
        for i in ids:
            at = line.index(i)
            assert windows[i] == [(n, d - at) for d, n in enumerate(line) if n != i and abs(d - at) <= span]
        plan = [r[3] for r in reader.execute("EXPLAIN QUERY PLAN " + statements[0])]
        assert not [step for step in plan if "TEMP B-TREE" in step]
