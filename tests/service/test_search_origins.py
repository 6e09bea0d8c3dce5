"""A search's trail hits name their session's agent, and their paths are shown relative to its
project root, from what the store read with the hits' rows (`SearchHit.origin`): the same names
and paths as the sessions' own rows give, on both engines, without a read of the sessions after
the search (on PostgreSQL: counted from the statements the server reports it received)."""

from __future__ import annotations

from typing import Any

import pytest

from nmem.service.api import Service
from search_origins_support import SESSIONS, T0, Received, expected, logged, seed

__all__ = ["logged"]

SEARCHES: list[dict[str, Any]] = [
    {"query": "invoice export rows"},                                   # ranked observations
    {"query": "invoice export", "scope": "prompts"},                    # ranked prompts
    {"query": "invoice export", "scope": "all"},
    {"query": '"invoice export" AND rows', "raw": True},                # FTS5 syntax, BM25 order
    {"query": "invoice export", "scope": "prompts", "raw": True},
    {"query": "invoice export", "strict": True},
    {"query": "invoice export", "date_start": T0 - 5, "date_end": T0 + 100},
    {"query": "invoice export", "prefer_project": "billing"},
    {"query": "invoice", "order_by": "date_desc"},
]


@pytest.mark.parametrize("asked", SEARCHES, ids=lambda a: ",".join(f"{k}={v}" for k, v in a.items()))
def test_trail_hits_name_the_agent_and_root_their_session_recorded(service: Service, asked: dict[str, Any]) -> None:
    seed(service)
    result = service.search(**{"limit": 20, **asked})
    trail = [h for h in result.hits if h.kind in ("observation", "prompt")]
    assert trail, "the search finds trail rows"
    assert result.to_list() == expected(service, result)
    assert {h.agent for h in trail} <= {"codex", "claude-code", None}
    codex = [r for r in result.to_list() if r["session_id"] == "s-codex" and r["kind"] == "observation"]
    assert all(r["rel_path"].startswith("src/export_") for r in codex)


@pytest.mark.parametrize("asked", SEARCHES[:6], ids=lambda a: ",".join(f"{k}={v}" for k, v in a.items()))
def test_relevance_hits_carry_their_sessions_origin_from_the_rows_read(service: Service, engine: str,
                                                                       asked: dict[str, Any]) -> None:
    """Every relevance read of the page's rows brings them; SQLite's ranking reads a pool of rows
    to arrange and leaves the page's sessions to one read afterwards (a join a pooled row cost more)."""
    seed(service)
    trail = [h for h in service.search(**{"limit": 20, **asked}).hits if h.kind in ("observation", "prompt")]
    carried = [h.origin for h in trail if h.origin is not None]
    assert carried == [SESSIONS[h.record.session_id][1:][::-1] for h in trail if h.origin is not None]
    if engine == "postgres" or asked.get("raw") or asked.get("strict"):
        assert trail and len(carried) == len(trail)


# -- the statements one search sends to PostgreSQL, as the server reports receiving them -----

@pytest.mark.parametrize("engine", ["postgres"])
@pytest.mark.parametrize(("asked", "statements"), [
    ({"query": "invoice export rows"}, 1),
    ({"query": "invoice export rows", "date_start": T0 - 5, "date_end": T0 + 100}, 1),
    ({"query": '"invoice export" AND rows', "raw": True}, 1),
    ({"query": "invoice export", "order_by": "date_desc"}, 1),
    ({"query": "invoice export", "scope": "prompts"}, 2),   # and the turns of the agents' replies ranked
], ids=["ranked", "ranked-dates", "fts-syntax", "newest-first", "prompts"])
def test_one_search_is_one_statement_on_postgres(logged: tuple[Service, Received], asked: dict[str, Any],
                                                 statements: int) -> None:
    service, received = logged
    seed(service)
    first = service.search(**{"limit": 10, **asked})   # words counted and kept: the next search asks none
    received.statements.clear()
    again = service.search(**{"limit": 10, **asked})
    sent = list(received.statements)
    assert len(sent) == statements, "\n".join(s[:160] for s in sent)
    assert again.to_list() == first.to_list() == expected(service, again)
    assert any(h.agent == "codex" for h in again.hits)
