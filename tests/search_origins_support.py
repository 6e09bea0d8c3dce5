"""The sessions, listings and statement log shared by the tests of what a search reads with its
hits' rows (tests/service/test_search_origins.py, tests/service/test_listing_statements.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from nmem.models import Observation, Prompt
from nmem.service.api import Service
from nmem.service.relpaths import Roots
from nmem.store import NewObservation

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
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


class Received:
    """Statements the server logged as received (log_statement = all, sent back to the client as
    LOG notices: client_min_messages = log), on every connection of the store's pool."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def __call__(self, diag: Any) -> None:
        text = str(diag.message_primary or "")
        if diag.severity_nonlocalized == "LOG" and text.startswith(("statement:", "execute ")):
            self.statements.append(text)


def statement_logging(pg_url: str, monkeypatch: pytest.MonkeyPatch, handler: Callable[[Any], None]) -> str:
    """`pg_url` with every statement logged back to the client (log_statement = all as LOG
    notices), and every connection the store opens from now on handing them to `handler`."""
    from nmem.store.postgres import connection

    parts = urlsplit(pg_url)
    options = parse_qs(parts.query)["options"][0] + " -clog_statement=all -cclient_min_messages=log"
    configure = connection._configure

    def with_notices(conn: Any) -> None:
        configure(conn)
        conn.add_notice_handler(handler)

    monkeypatch.setattr(connection, "_configure", with_notices)
    return parts._replace(query=f"options={quote(options, safe='')}").geturl()


@pytest.fixture
def logged(pg_url: str, monkeypatch: pytest.MonkeyPatch, nmem_home: Path) -> Iterator[tuple[Service, Received]]:
    from nmem.config import load_settings

    received = Received()
    monkeypatch.setenv("NMEM_STORE_URL", statement_logging(pg_url, monkeypatch, received))
    service = Service.open(load_settings())
    yield service, received
    service.close()
