"""Consolidation: near-duplicates merged with provenance, stale notes archived, sessions rolled up,
every change logged for sync and undoable; through the service, the CLI and the MCP tool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from conftest import Clock, record
from mcp_support import check_output, structured, tool_error
from nmem.adapters.mcp.server import NmemServer
from nmem.errors import InvalidArgument, NotFound
from nmem.lifecycle import similarity
from nmem.lifecycle.tiers import MERGED_TAG, STALE_TAG
from nmem.models import Memory
from nmem.service.api import Service
from store_engines import both_engines
from test_cli_support import as_json, invoke, ok

__all__ = ["both_engines"]  # every service test here runs on SQLite and PostgreSQL

DAY = 86400
ORIGINAL = "Use PostgreSQL 15 for the billing service because it supports transactions."
RESTATED = "Decision: we use PostgreSQL 15 for the billing service, because it supports transactions. " \
           "Migrations run through Alembic."
OTHER_VERSION = "Use PostgreSQL 14 for the billing service because it supports transactions."
NEGATED = "Never use PostgreSQL 15 for the billing service because it supports transactions."
OTHER_SERVICE = "Use Redis for the session store because it keeps deploys simple."


def remember(service: Service, text: str, namespace: str = "decisions", **kw: object) -> Memory:
    return service.remember(text, namespace=namespace, project="demo", **kw)  # type: ignore[arg-type]


@pytest.fixture
def notes(service: Service, clock: Clock) -> dict[str, Memory]:
    out = {"original": remember(service, ORIGINAL)}
    clock.advance(60)
    out["restated"] = remember(service, RESTATED)
    out["other_version"] = remember(service, OTHER_VERSION)
    out["negated"] = remember(service, NEGATED)
    out["other_service"] = remember(service, OTHER_SERVICE)
    out["user_copy"] = service.remember(ORIGINAL, namespace="decisions", domain="user")   # another domain
    return out


def test_similarity_guards_hard_negatives() -> None:
    corpus = similarity.Corpus([ORIGINAL, RESTATED, OTHER_VERSION, NEGATED, OTHER_SERVICE])
    assert corpus.score(0, 1) >= 0.92 and corpus.similar(0, 1, 0.92)
    assert not corpus.similar(0, 2, 0.5)        # another version number: another fact
    assert not corpus.similar(0, 3, 0.5)        # negated
    assert corpus.score(0, 4) < 0.5
    assert similarity.novel_sentences(ORIGINAL, RESTATED) == ["Migrations run through Alembic."]


def test_dry_run_reports_and_changes_nothing(service: Service, notes: dict[str, Memory]) -> None:
    ops = len(service.store.sync_outbox())
    report = service.consolidate(dry_run=True)
    assert report["run_id"] is None and report["summarizer"] == "extractive"
    assert len(report["merges"]) == 1
    merge = report["merges"][0]
    assert {merge["survivor"], *(m["id"] for m in merge["merged"])} == {notes["original"].id, notes["restated"].id}
    for memory in notes.values():
        assert service.get_memory(memory.id).to_dict() == memory.to_dict()
    assert len(service.store.sync_outbox()) == ops


def test_merge_keeps_provenance_logs_for_sync_and_undo_restores(service: Service, notes: dict[str, Memory],
                                                               clock: Clock) -> None:
    service.recall("Alembic", project="demo")               # the restated note is the one used: it is kept
    ops = len(service.store.sync_outbox())
    clock.advance(60)
    report = service.consolidate()
    kept, gone = service.get_memory(notes["restated"].id), service.get_memory(notes["original"].id)
    assert report["merges"][0]["survivor"] == kept.id
    assert gone.id in kept.relates_to and MERGED_TAG not in kept.tags
    assert gone.tier == "archived" and MERGED_TAG in gone.tags and gone.relates_to[0] == kept.id
    assert gone.content == ORIGINAL                          # archived, not erased
    for name in ("other_version", "negated", "other_service", "user_copy"):
        assert service.get_memory(notes[name].id).tier != "archived", name
    outbox = service.store.sync_outbox()
    assert {op.uid for op in outbox[ops:]} == {kept.id, gone.id}   # edits that sync like any other
    assert [h.record.id for h in service.recall("PostgreSQL 15 billing", project="demo")
            if h.record.id == gone.id] == []
    assert gone.id in [h.record.id for h in service.recall("PostgreSQL 15 billing", project="demo",
                                                           include_archived=True)]
    clock.advance(60)
    undone = service.undo_consolidation(report["run_id"])
    assert set(undone["restored"]) == {kept.id, gone.id} and undone["conflicts"] == []
    assert service.get_memory(gone.id).tags == [] and service.get_memory(gone.id).tier != "archived"
    assert service.get_memory(kept.id).relates_to == [] and service.get_memory(kept.id).content == RESTATED
    with pytest.raises(InvalidArgument, match="undone already"):
        service.undo_consolidation(report["run_id"])
    with pytest.raises(NotFound):
        service.undo_consolidation(999)


def test_extractive_merge_keeps_what_only_the_merged_one_said(service: Service, clock: Clock) -> None:
    a = remember(service, RESTATED)
    clock.advance(60)
    b = remember(service, ORIGINAL)          # newer, so kept: it gains the sentence only `a` had
    service.consolidate()
    kept = service.get_memory(b.id)
    assert kept.content.startswith(ORIGINAL) and "- Migrations run through Alembic." in kept.content
    assert service.get_memory(a.id).tier == "archived"


def test_undo_leaves_a_memory_edited_since_and_says_so(service: Service, notes: dict[str, Memory],
                                                       clock: Clock) -> None:
    report = service.consolidate()
    kept = report["merges"][0]["survivor"]
    clock.advance(60)
    service.update(kept, content="Use PostgreSQL 16 now.")
    undone = service.undo_consolidation(report["run_id"])
    assert undone["conflicts"] == [{"id": kept, "reason": "changed or forgotten since the run"}]
    assert service.get_memory(kept).content == "Use PostgreSQL 16 now."     # the later edit is not lost


def test_pinned_memories_are_never_archived_into_another(service: Service, clock: Clock) -> None:
    a = remember(service, ORIGINAL, pinned=True)
    b = remember(service, ORIGINAL, pinned=True)
    report = service.consolidate()
    assert report["merges"] == []
    assert service.get_memory(a.id).tier == service.get_memory(b.id).tier == "hot"


def test_stale_notes_are_archived_and_rolled_sessions_summarised(service: Service, clock: Clock) -> None:
    old = remember(service, "Halfway through the invoice export rewrite", namespace="progress")
    pinned_old = remember(service, "Blocked on the vendor's sandbox", namespace="blockers", pinned=True)
    lasting = remember(service, "Invoices are immutable once sent", namespace="decisions")
    clock.advance(120 * DAY)
    for n, intent in enumerate(("Add the CSV export", "Fix the flaky billing test")):
        sid = f"sess-{n}"
        record(service, "SessionStart", session_id=sid, source="startup", now=clock.now)
        record(service, "UserPromptSubmit", session_id=sid, prompt=intent, now=clock.now + 1)
        record(service, "PostToolUse", session_id=sid, tool_name="Edit", now=clock.now + 2,
               tool_input={"file_path": f"/work/demo/src/f{n}.py", "old_string": "a", "new_string": "b"},
               tool_response={"filePath": f"/work/demo/src/f{n}.py"})
        record(service, "SessionEnd", session_id=sid, reason="exit", now=clock.now + 3)
        clock.advance(DAY)
    report = service.consolidate()
    assert [s["id"] for s in report["stale"]] == [old.id]
    stale = service.get_memory(old.id)
    assert stale.tier == "archived" and STALE_TAG in stale.tags
    assert service.get_memory(pinned_old.id).tier == "hot"
    assert service.get_memory(lasting.id).tier != "archived"       # decisions do not go stale
    assert report["rollups"] == [{"project": "demo", "sessions": 2, "action": "created"}]
    rollups = [m for m in service.store.iter_memories("project:demo", "context") if "nmem:rollup" in m.tags]
    assert len(rollups) == 1
    assert "Add the CSV export" in rollups[0].content and "Fix the flaky billing test" in rollups[0].content
    assert service.consolidate()["rollups"] == []                 # nothing new: no second write
    undone = service.undo_consolidation(report["run_id"])
    assert rollups[0].id in undone["restored"]
    assert service.store.get_memory(rollups[0].id).deleted_at is not None   # the roll-up it made is forgotten
    assert service.get_memory(old.id).tier != "archived"


# -- CLI -----------------------------------------------------------------------------------------

def test_cli_consolidate_dry_run_run_list_and_undo(nmem_home: Path, service: Service, notes: dict[str, Memory],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMEM_PROJECT", "demo")
    text = ok("consolidate", "--dry-run").stdout
    assert "nmem consolidate (dry run)" in text and "1 groups, 1 archived" in text
    data = as_json("consolidate")
    run = data["run_id"]
    assert isinstance(run, int) and len(data["merges"]) == 1
    merged = data["merges"][0]["merged"][0]["id"]
    assert merged not in json.dumps(as_json("recall", "PostgreSQL billing"))
    assert merged in json.dumps(as_json("recall", "PostgreSQL billing", "--include-archived"))
    runs = as_json("consolidate", "--runs")["runs"]
    assert [r["id"] for r in runs] == [run]
    undone = as_json("consolidate", "--undo", str(run))
    assert len(undone["restored"]) == 2
    again = invoke("consolidate", "--undo", str(run))
    assert again.exit_code == 2 and "undone already" in again.stderr
    missing = invoke("consolidate", "--undo", "77")
    assert missing.exit_code == 10


# -- MCP -----------------------------------------------------------------------------------------

@pytest.mark.anyio
async def test_mcp_consolidate_is_a_dry_run_unless_asked(service: Service, notes: dict[str, Memory]) -> None:
    async with Client(NmemServer(service, project="demo").server, mode="legacy") as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "consolidate")
        dry = structured(await client.call_tool("consolidate", {}))
        check_output(tool, dry)
        assert dry["dry_run"] is True and dry["run_id"] is None and len(dry["merges"]) == 1
        assert service.get_memory(notes["original"].id).tier != "archived"
        done = structured(await client.call_tool("consolidate", {"dry_run": False, "domain": "project"}))
        assert done["run_id"] is not None
        archived = structured(await client.call_tool("recall", {"query": "PostgreSQL 15 billing",
                                                                "include_archived": True}))
        assert any(r["tier"] == "archived" for r in archived["results"])
        undone = structured(await client.call_tool("consolidate", {"undo": done["run_id"]}))
        assert len(undone["restored"]) == 2
        error = tool_error(await client.call_tool("consolidate", {"undo": "soon"}))
        assert "undo" in error and "integer" in error
    assert json.loads(json.dumps(undone)) == undone
