"""A search's trail hits name their session's agent, and their paths are shown relative to its
project root, from what the store read with the hits' rows (`SearchHit.origin`): the same names
and paths as the sessions' own rows give, on both engines, without a read of the sessions after
the search (on PostgreSQL: counted from the statements the server reports it received)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from nmem.models import Observation, Prompt
from nmem.service.api import Service
from nmem.service.relpaths import Roots
from nmem.store import NewObservation

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from nmem.service.search import SearchResult

T0 = 1_790_000_000
# session id -> (project, root, agent): an agent and root recorded, an agent only, neither
SESSIONS = {"s-codex": ("ledger", "/work/ledger", "codex"),
            "s-cc": ("ledger", None, "claude-code"),
            "s-old": ("billing", None, None)}


def seed(service: Service) -> None:
    store = service.store
    for n, (sid, (project, root, agent)) in enumerate(SESSIONS.items()):
        store.ensure_session(sid, project, T0 + n, root=root, agent=agent)
        base = root or f"/home/me/{project}"
        store.add_prompt(sid, T0 + n + 1, "user", f"why does the invoice export drop rows in {project}?")
        store.add_prompt(sid, T0 + n + 2, "agent", f"The invoice export skips the last page of {project}.")
        for k in range(3):
            store.add_observation(NewObservation(
                session_id=sid, project=project, timestamp=T0 + 10 * k + n, obs_type="file_edit",
                source_event="PostToolUse", tool_name="Edit", file_path=f"{base}/src/export_{k}.py",
                content=f"Edit {base}/src/export_{k}.py: invoice export pages rows by {k}"))


def expected(service: Service, result: SearchResult) -> list[dict[str, Any]]:
    """The listing as the sessions' own rows name it: each trail hit's agent read by session,
    paths made relative to the roots read by session (what searches did before the fold)."""
    trail = [h for h in result.hits if isinstance(h.record, (Observation, Prompt))]
    origins = service.store.session_origins([h.record.session_id for h in trail])
    for hit in trail:
        assert hit.agent == origins.get(hit.record.session_id, (None, None))[0]
    roots = Roots(service.store, [h.record.session_id for h in trail])
    rows = [hit.to_dict() for hit in result.hits]
    for hit, row in zip(result.hits, rows, strict=True):
        if isinstance(hit.record, (Observation, Prompt)):
            roots.apply(row, hit.record if isinstance(hit.record, Observation) else None)
    return rows


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

class Received:
    """Statements the server logged as received (log_statement = all, sent back to the client as
    LOG notices: client_min_messages = log), on every connection of the store's pool."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def __call__(self, diag: Any) -> None:
        text = str(diag.message_primary or "")
        if diag.severity_nonlocalized == "LOG" and text.startswith(("statement:", "execute ")):
            self.statements.append(text)


@pytest.fixture
def logged(pg_url: str, monkeypatch: pytest.MonkeyPatch, nmem_home: Path) -> Iterator[tuple[Service, Received]]:
    from nmem.config import load_settings
    from nmem.store.postgres import connection

    parts = urlsplit(pg_url)
    options = parse_qs(parts.query)["options"][0] + " -clog_statement=all -cclient_min_messages=log"
    url = parts._replace(query=f"options={quote(options, safe='')}").geturl()
    received = Received()
    configure = connection._configure

    def with_notices(conn: Any) -> None:
        configure(conn)
        conn.add_notice_handler(received)

    monkeypatch.setattr(connection, "_configure", with_notices)
    monkeypatch.setenv("NMEM_STORE_URL", url)
    service = Service.open(load_settings())
    yield service, received
    service.close()


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
