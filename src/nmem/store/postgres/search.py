"""Reading records by id and by full-text match on PostgreSQL: `tsvector @@ tsquery`, ranked.

Ranking: FTS5's bm25() computed in SQL (k1 1.2, b 0.75, FTS5's IDF floor; the memory fields'
weight classes A summary, B tags, C content, D namespace take FTS5's column weights
3 : 2 : 1 : 0.5), over the newest RELEVANCE_WINDOW matching rows as on SQLite, so a word found
in a third of the rows costs a bounded sort. Scores are negated BM25s, as SQLite's. ts_rank's
own score is left only for a match ordered by date; BM25 reads a word's hits in a row through it
(RANKED_TERMS).

Statistics: the words' counts and the table's rows and tokens are kept in the database for every
process (`word_counts`, KEPT_COUNTS): each statement adds the rows past what is kept, and writes
the sum back (one statement more) when a word was counted afresh or the rows past it grew.

Round trips: every relevance read is one statement that reads the statistics, ranks, and
returns what its caller needs (the rows; or, for the service's own ranking
(nmem.search.rank), the candidates with their session windows and the texts, token counts and
times of every row named: `rank_candidates`). A plain-language search of one trail scope is
then that statement and the page's rows, plus one statement first when this process has not
seen a word's count yet (`fts_stats`). A search of observations filtered by dates alone sends
all of its candidate queries in that one statement, the first that finds a row in the dates
taking the candidates (FOLDED_READ_SQL), where they ran one statement each in turn. The rows
come with their sessions' agents and project roots (`Candidates.origins`, `Found.origins`), which
the service names beside each hit: no read of the sessions after the search.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import psycopg

from nmem.errors import StorageError
from nmem.models import Memory, Observation, Prompt
from nmem.store.postgres.connection import (
    ANY_PLANS,
    CUSTOM_PLANS,
    GENERIC_PLANS,
    KEYED_PLANS,
    SETTLED,
    Connection,
    Row,
    array_text,
)
from nmem.store.postgres.tsquery import Parsed, Phrase, parse
from nmem.store.records import Candidates, Found, FtsStats, SearchFilters
from nmem.store.sql.base import (
    OBS_COLUMNS_O,
    ORIGIN_COLUMNS,
    PROMPT_COLUMNS,
    PROMPT_ORIGIN_COLUMNS,
    origin_join,
    origins_of,
)
from nmem.store.sql.filters import observation_filters, prompt_filters
from nmem.store.sql.memories import HIDDEN_MEMORIES_SQL, VISIBLE_TO, listed_visible
from nmem.store.sql.scopes import SCOPES, Scope, ScopedSearch

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from nmem.store.records import IndexedText

# scope -> (table, the column after session_id that orders a session)
RANKED_TABLES = {"prompts": ("prompts", "id"), "observations": ("observations", "timestamp")}

RELEVANCE_WINDOW = 2000
NO_FILTERS = SearchFilters()
DF_CACHE_DRIFT = 0.05
DF_CACHE_SIZE = 20_000

TSQ = "to_tsquery('nmem', ?)"
# ts_rank's weights are listed D, C, B, A: namespace 0.5, content 1, tags 2, summary 3, scaled to 0..1.
MEMORY_WEIGHTS = "'{0.1667, 0.3333, 0.6667, 1.0}'"
SESSION_WEIGHTS = "'{0.1, 0.2, 0.4, 1.0}'"


_TERM = re.compile(r"[^\W_]+", re.UNICODE)


def _id_list(ids: Any) -> str | None:
    """A term's newest ids as the statement sent them (text, or a list) as an array's text."""
    if ids is None or isinstance(ids, str):
        return ids
    return "{" + ",".join(str(int(i)) for i in ids) + "}"


# What ranking one trail scope reads, in one statement (`rank_candidates`): the rows and tokens
# indexed, the candidates as BM25_SQL finds them, each candidate's session window (`reach`
# records each side, in session order), and the text, token count and time of every row named,
# and the candidates' whole rows (most pages are candidates: no second read for them). Rows come
# back by kind: 0 totals (id = rows, n = tokens, at = newest id, before = KEPT_STATE), 1 a
# candidate and its rank, 2 a window, 3 a text (a prompt's with its source), 4 a word's document
# frequency (id; content = the word), for the caches, 5 a candidate's row (at = its time).
#
# BM25 is FTS5's bm25(): a sum over the query's phrases (tsquery.parse: in order, repeats
# included) of the phrase's IDF (from the rows holding the phrase) times its hits in the row.
# `phrases` are those texts stemmed (their keys); `pwords` each phrase's lexemes (j: the place in
# the phrase, k: its length, prefix for `word*`); `words` what is counted: a phrase of one whole
# word by its lexeme (the counts plain searches keep too), any other (`'a' <-> 'b'`, `'pre':*`) by
# its key. A phrase under a NOT is not listed: no row that matches holds it, so it weighs in no
# score (as in FTS5, where it has no hit in the row), and counting it read every row of a common
# word (0.7 s for 'test' in 390k rows at 1M).
BM25_HEAD = """
WITH phrases AS MATERIALIZED (
    SELECT p.ord::int AS ord, to_tsquery('nmem', p.text)::text AS key, p.near, p.distance,
           CASE WHEN p.near > 0 THEN to_tsquery('nmem', p.grp) END AS nearq
    FROM unnest(?::text[], ?::int[], ?::int[], ?::text[]) WITH ORDINALITY AS p(text, near, distance, grp, ord)
), pwords AS MATERIALIZED (
    SELECT ph.ord, (m.j - 1)::int AS j, replace(m.w[1], '''''', '''') AS lexeme, m.w[2] IS NOT NULL AS prefix,
           count(*) OVER (PARTITION BY ph.ord) AS k
    FROM phrases ph CROSS JOIN LATERAL regexp_matches(ph.key, '''((?:[^'']|'''')+)''(:\\*)?', 'g')
         WITH ORDINALITY AS m(w, j)
), keyed AS MATERIALIZED (
    SELECT ph.ord, ph.near, ph.distance, w.k,
           CASE WHEN w.k = 1 AND NOT w.prefix THEN w.lexeme ELSE ph.key END AS term,
           CASE WHEN w.k = 1 AND NOT w.prefix THEN quote_literal(w.lexeme) ELSE ph.key END AS query
    FROM phrases ph JOIN pwords w ON w.ord = ph.ord AND w.j = 0
), words AS MATERIALIZED (
    SELECT DISTINCT term, query FROM keyed
), {counts}, idf AS MATERIALIZED (
    SELECT k.ord, k.term, k.near, k.distance, CASE WHEN raw.idf <= 0 THEN 1e-6 ELSE raw.idf END AS idf
    FROM keyed k JOIN terms tm ON tm.term = k.term CROSS JOIN totals t
    CROSS JOIN LATERAL (SELECT ln(((t.docs - tm.df)::float8 + 0.5) / (tm.df + 0.5)) AS idf) AS raw
), {found}
), {ranked}
"""

def length_term(tokens: str, avg: str) -> str:
    """BM25's length part of a row's term, k1 · (1 − b + b · tokens / avg), as SQL: in float8 (not
    numeric, cast a row), the same operations in the same order in every statement that ranks, so
    each gives the same float for the same row (0.75 × tokens and 0.25 are exact in both types)."""
    return f"1.2::float8 * (0.25::float8 + 0.75::float8 * {tokens} / {avg})"


# Ranking where every phrase is one word or one prefix (`term_ranking`): each found row's hits of
# each phrase are read by one of PostgreSQL's rank functions in C, given unit weights, so no row
# unnests its vector (unnesting even the filtered vector cost about 3 µs a row: 6 of a 12 ms
# statement at 2,000 rows). A word's hits from ts_rank, which for one lexeme found n times gives
# (Σ 1/j², j = 1…n) / 1.64493406685 (as float4): that sum's distance to π²/6 is about 1/(n + ½), so
# n = round(1 / (1.64493406685 · (1 − rank)) − ½), exactly for every n a vector holds (1…256; it
# keeps 256 places a lexeme: tests/store/test_pg_term_hits.py checks each). A prefix's hits (of
# every lexeme it begins, as FTS5 counts them) from ts_rank_cd, whose covers of a one-operand
# query are its places, each weighing 1 (six times ts_rank's cost, still a fifth of unnesting).
# A phrase's hits are taken once (`tf`, kept from being inlined by OFFSET 0), with the row's length
# term `k`; then FTS5's sum over the phrases, in their order (a word asked twice weighs twice).
# The question's values (`x`, TERMS_X) and the rows' ranking (RANKED_TERMS) are two CTEs, the
# second named and given its rows where the statement has them (`Ranking.over`).
_TERMS_X = """x AS MATERIALIZED (
    SELECT (SELECT array_agg(CASE WHEN w.k = 1 THEN ph.key::tsquery END ORDER BY ph.ord)
            FROM phrases ph LEFT JOIN pwords w ON w.ord = ph.ord AND w.j = 0) AS q,
           ARRAY[{idfs}]::float8[] AS idf<x columns>
)"""
TERMS_X = _TERMS_X.replace("<x columns>", "")
RANKED_TERMS = """<name> AS MATERIALIZED (
    SELECT r.id, -({score}) AS rank
    FROM <rows> r CROSS JOIN x CROSS JOIN totals t
    CROSS JOIN LATERAL (SELECT {tfs}, """ + length_term("r.tokens", "{avg}") + """ AS k OFFSET 0) tf
    ORDER BY rank, r.id DESC LIMIT ?
)"""


class Ranking(NamedTuple):
    """A ranking's two CTEs: `x`, the question's values, and `ranked`, the rows' scores, whose
    name (`<name>`) and rows (`<rows>`, each with its id, tsv and tokens) it is given where used."""
    x: str
    ranked: str

    def over(self, rows: str = "found", name: str = "ranked") -> str:
        """The ranking CTE named `name`, of the best rows of `rows` (its LIMIT is a mark)."""
        return self.ranked.replace("<name>", name).replace("<rows>", rows)

    def sql(self) -> str:
        """Both CTEs, ranking `found` as `ranked`: what the statements' `{ranked}` takes."""
        return f"{self.x}, {self.over()}"

# A word's hits in a row and a prefix's (RANKED_TERMS), from its tsquery `q`; 0 for a phrase
# PostgreSQL's parser gave no lexeme or several (`q` NULL). A prefix's: ts_rank sums each lexeme
# the prefix begins as WORD_HITS reads one, each over 1 / 1.645 (the lexeme's first place alone
# weighs 1), so under 1.1 the row holds one such lexeme, whose count WORD_HITS's formula reads
# back; from two lexemes up (1.216 at least) ts_rank_cd counts every place of them. Most rows of
# a prefix's window hold one of its lexemes, and ts_rank costs a third of ts_rank_cd: about 0.8
# ms of a single prefix's 6.7 at 1M rows (docs/benchmarks/postgres.md, pg-prefix).
_RANK = "ts_rank('{{1,1,1,1}}', r.tsv, {q})::float8"
_ONE_LEXEME = "round(1 / (1.64493406685 * (1 - " + _RANK + ")) - 0.5)"
WORD_HITS = "COALESCE(" + _ONE_LEXEME + ", 0)"
PREFIX_HITS = ("COALESCE(CASE WHEN " + _RANK + " < 1.1 THEN " + _ONE_LEXEME
               + " ELSE ts_rank_cd('{{1,1,1,1}}', r.tsv, {q})::float8 END, 0)")


def term_ranking(phrases: Sequence[Phrase], avg: str) -> Ranking:
    """TERMS_X and RANKED_TERMS for phrases of one word or one prefix each."""
    tfs, score = [], "0::float8"
    for i, phrase in enumerate(phrases, start=1):
        hits = PREFIX_HITS if phrase.text.endswith(":*") else WORD_HITS
        tfs.append(f"{hits.format(q=f'x.q[{i}]')}::float8 AS t{i}")
        score = f"({score} + x.idf[{i}] * ((tf.t{i} * 2.2) / (tf.t{i} + tf.k)))"
    return Ranking(TERMS_X.format(idfs=_phrase_idfs(len(phrases))),
                   RANKED_TERMS.format(score=score, tfs=", ".join(tfs), avg=avg))


def _phrase_idfs(n: int) -> str:
    """Each phrase's IDF by its place (0 for a phrase of no lexeme)."""
    return ", ".join(f"COALESCE((SELECT d.idf FROM idf d WHERE d.ord = {i + 1}), 0)" for i in range(n))


# Ranking with phrases of several words or a NEAR (`phrase_ranking`): each word of each phrase
# (`x.w[1…]`, in order; `x.l` its lexeme) has its hits in the row read as RANKED_TERMS reads a
# word's or a prefix's (`c.n1`, `c.n2`, …). A phrase's hits are then those counts wherever they can
# only be 0 or 1: a phrase or a NEAR the row does not hold (`@@`, in C; asked only of one under an
# OR, as every match holds the others) has none, nor has one a word of which the row lacks; one
# of whose words stands once in the row has one. Only otherwise are the places of its words read
# (`places`) and compared: the first word's places p where the next word stands at p + 1, …; a
# NEAR's where the other phrase's ends or starts close enough. Each phrase's hits are taken once
# (`tf`, kept from being inlined by OFFSET 0), then FTS5's sum over the phrases, in their order.
# Reading every found row's places instead (unnesting its filtered vector) cost about 3 µs a row.
# A phrase of adjacent words (`x.adjacent`: its tsquery `'a' <-> 'b' <-> …`, no word dropped, no
# prefix) takes its hits from ts_rank_cd given unit weights instead, in C (about 1-2 µs a row
# against about 7.5 for the places compared): each cover it finds of such a phrase is one hit, of
# as many entries as words and as wide, so it weighs exactly 1, and it finds them one by one. That
# holds while no place holds two of its words, which happens only past place 16,383, where
# PostgreSQL puts every later place: such a row (`x.clash`, `'a' <0> 'b'`) compares its places
# (tests/store/test_pg_phrase_bounds.py checks the count over vectors clamped there).
PHRASES_X = """x AS MATERIALIZED (
    SELECT ARRAY[{lexemes}] AS l,
           ARRAY[{words}]::tsquery[] AS w,
           (SELECT array_agg(key::tsquery ORDER BY ord) FROM phrases) AS q,
           (SELECT array_agg(nearq ORDER BY ord) FROM phrases) AS nq,
           (SELECT array_agg(ph.key !~ '<[0-9]' ORDER BY ph.ord) FROM phrases ph) AS adjacent,
           (SELECT array_agg((SELECT string_agg(quote_literal(a.lexeme) || ' <0> ' || quote_literal(b.lexeme), ' | ')
                              FROM pwords a JOIN pwords b ON b.ord = a.ord AND a.lexeme < b.lexeme
                              WHERE a.ord = ph.ord)::tsquery ORDER BY ph.ord) FROM phrases ph) AS clash,
           ARRAY[{idfs}]::float8[] AS idf
)"""
# The phrases' places are compared (`exact`, about 11 µs a row: 22 of the 29 ms of `"no such table"`
# at 1M rows, whose 2,000 rows of the window each hold the phrase three times) only for the rows
# that can reach the page. A phrase's hits are at most its rarest word's (`least`: a hit needs
# each of its words, or each of a NEAR phrase's own), so the row's score with `least` in place of
# each phrase's hits is a bound above its score (`<name>_b`, `ub`: the same sum, each term rising
# with the hits, and PostgreSQL's float operations rising with their operands). The rows are taken
# by that bound, best first: the first PHRASE_BATCH × `want` are scored exactly (`<name>_1`);
# when the `want`-th best of them scores strictly better than the best bound left (`<name>_cut`),
# no other row can reach the page (nor tie with it), and none is scored (`<name>_ok`); else the
# rest whose bound reaches the page's last score so far are scored too (`<name>_2`: a row whose
# bound is below it scores below `want` rows). Every score is the same expression as before (the
# same float), the page the same rows in the same order as when every row was scored. Where a
# phrase's hits are mostly its rarest word's (the usual case) the bound is its score.
RANKED_PHRASES = """<name>_n AS MATERIALIZED (
    SELECT ?::bigint AS n
), <name>_b AS MATERIALIZED (
    SELECT r.id, r.tsv, r.tokens, {columns}, -({score}) AS ub
    FROM <rows> r CROSS JOIN x CROSS JOIN totals t
    CROSS JOIN LATERAL (SELECT {counts} OFFSET 0) c
    CROSS JOIN LATERAL (SELECT {bounds}, {k} AS k OFFSET 0) tf
), <name>_cut AS MATERIALIZED (
    SELECT (SELECT b.ub FROM <name>_b b ORDER BY b.ub, b.id DESC
            OFFSET (SELECT {batch} * n FROM <name>_n) LIMIT 1) AS rest
), <name>_1 AS MATERIALIZED (
    SELECT r.id, -({score}) AS rank
    FROM (SELECT * FROM <name>_b b ORDER BY b.ub, b.id DESC LIMIT (SELECT {batch} * n FROM <name>_n)) r
    CROSS JOIN x CROSS JOIN totals t
    CROSS JOIN LATERAL (SELECT {tfs}, {k} AS k OFFSET 0) tf
), <name>_ok AS MATERIALIZED (
    SELECT l.last, (SELECT rest FROM <name>_cut) IS NULL OR l.last < (SELECT rest FROM <name>_cut) AS ok
    FROM (SELECT (SELECT max(p.rank) FROM (SELECT o.rank FROM <name>_1 o ORDER BY o.rank, o.id DESC
                                           LIMIT (SELECT n FROM <name>_n)) p) AS last) AS l
), <name>_2 AS MATERIALIZED (
    SELECT r.id, -({score}) AS rank
    FROM (SELECT * FROM <name>_b b WHERE NOT (SELECT ok FROM <name>_ok) AND b.ub <= (SELECT last FROM <name>_ok)
          ORDER BY b.ub, b.id DESC OFFSET (SELECT {batch} * n FROM <name>_n)) r
    CROSS JOIN x CROSS JOIN totals t
    CROSS JOIN LATERAL (SELECT {tfs}, {k} AS k OFFSET 0) tf
), <name> AS MATERIALIZED (
    SELECT u.id, u.rank FROM (SELECT id, rank FROM <name>_1 UNION ALL SELECT id, rank FROM <name>_2) AS u
    ORDER BY u.rank, u.id DESC LIMIT (SELECT n FROM <name>_n)
)"""
# How many times the page's rows are scored exactly first (RANKED_PHRASES)
PHRASE_BATCH = 2

# The places of the word in slot {slot} of x.l in a row: a whole word's, or a prefix's (every
# lexeme it begins)
WORD_PLACES = ("ARRAY(SELECT unnest(u.positions)::int "
               "FROM unnest(ts_filter(setweight(r.tsv, 'A', ARRAY[x.l[{slot}]]), '{{a}}')) u)")
PREFIX_PLACES = "ARRAY(SELECT unnest(u.positions)::int FROM unnest(r.tsv) u WHERE starts_with(u.lexeme, x.l[{slot}]))"


def phrase_ranking(phrases: Sequence[Phrase], avg: str) -> Ranking:
    """PHRASES_X and RANKED_PHRASES for these phrases: their words are `x.l[1…]` (lexemes) and `x.w[1…]`
    (tsqueries) in order, each looked up by its phrase and place (a word PostgreSQL's parser
    drops, `½`, is NULL there and has no hits), their IDFs `x.idf[1…]` (0 for a phrase of no lexeme)."""
    slots: list[list[int]] = []   # per phrase: its words' places in x.l
    prefixed: set[int] = set()
    for phrase in phrases:
        k = len(_LEXEME.findall(phrase.text))
        first = sum(len(m) for m in slots) + 1
        slots.append(list(range(first, first + k)))
        if phrase.text.endswith(":*") or phrase.text.endswith(":*)"):
            prefixed.add(first + k - 1)
    every = [slot for mine in slots for slot in mine]
    counts = [(PREFIX_HITS if slot in prefixed else WORD_HITS).format(q=f"x.w[{slot}]") + f"::float8 AS n{slot}"
              for slot in every]

    def places(slot: int) -> str:
        return (PREFIX_PLACES if slot in prefixed else WORD_PLACES).format(slot=slot) + f" AS a{slot}"

    def starts(i: int) -> str:
        """Where phrase i starts in the row: its first word's places followed by the others'."""
        first, *rest = slots[i]
        follow = " AND ".join(f"p + {j} = ANY(pa.a{slot})" for j, slot in enumerate(rest, start=1))
        return (f"SELECT p AS s FROM unnest(pa.a{first}) AS p"
                + (f" WHERE {follow}" if follow else ""))

    def rarest(i: int, row: str) -> str:
        """The least of phrase i's words' hits, as `row` carries them (n{slot}): a bound of its hits."""
        n = [f"{row}.n{slot}" for slot in slots[i]]
        return n[0] if len(n) == 1 else f"LEAST({', '.join(n)})"

    tfs, bounds, score = [], [], "0::float8"
    for i, phrase in enumerate(phrases):
        least = rarest(i, "r")
        bounds.append(f"({rarest(i, 'c')})::float8 AS t{i + 1}")   # counted (c), then carried by the row (r)
        if len(slots[i]) == 1 and not phrase.near:
            tf = least   # a word's (or prefix's) hits
        else:
            read = slots[i]
            if phrase.near:
                other = next(o for o, p in enumerate(phrases) if p.near == phrase.near and o != i)
                read = slots[i] + slots[other]
                k, ko, d = len(slots[i]), len(slots[other]), phrase.distance + 1
                count = (f"count(*) FROM ({starts(i)}) a WHERE EXISTS (SELECT 1 FROM ({starts(other)}) b "
                         f"WHERE (b.s > a.s + {k - 1} AND b.s - (a.s + {k - 1}) <= {d}) "
                         f"OR (a.s > b.s + {ko - 1} AND a.s - (b.s + {ko - 1}) <= {d}))")
                held = f"r.tsv @@ x.nq[{i + 1}]"
            else:
                count = f"count(*) FROM ({starts(i)}) a"
                held = f"r.tsv @@ x.q[{i + 1}]"
            exact = (f"(SELECT (SELECT {count}) FROM (SELECT {', '.join(places(s) for s in read)} OFFSET 0) pa)")
            if not phrase.near and not any(slot in prefixed for slot in slots[i]):
                exact = (f"CASE WHEN NOT x.adjacent[{i + 1}] OR r.tsv @@ x.clash[{i + 1}] THEN {exact} "
                         f"ELSE ts_rank_cd('{{1,1,1,1}}', r.tsv, x.q[{i + 1}])::float8 END")
            # a phrase (or NEAR) every match holds needs no test of its own
            absent = "" if phrase.required else f"WHEN NOT ({held}) THEN 0 "
            tf = f"CASE {absent}WHEN {least} <= 1 THEN {least} ELSE {exact} END"
        tfs.append(f"({tf})::float8 AS t{i + 1}")
        score = f"({score} + x.idf[{i + 1}] * ((tf.t{i + 1} * 2.2) / (tf.t{i + 1} + tf.k)))"
    lexemes = ", ".join(f"(SELECT w.lexeme FROM pwords w WHERE w.ord = {i + 1} AND w.j = {j})"
                        for i, mine in enumerate(slots) for j in range(len(mine)))
    words = ", ".join(f"(SELECT quote_literal(w.lexeme) || CASE WHEN w.prefix THEN ':*' ELSE '' END "
                      f"FROM pwords w WHERE w.ord = {i + 1} AND w.j = {j})"
                      for i, mine in enumerate(slots) for j in range(len(mine)))
    return Ranking(PHRASES_X.format(lexemes=lexemes, words=words, idfs=_phrase_idfs(len(phrases))),
                   RANKED_PHRASES.format(score=score, counts=", ".join(counts), tfs=", ".join(tfs),
                                         bounds=", ".join(bounds), k=length_term("r.tokens", avg), batch=PHRASE_BATCH,
                                         columns=", ".join(f"c.n{slot}" for slot in every)))

# The statistics of some terms (`fts_stats`): `words` their terms and tsquery texts.
FTS_STATS_SQL = """
WITH words AS MATERIALIZED (
    SELECT term, query FROM unnest(?::text[], ?::text[]) AS w(term, query)
), {counts}
SELECT t.docs, t.tokens, t.newest, {state} AS state,
       (SELECT array_agg(term) FROM terms) AS terms, (SELECT array_agg(df) FROM terms) AS dfs,
       CASE WHEN s.settled THEN (SELECT array_agg(newest::text) FROM terms) END AS lists
FROM totals t CROSS JOIN state s
"""

# Past this many rows in its table, the statements that read the kept counts are planned for
# their own values at every run: still prepared by psycopg after five runs (parsed once), on a
# connection set to `plan_cache_mode = force_custom_plan` (connection.py, `CUSTOM_PLANS`).
# Left to choose, PostgreSQL keeps one generic plan per prepared statement, which for these
# statements walks the wrong index for many questions. Measured on `bench/http_server.py --pg`
# (16 clients, 100k rows, every search of everything; docs/benchmarks/postgres.md): PostgreSQL CPU 36.4 ms a
# search with generic plans allowed, 17.5 ms never prepared, 16.5-17.0 ms prepared and planned
# each run (41 / 65 / 67-70 requests/s). Below the threshold (bench-team's small tables) planning
# costs more than a generic plan loses: forcing custom plans there doubled PostgreSQL's CPU a request.
# Those whose plan reads no value of its own keep their generic plan all the same (`fts_stats`;
# `_generic_plan`: a few days of a bounded few words). On a store whose tables are all below it,
# every ranking read keeps its generic plan and the other statements run in whatever mode their
# connection is in, so no SET goes out between them (`_plans`, connection.ANY_PLANS).
CUSTOM_PLAN_ROWS = 10_000
# The tables a store ranks (`_plans`: a store is small while none is past CUSTOM_PLAN_ROWS)
SIZED_TABLES = ("observations", "prompts", "memories", "sessions")

# A kept count is written back when none is kept or more than this many ids have been drawn
# past it (the walk past `up_to` costs a few microseconds a row).
WRITE_BACK_LAG = 1000

# The words' counts and the table's totals, kept for every process (schema step 9, `word_counts`):
# `words` (a CTE of `term` and its tsquery text, `query`) gives `totals` (rows, tokens, newest
# id), `terms` (term, df, kept_to) and `state`. A count is the kept one plus the rows past its
# `up_to`, walked by the primary key (ts_match_vq: the operator's function, which the GIN index
# does not serve); a word none is kept for is counted off the GIN index (which reads every
# matching row's heap page: 74 ms for a word in 22k rows at 1M).
# `state.settled`, asked only when a count is missing or lags: whether these counts may be
# written back: no row this statement could not see can still commit with an id at or below the
# newest it saw (connection.SETTLED). `state.epoch`: the table's, checked again by the write.
KEPT_COUNTS = """kept AS MATERIALIZED (
    SELECT c.word, c.rows, c.tokens, c.up_to,
           CASE WHEN cardinality(c.newest) >= {keep} OR cardinality(c.newest) = c.rows THEN c.newest END AS newest
    FROM (SELECT term FROM words UNION ALL SELECT '') AS w(term)
    JOIN word_counts c ON c.tbl = '{table}' AND c.word = w.term
), base AS MATERIALIZED (
    SELECT COALESCE(k.rows, 0) AS docs, COALESCE(k.tokens, 0) AS tokens, k.up_to AS kept_to
    FROM (SELECT 1) AS one LEFT JOIN kept k ON k.word = ''
), fresh AS MATERIALIZED (
    SELECT count(*) AS n, COALESCE(sum(tokens), 0) AS tokens, max(id) AS newest FROM {table}
    WHERE id > (SELECT COALESCE(kept_to, 0) FROM base)
), totals AS MATERIALIZED (
    SELECT b.docs + f.n AS docs, b.tokens + f.tokens AS tokens, COALESCE(f.newest, b.kept_to, 0) AS newest
    FROM base b CROSS JOIN fresh f
), terms AS MATERIALIZED (
    SELECT w.term, COALESCE(k.rows + f.n, a.n) AS df, k.up_to AS kept_to,
           CASE WHEN k.newest IS NOT NULL THEN (f.ids || k.newest)[1:{keep}] WHEN a.read THEN a.ids END AS newest,
           k.newest IS NULL AND a.read AND {lists} AS built
    FROM words w LEFT JOIN kept k ON k.word = w.term
    CROSS JOIN LATERAL (SELECT count(*) AS n, COALESCE(array_agg(x.id ORDER BY x.id DESC), '{{}}') AS ids
                        FROM {table} x WHERE x.id > k.up_to AND ts_match_vq(x.tsv, {query})) f
    CROSS JOIN LATERAL (SELECT k.up_to IS NULL OR (k.newest IS NULL AND {lists} AND k.rows < {list_rows}) AS read) r
    CROSS JOIN LATERAL (SELECT count(*) AS n, {listed} AS ids, r.read
                        FROM {table} x WHERE r.read AND x.tsv @@ {query}) a
), state AS MATERIALIZED (
    SELECT CASE WHEN b.kept_to IS NULL OR t.newest - b.kept_to > {lag}
                     OR EXISTS (SELECT 1 FROM terms WHERE kept_to IS NULL OR t.newest - kept_to > {lag} OR built)
           THEN {settled} ELSE false END AS settled,
           (SELECT epoch FROM word_count_epochs WHERE tbl = '{table}') AS epoch, b.kept_to
    FROM totals t CROSS JOIN base b
)"""

# A term's newest ids are read off the GIN index (every match's row) only for a term in fewer rows
# than this, when its count is kept already: a term in more is found faster by walking the key
# (FOUND_RANGED), and reading its rows once cost 0.7 s for a word in 390k rows at 1M.
LIST_ROWS = 50_000


def kept_counts(table: str, query: str, lists: bool = False) -> str:
    """KEPT_COUNTS for `table`, each term's rows counted with `query`; `lists`: a term's newest
    ids are read off the GIN index when none are kept (FOUND_RANGED's 'kept' way takes them; a
    term counted already only when in fewer than LIST_ROWS rows), and none otherwise."""
    listed = (f"COALESCE((array_agg(x.id ORDER BY x.id DESC))[1:{RELEVANCE_WINDOW}], '{{}}')" if lists
              else "NULL::bigint[]")
    return KEPT_COUNTS.format(table=table, query=query, lag=WRITE_BACK_LAG, settled=SETTLED, keep=RELEVANCE_WINDOW,
                              lists="true" if lists else "false", listed=listed, list_rows=LIST_ROWS)


# What kind 0 carries besides the totals: [the id the kept totals reached (-1: none), the
# table's epoch, 1 when the counts may be written back]
KEPT_STATE = "ARRAY[COALESCE(s.kept_to, -1), COALESCE(s.epoch, -1), s.settled::int]::bigint[]"

# Counts written back (`_write_back`), only while the table's epoch is the one they were taken
# at: no delete since, and none under way (it holds the epoch's row: the write is skipped). Its
# commit is not waited for on disk (synchronous_commit off for it): a count lost is counted again.
# A term's newest ids (as text, NULL when none were read) go with its count, taken to the same
# `up_to`: a count moved on without them drops the ids kept before (they would miss the rows
# past their `up_to`), and ids read for a count kept to the same row are added to it.
WRITE_BACK_SQL = """
INSERT INTO word_counts AS c (tbl, word, rows, tokens, up_to, newest)
SELECT ?, k.word, k.rows, k.tokens, ?::bigint, k.newest::bigint[]
FROM unnest(?::text[], ?::bigint[], ?::bigint[], ?::text[]) AS k(word, rows, tokens, newest)
WHERE EXISTS (SELECT 1 FROM word_count_epochs e WHERE e.tbl = ? AND e.epoch = ?
              AND set_config('synchronous_commit', 'off', true) = 'off' FOR SHARE SKIP LOCKED)
ORDER BY k.word
ON CONFLICT (tbl, word) DO UPDATE SET rows = excluded.rows, tokens = excluded.tokens, up_to = excluded.up_to,
                                      newest = excluded.newest
    WHERE c.up_to < excluded.up_to
          OR (c.up_to = excluded.up_to AND cardinality(excluded.newest) > COALESCE(cardinality(c.newest), -1))
"""

# The newest RELEVANCE_WINDOW matches, as the planner reads them: by walking the primary key
# backwards and testing each row, when it expects many matches, else off the GIN index and sorted
# (by id with their place, ctid, alone; the rows kept are then read whole by that place, see
# FOUND_BOUNDED). In no order: ranking sorts them (sorting 2,000 rows with their vectors by id
# took half a millisecond of `auth | login` at 100k under EXPLAIN ANALYZE).
FOUND_PLANNED = """found AS (
    SELECT z.id, z.tsv, z.tokens FROM {table} z
    WHERE z.ctid = ANY(ARRAY(SELECT {alias}.ctid FROM {source} WHERE {where} ORDER BY {alias}.id DESC LIMIT ?))"""

# A relevance read filtered by project (FOUND_PLANNED) is planned for its values, and PostgreSQL
# then ANDs the words' bitmap with the project index's whenever that leaves fewer rows to read: for
# a project of 30% of 100k rows and a word of 1,100 rows, reading the project's 30k index entries
# took 5-15 ms against 1-3 ms for testing the 1,100 rows' project (every match's page was read all
# the same). When the words' counts bound the matches below a WORDS_FIRST_RATIO-th of the
# project's rows, the filter is written so that its index cannot serve it (`|| ''`), and the
# matches come off the words' index alone; a small project or common words keep the planner's
# choice (the project's index, or its time order walked). An index entry costs about a fifth of
# a matched row's test.
PROJECT_CLAUSE = "o.project = ?"
WORDS_FIRST_CLAUSE = "(o.project || '') = ?"
WORDS_FIRST_RATIO = 5
FETCHED, TESTED = "fetched", "tested"
# FOUND_PLANNED for a few matches tested for their project (FETCHED): off the words' index alone
# whatever the values (`id + 0`: never the key walked backwards), so one generic plan serves
FOUND_FETCHED = FOUND_PLANNED.replace("ORDER BY {alias}.id DESC", "ORDER BY {alias}.id + 0 DESC")
PROJECT_STATS_SQL = """
SELECT s.most_common_vals::text::text[] AS vals, s.most_common_freqs AS freqs, s.n_distinct, s.null_frac,
       c.reltuples
FROM pg_stats s JOIN pg_class c ON c.relname = s.tablename AND c.relnamespace = to_regnamespace(s.schemaname)
WHERE s.schemaname = current_schema() AND s.tablename = ? AND s.attname = 'project'
"""


# The same rows for a read without a filter (`found_ranged`). A question of phrases joined by OR
# alone (`disjunctive`) takes them, when every term's newest ids are kept (KEPT_COUNTS, schema step
# 12; read off the GIN index with its count when missing), from those ids ('kept'): each of its
# newest matches holds a term in whose newest window it stands (fewer than a window of matches,
# so of that term's rows, are newer), so the newest window of the terms' ids put together holds
# them all; the rows are then read by id (no GIN bitmap, no range of the key, no row read twice).
# Otherwise one of three ways picked by an
# estimate of the matches made from the counts the statement holds (`guess`: the rows of the rarest
# phrase every match holds, times the share of the rows each other such phrase is in, as if they
# were independent; with none, the sum of the phrases' rows):
# - 'walk': many matches (est² ≥ 2 × window × rows: 63k at 1M rows): the key walked backwards,
#   testing a row or two per match;
# - 'fetch': few (below 3 × margin × window): every match off the GIN index, sorted by id;
# - 'range': between: only the matches above an id `lo` that should hold margin × window of them
#   (ids ÷ matches), off the GIN index ANDed with the primary key's range (`near`), and, when they
#   are too few after all, the key walked down from `lo` for the rest (`far`).
# The walk reads every row it passes (231k rows, 23k buffers for `timeout* NOT auth`, 0.8% of the
# rows at 1M) and the fetch every match's page (7k pages for the 23k matches of `auth OR login`);
# the range reads about margin × window of the matches' pages (a bitmap of the key's range costs
# some 30 ns an id). `OR id IS NULL` (never true) keeps the planner from walking the key through
# the range (a plain index scan cannot take an OR; it did for `error | ledgererror`), `lo` being
# unknown when it plans; `id + 0` from walking the key to sort. The walks test rows with
# ts_match_vq, which the GIN index does not serve. So every way's plan is fixed by the
# statement, whatever the words: a read without a filter keeps one
# generic plan (`_plan_kept`), its tsquery made once (`matching`: under a generic plan a walk's
# `to_tsquery('nmem', $n)` was parsed again for every row it tested).
# Each way is exact: `near` holds the newest matches above `lo`, `far` the newest below; 'kept'
# holds every term's newest (a term in fewer rows than the window: all of them).
# A question with a NOT or a prefix (`sievable`) may take 'sieve': a term's kept ids (`usable`:
# its newest window, or all its rows) hold every row of the term with an id at or above the
# least of them (`bound`; 0 when all its rows are kept). A term every match holds (required: no
# OR above it, and no NOT: a negated phrase is not listed) thus holds every match at or above its
# bound: those rows, read by id and tested against the whole question (`sieved`), are exactly
# the matches there. `cover` takes the required term of the least bound (the most ids proven),
# else, when every term is kept, the union of all (each match holds one of them: the ids at or
# above the greatest bound). When they give fewer than the window, the rest are the newest
# matches below the bound: `near` between `lo` and the bound (`lo` from the density the sieve
# measured above it: no estimate of the NOT's share) and `far` below `lo`, as for 'range'. A
# cover whose term is in fewer rows than the window (bound 0) is left to the ways before: the
# fetch reads the same rows off the GIN index, each for less than by id (a descent of the key).
FOUND_RANGED = """matching AS MATERIALIZED (
    SELECT to_tsquery('nmem', ?) AS q
), guess AS MATERIALIZED (
    SELECT t.docs, t.newest, GREATEST(t.newest, t.docs) AS ids,
           CASE WHEN bool_or(g.required)
                THEN t.docs * exp(sum(ln(LEAST(GREATEST(g.df, 1)::float8 / GREATEST(t.docs, 1), 1.0)))
                                  FILTER (WHERE g.required))
                ELSE sum(g.df) END AS est
    FROM (SELECT DISTINCT k.term, tm.df, r.required
          FROM keyed k JOIN terms tm ON tm.term = k.term
          JOIN unnest(?::bool[]) WITH ORDINALITY AS r(required, ord) ON r.ord = k.ord) AS g
    CROSS JOIN totals t GROUP BY t.docs, t.newest
), usable AS MATERIALIZED (
    SELECT tm.term, tm.newest, bool_or(r.required) AS required,
           CASE WHEN cardinality(tm.newest) = tm.df THEN 0 ELSE tm.newest[cardinality(tm.newest)] END AS bound
    FROM terms tm JOIN keyed k ON k.term = tm.term
    JOIN unnest(?::bool[]) WITH ORDINALITY AS r(required, ord) ON r.ord = k.ord
    WHERE {sieve} AND tm.newest IS NOT NULL AND (cardinality(tm.newest) >= ? OR cardinality(tm.newest) = tm.df)
    GROUP BY tm.term, tm.newest, tm.df
), cover AS MATERIALIZED (
    SELECT c.ids, c.bound FROM (
        (SELECT u.newest AS ids, u.bound, 0 AS pick FROM usable u WHERE u.required
         ORDER BY u.bound, cardinality(u.newest) LIMIT 1)
        UNION ALL
        SELECT ARRAY(SELECT DISTINCT i.id FROM usable u CROSS JOIN LATERAL unnest(u.newest) AS i(id)
                     WHERE i.id >= m.bound), m.bound, 1
        FROM (SELECT max(bound) AS bound, count(*) AS n, bool_or(required) AS required FROM usable) AS m
        WHERE m.n = (SELECT count(*) FROM terms) AND NOT m.required) AS c
    ORDER BY c.pick LIMIT 1
), choice AS MATERIALIZED (
    SELECT CASE WHEN {lists} AND (SELECT bool_and(tm.newest IS NOT NULL AND (cardinality(tm.newest) >= ?
                                                                          OR cardinality(tm.newest) = tm.df))
                                  FROM terms tm) THEN 'kept'
                WHEN (SELECT bound FROM cover) > 0 THEN 'sieve'
                WHEN g.est IS NULL OR g.est < ?::float8 THEN 'fetch'
                WHEN g.est * g.est >= ?::float8 * g.docs THEN 'walk' ELSE 'range' END AS how,
           g.newest - ceil(?::float8 * g.ids / GREATEST(g.est, 1))::bigint AS lo
    FROM (SELECT 1) AS one LEFT JOIN guess g ON true
), sieved AS MATERIALIZED (
    SELECT sv.id, sv.tsv, sv.tokens FROM {table} sv
    WHERE sv.id = ANY((SELECT ids FROM cover)::bigint[]) AND (SELECT how FROM choice) = 'sieve'
          AND ts_match_vq(sv.tsv, (SELECT q FROM matching))
    ORDER BY sv.id DESC LIMIT ?
), span AS MATERIALIZED (
    SELECT CASE WHEN c.how = 'sieve'
                THEN v.bound - LEAST(ceil(?::float8 * (? - s.n) * CASE WHEN s.n > 0
                                                                     THEN (g.newest - v.bound + 1)::float8 / s.n
                                                                     ELSE g.ids / GREATEST(g.est, 1) END),
                                     v.bound + 1)::bigint
                ELSE c.lo END AS lo,
           CASE WHEN c.how = 'sieve' THEN v.bound ELSE 9223372036854775807 END AS hi,
           ? - s.n AS short,
           c.how = 'range' OR (c.how = 'sieve' AND s.n < ? AND v.bound > 0) AS ranged
    FROM choice c CROSS JOIN (SELECT count(*) AS n FROM sieved) AS s
    LEFT JOIN cover v ON true LEFT JOIN guess g ON true
), near AS MATERIALIZED (
    SELECT {alias}.id, {alias}.ctid FROM {source}
    WHERE {alias}.tsv @@ (SELECT q FROM matching)
          AND (({alias}.id > (SELECT lo FROM span) AND {alias}.id < (SELECT hi FROM span)) OR {alias}.id IS NULL)
          AND (SELECT ranged FROM span)
    ORDER BY {alias}.id + 0 DESC LIMIT (SELECT short FROM span)
), far AS MATERIALIZED (
    SELECT {alias}.id, {alias}.ctid FROM {source}
    WHERE {alias}.id <= (SELECT lo FROM span) AND ts_match_vq({alias}.tsv, (SELECT q FROM matching))
          AND (SELECT ranged FROM span) AND (SELECT count(*) FROM near) < (SELECT short FROM span)
    ORDER BY {alias}.id DESC LIMIT (SELECT short - (SELECT count(*) FROM near) FROM span)
){kept}, found AS (
    (SELECT {alias}.id, {alias}.tsv, {alias}.tokens FROM {source}
     WHERE ts_match_vq({alias}.tsv, (SELECT q FROM matching)) AND (SELECT how FROM choice) = 'walk'
     ORDER BY {alias}.id DESC LIMIT ?)
    UNION ALL
    {kept_rows}
    UNION ALL
    SELECT s.id, s.tsv, s.tokens FROM sieved s
    UNION ALL
    (SELECT z.id, z.tsv, z.tokens FROM {table} z
     WHERE z.ctid = ANY(ARRAY(
         SELECT u.ctid FROM (SELECT id, ctid FROM near UNION ALL SELECT id, ctid FROM far
                             UNION ALL (SELECT {alias}.id, {alias}.ctid FROM {source}
                                        WHERE {alias}.tsv @@ (SELECT q FROM matching)
                                              AND (SELECT how FROM choice) = 'fetch'
                                        ORDER BY {alias}.id + 0 DESC LIMIT ?)) AS u
         ORDER BY u.id DESC LIMIT (SELECT short FROM span))))"""

# The 'kept' way's rows (FOUND_RANGED): the newest window of the terms' kept ids, read by id.
# The ids are gated by the way inside the CASE as well as beside it: PostgreSQL evaluated the
# index condition, and so the union of every term's kept ids (a sort of up to 2,000 ids a term),
# though the gate kept the scan under it from running (0.5-0.9 ms of an AND at 1M rows).
KEPT_ROWS = """(SELECT z.id, z.tsv, z.tokens FROM {table} z
     WHERE z.id = ANY(CASE WHEN (SELECT how FROM choice) <> 'kept' THEN NULL::bigint[]
                           WHEN (SELECT count(*) FROM terms) = 1 THEN (SELECT tm.newest[1:?] FROM terms tm)
                           ELSE ARRAY(SELECT DISTINCT u.id FROM terms tm CROSS JOIN LATERAL unnest(tm.newest) AS u(id)
                                      ORDER BY u.id DESC LIMIT ?) END)
           AND (SELECT how FROM choice) = 'kept')"""

# The same rows for a question of several terms (`pruned`), of which only those that can still
# reach the page have their vectors read and scored. Which of its terms a row of the window holds
# is known without the row: a term's kept ids are its newest window (or all its rows), and a row
# of the question's newest window that holds the term has fewer than a window of the term's rows
# newer than it (they all match), so it stands in them. A row's BM25 is a sum over the phrases of
# idf × tf × 2.2 ÷ (tf + k), k > 0: each under 2.2 × idf, and 0 for a phrase whose term the row
# lacks (no hit). So 2.2 × the summed IDFs of the terms a row holds is above its score (`kub`:
# the window's ids, the newest of the terms' ids put together, each with that bound). The rows
# are taken from the highest bound down to a level (`kcut.tau`), read (`found1`) and scored
# (`pre`: the ranking's own `ranked`, over them); when the page's last of them scores above the
# highest bound left (`kcut.rest`), no other row can reach the page, and none is read (`kenough`).
# Otherwise the rest are read too, and the page is the whole window's, as before. The level: the
# highest at which `want` rows at least have a bound PRUNE_LIKELY times the next one (a row that
# holds each of its terms once, of average length, scores its bound ÷ 2.2). For `error OR
# LedgerError` the rows of the window holding LedgerError are read (160 at 100k), not its 2,000.
PRUNED_ROWS = """kwant AS MATERIALIZED (
    SELECT ?::int AS n
), kub AS MATERIALIZED (
    SELECT g.id, g.ub FROM (
        SELECT u.id, 2.2 * sum(w.w) AS ub
        FROM (SELECT d.term, sum(d.idf) AS w FROM idf d GROUP BY d.term) AS w
        JOIN terms tm ON tm.term = w.term CROSS JOIN LATERAL unnest(tm.newest) AS u(id)
        WHERE (SELECT how FROM choice) = 'kept'
        GROUP BY u.id) AS g
    ORDER BY g.id DESC LIMIT ?
), kcut AS MATERIALIZED (
    SELECT l.ub AS tau, l.next AS rest
    FROM (SELECT d.ub, lead(d.ub) OVER (ORDER BY d.ub DESC) AS next FROM (SELECT DISTINCT ub FROM kub) AS d) AS l
    WHERE l.next IS NULL OR (SELECT count(*) FROM kub k WHERE k.ub > ?::float8 * l.next) >= (SELECT n FROM kwant)
    ORDER BY l.ub DESC LIMIT 1
), found1 AS MATERIALIZED (
    SELECT z.id, z.tsv, z.tokens FROM {table} z
    WHERE z.id = ANY(ARRAY(SELECT k.id FROM kub k WHERE k.ub >= (SELECT tau FROM kcut)))
), {pre}, kenough AS MATERIALIZED (
    SELECT (SELECT rest FROM kcut) IS NULL
           OR ((SELECT count(*) FROM pre) >= (SELECT n FROM kwant)
               AND -(SELECT max(rank) FROM pre) > (SELECT rest FROM kcut)) AS ok
)"""
PRUNED_FOUND = """(SELECT z.id, z.tsv, z.tokens FROM {table} z
     WHERE z.id = ANY(ARRAY(SELECT k.id FROM kub k WHERE k.ub < (SELECT tau FROM kcut)))
           AND NOT (SELECT ok FROM kenough))"""
# The page: the best of the first rows (`pre`) and of the rest, when read (`ranked0`, the
# ranking's own over `found`), each row scored once
PRUNED_RANKED = """, ranked AS MATERIALIZED (
    SELECT u.id, u.rank FROM (SELECT id, rank FROM ranked0 UNION ALL SELECT id, rank FROM pre) AS u
    ORDER BY u.rank, u.id DESC LIMIT (SELECT n FROM kwant)
)"""
PRUNE_LIKELY = 2.2


# How many ids a range holds per expected match, in windows (`found_ranged`): 1.2 windows of
# matches expected above `lo` (a few short are found by `far`'s walk, which costs less than a
# wider range: its key's bitmap costs about 30 ns an id and its matches' pages are read);
# twice that when the query negates a phrase (its rows are not counted, so the estimate is of
# the matches before the NOT, and `far` would walk long).
RANGE_MARGIN = 1.2
# The same for the range below a sieve's proven ids (`span`): the matches' density there is
# measured (the sieved rows over the ids they span), the NOT's share included.
SIEVE_MARGIN = RANGE_MARGIN


def range_limits(q: str, window: int) -> tuple[float, float, float]:
    """FOUND_RANGED's thresholds for a tsquery: (fetch below this estimate, walk from est² ≥
    this × rows, ids above `lo` = this × ids ÷ est)."""
    margin = RANGE_MARGIN * (2 if "!" in q else 1)
    return 3 * margin * window, 2.0 * window, margin * window


def found_ranged(alias: str, source: str, table: str, q: str, phrases: Sequence[Phrase],
                 window: int, lists: bool = False, sieve: bool = False, pre: str | None = None,
                 want: int = 0) -> tuple[str, list[Any]]:
    """FOUND_RANGED for a read without a filter, and its parameters; `lists`: the terms' newest
    ids are read (KEPT_COUNTS) and the 'kept' way may take them (`disjunctive`); `sieve`: so
    may the 'sieve' way (`sievable`); `pre`: the ranking of the 'kept' way's first rows
    (PRUNED_ROWS, `pruned`; its `ranked` CTE read from `found1` as `pre`), of the best `want`."""
    fetch_below, walk_factor, span = range_limits(q, window)
    more: list[Any]
    if pre is None:
        kept, rows, more = "", KEPT_ROWS.format(table=table), [window, window]
    else:
        kept = ", " + PRUNED_ROWS.format(table=table, pre=pre)
        rows, more = PRUNED_FOUND.format(table=table), [want, window, PRUNE_LIKELY, want]
    sql = FOUND_RANGED.format(alias=alias, source=source, table=table, lists="true" if lists else "false",
                              sieve="true" if sieve else "false", kept=kept, kept_rows=rows)
    required = array_text([p.required for p in phrases])
    if pre is None:   # the kept rows' marks come after the walk's
        return sql, [q, required, required, window, window, fetch_below, walk_factor, span, window,
                     SIEVE_MARGIN, window, window, window, window, *more, window]
    return sql, [q, required, required, window, window, fetch_below, walk_factor, span, window,
                 SIEVE_MARGIN, window, window, window, *more, window, window]   # (kub's window first)


def pruned(parsed: Parsed) -> bool:
    """Whether a `disjunctive` question's 'kept' way reads only the rows that can reach the page
    (PRUNED_ROWS): one of two phrases or more (of one phrase, every row holds the same term)."""
    return len({p.text for p in parsed.phrases}) > 1


def sievable(parsed: Parsed) -> bool:
    """Whether a question not `disjunctive` takes its newest matches from its terms' kept ids
    when they can (FOUND_RANGED's 'sieve' way): one with a NOT or a prefix. Other ANDs are
    left to the ways before: their few matches cost less off the GIN index than 2,000 rows
    read by id."""
    if parsed.text is None or not parsed.phrases or disjunctive(parsed):
        return False
    return "!" in parsed.text or any(p.text.endswith((":*", ":*)")) for p in parsed.phrases)


def disjunctive(parsed: Parsed) -> bool:
    """Whether every row the query matches holds one of its phrases at least, and every row
    holding one matches: phrases (words, prefixes, phrases of words) joined by OR alone, no
    NOT, no NEAR. Its newest matches are then the newest of the union of its phrases' newest
    (FOUND_RANGED's 'kept' way)."""
    if parsed.text is None or not parsed.phrases or any(p.near for p in parsed.phrases):
        return False
    rest = parsed.text
    for text in sorted({p.text for p in parsed.phrases}, key=len, reverse=True):
        rest = rest.replace(text, "w")
    return _PHRASES_OR.fullmatch(rest) is not None


# A tsquery's quoted lexemes, and what is left of it besides them and its brackets
_PHRASES_OR = re.compile(r"[w|() ]+")   # phrases (each spelled w) joined by OR
_LEXEME = re.compile(r"'(?:[^']|'')*'(?::\*)?")
# the distances a NEAR of two words allows, spelled out (tsquery.parse), once its words are `w`
_SPELLED_NEAR = re.compile(r" & \((?:w <\d+> w(?: \| )?)+\)")


def conjunction(q: str) -> str | None:
    """How the words' counts bound the tsquery's matches: 'and' when a match holds every word
    not negated (joined by & alone, only single words negated): at most the rows of the rarest;
    'or' when it holds one of them at least: at most the sum of their rows; None for a phrase
    (its words' rows bound only the candidates, each rechecked on its row) or a prefix (its
    count is of its whole word). A NEAR of two words (tsquery.parse: `a & b & (a <1> b | …)`) is
    bounded as `a & b`. The bound only picks the faster of two plans of the same rows."""
    rest = _SPELLED_NEAR.sub("", _LEXEME.sub("w", q))
    if ":*" in q or "<" in rest:
        return None
    return "and" if "|" not in rest and "!(" not in rest else "or"


def fetch_bound(docs: int) -> int:
    """Matches up to which fetching them all off the GIN index beats walking the key backwards:
    a fetched match costs about three times a row tested on the walk (at 1M rows: ~25k)."""
    return int(math.sqrt(RELEVANCE_WINDOW * max(docs, 1) / 3))


RANK_READ_SQL = BM25_HEAD.rstrip() + """,
cand AS MATERIALIZED (
    SELECT x.id, x.timestamp, x.content, x.tokens, {record} FROM {records}
    WHERE x.id = ANY(ARRAY(SELECT id FROM ranked))
), nbr AS MATERIALIZED (
    SELECT a.id AS anchor, n.* FROM cand a CROSS JOIN LATERAL (
        (SELECT false AS after, {neighbour} FROM {table} n WHERE n.session_id = a.session_id AND {key} < {anchor}
         ORDER BY {desc} LIMIT ?)
        UNION ALL
        (SELECT true, {neighbour} FROM {table} n WHERE n.session_id = a.session_id AND {key} > {anchor}
         ORDER BY {asc} LIMIT ?)) AS n
)
SELECT 0 AS kind, t.docs AS id, NULL::float8 AS rank, t.tokens AS n, t.newest AS at,
       {state} AS before, NULL::bigint[] AS after, NULL::text AS content, {nulls} FROM totals t CROSS JOIN state s
UNION ALL SELECT 1, id, rank, NULL, NULL, NULL, NULL, NULL, {nulls} FROM ranked
UNION ALL SELECT 2, a.id, NULL, NULL, NULL, COALESCE(w.before, '{{}}'), COALESCE(w.after, '{{}}'), NULL, {nulls}
    FROM cand a LEFT JOIN (SELECT n.anchor, array_agg(n.id ORDER BY {desc}) FILTER (WHERE NOT n.after) AS before,
                                  array_agg(n.id ORDER BY {asc}) FILTER (WHERE n.after) AS after
                           FROM nbr n GROUP BY n.anchor) AS w ON w.anchor = a.id
UNION ALL SELECT 3, n.id, NULL, n.tokens, n.timestamp, NULL, NULL, n.content, {named} FROM nbr n
    WHERE NOT EXISTS (SELECT 1 FROM cand c WHERE c.id = n.id)
UNION ALL SELECT 4, df, NULL, NULL, NULL, CASE WHEN (SELECT settled FROM state) THEN newest END, NULL, term, {nulls}
    FROM terms
UNION ALL SELECT 5, c.id, NULL, c.tokens, c.timestamp, NULL, NULL, c.content, {cand_record} FROM cand c
"""

# A ranking read of observations filtered by dates alone, its candidate queries folded into one
# statement that keeps one generic plan (`_folded_read`). The service's queries
# (nmem.search.rank.candidate_queries: the OR of the rarest words, or every word ANDed then the
# rarest alone; last the OR of every word) are tried in order until one finds a row in the dates.
# Within the last days the first often does not, and each query was a statement of its own; one
# of common words was planned at every run (1.5-9 ms at 1M rows), and the plan chosen ANDed the
# GIN index's bitmap of its words with the time index's range: 11-23 ms for `schema & test`
# (11k rows hold both) where testing each of the 3,210 rows of the last 7 days took 1.7-5.4 ms.
#
# Here each query's newest RELEVANCE_WINDOW matches are a CTE (`f1`, `f2`, …), each one after the
# first gated by the ones before it being empty (a one-time filter: a later query's matches are
# never read once an earlier one found any). Each finds its rows one of two ways, chosen in the
# statement (`w1`, `w2`, …, also read only by a one-time filter, so only for a query reached)
# from its words' rows (`bounds`: the rows a GIN read of them passes, and whether their counts
# bound its matches below `_generic_plan`'s bound, `conjunction`) and the rows in the dates,
# counted off the time index only as far as the choice needs:
# - walking the dates' rows on the time index and testing each (ts_match_vq, the operator's
#   function, which no index serves: no plan reads the words' index there), when they are fewer
#   than the rows a read of its words' index passes / WALK_COST, and than WALK_ROWS. Those rows
#   are its words' bound (`conjunction`): the rarest word's rows for an AND (GIN skips through
#   the others), the sum of its words' for an OR. A walked row costs about as much as 2.5 GIN
#   postings: at 1M rows the 3,210 rows of the last 7 days walked in 2.2-3.3 ms of backend CPU,
#   whatever the words, against 3.5 ms for `lint`'s 9,900 postings ANDed with the dates, 6.4 ms
#   for `fix`'s 21,500, 22 ms for `lint | errors | schema | change` (bench/engines.py's words;
#   ~0.3 µs a posting at 100k rows too). 30, counted on the postings' sum, was measured on
#   `schema & test` (410k postings, 11 ms), where GIN skips most of the common word's;
# - else off the words' index ANDed with the dates, when its words bound its matches (few) or the
#   dates hold fewer than WALK_ROWS rows: either way a bounded read;
# - neither (many rows in the dates and many matches: a walk of the key backwards may be best,
#   which only a plan made for the values picks): that query and the ones after it are not read
#   (`picked` is minus its place) and run in turn as before, each planned for its values.
# So the plan follows from the statement, not from its values: it runs with its generic plan
# (each tsquery made once, in a sub-select: a generic plan made `to_tsquery(…)` anew for every
# row it tested, 3 µs a row). The phrases of all the queries are listed together (each with its
# query: `owner`) and ranked as RANKED_TERMS ranks them, a phrase of another query than the one
# that found the rows (`picked`) having no hits: it adds exactly 0 to the sum, so every score is
# the one the chosen query's own statement gives, its additions in the same order.
WALK_ROWS = 4 * RELEVANCE_WINDOW
WALK_COST = 2.5
FOLDED_QUERIES = 3   # what rank.candidate_queries makes at most
FOLDED_PHRASES = 8   # phrases are sent by this many
FOLDED_PATHS = """bounds AS MATERIALIZED (
    SELECT i, walk, few, CASE WHEN few THEN walk ELSE {walk_rows} END AS cap FROM (
        SELECT i, LEAST((COALESCE(bound, 0) / {walk_cost})::bigint, {walk_rows}) AS walk,
               COALESCE(bound < ?::bigint, false) AS few
        FROM (SELECT b.i, CASE b.how WHEN 'and' THEN min(tm.df) WHEN 'or' THEN sum(tm.df) END AS bound
              FROM unnest(?::text[]) WITH ORDINALITY AS b(how, i)
              LEFT JOIN keyed k ON (?::int[])[k.ord] = b.i LEFT JOIN terms tm ON tm.term = k.term
              GROUP BY b.i, b.how) AS g) AS q
)"""
FOLDED_FOUND = """w{i} AS MATERIALIZED (
    SELECT d.n < b.walk AS walk, d.n < b.walk OR b.few OR d.n < {walk_rows} AS decided
    FROM bounds b, (SELECT count(*) AS n FROM (SELECT 1 FROM {table} {alias} WHERE {dates}
                                               LIMIT COALESCE((SELECT cap FROM bounds WHERE i = {i}), 0)) AS x) AS d
    WHERE b.i = {i}
), f{i} AS MATERIALIZED (
    (SELECT {alias}.ctid AS c FROM {table} {alias}
     WHERE {gate}(SELECT walk FROM w{i}) AND ts_match_vq({alias}.tsv, {tsq}) AND {dates}
     ORDER BY {alias}.id + 0 DESC LIMIT ?)
    UNION ALL
    (SELECT {alias}.ctid AS c FROM {table} {alias}
     WHERE {gate}NOT (SELECT walk FROM w{i}) AND (SELECT decided FROM w{i}) AND {alias}.tsv @@ {tsq} AND {dates}
     ORDER BY {alias}.id + 0 DESC LIMIT ?)
)"""
FOLDED_PICKED = """picked AS MATERIALIZED (
    SELECT CASE {cases} ELSE 0 END AS qi
), found AS (
    SELECT z.id, z.tsv, z.tokens FROM {table} z WHERE z.ctid = ANY(ARRAY({chosen}))"""
# RANKED_TERMS whose `x` also names each phrase's query (`owner`) and the query that found the rows
FOLDED_X = _TERMS_X.replace("<x columns>", ", ?::int[] AS owner, (SELECT qi FROM picked) AS qi")


def folded_found(n: int, alias: str, table: str, dates: str) -> str:
    """The `found` of FOLDED_READ_SQL for `n` queries, `dates` the clauses of the dates."""
    rows = {"walk_rows": WALK_ROWS, "walk_cost": WALK_COST}
    parts = [FOLDED_PATHS.format(**rows)]
    parts += [FOLDED_FOUND.format(i=i, alias=alias, table=table, dates=dates, tsq=f"(SELECT {TSQ})", **rows,
                                  gate="".join(f"NOT EXISTS (SELECT 1 FROM f{j}) AND (SELECT decided FROM w{j}) AND "
                                               for j in range(1, i)))
              for i in range(1, n + 1)]
    cases = " ".join(f"WHEN EXISTS (SELECT 1 FROM f{i}) THEN {i} WHEN NOT (SELECT decided FROM w{i}) THEN -{i}"
                     for i in range(1, n + 1))
    chosen = " UNION ALL ".join(f"SELECT c FROM f{i}" for i in range(1, n + 1))
    return ",\n".join([*parts, FOLDED_PICKED.format(cases=cases, table=table, chosen=chosen)])


def folded_ranking(phrases: Sequence[Phrase], avg: str) -> str:
    """FOLDED_X and RANKED_TERMS for phrases of one word or one prefix each: RANKED_TERMS's sum, a phrase
    counted only in a row its own query found (`x.owner`, `x.qi`), else 0 hits."""
    tfs, score = [], "0::float8"
    for i, phrase in enumerate(phrases, start=1):
        hits = (PREFIX_HITS if phrase.text.endswith(":*") else WORD_HITS).format(q=f"x.q[{i}]")
        tfs.append(f"(CASE WHEN x.owner[{i}] = x.qi THEN {hits} ELSE 0 END)::float8 AS t{i}")
        score = f"({score} + x.idf[{i}] * ((tf.t{i} * 2.2) / (tf.t{i} + tf.k)))"
    return Ranking(FOLDED_X.format(idfs=_phrase_idfs(len(phrases))),
                   RANKED_TERMS.format(score=score, tfs=", ".join(tfs), avg=avg)).sql()


# RANK_READ_SQL whose totals row names the query that found the rows (its rank: 1, 2, …; 0: none)
FOLDED_READ_SQL = RANK_READ_SQL.replace("SELECT 0 AS kind, t.docs AS id, NULL::float8 AS rank,",
                                        "SELECT 0 AS kind, t.docs AS id, (SELECT qi FROM picked)::float8 AS rank,")


# FOLDED_READ_SQL's text by its shape (scope, queries, the dates' clauses, which phrases are
# prefixes: all that `folded_ranking` and `folded_found` read; and the constants written into
# it), up to this many
FOLDED_SHAPES = 256
_FOLDED_SQL: dict[tuple[Any, ...], str] = {}


def foldable(parsed: Sequence[Parsed]) -> bool:
    """Whether these queries are of whole words alone, joined by AND or by OR (`conjunction`)
    and so bounded by their words' counts; folded_ranking ranks their phrases."""
    return all(not p.near and "<" not in p.text for q in parsed for p in q.phrases) and all(
        conjunction(str(q.text)) is not None for q in parsed)


class _Rows(Mapping[int, Any]):
    """The candidates' records as the ranking statement read them (kind 5: timestamp, content
    and the scope's other columns), each built the first time it is read: the service arranges
    the candidates on their sessions, prompts and times (`Candidates.sessions`, the texts) and
    builds only the page it shows, not each of the pool's ~50 (an observation's metadata is JSON)."""

    __slots__ = ("_build", "_built", "_names", "_rows")

    def __init__(self, rows: dict[int, tuple[Any, Any, Sequence[Any]]], names: Sequence[str],
                 build: Callable[[Any], Any]) -> None:
        self._rows, self._names, self._build = rows, names, build
        self._built: dict[int, Any] = {}

    def __getitem__(self, rid: int) -> Any:
        record = self._built.get(rid)
        if record is None:
            at, content, rest = self._rows[rid]
            fields = dict(zip(self._names, rest, strict=True))
            fields.update(id=rid, timestamp=int(at), content=content)
            record = self._built[rid] = self._build(fields)
        return record

    def __contains__(self, rid: object) -> bool:
        return rid in self._rows

    def __iter__(self) -> Iterator[int]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


# The ranked rows themselves (columns as the scope reads them) with the totals and the words'
# counts beside each: what a relevance-ordered search of observations or prompts returns (one
# row of NULL columns and rank when none matches: the counts come all the same).
BM25_ROWS_SQL = BM25_HEAD + """
SELECT f.*, t.docs AS nmem_docs, t.tokens AS nmem_tokens, t.newest AS nmem_newest, {state} AS nmem_state,
       (SELECT array_agg(term) FROM terms) AS nmem_terms, (SELECT array_agg(df) FROM terms) AS nmem_dfs,
       CASE WHEN s.settled THEN (SELECT array_agg(newest::text) FROM terms) END AS nmem_lists
FROM totals t CROSS JOIN state s
LEFT JOIN (SELECT {columns}, r.rank, {origin} FROM {full} JOIN ranked r ON r.id = {alias}.id{origin_join}) AS f ON true
"""

# The ranked ids only (`match_ids`), by kind as RANK_READ_SQL's: 0 totals, 1 candidates, 4 counts.
BM25_IDS_SQL = BM25_HEAD + """
SELECT 0 AS kind, t.docs AS id, NULL::float8 AS rank, t.tokens AS n, t.newest AS at, NULL::text AS term,
       {state} AS state FROM totals t CROSS JOIN state s
UNION ALL SELECT 1, id, rank, NULL, NULL, NULL, NULL FROM ranked
UNION ALL SELECT 4, df, NULL, NULL, NULL, term, CASE WHEN (SELECT settled FROM state) THEN newest END FROM terms
"""

# A scope's record columns besides id, timestamp and content: (what `cand` reads of `x`, the
# same as NULLs for the other kinds, what x is read from, what kind 3 reads of a neighbour `n`:
# its session and an observation's prompt or a prompt's source, what arranging reads of a row
# besides its time). `cand` reads the agent and root of the record's session too (`Candidates.origins`).
RECORD_PARTS = {
    "observations": ("x.session_id, x.project, x.prompt_id, x.obs_type, x.source_event, x.tool_name, x.file_path, "
                     "x.metadata, x.is_pinned, s2.agent AS nmem_agent, s2.root AS nmem_root",
                     "NULL::text AS session_id, NULL::text AS project, NULL::bigint AS prompt_id, "
                     "NULL::text AS obs_type, NULL::text AS source_event, NULL::text AS tool_name, "
                     "NULL::text AS file_path, NULL::text AS metadata, NULL::integer AS is_pinned, "
                     "NULL::text AS nmem_agent, NULL::text AS nmem_root",
                     "observations x LEFT JOIN sessions s2 ON s2.id = x.session_id",
                     "n.session_id, NULL, n.prompt_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL"),
    "prompts": ("x.session_id, s2.project, x.source, s2.agent AS nmem_agent, s2.root AS nmem_root",
                "NULL::text AS session_id, NULL::text AS project, NULL::text AS source, "
                "NULL::text AS nmem_agent, NULL::text AS nmem_root",
                "prompts x JOIN sessions s2 ON s2.id = x.session_id", "n.session_id, NULL, n.source, NULL, NULL"),
}
# What the windows' walks read of each neighbour `n` (RANK_READ_SQL's `nbr`): its id, its text and
# what kind 3 sends of it (RECORD_PARTS' last)
NEIGHBOUR_COLUMNS = {"observations": "n.id, n.tokens, n.timestamp, n.content, n.session_id, n.prompt_id",
                     "prompts": "n.id, n.tokens, n.timestamp, n.content, n.session_id, n.source"}


def window_parts(scope: str) -> dict[str, str]:
    """RANK_READ_SQL's (and FOLDED_READ_SQL's) scope-dependent parts: the windows' order, the
    candidates' record columns (as `cand` reads them, and as kind 5 reads them of `cand`), the
    neighbours' columns."""
    key, anchor, desc, asc = WINDOW_ORDER[scope]
    record, nulls, records, named = RECORD_PARTS[scope]
    cand_record = ", ".join("c." + column.split(" AS ")[-1].split(".")[-1] for column in record.split(", "))
    return {"key": key, "anchor": anchor, "desc": desc, "asc": asc, "record": record, "nulls": nulls,
            "records": records, "named": named, "cand_record": cand_record, "neighbour": NEIGHBOUR_COLUMNS[scope]}


# What a relevance read of a scope's rows (BM25_ROWS_SQL) reads of their sessions: (columns, join)
ROW_ORIGINS = {"observations": (ORIGIN_COLUMNS, origin_join("o")), "prompts": (PROMPT_ORIGIN_COLUMNS, "")}

# How a scope's session is ordered for the windows: (key, the anchor's key, newest first, oldest first)
WINDOW_ORDER = {"observations": ("(n.timestamp, n.id)", "(a.timestamp, a.id)", "n.timestamp DESC, n.id DESC",
                                 "n.timestamp, n.id"),
                "prompts": ("n.id", "a.id", "n.id DESC", "n.id")}


# FTS5's bm25() over a table of several weighted columns (memories: summary 3, content 1, tags 2,
# namespace 0.5, as the SQLite engine weighs them; sessions: project and summary alike). The
# columns are the tsvector's weight classes; a row's length is its `tokens` (schema v7: its
# words as FTS5 counts them), the table's totals are kept (schema step 13, KEPT_TOTALS: the few
# rows of `table_totals`, summed). Each word's rows are counted in the statement unless the
# caller knows them for the table's signature (its rows and the rows whose words were written
# since it was made, returned with every row), so a word in every session (20k rows at 1M) is
# counted once while the sessions' words stay as they are.
WEIGHTED_HEAD = """
WITH {hidden}words AS MATERIALIZED (
    SELECT DISTINCT replace(m[2], '''''', '''') AS term
    FROM regexp_matches(to_tsquery('nmem', ?)::text, '(!?)''((?:[^'']|'''')+)''', 'g') AS m
    WHERE m[1] = ''
), totals AS MATERIALIZED (
    {totals}
), terms AS MATERIALIZED (
    SELECT w.term, COALESCE(CASE WHEN t.n = ?::bigint AND t.stamp = ?::bigint THEN k.df END,
                            (SELECT count(*) FROM {table} x
                             WHERE x.tsv @@ quote_literal(w.term)::tsquery{seen_x})) AS df
    FROM words w CROSS JOIN totals t LEFT JOIN unnest(?::text[], ?::bigint[]) AS k(term, df) ON k.term = w.term
"""
BM25_WEIGHTED_SQL = WEIGHTED_HEAD + """), weighted AS MATERIALIZED (
    SELECT array_agg(term) AS terms, array_agg(CASE WHEN idf <= 0 THEN 1e-6 ELSE idf END) AS idfs
    FROM (SELECT term, ln(((t.n - df)::float8 + 0.5) / (df + 0.5)) AS idf FROM terms CROSS JOIN totals t) AS raw
), found AS (
    SELECT {columns}, {alias}.tsv AS match_tsv FROM {source} WHERE {found}
)
SELECT {output}, t.n AS nmem_sig_rows, t.stamp AS nmem_sig_stamp, t.tokens AS nmem_tokens, t.parts AS nmem_parts,
       (SELECT array_agg(term) FROM terms) AS nmem_terms, (SELECT array_agg(df) FROM terms) AS nmem_dfs,
       {score} AS rank
FROM found {alias} CROSS JOIN totals t CROSS JOIN weighted w
ORDER BY {order} LIMIT ? OFFSET ?
"""

# Sessions (BM25_WEIGHTED_SQL's window): each of the newest RELEVANCE_WINDOW matches is read once
# for its query lexemes (`kept`: the vector cut to them, EVEN_WEIGHTED_SCORE's filter), their hits
# counted off that small vector (WORD_HITS, a slot a lexeme), scored and sorted on its place, id
# and score alone; the page's rows are read whole after, by place. The terms and their IDFs are
# in the vectors' order (bytes, as "C" collates), so the slots add up in the order the sub-select
# of EVEN_WEIGHTED_SCORE summed them: the same floats. A sub-select a session (unnest, sum), the
# whole rows carried through the sort and the length part worked out again for each slot cost
# about a fifth of the statement at 1M observations (8.8 → 7.0 ms a search of everything).
SESSIONS_WEIGHTED_SQL = WEIGHTED_HEAD + """), weighted AS MATERIALIZED (
    SELECT array_agg(term ORDER BY term COLLATE "C") AS terms,
           array_agg(CASE WHEN idf <= 0 THEN 1e-6 ELSE idf END ORDER BY term COLLATE "C") AS idfs,
           array_agg(quote_literal(term)::tsquery ORDER BY term COLLATE "C") AS queries
    FROM (SELECT term, ln(((t.n - df)::float8 + 0.5) / (df + 0.5)) AS idf FROM terms CROSS JOIN totals t) AS raw
), kept AS MATERIALIZED (
    SELECT s.ctid AS nmem_place, s.id, s.tokens, ts_filter(setweight(s.tsv, 'C', w.terms), '{{c}}') AS match_tsv
    FROM sessions s CROSS JOIN weighted w WHERE {found}
), found AS MATERIALIZED (
    SELECT s.*, """ + length_term("s.tokens", "(t.tokens::float8 / t.n)") + """ AS nmem_length, {hits}
    FROM kept s CROSS JOIN weighted w CROSS JOIN totals t
), ranked AS MATERIALIZED (
    SELECT s.nmem_place, s.id, {score} AS rank FROM found s CROSS JOIN totals t CROSS JOIN weighted w
    ORDER BY {order} LIMIT ? OFFSET ?
)
SELECT {output}, t.n AS nmem_sig_rows, t.stamp AS nmem_sig_stamp, t.tokens AS nmem_tokens, t.parts AS nmem_parts,
       (SELECT array_agg(term) FROM terms) AS nmem_terms, (SELECT array_agg(df) FROM terms) AS nmem_dfs, r.rank
FROM ranked r JOIN sessions s ON s.ctid = r.nmem_place CROSS JOIN totals t
ORDER BY {order}
"""
SESSION_HITS = WORD_HITS.replace("r.tsv", "s.match_tsv") + "::int"   # {q}: the lexeme's tsquery
# a slot's term of the sum, as EVEN_WEIGHTED_SCORE writes it (the same operations on the same
# types: the same float); the row's length part, the same for every slot, is worked out once a row
SESSION_TERM = ("CASE WHEN s.nmem_h{i} > 0 THEN w.idfs[{i}] * (s.nmem_h{i} * 2.2) / (s.nmem_h{i} + s.nmem_length) "
                "ELSE 0 END")


def session_slots(q: str) -> int:
    """Slots for a tsquery's lexemes in SESSIONS_WEIGHTED_SQL: as many as its quoted words (a word
    stems to one lexeme or none), by fours then eights, so that a few texts serve every question."""
    n = len(_LEXEME.findall(q))
    return 4 if n <= 4 else -(-n // 8) * 8


def session_scoring(slots: int) -> tuple[str, str]:
    """SESSIONS_WEIGHTED_SQL's hits and score for `slots` lexemes; a question whose words gave
    more lexemes than that is scored by EVEN_WEIGHTED_SCORE's sub-select, to the same floats."""
    hits = ", ".join(f"{SESSION_HITS.format(q=f'w.queries[{i}]')} AS nmem_h{i}" for i in range(1, slots + 1))
    terms = " + ".join(SESSION_TERM.format(i=i) for i in range(1, slots + 1))
    return hits, (f"CASE WHEN cardinality(w.terms) <= {slots} THEN -(0::float8 + {terms}) "
                  f"ELSE {EVEN_WEIGHTED_SCORE.format(alias='s')} END")


# A found row's negated BM25 when its weight classes weigh differently (memories): each of the
# query's lexemes' positions counts its class's weight. Only the query's lexemes of the vector
# are unnested, their classes intact (the vector less every other lexeme): unnesting the whole
# vector (55 lexemes a memory, each with its arrays of places and classes) cost about 30 µs a
# matching memory: memories cost a search of everything 4.4 ms of PostgreSQL CPU at 1M
# observations, 2.8 ms with their query lexemes alone.
CLASS_WEIGHTED_SCORE = """-COALESCE((
    SELECT sum(w.idfs[array_position(w.terms, v.lexeme)] * (u.tf * 2.2)
               / (u.tf + """ + length_term("{alias}.tokens", "(t.tokens::float8 / t.n)") + """))
    FROM unnest(ts_delete({alias}.match_tsv, tsvector_to_array(ts_delete({alias}.match_tsv, w.terms)))) AS v
    CROSS JOIN LATERAL (SELECT sum(CASE c {weights} END) AS tf FROM unnest(v.weights) AS c) AS u
    WHERE v.lexeme = ANY(w.terms)), 0)"""

# The same when every class weighs 1 (sessions: project and summary alike): a lexeme's positions
# counted, and only the query's lexemes read of the vector: they are set to class C, which no
# other lexeme of a session's vector holds (SESSIONS_TSV_CLASSES: project B, summary A), and kept
# alone. Unnesting each matching session's whole vector (70 lexemes a session at 1M rows) cost
# 38 ms of a 88 ms search of sessions; setting every class to D first, a copy of the vector more,
# about 9% of the statement.
EVEN_WEIGHTED_SCORE = """-COALESCE((
    SELECT sum(w.idfs[array_position(w.terms, u.lexeme)] * (array_length(u.positions, 1) * 2.2)
               / (array_length(u.positions, 1)
                  + """ + length_term("{alias}.tokens", "(t.tokens::float8 / t.n)") + """))
    FROM unnest(ts_filter(setweight({alias}.match_tsv, 'C', w.terms), '{{c}}')) u), 0)"""
# The weight classes a session's vector holds (schema.py: project B, summary A); EVEN_WEIGHTED_SCORE
# marks the query's lexemes with a class outside them.
SESSIONS_TSV_CLASSES = ("A", "B")

# What BM25_WEIGHTED_SQL returns of a found row: every column but its tsvector (sessions, memories).
# `{alias}.*` returned it twice (the row's, and `match_tsv` for the score), each written out as
# text by PostgreSQL and read by Python on every row for nothing: 0.6 of the 4.7 ms of PostgreSQL
# CPU a `search_curated` call took at 100k observations. tests/store/test_pg_plan_cost.py checks
# these are the tables' columns.
WEIGHTED_OUTPUT = {
    "sessions": ("id", "project", "started_at", "ended_at", "signature", "summary", "root", "agent", "tokens"),
    "memories": ("id", "uid", "domain", "namespace", "summary", "content", "tags", "source", "relates_to", "tier",
                 "is_pinned", "created_at", "updated_at", "accessed_at", "access_count", "deleted_at",
                 "sync_version", "writer", "tokens"),
}

# scope -> how a found row is scored
WEIGHTED = {"memories": CLASS_WEIGHTED_SCORE.format(
                alias="{alias}", weights="WHEN 'A' THEN 3.0 WHEN 'B' THEN 2.0 WHEN 'C' THEN 1.0 ELSE 0.5"),
            "sessions": EVEN_WEIGHTED_SCORE}


# BM25_WEIGHTED_SQL's totals: rows, the signature's second part (`stamp`: the rows whose words
# were written, which only grows) and tokens, summed from the table's rows of `table_totals`,
# and how many rows those were (`parts`). Summing the rows of every session instead was an
# index-only scan of them all (2,402 at 100k observations: 0.45 ms; 6 ms at 1M).
KEPT_TOTALS = ("SELECT COALESCE(sum(rows), 0)::bigint AS n, COALESCE(sum(writes), 0) AS stamp, "
               "COALESCE(sum(tokens), 0)::bigint AS tokens, count(*) AS parts FROM table_totals WHERE tbl = '{table}'")
# A viewer's totals leave the memories hidden from them out (VIEWER_HIDES): summed from the rows
SEEN_TOTALS = ("SELECT count(*) AS n, COALESCE(sum({stamp}), 0) AS stamp, COALESCE(sum(tokens), 0) AS tokens, "
               "0::bigint AS parts FROM {table}{seen}")
# Past this many rows of a table's totals, a search folds them into one (FOLD_TOTALS_SQL, a
# statement of its own): a writer adds one for each statement that changes the table.
FOLD_TOTALS_AT = 16
# One statement: a fold that runs beside another finds their rows gone and adds none (its
# DELETE skips rows the other deleted), a write beside it adds a row it does not see.
FOLD_TOTALS_SQL = """
WITH gone AS (DELETE FROM table_totals WHERE tbl = ? RETURNING rows, tokens, writes)
INSERT INTO table_totals (tbl, rows, tokens, writes)
SELECT ?, sum(rows), sum(tokens), sum(writes) FROM gone HAVING count(*) > 0
"""

# What BM25_WEIGHTED_SQL leaves out for a team server's user (nmem.team.access): the memories hidden
# from them (HIDDEN_MEMORIES_SQL, in the statement: what it counts and what it hides are one
# snapshot) are not in the totals nor in any word's count, so no score tells what they hold.
VIEWER_HIDES = {"hidden": f"hidden AS MATERIALIZED ({HIDDEN_MEMORIES_SQL}), ",
                "seen": " WHERE id NOT IN (SELECT id FROM hidden)",
                "seen_x": " AND x.id NOT IN (SELECT id FROM hidden)"}


# `prompt_turns`: kind 1 a row asked whole (PROMPT_COLUMNS and its origin), kind 2 a reply's turn
# (the user prompt before it, over the user prompts of its session's window: `sessions_prompts`)
PROMPT_TURNS_SQL = f"""
WITH replies AS MATERIALIZED (
    SELECT p.id, p.session_id, p.timestamp FROM prompts p WHERE p.id = ANY(?) AND p.source IS DISTINCT FROM 'user'
), bounds AS MATERIALIZED (
    SELECT session_id, max(timestamp) + 1 AS until, min(timestamp) - ?::bigint AS since FROM replies GROUP BY session_id
)
SELECT 1 AS nmem_kind, {PROMPT_COLUMNS}, {PROMPT_ORIGIN_COLUMNS}, NULL::bigint AS nmem_turn
FROM prompts p JOIN sessions s ON s.id = p.session_id WHERE p.id = ANY(?)
UNION ALL
SELECT 2, r.id, r.session_id, NULL, NULL, NULL, NULL, NULL, NULL,
       (SELECT max(u.id) FROM prompts u JOIN bounds b ON b.session_id = u.session_id
        WHERE u.session_id = r.session_id AND u.source = 'user' AND u.timestamp < b.until
          AND u.timestamp > b.since AND u.id < r.id)
FROM replies r
"""

# `user_prompt_ids`: each window's user prompts' ids, in id order, off the session's index
USER_PROMPT_IDS_SQL = """
SELECT w.session, ARRAY(SELECT p.id FROM prompts p WHERE p.session_id = w.session AND p.timestamp < w.before
                        AND p.timestamp > w.after AND p.source = 'user' ORDER BY p.id)
FROM unnest(?::text[], ?::bigint[], ?::bigint[]) AS w(session, before, after)
"""


# scope -> (table, alias, what the filters read, the filters); prompts read their sessions only
# for a filter on them (project, agent: `_bm25`)
BM25_SOURCES = {"observations": ("observations", "o", "observations o", observation_filters),
                "prompts": ("prompts", "p", "prompts p JOIN sessions s ON s.id = p.session_id", prompt_filters)}


# ts_rank's weights for a scope's weight classes, listed D, C, B, A
RANK_WEIGHTS = {"memories": MEMORY_WEIGHTS, "sessions": SESSION_WEIGHTS}


class SearchReads(Connection, ScopedSearch):
    def _text_match(self, table: str, alias: str, match: str) -> tuple[str, Any] | None:
        q = parse(match).text
        return None if q is None else (f"{alias}.tsv @@ {TSQ}", q)

    def get_observations(self, ids: Sequence[int]) -> Found:
        if not ids:
            return Found()
        rows = self._query(f"SELECT {OBS_COLUMNS_O}, {ORIGIN_COLUMNS} FROM observations o{origin_join('o')} "
                           "WHERE o.id = ANY(?)", ([int(i) for i in ids],), plans=KEYED_PLANS)
        by_id = {row["id"]: Observation.from_row(row) for row in rows}
        return Found([by_id[i] for i in ids if i in by_id], origins_of(rows))

    def get_prompts(self, ids: Sequence[int]) -> Found:
        if not ids:
            return Found()
        rows = self._query(f"SELECT {PROMPT_COLUMNS}, {PROMPT_ORIGIN_COLUMNS} FROM prompts p "
                           "JOIN sessions s ON s.id = p.session_id WHERE p.id = ANY(?)", ([int(i) for i in ids],))
        by_id = {row["id"]: Prompt.from_row(row) for row in rows}
        return Found([by_id[i] for i in ids if i in by_id], origins_of(rows))

    def prompt_turns(self, ids: Sequence[int], fetch: Sequence[int], lookback: int) -> tuple[Found, dict[int, int]]:
        """What arranging ranked prompts reads, in one statement (PROMPT_TURNS_SQL): the rows of
        `fetch` whole (as `get_prompts`), and the turn of each reply among `ids` (a prompt not
        the user's): the last user prompt before it in its session, looked for from `lookback`
        seconds before the session's first reply among `ids` to just after its last (the user's
        prompts `sessions_prompts` reads for them). Replies with no such prompt are left out."""
        rows = self._query(PROMPT_TURNS_SQL, ([int(i) for i in ids], lookback, [int(i) for i in fetch]),
                           plans=KEYED_PLANS)
        whole = [r for r in rows if r["nmem_kind"] == 1]
        by_id = {row["id"]: Prompt.from_row(row) for row in whole}
        turns = {int(r["id"]): int(r["nmem_turn"]) for r in rows if r["nmem_kind"] == 2 and r["nmem_turn"] is not None}
        return Found([by_id[i] for i in fetch if i in by_id], origins_of(whole)), turns

    def user_prompt_ids(self, windows: Sequence[tuple[str, int, int]]) -> dict[str, list[int]]:
        """For each (session, before, after), the ids of its user prompts strictly between the two
        times, in order: what a search's turns read of `sessions_prompts(windows, source="user")`,
        without reading their rows whole or building them (USER_PROMPT_IDS_SQL: one array a window)."""
        if not windows:
            return {}
        rows = self._query(USER_PROMPT_IDS_SQL, (array_text([s for s, _, _ in windows]),
                                                 array_text([int(b) for _, b, _ in windows]),
                                                 array_text([int(a) for _, _, a in windows])), plans=KEYED_PLANS)
        out: dict[str, list[int]] = {session: [] for session, _, _ in windows}
        for session, ids in rows:
            out[session] = sorted({*out[session], *ids}) if out[session] else list(ids)
        return out

    # -- the shared relevance read --------------------------------------------------------

    def _bm25(self, template: str, scope: str, parsed: Parsed, filters: SearchFilters, want: int,
              **parts: str) -> tuple[str, list[Any]]:
        """A statement built on BM25_HEAD and its parameters: FTS5's bm25() (k1 1.2, b 0.75,
        its IDF floor) of the best `want` among the newest RELEVANCE_WINDOW matches that pass
        the filters, over the same rows, terms, document frequencies and token counts; the
        totals are the cached ones plus the rows added since (counted in the statement)."""
        table, alias, source, apply = BM25_SOURCES[scope]
        clauses: list[str] = []
        params: list[Any] = []
        apply(filters, clauses, params)
        full = source
        if scope == "prompts" and not any("s." in clause for clause in clauses):
            source = "prompts p"   # no clause reads the session (a join of every match spared)
        avg = "(CASE WHEN t.docs > 0 THEN t.tokens::float8 / t.docs ELSE 1.0 END)"
        where = " AND ".join([f"{alias}.tsv @@ {TSQ}", *clauses])
        window = max(RELEVANCE_WINDOW, want)
        q = str(parsed.text)
        phrases = parsed.phrases
        lists = not clauses and disjunctive(parsed)
        sieve = not clauses and not lists and sievable(parsed)
        if all("<" not in p.text and not p.near for p in phrases):
            ranking = term_ranking(phrases, avg)
        else:
            ranking = phrase_ranking(phrases, avg)
        ranked = ranking.sql()
        if not clauses:
            if lists and pruned(parsed):
                # `x` comes before the found rows, whose first part it ranks as `pre` (PRUNED_ROWS);
                # the rest are ranked as `ranked0`, and the page is the best of both (PRUNED_RANKED)
                found, reads = found_ranged(alias, source, table, q, phrases, window, lists, sieve,
                                            ranking.over("found1", "pre"), want)
                found = f"{ranking.x},\n{found}"
                ranked = ranking.over("found", "ranked0") + PRUNED_RANKED
            else:
                found, reads = found_ranged(alias, source, table, q, phrases, window, lists, sieve)
        else:
            first = self._words_first(table, parsed, filters) if scope == "observations" else None
            if first is not None:
                where = where.replace(PROJECT_CLAUSE, WORDS_FIRST_CLAUSE, 1)
            found = (FOUND_FETCHED if first == FETCHED else FOUND_PLANNED).format(
                alias=alias, source=source, where=where, table=table)
            reads = [q, *params, window]
        # a read-only store never keeps what it reads: it takes kept ids, never reads them
        counts = kept_counts(table, "w.query::tsquery", (lists or sieve) and not self.readonly)
        sql = template.format(table=table, alias=alias, source=source, full=full, ranked=ranked,
                              found=found, counts=counts, state=KEPT_STATE, **parts)
        texts = [array_text([p.text for p in phrases]), array_text([p.near for p in phrases]),
                 array_text([p.distance for p in phrases]), array_text([p.group for p in phrases])]
        return sql, [*texts, *reads, want]

    def _query_kept(self, table: str, sql: str, params: Sequence[Any], generic: bool = False) -> list[Any]:
        """A statement that reads the kept counts (KEPT_COUNTS): on a large table
        (CUSTOM_PLAN_ROWS), planned for its own values at every run, unless `generic`
        (`_generic_plan`: its plan does not depend on them)."""
        if self._totals.get(table, (0, 0, 0))[0] <= CUSTOM_PLAN_ROWS:
            return self._query(sql, params, plans=GENERIC_PLANS if self._plans() == ANY_PLANS else None)
        return self._query(sql, params, plans=GENERIC_PLANS if generic else CUSTOM_PLANS)

    def _plans(self) -> str | None:
        """ANY_PLANS on a small store: no table it ranks (SIZED_TABLES) past CUSTOM_PLAN_ROWS, as
        its last ranking read counted it, else as the store found it when it opened (`_size_up`).
        Its ranking reads then run on their generic plans (`_query_kept`, `_weighted_statement`)
        and every other statement in the mode its connection is in, so each of its connections
        is set to generic plans once and stays (connection.ANY_PLANS). A store that grew past it
        plans as a large one does from its next search (one SET a connection)."""
        for table in SIZED_TABLES:
            if table in self._totals:
                past = self._totals[table][0] > CUSTOM_PLAN_ROWS
            elif table in self._weighted:
                past = self._weighted[table][1][0] > CUSTOM_PLAN_ROWS
            else:   # as the store found it when it opened (`_size_up`); unknown: large
                past = self._past.get(table, True)
            if past:
                return None
        return ANY_PLANS

    def _size_up(self, conn: psycopg.Connection[Row] | None = None) -> None:
        """Whether each ranked table holds more than CUSTOM_PLAN_ROWS rows, read when the store
        opens (a few milliseconds: at most that many rows a table are stepped over), or by a new
        pooled connection `conn` before it knew. On a small store the connections the pool holds
        are then set to generic plans at once and those it makes later as it makes them
        (`_configure_pooled`): none of its searches sends a SET for it. A table read since is
        judged by what its reads counted (`_plans`)."""
        sql = "SELECT " + ", ".join(f"EXISTS (SELECT 1 FROM {t} OFFSET {CUSTOM_PLAN_ROWS})" for t in SIZED_TABLES)
        try:
            row = self._query(sql)[0] if conn is None else conn.execute(sql).fetchone()
        except (StorageError, psycopg.Error):
            return   # (no tables yet: a schema being made) planned as a large store's until known
        if row is None:
            return
        self._past = dict(zip(SIZED_TABLES, map(bool, row), strict=True))
        if conn is None and self._plans() == ANY_PLANS:
            self._generic_pool()

    def _plan_kept(self, table: str, parsed: Parsed, filters: SearchFilters) -> bool:
        """Whether a relevance read keeps one generic plan (connection.GENERIC_PLANS): a read
        without a filter always does (FOUND_RANGED: the statement, not the planner, picks how its
        matches are read, and every way's plan is the same whatever the words, so planning it
        at every run, a millisecond or more at 1M rows, buys nothing), as does a read of a few
        matches tested for their project (`_words_first`); else `_generic_plan`."""
        return (filters == NO_FILTERS or self._generic_plan(table, str(parsed.text), filters)
                or (table == "observations" and self._words_first(table, parsed, filters) == FETCHED))

    def _generic_plan(self, table: str, q: str, filters: SearchFilters) -> bool:
        """Whether a relevance read may keep one generic plan (connection.GENERIC_PLANS): dates
        alone filter it, and the words' counts (as its last run found them, while the rows moved
        under 5% since) bound its matches below `fetch_bound` and twice RELEVANCE_WINDOW. A generic plan
        then finds them by ANDing the GIN index's bitmap with the time index's range, whatever
        the dates and words, which reads at most that many rows (about what a walk of the key
        reads for the window); the planner would choose the same for a few days, and walk the
        key only for a wide range of many matches, which the bound leaves out."""
        if filters.date_start is None and filters.date_end is None:
            return False
        if filters.replace(date_start=None, date_end=None) != NO_FILTERS:
            return False
        docs = self._totals.get(table, (0, 0, 0))[0]
        bound = self._bounds.get((table, q))
        return (bound is not None and abs(docs - bound[1]) <= docs * DF_CACHE_DRIFT
                and bound[0] < min(fetch_bound(docs), 2 * RELEVANCE_WINDOW))

    def _words_first(self, table: str, parsed: Parsed, filters: SearchFilters) -> str | None:
        """Whether a relevance read filtered by project finds its matches off the words' index
        alone, testing each match's project on its row (WORDS_FIRST_CLAUSE): when the words' counts
        bound the matches below a WORDS_FIRST_RATIO-th of the project's rows (pg_stats' estimate).
        The project must be the only filter: another (a type, a file) has an index of its own
        with the project in it, which the planner should keep. FETCHED when the matches are few
        enough to fetch them all (`fetch_bound`, and twice RELEVANCE_WINDOW): the statement's plan
        is then the same for every value, and it keeps one generic plan (`_plan_kept`); TESTED
        otherwise (the planner may still walk the key); None: the planner's choice."""
        if not filters.project or filters.replace(project=None) != NO_FILTERS:
            return None
        docs = self._totals.get(table, (0, 0, 0))[0]
        if docs <= CUSTOM_PLAN_ROWS:
            return None
        matches = self._match_bound(table, parsed, docs)
        rows = self._project_rows(table, filters.project, docs)
        if matches is None or rows is None or matches * WORDS_FIRST_RATIO >= rows:
            return None
        return FETCHED if matches < min(fetch_bound(docs), 2 * RELEVANCE_WINDOW) else TESTED

    def _match_bound(self, table: str, parsed: Parsed, docs: int) -> int | None:
        """The most rows the tsquery can match (`conjunction`) from its words' counts in this
        process's cache; None when one is not there or the query's form gives no bound."""
        joined = conjunction(str(parsed.text))
        if joined is None or not parsed.phrases:
            return None
        dfs = []
        for phrase in parsed.phrases:
            df = self._cached_df(table, phrase.text[1:-1].replace("''", "'"), docs)
            if df is None:
                return None
            dfs.append(df)
        return min(dfs) if joined == "and" else sum(dfs)

    def _project_rows(self, table: str, project: str, docs: int) -> int | None:
        """About how many of the table's rows are the project's: its share of the rows in
        PostgreSQL's statistics (pg_stats, which ANALYZE and autovacuum keep), read again once
        the rows moved 5%; None before the table was ever analysed."""
        kept = self._projects.get(table)
        if kept is None or abs(docs - kept[0]) > docs * DF_CACHE_DRIFT:
            row = next(iter(self._query(PROJECT_STATS_SQL, (table,))), None)
            if row is None:
                return None
            shares = dict(zip(row["vals"] or (), row["freqs"] or (), strict=True))
            distinct = float(row["n_distinct"])
            distinct = -distinct * float(row["reltuples"]) if distinct < 0 else distinct
            rest = max(0.0, 1.0 - sum(shares.values()) - float(row["null_frac"]))
            kept = (docs, shares, rest / max(distinct - len(shares), 1.0))
            self._projects[table] = kept
        return int(kept[1].get(project, kept[2]) * docs)

    def _keep_bound(self, table: str, q: str, counts: Sequence[tuple[str, int]], docs: int) -> None:
        """The most rows the tsquery can match, from its words' counts (`conjunction`), for
        `_generic_plan`."""
        joined = conjunction(q)
        if joined is None or not counts:
            return
        if len(self._bounds) > DF_CACHE_SIZE:
            self._bounds.clear()
        dfs = [df for _, df in counts]
        self._bounds[(table, q)] = (min(dfs) if joined == "and" else sum(dfs), docs)

    def _counted(self, table: str, totals: tuple[int, int, int], state: Sequence[int],
                 counts: Sequence[tuple[str, int]], lists: Mapping[str, Any] | None = None) -> None:
        """Keep what a statement counted: the totals (rows, tokens, newest id) and the words'
        counts in this process's caches (a word's count there is replaced only once the rows
        moved 5% since it was taken, as on SQLite: `fts_stats` answers from it until then),
        and, when `state` (KEPT_STATE) says they may be, in `word_counts` for every process,
        with each term's newest ids the statement read (`lists`, sent only then)."""
        docs = totals[0]
        self._totals[table] = totals
        for term, df in counts:
            if self._cached_df(table, term, docs) is None:
                self._remember_df(table, term, df, docs)
        if state[2] and not self.readonly and not self._in_write():
            self._write_back(table, int(state[1]), totals, counts, lists)

    def _write_back(self, table: str, epoch: int, totals: tuple[int, int, int],
                    counts: Sequence[tuple[str, int]], lists: Mapping[str, Any] | None = None) -> None:
        """Keep the counts, taken up to id totals[2], and the terms' newest ids (a list of ids
        or its text; None: none read) unless the table's epoch moved since `epoch` (rows
        deleted: WRITE_BACK_SQL), in a statement of its own."""
        # a word's lexeme, or a phrase's or prefix's key (tsquery text: `'a' <-> 'b'`, `'pre':*`,
        # BM25_HEAD); a term of several words that `fts_stats` counted is kept by no statement
        words = {term: (df, 0) for term, df in counts
                 if (_TERM.fullmatch(term) and term == term.lower()) or term.startswith("'")}
        kept = sorted({"": (totals[0], totals[1]), **words}.items())
        newest = [_id_list((lists or {}).get(w)) if w else None for w, _ in kept]
        # a write that fails costs only a later count
        self._exec_aside(WRITE_BACK_SQL, [table, totals[2], [w for w, _ in kept], [n for _, (n, _) in kept],
                                          [t for _, (_, t) in kept], newest, table, epoch])

    def _bm25_newest(self, scope: str, q: Parsed, filters: SearchFilters, want: int) -> list[tuple[int, float]]:
        """(id, negated BM25) of the best `want` among the newest RELEVANCE_WINDOW matches that
        pass the filters, best first, in one statement (`_bm25`)."""
        table = BM25_SOURCES[scope][0]
        sql, params = self._bm25(BM25_IDS_SQL, scope, q, filters, want)
        ranked: list[tuple[float, int]] = []
        totals, state, counts = (0, 0, 0), [-1, -1, 0], []
        generic = self._plan_kept(table, q, filters)
        lists: dict[str, Any] = {}
        for kind, rid, rank, n, at, term, kept in self._query_kept(table, sql, params, generic):
            if kind == 0:
                totals, state = (int(rid), int(n), int(at)), kept
            elif kind == 1:
                ranked.append((float(rank), int(rid)))
            else:
                counts.append((str(term), int(rid)))
                lists[str(term)] = kept
        self._counted(table, totals, state, counts, lists)
        ranked.sort(key=lambda item: (item[0], -item[1]))   # the statement's order: rank, then newest
        return [(i, rank) for rank, i in ranked]

    def _bm25_rows(self, scope: Scope, q: Parsed, filters: SearchFilters, want: int) -> Found:
        """The records of `_bm25_newest`, best first, read in the same statement."""
        table = scope.table
        origin, join = ROW_ORIGINS[scope.name]
        sql, params = self._bm25(BM25_ROWS_SQL, scope.name, q, filters, want, columns=scope.columns, origin=origin,
                                 origin_join=join)
        rows = self._query_kept(table, sql, params, self._plan_kept(table, q, filters))
        if rows:   # always one at least: the totals and counts beside a NULL row when none matched
            first = rows[0]
            terms = [str(term) for term in first["nmem_terms"] or ()]
            self._counted(table, (int(first["nmem_docs"]), int(first["nmem_tokens"]), int(first["nmem_newest"])),
                          first["nmem_state"], [(term, int(df)) for term, df in zip(
                              terms, first["nmem_dfs"] or (), strict=True)],
                          dict(zip(terms, first["nmem_lists"] or (), strict=False)))
        rows = sorted((r for r in rows if r["rank"] is not None), key=lambda r: (float(r["rank"]), -int(r["id"])))
        return Found([(scope.record(r), 0.0 - float(r["rank"])) for r in rows], origins_of(rows))

    # -- what ranking reads of a trail scope, in one statement ----------------------------

    def rank_candidates(self, scope: str, stems: Sequence[str], plan: Callable[[Mapping[str, int]], list[str]],
                        filters: SearchFilters, want: int, span: int, reach: int) -> Candidates:
        """As the shared `rank_candidates`, in one round trip when the stems' document
        frequencies are cached (two when one is counted first): the totals, the candidates,
        their windows (reaching `reach`) and every named row's text come in one statement."""
        table, _ = self._ranked(scope)
        stats = self._cached_stats(table, stems) or self.fts_stats(scope, stems)
        queries = plan(stats.df)
        match = queries[-1] if queries else ""
        folded = self._folds(scope, queries, filters)
        if folded:
            found, chosen = self._folded_read(scope, folded, filters, want, max(span, reach))
            stats = FtsStats(*self._fts_totals_cached(table), stats.df)
            if found.ids:
                return Candidates(stats, folded[chosen - 1][0], found.ids, found.span, found.windows, found.texts,
                                  found.records, found.origins, found.sessions)
            if chosen == 0:
                return Candidates(stats, match, [], span, {}, {})
            queries = [m for m, _ in folded[-chosen - 1:]]   # the ones no path suited: in turn
        for match in queries:
            parsed = parse(match)
            if parsed.text is None:
                continue
            found = self._rank_read(scope, parsed, filters, want, max(span, reach))
            stats = FtsStats(*self._fts_totals_cached(table), stats.df)
            if found.ids:
                return Candidates(stats, match, found.ids, found.span, found.windows, found.texts,
                                  found.records, found.origins, found.sessions)
        return Candidates(stats, match, [], span, {}, {})

    @staticmethod
    def _folds(scope: str, queries: Sequence[str], filters: SearchFilters) -> list[tuple[str, Parsed]]:
        """The candidate queries to fold into one statement (`_folded_read`), each with its
        parse, those that match nothing left out: for observations filtered by dates alone (their
        time is indexed), when the queries are of whole words (`foldable`); else none (the
        queries run in turn, each planned for its values)."""
        if scope != "observations" or (filters.date_start is None and filters.date_end is None):
            return []
        if filters.replace(date_start=None, date_end=None) != NO_FILTERS:
            return []
        parsed = [(match, q) for match in queries if (q := parse(match)).text is not None]
        return parsed if parsed and foldable([q for _, q in parsed]) else []

    def _folded_read(self, scope: str, folded: Sequence[tuple[str, Parsed]], filters: SearchFilters,
                     want: int, reach: int) -> tuple[Candidates, int]:
        """What `_rank_read` reads for the first of the queries that finds a row in the dates,
        and which one it was (1, 2, …; 0 none; minus the place of the first that neither path
        suits when none before it found any), in one statement (FOLDED_READ_SQL) run with its
        generic plan."""
        table, alias, source, apply = BM25_SOURCES[scope]
        dates: list[str] = []
        params: list[Any] = []
        apply(filters, dates, params)
        window = max(RELEVANCE_WINDOW, want)
        phrases = [p for _, q in folded for p in q.phrases]
        owner = [i for i, (_, q) in enumerate(folded, start=1) for _ in q.phrases]
        # The statement's text is kept to a few shapes, each prepared once per connection (its
        # generic plan made once: planning it afresh cost 2-3 ms at 1M rows): at least
        # FOLDED_QUERIES queries (the ones past the last have no `bounds` row: never read) and
        # phrases by eights (the last repeated, of no query: never counted in a score).
        n = max(len(folded), FOLDED_QUERIES)
        pad = -len(phrases) % FOLDED_PHRASES
        phrases += [phrases[-1]] * pad
        owner += [0] * pad
        texts_of = [str(q.text) for _, q in folded]
        texts_of += [texts_of[-1]] * (n - len(folded))
        avg = "(CASE WHEN t.docs > 0 THEN t.tokens::float8 / t.docs ELSE 1.0 END)"
        shape = (scope, n, tuple(dates), tuple(p.text.endswith(":*") for p in phrases),
                 WALK_ROWS, WALK_COST, RELEVANCE_WINDOW, WRITE_BACK_LAG, LIST_ROWS)
        sql = _FOLDED_SQL.get(shape)
        if sql is None:   # the text follows from the shape alone: built once a process
            sql = FOLDED_READ_SQL.format(
                table=table, alias=alias, source=source, full=source, ranked=folded_ranking(phrases, avg),
                found=folded_found(n, alias, table, " AND ".join(dates)), state=KEPT_STATE,
                counts=kept_counts(table, "w.query::tsquery"), **window_parts(scope))
            if len(_FOLDED_SQL) >= FOLDED_SHAPES:
                _FOLDED_SQL.clear()
            _FOLDED_SQL[shape] = sql
        texts = [array_text([p.text for p in phrases]), array_text([p.near for p in phrases]),
                 array_text([p.distance for p in phrases]), array_text([p.group for p in phrases])]
        fetch_rows = min(fetch_bound(self._totals.get(table, (0, 0, 0))[0]), 2 * RELEVANCE_WINDOW)
        owned = array_text(owner)
        paths = [fetch_rows, array_text([conjunction(str(q.text)) for _, q in folded]), owned]
        reads = [value for text in texts_of for value in (*params, *(text, *params, window) * 2)]
        rows = self._query_kept(table, sql, [*texts, *paths, *reads, owned, want, reach, reach], generic=True)
        found, _, _, chosen = self._read_candidates(scope, rows, reach)
        return found, chosen or 0

    def _cached_stats(self, table: str, stems: Sequence[str]) -> FtsStats | None:
        """The stems' statistics from the caches alone, None when one must be counted (the
        totals then come fresh from the candidates' statement)."""
        totals = self._totals.get(table)
        if totals is None:
            return None
        docs = totals[0]
        df: dict[str, int] = {}
        for term in dict.fromkeys(stems):
            hit = self._df_cache.get((table, term))
            if hit is None or abs(docs - hit[1]) > docs * DF_CACHE_DRIFT:
                return None
            if hit[0]:
                df[term] = hit[0]
        return FtsStats(docs, totals[1], df)

    def _fts_totals_cached(self, table: str) -> tuple[int, int]:
        docs, tokens, _ = self._totals.get(table, (0, 0, 0))
        return docs, tokens

    def _rank_read(self, scope: str, q: Parsed, filters: SearchFilters, want: int, reach: int) -> Candidates:
        table = BM25_SOURCES[scope][0]
        sql, params = self._bm25(RANK_READ_SQL, scope, q, filters, want, **window_parts(scope))
        generic = self._plan_kept(table, q, filters)
        rows = self._query_kept(table, sql, [*params, reach, reach], generic)
        found, totals, counts, _ = self._read_candidates(scope, rows, reach)
        self._keep_bound(table, str(q.text), counts, totals[0])
        return found

    def _read_candidates(self, scope: str, rows: Sequence[Any], reach: int
                         ) -> tuple[Candidates, tuple[int, int, int], list[tuple[str, int]], int | None]:
        """RANK_READ_SQL's rows (or FOLDED_READ_SQL's) read: the candidates, the totals and words'
        counts the statement took (kept: `_counted`), and which of a folded read's queries found
        them (its totals row's rank: 1, 2, …, 0 when none did; None for a read of one query)."""
        table = BM25_SOURCES[scope][0]
        whole: dict[int, tuple[Any, Any, Sequence[Any]]] = {}
        origins: dict[str, tuple[str | None, str | None]] = {}
        sessions: dict[int, tuple[str, int | None]] = {}
        ranked: list[tuple[float, int]] = []
        totals, state, counts, chosen = (0, 0, 0), [-1, -1, 0], [], None
        windows: dict[int, list[tuple[int, int]]] = {}
        texts: dict[int, IndexedText] = {}
        lists: dict[str, Any] = {}
        prompts = scope == "prompts"
        names: list[str] | None = None   # the record columns past the first 8 (the statement's, once)
        place = (0, 0)   # where the session's agent and root are among them
        for row in rows:   # read by position: a tuple's own unpacking, not Row.__getitem__ a column
            kind, rid, rank, n, at, before, after, content, *rest = row
            if kind == 3:
                texts[int(rid)] = (str(content), int(n or 0), int(at), rest[2] if prompts else None)
                sessions[int(rid)] = (str(rest[0]), None if prompts else rest[2])
            elif kind == 2:
                earlier = [(int(m), -(d + 1)) for d, m in enumerate(before)]
                earlier.reverse()
                windows[int(rid)] = earlier + [(int(m), d + 1) for d, m in enumerate(after)]
            elif kind == 1:
                ranked.append((float(rank), int(rid)))
            elif kind == 0:
                totals, state, chosen = (int(rid), int(n), int(at)), before, rank
            elif kind == 4:
                counts.append((str(content), int(rid)))
                lists[str(content)] = before
            else:   # a candidate's record: kept as read, built only if the page shows it (`_Rows`)
                if names is None:
                    names = list(row.keys()[8:])
                    place = (names.index("nmem_agent"), names.index("nmem_root"))
                whole[int(rid)] = (at, content, rest)
                origins[str(rest[0])] = (rest[place[0]], rest[place[1]])   # session_id first
                # its text and keys as kind 3 gives a neighbour's (the record's columns begin alike)
                texts[int(rid)] = (str(content), int(n or 0), int(at), rest[2] if prompts else None)
                sessions[int(rid)] = (str(rest[0]), None if prompts else rest[2])
        self._counted(table, totals, state, counts, lists)
        ranked.sort(key=lambda item: (item[0], -item[1]))   # the statement's order: rank, then newest
        records = _Rows(whole, names or [], Prompt.from_row if prompts else Observation.from_row)
        found = Candidates(FtsStats(0, 0, {}), "", [i for _, i in ranked], reach, windows, texts, records, origins,
                           sessions)
        return found, totals, counts, None if chosen is None else int(chosen)

    def _weighted_bm25(self, scope: Scope, q: str, filters: SearchFilters, order: str,
                       limit: int, offset: int, viewer: str | None = None) -> list[tuple[Any, float]]:
        """Memories or sessions holding the match, by BM25 over their weighted fields, in one
        statement. The words' counts are kept for the table's signature: a row added, removed
        or whose words were rewritten (KEPT_TOTALS' `stamp`) counts them again.
        For a team server's `viewer` (memories), the memories hidden from them are neither found
        nor counted in the totals or the words' counts (VIEWER_HIDES)."""
        sql, params, plans = self._weighted_statement(scope, q, filters, order, limit, offset, viewer)
        return self._weighted_found(scope, self._query(sql, params, plans=plans), viewer)

    def _weighted_statement(self, scope: Scope, q: str, filters: SearchFilters, order: str, limit: int,
                            offset: int, viewer: str | None) -> tuple[str, list[Any], str | None]:
        """`_weighted_bm25`'s statement, its parameters and how it is planned."""
        clauses, params = scope.where(filters, self.dialect)
        stamp = "updated_at" if scope.name == "memories" else "ended_at"
        where = " AND ".join([f"{scope.alias}.tsv @@ {TSQ}", *clauses])
        window = scope.name == "sessions"
        if window:
            # Sessions rank the newest RELEVANCE_WINDOW matches, as the SQLite engine does. The
            # matches are put in order by their place alone and only the window's rows read whole:
            # sorting whole rows (summaries, vectors) spilled to disk for a common word at 1M
            # observations (14k matching sessions: 26 MB, 190 ms of a 220 ms statement).
            where = (f"{scope.alias}.ctid = ANY(ARRAY(SELECT {scope.alias}.ctid FROM {scope.source} WHERE {where} "
                     f"ORDER BY {scope.alias}.started_at DESC, {scope.alias}.id DESC LIMIT ?))")
        hide = VIEWER_HIDES if viewer is not None else {"hidden": "", "seen": "", "seen_x": ""}
        totals = KEPT_TOTALS.format(table=scope.table)
        if viewer is not None:
            where = f"{where} AND {scope.alias}.id NOT IN (SELECT id FROM hidden)"
            totals = SEEN_TOTALS.format(stamp=stamp, table=scope.table, seen=hide["seen"])
        output = ", ".join(f"{scope.alias}.{c}" for c in WEIGHTED_OUTPUT[scope.name])
        keys = scope.order(order, True, self.dialect.binary)
        if window and order == "relevance" and viewer is None:
            hits, score = session_scoring(session_slots(q))
            sql = SESSIONS_WEIGHTED_SQL.format(output=output, table=scope.table, totals=totals, hits=hits,
                                               score=score, found=where, order=keys, **hide)
        else:
            sql = BM25_WEIGHTED_SQL.format(
                output=output, table=scope.table, alias=scope.alias, source=scope.source, columns=scope.columns,
                totals=totals, score=WEIGHTED[scope.name].format(alias=scope.alias), found=where, order=keys, **hide)
        rows_seen, stamps = self._weighted.get(scope.table, ((-1, -1), (0, 0)))[0]
        terms, dfs = self._weighted_known(scope.table, (rows_seen, stamps))   # the counts kept for that signature
        if viewer is not None:   # counts over what one viewer sees: neither taken from the cache nor kept
            rows_seen, stamps, terms, dfs = -1, -1, "{}", "{}"
        # a small table's statement keeps its generic plan (CUSTOM_PLAN_ROWS): whatever it
        # reads, it reads at most those rows, and planning it cost as much as running it
        rows_now = self._weighted.get(scope.table, ((-1, -1), (-1, 0)))[1][0]
        plans = GENERIC_PLANS if 0 <= rows_now <= CUSTOM_PLAN_ROWS or self._plans() == ANY_PLANS else None
        return sql, [*([viewer] if viewer is not None else []), q, rows_seen, stamps, terms, dfs, q, *params,
                     *([max(RELEVANCE_WINDOW, offset + limit)] if window else []), limit, offset], plans

    def _weighted_known(self, table: str, signature: tuple[int, int]) -> tuple[str, str]:
        """The words' counts kept for `table` at `signature` (rows, stamp), as the texts of the
        two arrays BM25_WEIGHTED_SQL takes them in (its words, their counts): written once for
        each change of the counts, not for every statement (a few hundred words: dumping them as
        lists cost 0.5 ms of Python a statement, and finding them among every table's counts 0.3)."""
        kept = self._weighted_dfs.get(table)
        if kept is None or kept[0] != signature:
            return "{}", "{}"
        if not kept[2]:
            quoted = ('"' + term.replace("\\", "\\\\").replace('"', '\\"') + '"' for term in kept[1])
            kept[2].extend(("{" + ",".join(quoted) + "}", "{" + ",".join(str(df) for df in kept[1].values()) + "}"))
        return kept[2][0], kept[2][1]

    def _weighted_found(self, scope: Scope, rows: Sequence[Any], viewer: str | None) -> list[tuple[Any, float]]:
        """`_weighted_bm25`'s rows as records and scores; the table's signature, and the words'
        counts the statement made for it, kept (a viewer's are theirs alone: not kept)."""
        if rows and viewer is None:
            first = rows[0]
            if first["nmem_parts"] > FOLD_TOTALS_AT and not self.readonly and not self._in_write():
                self._exec_aside(FOLD_TOTALS_SQL, [scope.table, scope.table])   # lost, it is folded later
            signature = (int(first["nmem_sig_rows"]), int(first["nmem_sig_stamp"]))
            self._weighted[scope.table] = (signature, (signature[0], int(first["nmem_tokens"])))
            kept = self._weighted_dfs.get(scope.table)
            if kept is None or kept[0] != signature or len(kept[1]) > DF_CACHE_SIZE:
                kept = self._weighted_dfs[scope.table] = (signature, {}, [])
            counts = dict(zip(map(str, first["nmem_terms"] or ()), map(int, first["nmem_dfs"] or ()), strict=True))
            if any(kept[1].get(term) != df for term, df in counts.items()):
                kept[1].update(counts)
                kept[2].clear()   # the arrays' texts are written again at the next statement
        return [(scope.record(r), 0.0 - float(r["rank"])) for r in rows]

    def search_memories_seen_by(self, viewer: str, match: str | None, filters: SearchFilters, order: str,
                                limit: int, offset: int) -> list[tuple[Memory, float]]:
        """`search_memories` as `viewer` sees the memories: other writers' `user` memories neither
        returned nor counted in a score's statistics (a date order's ts_rank reads the row alone)."""
        if match is None:
            return listed_visible(self, viewer, filters, order, limit, offset)
        q = parse(match).text
        if q is None:
            return []
        scope = SCOPES["memories"]
        if order == "relevance":
            return self._weighted_bm25(scope, q, filters, order, limit, offset, viewer)
        clauses, params = scope.where(filters, self.dialect)
        rows = self._query(f"SELECT {scope.columns}, -ts_rank({MEMORY_WEIGHTS}, m.tsv, {TSQ}, 1) AS rank "
                           f"FROM {scope.source} WHERE {' AND '.join(['m.tsv @@ ' + TSQ, *clauses, VISIBLE_TO])} "
                           f"ORDER BY {scope.order(order, True, self.dialect.binary)} LIMIT ? OFFSET ?",
                           [q, q, *params, viewer, limit, offset])
        return [(Memory.from_row(r), 0.0 - float(r["rank"])) for r in rows]

    def search_curated(self, scopes: Sequence[str], tiers: Sequence[str], filters: SearchFilters, limit: int,
                       viewer: str | None = None) -> dict[str, tuple[list[tuple[Any, float]], str]]:
        """Each of `scopes` (sessions, memories) searched by relevance for the strictest of `tiers`
        that finds anything there. Per scope, its best `limit` records and scores (as
        `search_sessions`/`search_memories`, `search_memories_seen_by` for a `viewer`) and the
        tier that found them ("" when none did).

        A tier at a time: every scope's statement for the strictest tier (`_weighted_statement`)
        goes in one round trip (`_query_many`), the next tier's only for the scopes it found
        nothing in, and so on. A looser tier is thus neither sent nor planned when a stricter one
        found rows (most searches: one round trip). Each statement is the scope's own, one text
        for every tier and question (the words are parameters), so a connection prepares it once
        and a small table's keeps its generic plan (`_weighted_statement`). They ran as one
        statement (each tier's part behind a one-time filter), which PostgreSQL planned and
        started whole, every tier's part for each scope, and whose rows of two tables came back
        as JSON, tsvectors and all: 5.4 ms of PostgreSQL CPU and 4.4 ms of Python a call at 100k
        observations, against about 2.8 and 1.4 ms now (docs/benchmarks/postgres.md)."""
        found: dict[str, tuple[list[tuple[Any, float]], str]] = {name: ([], "") for name in scopes}
        pending = list(scopes)
        for tier in tiers:
            q = parse(tier).text
            if q is None or not pending:
                continue
            who = {name: viewer if name == "memories" else None for name in pending}
            results = self._query_many([self._weighted_statement(SCOPES[name], q, filters, "relevance", limit, 0,
                                                                 who[name]) for name in pending])
            for name, rows in zip(pending, results, strict=True):
                if rows:
                    found[name] = (self._weighted_found(SCOPES[name], rows, who[name]), tier)
            pending = [name for name in pending if not found[name][0]]
        return found

    def _remember_df(self, table: str, term: str, count: int, docs: int) -> None:
        if len(self._df_cache) > DF_CACHE_SIZE:
            self._df_cache.clear()
        self._df_cache[(table, term)] = (count, docs)

    def _observation_ranks(self, q: Parsed, filters: SearchFilters, want: int) -> list[tuple[int, float]]:
        return self._bm25_newest("observations", q, filters, want)

    def _prompt_ranks(self, q: Parsed, filters: SearchFilters, want: int) -> list[tuple[int, float]]:
        return self._bm25_newest("prompts", q, filters, want)

    # -- searches ----------------------------------------------------------------------------

    def _matched(self, scope: Scope, match: str, filters: SearchFilters, order: str,
                 limit: int, offset: int) -> list[tuple[Any, float]]:
        """Records of `scope` whose tsvector holds the match: the newest matches ranked as FTS5
        ranks them for relevance (BM25 for observations and prompts, weighted ts_rank for
        sessions), else every match in order."""
        parsed = parse(match)
        if parsed.text is None:
            return []
        if order == "relevance" and scope.name in BM25_SOURCES:
            best = self._bm25_rows(scope, parsed, filters, offset + limit)
            return Found(best[offset:], best.origins)
        q = parsed.text
        clauses, params = scope.where(filters, self.dialect)
        if order == "relevance" and scope.name in WEIGHTED:
            return self._weighted_bm25(scope, q, filters, order, limit, offset)
        classes = RANK_WEIGHTS.get(scope.name)
        rank = f"-ts_rank({classes + ', ' if classes else ''}{scope.alias}.tsv, {TSQ}, 1)"
        keys = scope.order(order, True, self.dialect.binary)
        sql = (f"SELECT {scope.columns}, {rank} AS rank FROM {scope.source} "
               f"WHERE {' AND '.join([f'{scope.alias}.tsv @@ {TSQ}', *clauses])} ORDER BY {keys} LIMIT ? OFFSET ?")
        trail = scope.name in BM25_SOURCES
        if trail:   # the page's sessions' agents and roots, read for the page's rows alone
            sql = (f"SELECT f.*, os.agent AS nmem_agent, os.root AS nmem_root FROM ({sql}) AS f "
                   f"LEFT JOIN sessions os ON os.id = f.session_id ORDER BY {keys.replace(scope.alias + '.', 'f.')}")
        rows = self._query(sql, [q, q, *params, limit, offset])
        found = [(scope.record(r), 0.0 - float(r["rank"])) for r in rows]
        return Found(found, origins_of(rows)) if trail else found

    def memory_indexed(self, uid: str) -> bool:
        """Whether the memory's stored tsvector is what its text gives now (the generated column
        the GIN index reads; a stale one would follow a changed text-search configuration)."""
        expr = self._tsv_expression("memories")
        return bool(self._query(f"SELECT 1 FROM memories WHERE uid = ? AND tsv IS NOT NULL "
                                f"AND tsv = ({expr})", (uid,)))

    # -- ranking support ---------------------------------------------------------------------

    def _ranked(self, scope: str) -> tuple[str, str]:
        try:
            return RANKED_TABLES[scope]
        except KeyError:
            raise ValueError(f"no ranking support for scope {scope!r}") from None

    def session_windows(self, scope: str, ids: Sequence[int], span: int) -> dict[int, list[tuple[int, int]]]:
        """For each id, the ids up to `span` records before (-1, -2, …) and after (1, 2, …) it
        in its session, farthest before first."""
        if not ids or span <= 0:
            return {}
        table, col = self._ranked(scope)
        key, anchor = ("n.id", "a.id") if col == "id" else ("(n.timestamp, n.id)", "(a.timestamp, a.id)")
        desc = "n.id DESC" if col == "id" else "n.timestamp DESC, n.id DESC"
        asc = "n.id" if col == "id" else "n.timestamp, n.id"
        rows = self._query(
            f"SELECT a.id, ARRAY(SELECT n.id FROM {table} n WHERE n.session_id = a.session_id AND {key} < {anchor} "
            f"ORDER BY {desc} LIMIT ?), ARRAY(SELECT n.id FROM {table} n WHERE n.session_id = a.session_id "
            f"AND {key} > {anchor} ORDER BY {asc} LIMIT ?) FROM {table} a WHERE a.id = ANY(?)",
            (span, span, [int(i) for i in ids]))
        out: dict[int, list[tuple[int, int]]] = {}
        for anchor_id, before, after in rows:
            earlier = [(int(n), -(d + 1)) for d, n in enumerate(before)]
            out[int(anchor_id)] = list(reversed(earlier)) + [(int(n), d + 1) for d, n in enumerate(after)]
        return out

    def match_ids(self, scope: str, match: str, filters: SearchFilters, want: int) -> list[int]:
        """Ids of the best `want` rows by ts_rank among the newest RELEVANCE_WINDOW matches."""
        self._ranked(scope)
        parsed = parse(match)
        if parsed.text is None:
            return []
        ranked = (self._prompt_ranks if scope == "prompts" else self._observation_ranks)(parsed, filters, want)
        return [i for i, _ in ranked]

    def trail_keys(self, scope: str, ids: Sequence[int]) -> dict[int, tuple[str, int | None, str | None, int]]:
        """(session, prompt, source, time) of each row: what arranging ranked records reads of
        them, without their text and metadata (of a pool of 50, a page of 10 are shown). The
        ranking statement brings these of every row it names (`Candidates.sessions`, the texts):
        this reads only a row it did not name (a time candidate's)."""
        if not ids:
            return {}
        table, _ = self._ranked(scope)
        columns = "session_id, NULL::bigint, source" if scope == "prompts" else "session_id, prompt_id, NULL::text"
        rows = self._query(f"SELECT id, {columns}, timestamp FROM {table} WHERE id = ANY(?)",
                           ([int(i) for i in ids],), plans=KEYED_PLANS)
        return {int(r[0]): (r[1], r[2], r[3], int(r[4])) for r in rows}

    def fts_texts(self, scope: str, ids: Sequence[int]) -> dict[int, IndexedText]:
        """Each row's text, its token count as FTS5's unicode61 counts it, its time, and a prompt's source."""
        if not ids:
            return {}
        table, _ = self._ranked(scope)
        source = "t.source" if scope == "prompts" else "NULL"
        rows = self._query(f"SELECT t.id, t.content, t.tokens, t.timestamp, {source} FROM {table} t "
                           "WHERE t.id = ANY(?) ORDER BY t.id", ([int(i) for i in ids],))
        return {int(r[0]): (str(r[1]), int(r[2] or 0), int(r[3]), r[4]) for r in rows}

    def fts_stats(self, scope: str, terms: Sequence[str]) -> FtsStats:
        """Rows and tokens indexed, and rows holding each term, as FTS5 reports them, in one
        statement: the kept counts (KEPT_COUNTS) plus the rows past them; a term none is kept
        for is counted off the GIN index, then kept. A term's count this process took while
        the rows moved under 5% since is answered as it was (SQLite's `fts_stats` does the same)."""
        table, _ = self._ranked(scope)
        asked = [(term, expr) for term, expr in self._stems(terms) if expr]
        counts = kept_counts(table, "to_tsquery('simple', w.query)")
        # its plan reads no value of its own (the words come as arrays): a generic plan is the same
        row = self._query_kept(table, FTS_STATS_SQL.format(counts=counts, state=KEPT_STATE),
                               [array_text([term for term, _ in asked]), array_text([expr for _, expr in asked])],
                               generic=True)[0]
        totals = (int(row["docs"]), int(row["tokens"]), int(row["newest"]))
        counted = [(str(term), int(df)) for term, df in zip(row["terms"] or (), row["dfs"] or (), strict=True)]
        kept = {term: self._cached_df(table, term, totals[0]) for term, _ in counted}
        self._counted(table, totals, row["state"], counted,
                      dict(zip([term for term, _ in counted], row["lists"] or (), strict=False)))
        found = {term: df if (held := kept[term]) is None else held for term, df in counted}
        return FtsStats(totals[0], totals[1], {term: found[term] for term in dict.fromkeys(terms) if found.get(term)})

    def _cached_df(self, table: str, term: str, docs: int) -> int | None:
        """A word's count kept by this process while the rows moved under 5% since (as SQLite's
        `fts_stats` keeps its counts), else None."""
        hit = self._df_cache.get((table, term))
        return hit[0] if hit is not None and abs(docs - hit[1]) <= docs * DF_CACHE_DRIFT else None

    @staticmethod
    def _stems(terms: Sequence[str]) -> list[tuple[str, str]]:
        """Each distinct term and its tsquery text (the terms are stems already,
        nmem.search.porter: looked up as they are); "" for a term of no word."""
        out = []
        for term in dict.fromkeys(terms):
            words = _TERM.findall(term)
            out.append((term, " <-> ".join(f"'{w.lower()}'" for w in words) if words else ""))
        return out
