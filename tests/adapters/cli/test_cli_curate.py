"""CLI curated-memory commands: remember, capture, recall, update, forget, pin, unpin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from nmem.service.api import Service
from test_cli_support import History, as_json, invoke, ok, seed, stderr_lines

URN_PREFIX = "nmem://project:demo/"


@pytest.fixture(autouse=True)
def project_demo(nmem_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMEM_PROJECT", "demo")


def remember_json(*args: str, input: str | None = None) -> dict[str, object]:
    data = as_json("remember", *args, input=input)
    assert isinstance(data, dict)
    return data


# -- remember / capture ---------------------------------------------------------------------

def test_remember_prints_id_and_urn(service: Service) -> None:
    result = ok("remember", "Use WAL mode: readers never block writers", "-n", "decisions", "--tag", "sqlite")
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Remembered decisions/")
    uid = lines[0].split("/", 1)[1]
    assert f"urn:     {URN_PREFIX}decisions/{uid}" in result.stdout
    stored = service.get_memory(uid)
    assert stored.content == "Use WAL mode: readers never block writers"
    assert stored.tags == ["sqlite"] and stored.source == "cli"


def test_remember_json_is_the_success_object(service: Service) -> None:
    data = remember_json("Token TTL is one hour", "--summary", "Token TTL", "-n", "decision",
                         "--tags", "auth,tokens", "--relates-to", "01ABC", "--tier", "hot", "--pin")
    assert data["success"] is True
    assert data["urn"] == f"{URN_PREFIX}decisions/{data['id']}"
    assert data["summary"] == "Token TTL" and data["namespace"] == "decisions"
    assert data["tags"] == ["auth", "tokens"] and data["relates_to"] == ["01ABC"]
    assert data["tier"] == "hot" and data["is_pinned"] is True
    assert service.get_memory(str(data["id"])).summary == "Token TTL"


def test_remember_reads_stdin(service: Service) -> None:
    body = "## Context\nWe need JSONB\n"
    for args in (("--stdin",), ("-",)):
        data = remember_json(*args, "--summary", "Use PostgreSQL", input=body)
        assert service.get_memory(str(data["id"])).content == body.strip()


def test_remember_argument_errors(nmem_home: Path) -> None:
    assert invoke("remember").exit_code == 2
    assert invoke("remember", "text", "--stdin", input="other").exit_code == 2
    empty_stdin = invoke("remember", "--stdin", input="  \n")
    assert empty_stdin.exit_code == 2
    assert stderr_lines(empty_stdin) == ["nmem: --stdin was given but standard input is empty"]
    too_long = invoke("remember", "x", "--summary", "s" * 101)
    assert too_long.exit_code == 11
    assert stderr_lines(too_long) == ["nmem: summary is 101 characters; the limit is 100"]
    assert invoke("remember", "   ").exit_code == 11
    assert invoke("remember", "x", "--namespace", "Not A Slug!").exit_code == 11
    assert invoke("remember", "x", "--domain", "galaxy").exit_code == 11
    assert invoke("remember", "x", "--tier", "lukewarm").exit_code == 2


def test_capture_is_the_subcog_form(service: Service) -> None:
    data = as_json("capture", "decisions", "Use PostgreSQL for teams", "--content", "JSONB and pgvector")
    memory = service.get_memory(str(data["id"]))
    assert (memory.namespace, memory.summary, memory.content) == (
        "decisions", "Use PostgreSQL for teams", "JSONB and pgvector")
    piped = as_json("capture", "learnings", "Rust lifetimes", "--stdin", input="## Key insight\nborrowck\n")
    assert service.get_memory(str(piped["id"])).content == "## Key insight\nborrowck"
    bare = as_json("capture", "patterns", "Errors carry their exit code", "--domain", "user")
    assert bare["urn"] == f"nmem://user/patterns/{bare['id']}"
    assert service.get_memory(str(bare["id"])).content == "Errors carry their exit code"
    text = ok("capture", "blockers", "CI is red").stdout
    assert text.startswith("✓ Captured memory: blockers/") and "URI: nmem://project:demo/blockers/" in text
    assert invoke("capture", "decisions", "x", "--content", "a", "--stdin", input="b").exit_code == 2
    assert invoke("capture", "decisions").exit_code == 2


# -- recall ---------------------------------------------------------------------------------

@pytest.fixture
def memories(service: Service) -> dict[str, str]:
    wal = service.remember("SQLite WAL lets readers run during writes", summary="Use WAL",
                           namespace="decisions", tags=["sqlite", "storage"], project="demo")
    pg = service.remember("PostgreSQL for shared team databases", summary="Use PostgreSQL for teams",
                          namespace="decisions", tags=["storage"], project="demo")
    gotcha = service.remember("FTS5 needs balanced quotes", namespace="gotchas", tags=["sqlite"], domain="user")
    return {"wal": wal.id, "pg": pg.id, "gotcha": gotcha.id}


def test_recall_text_lists_memories(memories: dict[str, str]) -> None:
    result = ok("recall", "WAL")
    lines = result.stdout.splitlines()
    assert lines[0] == "Found 1 memory:"
    assert lines[2] == f"[1] decisions/{memories['wal']}  Use WAL"
    assert "tags:    sqlite, storage" in result.stdout
    assert stderr_lines(result) == ['nmem: 1 memories for "WAL"']


def test_recall_json_and_filters(memories: dict[str, str]) -> None:
    data = as_json("recall", "storage")
    assert data["query"] == "storage" and data["count"] == 2
    assert {r["id"] for r in data["results"]} == {memories["wal"], memories["pg"]}
    assert all(r["urn"].startswith("nmem://") for r in data["results"])

    def ids(*args: str) -> set[str]:
        return {r["id"] for r in as_json("recall", *args)["results"]}

    assert ids("--namespace", "gotchas") == {memories["gotcha"]}
    assert ids("--tag", "sqlite") == {memories["wal"], memories["gotcha"]}
    assert ids("--tag", "sqlite,storage") == {memories["wal"]}
    assert ids("--domain", "user") == {memories["gotcha"]}
    assert ids() == set(memories.values())
    assert len(ids("--limit", "1")) == 1
    assert ids("nothingsimilar") == set()


def test_recall_takes_plain_questions(memories: dict[str, str]) -> None:
    data = as_json("recall", "what did we decide about write-ahead WAL?")
    assert [r["id"] for r in data["results"]] == [memories["wal"]]


def test_recall_markdown_and_yaml(memories: dict[str, str]) -> None:
    md = ok("recall", "WAL", "--format", "markdown").stdout
    assert f"## [1] decisions/{memories['wal']} Use WAL" in md
    assert "- **urn**: nmem://project:demo/decisions/" in md
    data = yaml.safe_load(ok("recall", "WAL", "--format", "yaml").stdout)
    assert data["results"][0]["id"] == memories["wal"]


def test_recall_empty_and_archived(memories: dict[str, str], service: Service) -> None:
    assert ok("recall", "zzz").stdout == "No memories found.\n"
    service.update(memories["gotcha"], tier="archived")
    assert memories["gotcha"] not in {r["id"] for r in as_json("recall", "quotes")["results"]}
    assert [r["id"] for r in as_json("recall", "quotes", "--include-archived")["results"]] == [memories["gotcha"]]


# -- update, forget ---------------------------------------------------------------------------

def test_update_changes_fields(memories: dict[str, str], service: Service) -> None:
    urn = f"{URN_PREFIX}decisions/{memories['wal']}"
    data = as_json("update", urn, "--tier", "hot", "--tags", "a,b", "--summary", "WAL always")
    assert data["success"] is True and data["tier"] == "hot" and data["tags"] == ["a", "b"]
    text = ok("update", memories["wal"], "--stdin", input="New body\n").stdout
    assert text.startswith(f"Updated decisions/{memories['wal']}")
    memory = service.get_memory(memories["wal"])
    assert (memory.summary, memory.content, memory.tier) == ("WAL always", "New body", "hot")
    cleared = as_json("update", memories["wal"], "--tags", "")
    assert cleared["tags"] == []
    moved = as_json("update", memories["wal"], "--namespace", "learnings")
    assert moved["urn"] == f"{URN_PREFIX}learnings/{memories['wal']}"


def test_update_errors(memories: dict[str, str]) -> None:
    assert invoke("update", memories["wal"]).exit_code == 2          # nothing to change
    assert invoke("update", "01NOSUCHMEMORY", "--tier", "hot").exit_code == 10
    assert invoke("update", memories["wal"], "--summary", "s" * 101).exit_code == 11
    assert invoke("update", memories["wal"], "--content", "a", "--stdin", input="b").exit_code == 2


def test_forget_tombstones_the_memory(memories: dict[str, str], service: Service) -> None:
    urn = f"{URN_PREFIX}decisions/{memories['pg']}"
    assert ok("forget", urn).stdout == f"Forgot {urn}\n"
    assert memories["pg"] not in {r["id"] for r in as_json("recall")["results"]}
    assert invoke("get", memories["pg"]).exit_code == 10
    again = invoke("forget", urn)
    assert again.exit_code == 10
    assert stderr_lines(again) == [f"nmem: memory not found: {urn}"]
    data = as_json("forget", memories["wal"])
    assert data == {"success": True, "forgotten": True, "id": memories["wal"],
                    "urn": f"{URN_PREFIX}decisions/{memories['wal']}"}


# -- pin, unpin -------------------------------------------------------------------------------

def test_pin_and_unpin_observations_and_memories(service: Service, memories: dict[str, str]) -> None:
    history: History = seed(service)
    assert ok("pin", f"o{history.edit}").stdout == f"Pinned observation {history.edit}\n"
    assert service.get_observations([history.edit])[0].is_pinned
    data = as_json("unpin", f"#{history.edit}")
    assert data == {"success": True, "kind": "observation", "id": history.edit, "is_pinned": False}
    assert not service.get_observations([history.edit])[0].is_pinned

    urn = f"{URN_PREFIX}decisions/{memories['pg']}"
    assert ok("pin", urn).stdout == f"Pinned memory {urn}\n"
    assert service.get_memory(memories["pg"]).is_pinned
    assert ok("unpin", memories["pg"]).stdout == f"Unpinned memory {urn}\n"
    assert not service.get_memory(memories["pg"]).is_pinned


def test_pin_unknown_ids_exit_10(nmem_home: Path) -> None:
    missing_obs = invoke("pin", "o9999")
    assert missing_obs.exit_code == 10
    assert stderr_lines(missing_obs) == ["nmem: observation not found: o9999"]
    bare = invoke("pin", "9999")  # a bare number is a memory's, as recall shows it
    assert bare.exit_code == 10
    assert stderr_lines(bare) == ["nmem: memory not found: 9999 (a bare number is the `number` recall shows)"]
    assert invoke("unpin", "01NOSUCHMEMORY").exit_code == 10
    assert invoke("pin").exit_code == 2


def test_remember_then_search_memories_scope(service: Service) -> None:
    data = remember_json("Hooks never exit 2 on UserPromptSubmit", "-n", "gotchas")
    hits = json.loads(ok("search", "UserPromptSubmit", "--scope", "memories", "--format", "json").stdout)
    assert [h["id"] for h in hits] == [data["id"]]
