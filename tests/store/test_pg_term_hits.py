"""A word's and a prefix's hits in a row, as PostgreSQL's BM25 reads them (`RANKED_TERMS`: ts_rank
and ts_rank_cd given unit weights, read back as counts), and the scores both engines give for
questions of such phrases and of phrases of several words: FTS5's bm25() worked out here over
rows whose words and phrases stand several times."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from nmem.store import NewObservation
from nmem.store.protocol import Store
from nmem.store.records import SearchFilters
from store_engines import ENGINES

POSTGRES = [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"]
T0 = 1_790_000_000
FILLER = ("queue", "drain", "spool", "batch", "retry", "ledger", "socket", "bucket")


def _hits(store: Store, expr: str, vector: str, query: str) -> float:
    sql = f"SELECT {expr.format(q='r.q')} FROM (SELECT ?::tsvector AS tsv, ?::tsquery AS q) AS r"
    return float(store._query(sql, (vector, query))[0][0])  # type: ignore[attr-defined]


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_words_hits_are_read_back_from_ts_rank_for_every_count_a_vector_holds(store: Store,
                                                                               engine: str) -> None:
    """A tsvector keeps at most 256 places a lexeme; every count up to there (and past it, where
    256 are kept) is read back exactly, and a word the row lacks has none."""
    from nmem.store.postgres.search import WORD_HITS

    for n in range(1, 301):
        vector = "'x':" + ",".join(str(p) for p in range(1, n + 1)) + " 'y':400"
        assert _hits(store, WORD_HITS, vector, "'x'") == min(n, 256), n
    assert _hits(store, WORD_HITS, "'y':1,2,3", "'x'") == 0


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_prefixs_hits_are_every_place_of_every_word_it_begins(store: Store, engine: str) -> None:
    from nmem.store.postgres.search import PREFIX_HITS

    vector = "'log':3 'login':1,5,9 'logout':2,7 'blog':4 'lo':8"
    assert _hits(store, PREFIX_HITS, vector, "'log':*") == 6
    assert _hits(store, PREFIX_HITS, vector, "'logi':*") == 3
    assert _hits(store, PREFIX_HITS, vector, "'zzz':*") == 0


def _bm25(rows: dict[int, list[str]], phrases: list[tuple[str, bool]],
          matches: Callable[[list[str]], bool]) -> dict[int, float]:
    """FTS5's bm25() (k1 1.2, b 0.75) of every row the question matches; phrases: (its words, the
    last a prefix)."""
    def hits(words: list[str], phrase: tuple[str, bool]) -> int:
        asked = phrase[0].split()
        return sum(all(words[p + j] == w or (phrase[1] and j == len(asked) - 1 and words[p + j].startswith(w))
                       for j, w in enumerate(asked)) for p in range(len(words) - len(asked) + 1))

    avg = sum(len(w) for w in rows.values()) / len(rows)
    out: dict[int, float] = {}
    for rid, words in rows.items():
        if not matches(words):
            continue
        score = 0.0
        for phrase in phrases:
            df = sum(1 for ws in rows.values() if hits(ws, phrase))
            idf = math.log((len(rows) - df + 0.5) / (df + 0.5))
            tf = hits(words, phrase)
            score += max(idf, 1e-6) * (tf * 2.2) / (tf + 1.2 * (1 - 0.75 + 0.75 * len(words) / avg))
        out[rid] = score
    return out


@pytest.mark.parametrize("question, phrases, matches", [
    ("alpha", [("alpha", False)], lambda ws: "alpha" in ws),
    ("alpha OR beta", [("alpha", False), ("beta", False)], lambda ws: "alpha" in ws or "beta" in ws),
    ("½ OR beta", [("½", False), ("beta", False)], lambda ws: "beta" in ws),   # PostgreSQL's parser drops ½
    ("(alpha OR alpha) AND beta", [("alpha", False), ("alpha", False), ("beta", False)],
     lambda ws: "alpha" in ws and "beta" in ws),
    ("alph*", [("alph", True)], lambda ws: any(w.startswith("alph") for w in ws)),
    ("beta AND alph*", [("beta", False), ("alph", True)],
     lambda ws: "beta" in ws and any(w.startswith("alph") for w in ws)),
    ("alph* NOT gamma", [("alph", True)], lambda ws: any(w.startswith("alph") for w in ws) and "gamma" not in ws),
    ('"alpha beta"', [("alpha beta", False)], lambda ws: " alpha beta " in f" {' '.join(ws)} "),
    ('"beta alpha" OR gamma', [("beta alpha", False), ("gamma", False)],
     lambda ws: " beta alpha " in f" {' '.join(ws)} " or "gamma" in ws),
    ('"beta alph"* AND alpha', [("beta alph", True), ("alpha", False)],
     lambda ws: " beta alph" in f" {' '.join(ws)}" and "alpha" in ws),
])
def test_words_and_prefixes_score_as_fts5_on_both_engines(store: Store, engine: str, question: str,
                                                           phrases: list[tuple[str, bool]],
                                                           matches: Callable[[list[str]], bool]) -> None:
    """Rows where `alpha` stands 1 to 12 times among other words (some `alphabet`, `beta`, the
    phrases `alpha beta` and `beta alpha` 0 to 3 times), of several lengths: each engine's scores
    are FTS5's bm25(), row by row, best first."""
    store.ensure_session("s-hits", "proj", T0)
    rows: dict[int, list[str]] = {}
    for i in range(40):
        words = ["alpha"] * (i % 12 + 1) + [FILLER[(i + j) % len(FILLER)] for j in range(i % 7 + 2)]
        words += ["beta"] * (i % 3) + ["alphabet"] * (i % 4 == 0) + ["gamma"] * (i % 5 == 0)
        words += ["alpha", "beta", "queue", "alpha", "beta"][:i % 6] + ["beta", "alpha"] * (i % 4)
        if i % 9 == 0:
            words = [FILLER[j % len(FILLER)] for j in range(i % 5 + 3)]
        rid = store.add_observation(NewObservation("s-hits", "proj", T0 + i, "command", "PostToolUse",
                                                   " ".join(words), tool_name="Bash"))
        rows[rid] = words
    expected = _bm25(rows, phrases, matches)
    found = store.search("observations", question, SearchFilters(), "relevance", 50, 0)
    best_first = sorted(expected, key=lambda rid: (-expected[rid], -rid))
    assert [record.id for record, _ in found] == best_first
    assert [score for _, score in found] == pytest.approx([expected[rid] for rid in best_first], rel=1e-9)
