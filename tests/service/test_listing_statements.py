"""What one search's listing (`SearchResult.to_list`, as REST, MCP and the CLI give it) sends to
PostgreSQL beyond the search itself: the roots of the projects whose sessions recorded none, in
one read for them all (it was one a project), and nothing for rows that show no path or
preview. A search fused with embeddings names its hits' agents from the rows it read, with no
read of their sessions afterwards. Counted from the statements the server reports receiving;
the listings are the ones the sessions' own rows give (`expected`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from search_origins_support import expected, logged, seed

if TYPE_CHECKING:
    from nmem.service.api import Service
    from search_origins_support import Received

__all__ = ["logged"]

LISTINGS = [
    ({"query": "invoice export rows"}, False, 1),                        # two projects without roots
    ({"query": "invoice export rows", "project": "ledger"}, False, 1),
    ({"query": "invoice export rows", "scope": "all"}, False, 1),
    ({"query": "invoice export rows", "scope": "all", "project": "ledger"}, False, 1),
    ({"query": "invoice export rows", "prefer_project": "billing"}, False, 1),
    ({"query": "invoice export", "scope": "prompts"}, True, 0),          # full prompts: no path, no preview
]


@pytest.mark.parametrize("engine", ["postgres"])
@pytest.mark.parametrize(("asked", "full", "reads"), LISTINGS,
                         ids=["observations", "observations-project", "all", "all-project", "prefer-project",
                              "prompts-full"])
def test_a_listing_reads_the_roots_it_lacks_at_once(logged: tuple[Service, Received], asked: dict[str, Any],
                                                    full: bool, reads: int) -> None:
    service, received = logged
    seed(service)
    first = service.search(**{"limit": 10, **asked}).to_list(full=full)   # words counted and kept
    result = service.search(**{"limit": 10, **asked})
    received.statements.clear()
    rows = result.to_list(full=full)
    sent = list(received.statements)
    assert len(sent) == reads, "\n".join(" ".join(s.split())[:200] for s in sent)
    assert rows == first
    if not full:
        assert rows == expected(service, result)
        assert any(r.get("rel_path", "").startswith("src/export_") for r in rows)


@pytest.mark.parametrize("engine", ["postgres"])
def test_a_fused_search_names_agents_from_the_rows_it_read(logged: tuple[Service, Received]) -> None:
    from nmem.search import embedders
    from nmem.service import indexer

    service, received = logged
    seed(service)
    indexer.build_index(service.store, embedders.load_embedder("hashing", ""))
    service.settings.values.update({"search.embeddings": "hashing", "search.fusion": "weighted"})
    asked = {"query": "invoice export rows", "limit": 10}
    first = service.search(**asked)
    received.statements.clear()
    again = service.search(**asked)
    sent = [" ".join(s.split()) for s in received.statements]
    assert not [s for s in sent if "agent, root FROM sessions" in s], "\n".join(s[:200] for s in sent)
    assert again.to_list() == first.to_list() == expected(service, again)
    assert any(h.agent == "codex" for h in again.hits)
    assert any(h.kind == "observation" for h in again.hits)
