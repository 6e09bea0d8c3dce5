"""Reading records by id and by FTS5 match: filters, BM25 windows, ranking statistics."""

from __future__ import annotations

import _sqlite3 as sqlite3
import heapq
import math

from nmem import jsonlite as json
from nmem.models import Memory, Observation, Prompt, Session
from nmem.store.records import Found, FtsStats, SearchFilters
from nmem.store.sql.base import OBS_COLUMNS_O, ORIGIN_COLUMNS, PROMPT_ORIGIN_COLUMNS, origin_join, origins_of
from nmem.store.sql.filters import observation_filters, prompt_filters, session_filters
from nmem.store.sql.memories import HIDDEN_MEMORIES_SQL, listed_visible
from nmem.store.sql.scopes import SCOPES, Scope, ScopedSearch
from nmem.store.sqlite.connection import (
    Connection,
    varint,
)
from nmem.store.sqlite.fts5query import phrases

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from nmem.store.records import IndexedText


# scope -> (table, its FTS5 table, the column after session_id that orders a session)
RANKED_TABLES = {"prompts": ("prompts", "prompts_fts", "id"),
                 "observations": ("observations", "observations_fts", "timestamp")}

DF_CACHE_DRIFT = 0.05     # reuse a term's row count while the index size stays within 5%

DF_CACHE_SIZE = 20_000


# Relevance-ordered full-text reads rank the newest RELEVANCE_WINDOW matching rows that pass the
# filters: FTS5 hands matches over by rowid and stops there, and BM25 costs ~1 µs a match, so a
# word found in a third of a million rows no longer costs half a second.
RELEVANCE_WINDOW = 2000

# Under a type filter, a match with at least this many rows is checked against the ids of the type
# read once off idx_obs_type_project; a smaller one row by row, which costs less than reading the
# ids of a common type (65k for file_edit in one project at 1M rows: ~15 ms).
TYPE_IDS_MIN_MATCHES = 2500

ROWID_MIN, ROWID_MAX = -(2**63), 2**63 - 1


# What each scope's matches are ranked by when every match is read (memories weigh summary and
# tags, which say what a memory is about, above the body).
MEMORY_WEIGHTS = (3.0, 1.0, 2.0, 0.5)   # summary, content, tags, namespace
BM25 = {"observations": "bm25(observations_fts)", "prompts": "bm25(prompts_fts)", "sessions": "bm25(sessions_fts)",
        "memories": f"bm25(memories_fts, {', '.join(map(str, MEMORY_WEIGHTS))})"}
K1, B = 1.2, 0.75   # FTS5's bm25() constants
HIDDEN_SIZES_KEPT = 1000   # viewers whose hidden rows' sizes are kept
PROMPT_ROW = "p.id, p.session_id, s.project, p.timestamp, p.source, p.content, r.rank"   # a ranked prompt's columns


class SearchReads(Connection, ScopedSearch):
    def _text_match(self, table: str, alias: str, match: str) -> tuple[str, Any] | None:
        return f"{alias}.id IN (SELECT rowid FROM {table}_fts WHERE {table}_fts MATCH ?)", match

    # -- reads ---------------------------------------------------------------------------

    def get_observations(self, ids: Sequence[int]) -> Found:
        return self._observations(ids, origins=False)

    def _observations(self, ids: Sequence[int], origins: bool) -> Found:
        """The observations of `ids` in that order (those that exist), with their sessions' agents
        and roots when `origins`. Not for `get_observations`: ranking reads a pool of rows by it,
        and a join a row there cost SQLite more than the page's sessions read afterwards."""
        if not ids:
            return Found()
        marks = ",".join("?" * len(ids))
        joined = (f", {ORIGIN_COLUMNS} FROM observations o{origin_join('o')}" if origins
                  else " FROM observations o")
        rows = self._query(f"SELECT {OBS_COLUMNS_O}{joined} WHERE o.id IN ({marks})", list(ids))
        by_id = {row["id"]: Observation.from_row(row) for row in rows}
        return Found([by_id[i] for i in ids if i in by_id], origins_of(rows) if origins else None)

    def get_prompts(self, ids: Sequence[int]) -> Found:
        if not ids:
            return Found()
        marks = ",".join("?" * len(ids))
        rows = self._query(
            f"SELECT p.*, s.project, {PROMPT_ORIGIN_COLUMNS} FROM prompts p JOIN sessions s ON s.id = p.session_id "
            f"WHERE p.id IN ({marks})", list(ids),
        )
        by_id = {row["id"]: Prompt.from_row(row) for row in rows}
        return Found([by_id[i] for i in ids if i in by_id], origins_of(rows))

    def _matched(self, scope: Scope, match: str, filters: SearchFilters, order: str,
                 limit: int, offset: int) -> list[tuple[Any, float]]:
        """Records of `scope` holding the FTS5 `match`: the newest matches ranked by BM25 for
        relevance (observations, prompts, sessions), else every match in order."""
        if scope.name == "observations":
            return self._matched_observations(match, filters, order, limit, offset)
        if order == "relevance" and scope.name == "prompts":
            rows = self._prompts_by_bm25(match, filters, self._prompt_id_range(filters), offset + limit,
                                         select=f"{PROMPT_ROW}, {PROMPT_ORIGIN_COLUMNS}")[offset:offset + limit]
            return Found([(Prompt.from_row(r), 0.0 - float(r["rank"])) for r in rows], origins_of(rows))
        if order == "relevance" and scope.name == "sessions":
            rows = self._sessions_by_bm25(match, filters, offset + limit)
            return [(Session.from_row(r), 0.0 - float(r["rank"])) for r in rows[offset:offset + limit]]
        clauses, params = scope.where(filters, self.dialect)
        fts = f"{scope.table}_fts"
        key = "rowid" if scope.name == "sessions" else "id"   # sessions have a text key
        rows = self._query(f"SELECT {scope.columns}, {BM25[scope.name]} AS rank FROM {scope.source} "
                           f"JOIN {fts} f ON f.rowid = {scope.alias}.{key} "
                           f"WHERE {' AND '.join([f'{fts} MATCH ?', *clauses])} "
                           f"ORDER BY {scope.order(order, True)} LIMIT ? OFFSET ?", [match, *params, limit, offset])
        return [(scope.record(r), 0.0 - float(r["rank"])) for r in rows]

    def _matched_observations(self, match: str, filters: SearchFilters, order: str, limit: int,
                              offset: int) -> list[tuple[Any, float]]:
        ids = self._observation_id_range(filters)
        if ids is None:
            return []
        if order == "relevance":
            ranked = self._observations_by_bm25(match, filters, ids, offset + limit)[offset:]
            records = self._observations([i for i, _ in ranked], origins=True)   # the page's rows
            found = {o.id: o for o in records}
            return Found([(found[i], 0.0 - rank) for i, rank in ranked if i in found], records.origins)
        if order == "date_desc":
            rows = self._newest_observations(match, filters, ids, offset + limit)
        else:
            rows = self._observation_matches(match, filters, ids, "o.timestamp ASC, o.id DESC", offset + limit)
        return [(Observation.from_row(r), 0.0 - float(r["rank"])) for r in rows[offset:offset + limit]]

    # -- reading FTS5 matches by rowid ------------------------------------------------------
    #
    # FTS5 walks a match's doclists in rowid order and takes rowid bounds, so a read that
    # wants the newest rows, or rows of a time range, can stop early instead of scoring and
    # sorting every match (a word found in a third of a million rows costs ~0.5 s to rank).

    def _observations_by_bm25(self, match: str, filters: SearchFilters, ids: tuple[int, int],
                              want: int) -> list[tuple[int, float]]:
        """(id, bm25) of the best `want` among the newest RELEVANCE_WINDOW matching rows that
        pass the filters. Each match is checked against its row, except under a type filter
        when the match is large: then the ids of that type (and project) are read off
        idx_obs_type_project once and each match checked against them, at a fifth of the cost,
        which matters when a broad word meets a rare type (every match of "py" checked to find
        a project's commits)."""
        clauses: list[str] = []
        params: list[Any] = []
        observation_filters(filters, clauses, params)
        join = ""
        if filters.obs_types and self._has_matches("observations_fts", match, ids, TYPE_IDS_MIN_MATCHES):
            # `+` keeps SQLite from handing the id set to FTS5 as one rowid lookup per id.
            clauses = ["+f.rowid IN (SELECT o.id FROM observations o INDEXED BY idx_obs_type_project "
                       f"WHERE o.id BETWEEN ? AND ? AND {' AND '.join(clauses)})"]
            params = [*ids, *params]
        elif clauses:
            join = " CROSS JOIN observations o ON o.id = f.rowid"
        rows = self._rank_newest("observations_fts", match, ids, join, clauses, params, want)
        return [(int(r["id"]), float(r["rank"])) for r in rows]

    def _has_matches(self, fts: str, match: str, ids: tuple[int, int], n: int) -> bool:
        """Whether the match holds at least `n` rows within `ids`: a walk of the doclists that
        stops at `n`, without BM25 (whose IDF pass reads every doclist to its end)."""
        rows = self._query(f"SELECT count(*) FROM (SELECT 1 FROM {fts} f WHERE {fts} MATCH ? "
                           "AND f.rowid BETWEEN ? AND ? LIMIT ?)", [match, *ids, n])
        return int(rows[0][0]) >= n

    def _rank_newest(self, fts: str, match: str, ids: tuple[int, int], join: str, clauses: Sequence[str],
                     params: Sequence[Any], want: int, select: str = "r.id, r.rank",
                     rows: str = "") -> list[sqlite3.Row]:
        """The best `want` rows by BM25 among the newest RELEVANCE_WINDOW matches within `ids`
        that pass `clauses`, best first: FTS5 reads the match by rowid, newest first, and
        stops at the window. `select` and `rows` (joins on `r.id`) say what to return of them.

        `join` brings the table the clauses name; CROSS JOIN keeps FTS5 the outer loop, since
        driven by a filter's index SQLite would run the MATCH once per row (seconds at 1M)."""
        where = " AND ".join([f"{fts} MATCH ?", "f.rowid BETWEEN ? AND ?", *clauses])
        newest = (f"SELECT f.rowid AS id, bm25({fts}) AS rank FROM {fts} f{join} WHERE {where} "
                  "ORDER BY f.rowid DESC LIMIT ?")
        ranked = f"SELECT id, rank FROM ({newest}) ORDER BY rank, id DESC LIMIT ?"
        if rows or select != "r.id, r.rank":
            # sorted again after the joins (a temporary b-tree): when nothing is joined, spared
            ranked = f"SELECT {select} FROM ({ranked}) r {rows} ORDER BY r.rank, r.id DESC"
        return self._query(ranked, [match, *ids, *params, max(RELEVANCE_WINDOW, want), want])

    def _observation_matches(self, match: str, filters: SearchFilters, ids: tuple[int, int], order: str,
                             n: int, since: int | None = None) -> list[sqlite3.Row]:
        clauses = ["observations_fts MATCH ?", "f.rowid BETWEEN ? AND ?"]
        params: list[Any] = [match, *ids]
        if since is not None:
            clauses.append("o.timestamp >= ?")
            params.append(since)
        observation_filters(filters, clauses, params)
        return self._query(
            f"SELECT {OBS_COLUMNS_O}, bm25(observations_fts) AS rank FROM observations_fts f "
            f"CROSS JOIN observations o ON o.id = f.rowid WHERE {' AND '.join(clauses)} "
            f"ORDER BY {order} LIMIT ?", [*params, n])

    def _newest_observations(self, match: str, filters: SearchFilters, ids: tuple[int, int],
                             want: int) -> list[sqlite3.Row]:
        """The `want` newest matches (timestamp, then id): read by rowid, newest first, which
        stops at the LIMIT. Rows inserted out of time order (observations_late) are the only
        ones that could be newer than the oldest row read while having a smaller id; when
        one exists, the rows from the first that could be are read again and sorted."""
        rows = self._observation_matches(match, filters, ids, "f.rowid DESC", want)
        if len(rows) == want:
            oldest = min(int(r["timestamp"]) for r in rows)
            if self._query("SELECT 1 FROM observations_late WHERE timestamp >= ? LIMIT 1", (oldest,)):
                floor = self._first_id_since(oldest)
                lo = ids[0] if floor is None else max(ids[0], floor)
                rows = self._observation_matches(match, filters, (lo, ids[1]), "o.timestamp DESC, o.id DESC",
                                                 want, since=oldest)
        return sorted(rows, key=lambda r: (-r["timestamp"], -r["id"]))

    def _observation_id_range(self, filters: SearchFilters) -> tuple[int, int] | None:
        """Bounds on the ids of rows the filters can pass (dates, session); None if none can."""
        lo, hi = ROWID_MIN, ROWID_MAX
        if filters.date_start is not None:
            first = self._first_id_since(filters.date_start)
            if first is None:
                return None
            lo = first
        if filters.date_end is not None:
            last = self._last_id_until(filters.date_end)
            if last is None:
                return None
            hi = last
        if filters.session_id:
            first, last = self._query("SELECT MIN(id), MAX(id) FROM observations WHERE session_id = ?",
                                      (filters.session_id,))[0]
            if first is None:
                return None
            lo, hi = max(lo, int(first)), min(hi, int(last))
        return (lo, hi) if lo <= hi else None

    def _first_id_since(self, timestamp: int) -> int | None:
        """The smallest id of a row at or after `timestamp`. Rows in time order have ids in
        time order too, so the first of them by time has it; late rows are looked up apart."""
        row = self._query(
            "SELECT MIN(id) FROM ("
            "SELECT id FROM (SELECT id FROM observations WHERE timestamp >= ?1 "
            "AND id NOT IN (SELECT id FROM observations_late) ORDER BY timestamp, id LIMIT 1) "
            "UNION ALL SELECT MIN(id) FROM observations_late WHERE timestamp >= ?1)", (timestamp,))
        return None if row[0][0] is None else int(row[0][0])

    def _last_id_until(self, timestamp: int) -> int | None:
        """The largest id of a row at or before `timestamp` (ROWID_MAX when that is every row)."""
        newest = self._query("SELECT MAX(timestamp) FROM observations")[0][0]
        if newest is not None and timestamp >= newest:
            return ROWID_MAX
        row = self._query(
            "SELECT MAX(id) FROM ("
            "SELECT id FROM (SELECT id FROM observations WHERE timestamp <= ?1 "
            "AND id NOT IN (SELECT id FROM observations_late) ORDER BY timestamp DESC, id DESC LIMIT 1) "
            "UNION ALL SELECT MAX(id) FROM observations_late WHERE timestamp <= ?1)", (timestamp,))
        return None if row[0][0] is None else int(row[0][0])

    def _prompt_id_range(self, filters: SearchFilters) -> tuple[int, int]:
        if not filters.session_id:
            return ROWID_MIN, ROWID_MAX
        first, last = self._query("SELECT MIN(id), MAX(id) FROM prompts WHERE session_id = ?",
                                  (filters.session_id,))[0]
        return (1, 0) if first is None else (int(first), int(last))

    def _prompts_by_bm25(self, match: str, filters: SearchFilters, ids: tuple[int, int], want: int,
                         select: str = PROMPT_ROW,
                         rows: str = "JOIN prompts p ON p.id = r.id JOIN sessions s ON s.id = p.session_id",
                         ) -> list[sqlite3.Row]:
        clauses: list[str] = []
        params: list[Any] = []
        prompt_filters(filters, clauses, params)
        join = " CROSS JOIN prompts p ON p.id = f.rowid CROSS JOIN sessions s ON s.id = p.session_id" if clauses else ""
        return self._rank_newest("prompts_fts", match, ids, join, clauses, params, want, select, rows)

    def _sessions_by_bm25(self, match: str, filters: SearchFilters, want: int) -> list[sqlite3.Row]:
        clauses: list[str] = []
        params: list[Any] = []
        session_filters(filters, clauses, params)
        join = " CROSS JOIN sessions s ON s.rowid = f.rowid" if clauses else ""
        return self._rank_newest("sessions_fts", match, (ROWID_MIN, ROWID_MAX), join, clauses, params, want,
                                 "s.*, r.rank", "JOIN sessions s ON s.rowid = r.id")

    def memory_indexed(self, uid: str) -> bool:
        """Whether the full-text index holds the memory (its row in FTS5's docsize table)."""
        return bool(self._query("SELECT 1 FROM memories_fts_docsize WHERE id = (SELECT id FROM memories "
                                "WHERE uid = ?)", (uid,)))

    # -- memories as a team server's user sees them ------------------------------------------
    #
    # FTS5's bm25() weighs a phrase by the rows of the whole index, other users' private memories
    # among them: a score would tell whether they hold a word. When the viewer may not see some
    # rows, the matches are scored here by the same formula over the rows they may see: the
    # totals and each phrase's rows less the hidden rows' (their sizes from memories_fts_docsize,
    # their hits from FTS5 itself), and each candidate's weighted hits of each phrase taken back
    # out of FTS5's bm25() of that phrase alone (a sum of one term: F = s·K / ((k1 + 1)·IDF − s)).

    def search_memories_seen_by(self, viewer: str, match: str | None, filters: SearchFilters, order: str,
                                limit: int, offset: int) -> list[tuple[Memory, float]]:
        """`search_memories` as `viewer` sees the memories: other writers' `user` memories neither
        returned nor counted in any score's statistics. With none hidden, `search_memories` itself."""
        with self.read_snapshot():
            # as JSON: 2,000 rows as Python rows cost 3-4 ms, as two arrays 0.5 ms
            ids, times, n = self._query(f"SELECT json_group_array(id), json_group_array(updated_at), count(*) "
                                        f"FROM ({HIDDEN_MEMORIES_SQL})", (viewer,))[0]
            if not n:
                return self.search_memories(match, filters, order, limit, offset)
            if match is None:
                return listed_visible(self, viewer, filters, order, limit, offset)
            return self._memories_scored_visible(viewer, match, filters, order, limit, offset, (ids, times))

    def search_curated(self, scopes: Sequence[str], tiers: Sequence[str], filters: SearchFilters, limit: int,
                       viewer: str | None = None) -> dict[str, tuple[list[tuple[Any, float]], str]]:
        """Each of `scopes` (sessions, memories) searched by relevance for the strictest of `tiers`
        that finds anything there: per scope, its best `limit` records and scores (as
        `search_sessions`/`search_memories`, `search_memories_seen_by` for a `viewer`) and the tier
        that found them ("" when none did). A search a tier: in process, a statement costs no trip."""
        found: dict[str, tuple[list[tuple[Any, float]], str]] = {}
        for name in scopes:
            found[name] = ([], "")
            for tier in tiers:
                if name == "memories" and viewer is not None:
                    rows = self.search_memories_seen_by(viewer, tier, filters, "relevance", limit, 0)
                else:
                    rows = self.search(name, tier, filters, "relevance", limit, 0)
                if rows:
                    found[name] = (rows, tier)
                    break
        return found

    def _memories_scored_visible(self, viewer: str, match: str, filters: SearchFilters, order: str, limit: int,
                                 offset: int, hidden: tuple[str, str]) -> list[tuple[Memory, float]]:
        """`hidden`: the ids of the rows the viewer may not see and their write times, as JSON arrays."""
        scope = SCOPES["memories"]
        clauses, params = scope.where(filters, self.dialect)
        hide = "NOT (m.id IN (SELECT value FROM json_each(?)))"
        found = self._query("SELECT m.id, m.is_pinned, m.updated_at, d.sz FROM memories m "
                            "JOIN memories_fts f ON f.rowid = m.id LEFT JOIN memories_fts_docsize d ON d.id = m.id "
                            f"WHERE {' AND '.join(['memories_fts MATCH ?', *clauses, hide])}",
                            [match, *params, hidden[0]])
        if not found:
            return []
        sizes = {int(r[0]): _row_size(r[3]) for r in found}
        scores = self._visible_bm25(match, sizes, self._seen_totals(viewer, hidden), hidden[0])
        keyed = heapq.nsmallest(offset + limit, (
            ((-int(r[1]), *_order_key(order, scores[int(r[0])], int(r[2])), -int(r[0])), int(r[0])) for r in found))
        page = [rid for _, rid in keyed[offset:]]   # pinned first, as Scope.order
        if not page:
            return []
        where, param = self.dialect.in_ids("id", page)
        rows = {int(r["id"]): Memory.from_row(r) for r in self._query(f"SELECT * FROM memories WHERE {where}",
                                                                      (param,))}
        return [(rows[i], scores[i]) for i in page if i in rows]

    def _seen_totals(self, viewer: str, hidden: tuple[str, str]) -> _Totals:
        """The index's rows and tokens, all and those `viewer` may see. What the hidden rows hold is
        kept per viewer while they (ids and write times) and the index's totals stay as they were:
        reading 2,000 rows' sizes cost ~5 ms a search."""
        block = self._query("SELECT block FROM memories_fts_data WHERE id = 1")
        data = bytes(block[0][0]) if block and block[0][0] else b""
        docs, tokens = _averages(data)
        kept = self._hidden_sizes
        key = (data, hidden)
        hit = kept.get(viewer)
        if hit is not None and hit[0] == key:
            unseen = hit[1]
        else:
            sizes = self._query("SELECT sz FROM memories_fts_docsize WHERE id IN (SELECT value FROM json_each(?))",
                                (hidden[0],))
            unseen = (len(sizes), sum(_row_size(r[0]) for r in sizes))
            if len(kept) >= HIDDEN_SIZES_KEPT:
                kept.clear()
            kept[viewer] = (key, unseen)
        return _Totals(docs, tokens, docs - unseen[0], tokens - unseen[1])

    def _visible_bm25(self, match: str, sizes: dict[int, int], totals: _Totals,
                      hidden_param: str) -> dict[int, float]:
        """FTS5's weighted bm25() of each candidate (row id: its tokens) over the rows not hidden."""
        avg = totals.tokens / totals.docs if totals.docs else 1.0
        seen_avg = totals.seen_tokens / totals.seen_docs if totals.seen_docs > 0 else 1.0
        candidates = json.dumps(list(sizes))
        scores = dict.fromkeys(sizes, 0.0)
        for phrase in phrases(match):
            rows, rows_unseen = self._query(
                "SELECT count(*), COALESCE(sum(rowid IN (SELECT value FROM json_each(?))), 0) FROM memories_fts "
                "WHERE memories_fts MATCH ?", (hidden_param, phrase))[0]
            idf = _idf(totals.docs, int(rows))
            seen_idf = _idf(totals.seen_docs, int(rows) - int(rows_unseen))
            top = (K1 + 1) * idf
            for rid, bm25 in self._query(f"SELECT rowid, {BM25['memories']} FROM memories_fts "
                                         "WHERE memories_fts MATCH ? AND +rowid IN (SELECT value FROM json_each(?))",
                                         (phrase, candidates)):
                size = sizes[rid]
                s = -bm25
                # weights are multiples of 0.5, so is a weighted hit count: rounding drops the float error
                hits = round(2 * s * K1 * (1 - B + B * size / avg) / (top - s)) / 2 if s > 0 else 0.0
                scores[rid] += seen_idf * hits * (K1 + 1) / (hits + K1 * (1 - B + B * size / seen_avg))
        return scores

    # -- ranking support: context windows and index statistics ------------------------------

    def _ranked(self, scope: str) -> tuple[str, str, str]:
        try:
            return RANKED_TABLES[scope]
        except KeyError:
            raise ValueError(f"no ranking support for scope {scope!r}") from None

    def session_windows(self, scope: str, ids: Sequence[int], span: int
                        ) -> dict[int, list[tuple[int, int]]]:
        """For each id, the ids up to `span` records before (-1, -2, …) and after (1, 2, …) it
        in its session, in session order: (timestamp, id) for observations, id for prompts.
        Each side is one index range scan on (session_id, order column)."""
        if not ids or span <= 0:
            return {}
        table, _, col = self._ranked(scope)
        # Each side as a JSON array (of ids; of [timestamp, id] for observations), every anchor's
        # in one JSON value: one row for the whole read, not a row (and a text to split) an
        # anchor. Python sorts each side and keeps its `span` nearest, so no aggregate order is
        # relied on.
        by_id = col == "id"
        if by_id:   # a session's prompts in id order: idx_prompts_session (session_id, id)
            side = ("(SELECT json_group_array(k) FROM (SELECT n.id AS k FROM prompts n "
                    "WHERE n.session_id = a.session_id AND n.id {op} a.id ORDER BY n.id {way} LIMIT ?1))")
        else:
            # idx_obs_session orders a session by time, not by (time, id): an ORDER BY of both sorted
            # each side's rows in a temporary b-tree (a page allocated and zeroed, twice an anchor).
            # The rows are rather those from the time of the span-th nearest by time alone (index
            # order), ties at that time included; Python's sort then keeps the `span` nearest.
            side = ("(SELECT json_group_array(json_array(n.timestamp, n.id)) FROM observations n "
                    "WHERE n.session_id = a.session_id AND (n.timestamp, n.id) {op} (a.timestamp, a.id) "
                    "AND n.timestamp {bound} coalesce((SELECT m.timestamp FROM observations m "
                    "WHERE m.session_id = a.session_id AND (m.timestamp, m.id) {op} (a.timestamp, a.id) "
                    "ORDER BY m.timestamp {way} LIMIT 1 OFFSET ?1 - 1), {edge}))")
        before = side.format(op="<", way="DESC", bound=">=", edge=ROWID_MIN)
        after = side.format(op=">", way="ASC", bound="<=", edge=ROWID_MAX)
        own = "a.session_id, NULL" if by_id else "a.session_id, a.prompt_id"
        rows = self._query(f"SELECT json_group_array(json_array(a.id, {own}, {before}, {after})) "
                           f"FROM json_each(?2) j JOIN {table} a ON a.id = j.value", (span, _id_array(ids)))
        out = Windows()
        sessions = out.sessions
        for found, session, prompt, before_items, after_items in json.loads(rows[0][0]):
            sessions[found] = (session, prompt)
            before_items.sort()   # farthest first
            after_items.sort()
            if len(before_items) > span:
                del before_items[:-span]
            if len(after_items) > span:
                del after_items[span:]
            earlier = before_items if by_id else [n for _, n in before_items]
            later = after_items if by_id else [n for _, n in after_items]
            window = [(n, d) for d, n in enumerate(earlier, -len(earlier))]
            window += [(n, d) for d, n in enumerate(later, 1)]
            out[found] = window
        return out

    def match_ids(self, scope: str, match: str, filters: SearchFilters, want: int) -> list[int]:
        """Ids of the best `want` rows by FTS5 BM25, best first, among the newest
        RELEVANCE_WINDOW matches that pass the filters: what `search_*` ranks by relevance,
        without reading the rows (ranking reads only the texts, and the page's rows at the end)."""
        self._ranked(scope)  # a ValueError for a scope without ranking support
        if scope == "prompts":
            return [int(r[0]) for r in self._prompts_by_bm25(match, filters, self._prompt_id_range(filters),
                                                             want, "r.id, r.rank", "")]
        ids = self._observation_id_range(filters)
        return [] if ids is None else [i for i, _ in self._observations_by_bm25(match, filters, ids, want)]

    def fts_texts(self, scope: str, ids: Sequence[int]) -> dict[int, IndexedText]:
        """The indexed text of each row, how many tokens FTS5 counted in it (`docsize`), its
        time, and a prompt's source."""
        if not ids:
            return {}
        table, fts, _ = self._ranked(scope)
        source = "t.source" if scope == "prompts" else "NULL"
        # joined to json_each (ids distinct), not `IN` it, which first copies them into a temporary index
        rows = self._tuples(f"SELECT t.id, t.content, d.sz, t.timestamp, {source} FROM json_each(?) j "
                            f"JOIN {table} t ON t.id = j.value LEFT JOIN {fts}_docsize d ON d.id = t.id",
                            (_id_array(sorted({int(i) for i in ids})),))
        return {i: (str(text), _token_count(size), int(at), source) for i, text, size, at, source in rows}

    def trail_keys(self, scope: str, ids: Sequence[int]) -> dict[int, tuple[str, int | None, str | None, int]]:
        """(session, prompt, source, time) of each row: what arranging ranked records reads of
        them, without their text and metadata (of a pool of 50, a page of 10 are shown)."""
        table, _, _ = self._ranked(scope)
        columns = "session_id, NULL, source" if scope == "prompts" else "session_id, prompt_id, NULL"
        rows = self._query(f"SELECT id, {columns}, timestamp FROM {table} "
                           "WHERE id IN (SELECT value FROM json_each(?))", (_id_array(ids),))
        return {int(r[0]): (r[1], r[2], r[3], r[4]) for r in rows}

    def user_prompt_ids(self, windows: Sequence[tuple[str, int, int]]) -> dict[str, list[int]]:
        """For each (session, before, after), the ids of its user prompts strictly between the two
        times, in order: what a search's turns read of `sessions_prompts(windows, source="user")`,
        without reading their texts or building them (a prompt's session is its foreign key)."""
        if not windows:
            return {}
        clauses = " OR ".join(["(session_id = ? AND timestamp < ? AND timestamp > ?)"] * len(windows))
        rows = self._tuples(f"SELECT session_id, id FROM prompts WHERE ({clauses}) AND source = 'user'",
                            [v for window in windows for v in window])
        out: dict[str, list[int]] = {session: [] for session, _, _ in windows}
        for session, i in rows:
            out[session].append(i)
        for ids in out.values():
            ids.sort()   # here, not by an ORDER BY (a temporary b-tree)
        return out

    def fts_stats(self, scope: str, terms: Sequence[str]) -> FtsStats:
        """Rows and tokens indexed (FTS5's averages record), and rows holding each term."""
        _, fts, _ = self._ranked(scope)
        conn = self._w if (self._depth and self._w is not None) else self._reader()
        docs = tokens = 0
        block = self._query(f"SELECT block FROM {fts}_data WHERE id = 1")
        if block and block[0]["block"]:
            data = bytes(block[0]["block"])
            docs, pos = varint(data, 0)
            tokens, _ = varint(data, pos)
        # fts5vocab counts a term's rows by reading its whole list (10 ms for a word in a third
        # of a million rows), so counts are kept while the index grows or shrinks under 5%.
        df: dict[str, int] = {}
        stale = []
        for term in dict.fromkeys(terms):
            cached = self._df_cache.get((fts, term))
            if cached is not None and abs(docs - cached[1]) <= docs * DF_CACHE_DRIFT:
                if cached[0]:
                    df[term] = cached[0]
            else:
                stale.append(term)
        if stale:
            vocab = f"nmem_{fts}_vocab"
            # fts5vocab reads the index in place; a temp table costs nothing and needs no write.
            conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{vocab} USING fts5vocab(main, {fts}, row)")
            rows = self._query(f"SELECT term, doc FROM temp.{vocab} WHERE term IN "
                               f"({','.join('?' * len(stale))})", stale)
            counted = {str(r["term"]): int(r["doc"]) for r in rows}
            if len(self._df_cache) > DF_CACHE_SIZE:
                self._df_cache.clear()
            for term in stale:
                self._df_cache[(fts, term)] = (counted.get(term, 0), docs)
            df.update(counted)
        return FtsStats(docs, tokens, df)


class Windows(dict):  # type: ignore[type-arg]
    """Session windows by anchor (`session_windows`), with `sessions`: each anchor's session and
    (an observation's) prompt, read in the same statement, which `rank_candidates` hands on as
    `Candidates.sessions`: what arranging the ranked records reads of them besides their times
    and sources (`trail_keys`), which their texts bring."""

    __slots__ = ("sessions",)

    def __init__(self) -> None:
        super().__init__()
        self.sessions: dict[int, tuple[str, int | None]] = {}


def _id_array(ids: Sequence[int]) -> str:
    """The ids as a JSON array, for json_each()."""
    return repr(list(map(int, ids)))   # a list of ints reads as JSON, and costs half a join


def _token_count(size: bytes | None) -> int:
    """A row's tokens from its one-column docsize record: a varint, most often of one or two bytes."""
    if not size:
        return 0
    first = size[0]
    if first < 0x80:
        return first
    if len(size) > 1 and size[1] < 0x80:
        return ((first & 0x7F) << 7) | size[1]
    return varint(bytes(size), 0)[0]


class _Totals:
    """The index's rows and tokens, and those of the rows a viewer may see."""

    __slots__ = ("docs", "seen_docs", "seen_tokens", "tokens")

    def __init__(self, docs: int, tokens: int, seen_docs: int, seen_tokens: int) -> None:
        self.docs, self.tokens, self.seen_docs, self.seen_tokens = docs, tokens, seen_docs, seen_tokens


def _averages(data: bytes) -> tuple[int, int]:
    """Rows and tokens (every column's) in FTS5's averages record of memories_fts."""
    if not data:
        return 0, 0
    docs, pos = varint(data, 0)
    tokens = 0
    for _ in MEMORY_WEIGHTS:
        column, pos = varint(data, pos)
        tokens += column
    return docs, tokens


def _row_size(blob: bytes | None) -> int:
    """A row's tokens, every column's: the varints of its memories_fts_docsize row."""
    if not blob:
        return 0
    data, pos, total = bytes(blob), 0, 0
    if max(data) < 0x80:   # every column under 128 tokens: one byte each
        return sum(data)
    while pos < len(data):
        size, pos = varint(data, pos)
        total += size
    return total


def _idf(docs: int, rows: int) -> float:
    """FTS5's IDF of a phrase in `rows` of `docs` rows, with its floor."""
    idf = math.log((docs - rows + 0.5) / (rows + 0.5)) if docs > 0 else 0.0
    return idf if idf > 0 else 1e-6


def _order_key(order: str, score: float, updated: int) -> tuple[float, ...]:
    """What orders a scored memory after its pin (Scope.order): best score, or its time."""
    if order == "date_desc":
        return (-updated,)
    if order == "date_asc":
        return (updated,)
    return (-score,)

