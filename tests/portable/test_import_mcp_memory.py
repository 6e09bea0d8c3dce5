"""`nmem import mcp-memory`: the MCP reference memory server's JSONL knowledge graph becomes one
memory per entity, idempotently."""

from __future__ import annotations

import json
import os
from pathlib import Path

from conftest import Clock
from nmem.portable.sources.mcp_memory import entity_uid
from nmem.service.api import Service
from test_cli_support import invoke, ok

GRAPH = [
    {"type": "entity", "name": "Alice", "entityType": "person",
     "observations": ["Prefers small pull requests", "Reviews on Tuesdays"]},
    {"type": "entity", "name": "Acme Billing", "entityType": "project", "observations": ["Runs on Postgres 16"]},
    {"type": "entity", "name": "Bob", "entityType": "person", "observations": []},
    {"type": "relation", "from": "Alice", "to": "Acme Billing", "relationType": "maintains"},
    {"type": "relation", "from": "Bob", "to": "Alice", "relationType": "reports_to"},
    {"type": "relation", "from": "Alice", "to": "Carol", "relationType": "mentors"},  # Carol is no entity
]


def write_graph(path: Path, items: list[dict[str, object]], mtime: int = 1_790_000_000) -> Path:
    path.write_text("\n".join(json.dumps(item) for item in items) + "\n", encoding="utf-8")
    os.utime(path, (mtime, mtime))
    return path


def test_each_entity_becomes_a_memory(service: Service, tmp_path: Path) -> None:
    graph = write_graph(tmp_path / "memory.jsonl", GRAPH)
    report = json.loads(ok("--format", "json", "import", "mcp-memory", str(graph)).stdout)
    assert report["imported"]["memories"]["added"] == 3
    alice = service.get_memory(entity_uid("Alice"))
    assert (alice.domain, alice.namespace, alice.summary) == ("user", "context", "Alice (person)")
    assert alice.content == ("Alice (person)\n\n- Prefers small pull requests\n- Reviews on Tuesdays\n\n"
                             "Relations:\n- maintains → Acme Billing\n- ← reports_to (from Bob)\n"
                             "- mentors → Carol")
    assert alice.tags == ["mcp-memory", "person"]
    assert alice.relates_to == [entity_uid("Acme Billing"), entity_uid("Bob")]
    assert (alice.created_at, alice.updated_at, alice.source) == (1_790_000_000, 1_790_000_000, "mcp-memory")
    bob = service.get_memory(entity_uid("Bob"))
    assert bob.content == "Bob (person)\n\nRelations:\n- reports_to → Alice"
    assert service.recall("pull requests", domain="user")[0].record.id == alice.id


def test_again_adds_nothing_and_a_changed_graph_updates(service: Service, clock: Clock, tmp_path: Path) -> None:
    graph = write_graph(tmp_path / "memory.jsonl", GRAPH)
    ok("import", "mcp-memory", str(graph), "--domain", "project:acme", "--namespace", "people")
    again = json.loads(ok("--format", "json", "import", "mcp-memory", str(graph), "--domain", "project:acme",
                          "--namespace", "people").stdout)["imported"]["memories"]
    assert again == {"added": 0, "updated": 0, "deleted": 0, "unchanged": 3, "kept": 0}

    # Bob was edited in nmem after the file was written; then the graph changes
    clock.now = 1_790_000_500
    service.update(entity_uid("Bob"), content="Bob (person): moved to the platform team")
    changed = [dict(GRAPH[0], observations=[*GRAPH[0]["observations"], "On leave in May"]), *GRAPH[1:],
               dict(GRAPH[2], observations=["Joined in 2024"])]
    changed.pop(2)
    write_graph(graph, changed, mtime=1_790_000_300)
    result = json.loads(ok("--format", "json", "import", "mcp-memory", str(graph), "--domain", "project:acme",
                           "--namespace", "people").stdout)["imported"]["memories"]
    assert result == {"added": 0, "updated": 1, "deleted": 0, "unchanged": 1, "kept": 1}
    assert "On leave in May" in service.get_memory(entity_uid("Alice")).content
    assert service.get_memory(entity_uid("Bob")).content == "Bob (person): moved to the platform team"


def test_a_broken_graph_is_refused_whole(service: Service, tmp_path: Path) -> None:
    graph = tmp_path / "memory.jsonl"
    graph.write_text(json.dumps(GRAPH[0]) + "\n{not json\n", encoding="utf-8")
    result = invoke("import", "mcp-memory", str(graph))
    assert result.exit_code == 2 and "memory.jsonl, line 2: not JSON" in result.stderr
    graph.write_text(json.dumps({"type": "edge", "from": "a"}) + "\n", encoding="utf-8")
    assert "type must be entity or relation" in invoke("import", "mcp-memory", str(graph)).stderr
    bad_domain = write_graph(tmp_path / "ok.jsonl", GRAPH)
    result = invoke("import", "mcp-memory", str(bad_domain), "--domain", "everyone")
    assert result.exit_code == 11 and "invalid domain 'everyone'" in result.stderr
    assert service.store.status().memories == 0
