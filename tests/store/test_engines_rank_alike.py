"""Both engines rank alike: the same rows and the same question give the same top 10.

A generated trail of 20,000 observations (coding sessions: words drawn with Zipf frequencies,
paths, commands) is recorded into SQLite and copied into PostgreSQL with `nmem migrate`, as a
team moving to a server would. Fifty plain-language questions (one to three words, rare and
common, some absent) then run through the service on each engine: the top 10 must be the same
records in the same order for at least 95% of them, and never share fewer than 8 of 10.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from nmem.config import load_settings
from nmem.service.api import Service
from nmem.store import NewMemory, NewObservation, open_store
from nmem.store.migrate import migrate
from store_engines import pg_unavailable

pytestmark = [pytest.mark.slow, pytest.mark.postgres,
              pytest.mark.sqlite_only("compares the engines itself: the same rows on SQLite and on PostgreSQL")]

ROWS = 20_000
MEMORIES = 600
QUERIES = 50
T0 = 1_760_000_000
SEED = 21

SYLLABLES = ("ka", "lo", "mi", "ten", "ro", "vas", "quel", "dor", "pin", "sha", "tu", "ber", "gal", "nix", "po",
             "rel", "som", "tra", "ven", "zu")
COMMON = ("test", "fix", "error", "file", "update", "config", "build", "run", "check", "add", "remove", "handler",
          "request", "response", "session", "token", "cache", "query", "index", "parse")
TOOLS = ("Edit", "Read", "Bash", "Grep", "Write")
TYPES = ("file_edit", "file_read", "command", "search", "file_write", "command_error")


def vocabulary(rng: random.Random, n: int) -> list[str]:
    words: dict[str, None] = dict.fromkeys(COMMON)
    while len(words) < n:
        words["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))] = None
    return list(words)


@dataclass
class Trail:
    sqlite_url: str
    pg_url: str
    words: list[str]


def observation_text(rng: random.Random, words: list[str], weights: list[float]) -> tuple[str, str | None]:
    picked = rng.choices(words, weights=weights, k=rng.randint(4, 40))
    path = None
    if rng.random() < 0.6:
        path = f"src/{rng.choice(words)}/{rng.choice(words)}.py"
        picked.insert(rng.randrange(len(picked) + 1), path)
    if rng.random() < 0.3:
        picked.append(f"{rng.choice(words)}_{rng.choice(words)}()")
    return " ".join(picked), path


@pytest.fixture(scope="module")
def trail(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trail]:
    reason = pg_unavailable()
    if reason is not None:
        pytest.skip(reason)
    import os
    import uuid

    import psycopg

    from store_engines import schema_url

    rng = random.Random(SEED)
    words = vocabulary(rng, 3000)
    weights = [1.0 / (rank + 1) ** 1.07 for rank in range(len(words))]
    base = tmp_path_factory.mktemp("rank-alike")
    sqlite_url = f"sqlite:///{base / 'nmem.db'}"
    store = open_store(sqlite_url)
    try:
        with store.transaction():
            for n in range(ROWS):
                session = f"s{n // 40:04d}"
                if n % 40 == 0:
                    store.ensure_session(session, f"proj{n // 4000}", T0 + n * 30)
                text, path = observation_text(rng, words, weights)
                store.add_observation(NewObservation(session, f"proj{n // 4000}", T0 + n * 30,
                                                     rng.choice(TYPES), "PostToolUse", text,
                                                     tool_name=rng.choice(TOOLS), file_path=path))
        for n in range(MEMORIES):
            summary, _ = observation_text(rng, words, weights)
            content, _ = observation_text(rng, words, weights)
            store.insert_memory(NewMemory(f"m{n:05d}", "user", rng.choice(("decision", "fact", "howto")),
                                          summary[:120], content, T0 + n * 900,
                                          tags=tuple(rng.sample(words[:200], 2)), is_pinned=n % 50 == 0))
    finally:
        store.close()
    pg_base = os.environ["NMEM_TEST_PG"]
    schema = f"nmem_t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    pg_url = schema_url(pg_base, schema)
    try:
        migrate(sqlite_url, pg_url)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
        yield Trail(sqlite_url, pg_url, words)
    finally:
        with psycopg.connect(pg_base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def questions(words: list[str]) -> list[str]:
    """One to three words each: common and rare ones mixed, a few the trail never used."""
    rng = random.Random(SEED + 1)
    asked: list[str] = []
    while len(asked) < QUERIES:
        n = rng.choice((1, 2, 2, 3))
        picked = [rng.choice(words[:60]) if rng.random() < 0.5 else rng.choice(words) for _ in range(n)]
        if rng.random() < 0.1:
            picked.append("zzyzxquartz")
        asked.append(" ".join(picked))
    return asked


def top10(home: Path, url: str, asked: list[str], scope: str) -> list[list[str]]:
    service = Service.open(load_settings({"NMEM_HOME": str(home), "NMEM_STORE_URL": url}))
    service.clock = lambda: float(T0 + ROWS * 30 + 600)
    try:
        return [[f"{h.kind}:{h.record.id}" for h in service.search(q, scope=scope, limit=10).hits] for q in asked]
    finally:
        service.close()


@pytest.mark.parametrize("scope", ["observations", "memories", "all"])
def test_postgres_returns_the_same_top_10_as_sqlite(trail: Trail, tmp_path: Path, scope: str) -> None:
    asked = questions(trail.words)
    on_sqlite = top10(tmp_path / "home", trail.sqlite_url, asked, scope)
    on_postgres = top10(tmp_path / "home", trail.pg_url, asked, scope)
    assert sum(bool(ids) for ids in on_sqlite) >= QUERIES * 0.8, "the questions should mostly find something"
    identical = sum(a == b for a, b in zip(on_sqlite, on_postgres, strict=True))
    # records one list has and the other lacks (a short list counts as a top 10 with its gaps)
    missing = [max(len(a), len(b)) - len(set(a) & set(b)) for a, b in zip(on_sqlite, on_postgres, strict=True)]
    print(f"\nrank alike ({scope}): {identical}/{QUERIES} identical top 10s, at most {max(missing)} of 10 missing, "
          f"{sum(missing) / QUERIES:.2f} missing on average")
    differing = [(q, a, b) for q, a, b in zip(asked, on_sqlite, on_postgres, strict=True) if a != b]
    assert identical >= QUERIES * 0.95, f"{identical}/{QUERIES} identical; differing: {differing[:5]}"
    assert max(missing) <= 2, f"most missing: {max(missing)} of 10; differing: {differing[:5]}"


# common words their stem spells alike (the counts are kept by stem)
UNSTEMMED = ("test", "fix", "error", "file", "run", "check", "add", "build", "token", "handler")


def negated_questions(words: list[str]) -> list[str]:
    """FTS5 syntax with a negated word: a common or rare word NOT a common one, two words NOT one."""
    rng = random.Random(SEED + 2)
    asked: list[str] = []
    while len(asked) < QUERIES // 2:
        a, b, c = rng.choice(words[:60]), rng.choice(words), rng.choice(UNSTEMMED)
        asked.append(rng.choice((f"{a} NOT {c}", f"{b} NOT {c}", f"{a} AND {b} NOT {c}", f"({a} OR {b}) NOT {c}")))
    return asked


def test_a_negated_word_ranks_alike_and_is_not_counted(trail: Trail, tmp_path: Path) -> None:
    """No row that matches `a NOT c` holds c, so c's count weighs in no score: PostgreSQL leaves
    it uncounted (a common word's count reads each of its rows) and still ranks as SQLite does."""
    asked = negated_questions(trail.words)
    on_sqlite = top10(tmp_path / "home", trail.sqlite_url, asked, "observations")
    service = Service.open(load_settings({"NMEM_HOME": str(tmp_path / "home"), "NMEM_STORE_URL": trail.pg_url}))
    service.clock = lambda: float(T0 + ROWS * 30 + 600)
    try:
        on_postgres = [[f"{h.kind}:{h.record.id}" for h in service.search(q, scope="observations", limit=10).hits]
                       for q in asked]
        counted = {term for (_, term) in service._store._df_cache}  # type: ignore[attr-defined]
    finally:
        service.close()
    assert sum(bool(ids) for ids in on_sqlite) >= len(asked) * 0.8, "the questions should mostly find something"
    identical = sum(a == b for a, b in zip(on_sqlite, on_postgres, strict=True))
    differing = [(q, a, b) for q, a, b in zip(asked, on_sqlite, on_postgres, strict=True) if a != b]
    assert identical >= len(asked) * 0.95, f"{identical}/{len(asked)} identical; differing: {differing[:5]}"
    positive = {w for q in asked for w in re.findall(r"\w+", q.rsplit(" NOT ", 1)[0])}
    only_negated = {q.rsplit(" NOT ", 1)[1] for q in asked} - positive
    assert only_negated and not only_negated & counted, f"negated words counted: {only_negated & counted}"


def fts_questions(words: list[str]) -> list[str]:
    """FTS5 syntax whose phrases are not single words: prefixes, phrases of two words, a word
    asked twice, NEAR; mostly common words, so phrases and NEARs find rows."""
    rng = random.Random(SEED + 3)
    asked: list[str] = []
    while len(asked) < QUERIES:
        a, b, c = rng.choice(words[:30]), rng.choice(words[:30]), rng.choice(words[:300])
        asked.append(rng.choice((
            f"{a[:3]}*", f"{c[:4]}*", f'"{a} {b}"', f'"{a} {b}" AND {c}', f"NEAR({a} {b}, 3)",
            f"NEAR({a} {c})", f"({a} OR {a}) AND {b}", f"{c} AND {b[:3]}*", f"{a[:3]}* NOT {b}",
            f'"{a} {b[:2]}"*',
        )))
    return asked


def test_phrases_prefixes_and_near_rank_alike(trail: Trail, tmp_path: Path) -> None:
    """FTS5's bm25() weighs each phrase of the query: a prefix by every word it begins, a phrase
    by its own rows and hits, a word asked twice twice, a NEAR's phrases by their hits near each
    other (and a NEAR matches only those rows). PostgreSQL ranks the same phrases the same way."""
    asked = fts_questions(trail.words)
    on_sqlite = top10(tmp_path / "home", trail.sqlite_url, asked, "observations")
    on_postgres = top10(tmp_path / "home", trail.pg_url, asked, "observations")
    assert sum(len(ids) == 10 for ids in on_sqlite) >= len(asked) * 0.8, "the questions should mostly find ten"
    identical = sum(a == b for a, b in zip(on_sqlite, on_postgres, strict=True))
    differing = [(q, a, b) for q, a, b in zip(asked, on_sqlite, on_postgres, strict=True) if a != b]
    assert identical >= len(asked) * 0.95, f"{identical}/{len(asked)} identical; differing: {differing[:5]}"


def test_a_search_of_the_last_days_ranks_alike(trail: Trail, tmp_path: Path) -> None:
    """Filtered to the newest 1% of the trail, the rarest words of a question are often nowhere in
    the dates, and the candidates come from a later query (every word ANDed, or ORed). PostgreSQL
    sends those queries in one statement, each walking the dates' rows or reading its words'
    index (`_folded_read`); the candidates, so the top 10s, must be SQLite's."""
    asked = questions(trail.words)
    start, end = T0 + (ROWS - 200) * 30, T0 + ROWS * 30

    def found(url: str, dated: bool) -> list[tuple[list[str], str | None]]:
        service = Service.open(load_settings({"NMEM_HOME": str(tmp_path / "home"), "NMEM_STORE_URL": url}))
        service.clock = lambda: float(T0 + ROWS * 30 + 600)
        window = {"date_start": start, "date_end": end} if dated else {}
        try:
            out = []
            for q in asked:
                result = service.search(q, scope="observations", limit=10, **window)
                out.append(([f"{h.kind}:{h.record.id}" for h in result.hits], result.match))
            return out
        finally:
            service.close()

    on_sqlite, on_postgres = found(trail.sqlite_url, True), found(trail.pg_url, True)
    later = sum(a[1] != b[1] for a, b in zip(on_sqlite, found(trail.sqlite_url, False), strict=True))
    print(f"\nlast days: {later}/{QUERIES} questions took their candidates from a later query")
    assert later >= 5, f"only {later} questions found their candidates with a later query in the dates"
    assert sum(bool(ids) for ids, _ in on_sqlite) >= QUERIES * 0.6, "the questions should mostly find something"
    assert [m for _, m in on_sqlite] == [m for _, m in on_postgres]
    identical = sum(a == b for (a, _), (b, _) in zip(on_sqlite, on_postgres, strict=True))
    differing = [(q, a, b) for q, (a, _), (b, _) in zip(asked, on_sqlite, on_postgres, strict=True) if a != b]
    assert identical >= QUERIES * 0.95, f"{identical}/{QUERIES} identical; differing: {differing[:5]}"
