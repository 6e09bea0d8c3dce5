"""docs/json.md is the JSON contract: every key a command prints must be named there."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import record
from nmem.service.api import Service
from sync_support import bare_remote
from test_cli_support import AUTH_FILE, CWD, as_json, ok, seed

JSON_DOC = Path(__file__).resolve().parents[3] / "docs" / "json.md"
# Objects keyed by data (types, namespaces, projects...) rather than by a fixed schema.
DATA_KEYED = {"metadata", "by_obs_type", "by_namespace", "by_tier", "by_project", "by_domain", "events", "projects",
              "fts", "policy", "by_type", "tiers", "tables"}


def sections() -> dict[str, str]:
    text = JSON_DOC.read_text(encoding="utf-8")
    parts = re.split(r"^## ", text, flags=re.MULTILINE)
    return {part.splitlines()[0].strip(): part for part in parts[1:]}


def keys(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(key, where) for every object key, recursively, skipping data-keyed objects' keys."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield key, f"{path}.{key}"
            if key not in DATA_KEYED:
                yield from keys(inner, f"{path}.{key}")
    elif isinstance(value, list):
        for item in value:
            yield from keys(item, f"{path}[]")


@pytest.fixture
def populated(service: Service, tmp_path: Path) -> dict[str, str]:
    history = seed(service)
    record(service, "SessionEnd", session_id="s1", cwd=CWD, reason="logout")
    memory = service.remember("Use WAL", namespace="decisions", tags=["sqlite"], project="demo")
    spare = service.remember("Spare one", namespace="learnings", project="demo")
    remote = bare_remote(Path(service.settings.home).parent / "sync-remote.git")
    graph = tmp_path / "memory.jsonl"
    graph.write_text('{"type": "entity", "name": "Ada", "entityType": "person", "observations": ["likes tests"]}\n',
                     encoding="utf-8")
    return {"obs": str(history.edit), "memory": memory.id, "spare": spare.id, "graph": str(graph),
            "backup": str(tmp_path / "backup.db"), "remote": str(remote)}


def commands(ids: dict[str, str]) -> list[tuple[str, list[str]]]:
    """(docs section, command line) pairs covering every command's JSON shape."""
    return [
        ("nmem search", ["search", "auth", "--scope", "all"]),
        ("nmem search", ["search", "auth", "--scope", "all", "--full"]),
        ("nmem search", ["search", "--scope", "sessions", "--full"]),
        ("nmem get", ["get", ids["obs"], ids["memory"], "p1", "ss1"]),
        ("nmem sessions", ["sessions", "--all"]),
        ("nmem timeline", ["timeline", ids["obs"]]),
        ("nmem trace", ["trace", "s1"]),
        ("nmem file-history", ["file-history", AUTH_FILE]),
        ("nmem context", ["context", "--project", "demo"]),
        ("nmem status", ["status"]),
        ("nmem remember, capture, update", ["remember", "Another one", "-n", "gotchas"]),
        ("nmem remember, capture, update", ["capture", "decisions", "Short"]),
        ("nmem remember, capture, update", ["update", ids["memory"], "--tier", "hot"]),
        ("nmem recall", ["recall", "WAL"]),
        ("nmem pin, unpin", ["pin", ids["memory"]]),
        ("nmem pin, unpin", ["unpin", f"o{ids['obs']}"]),
        ("nmem forget", ["forget", ids["spare"]]),
        ("nmem purge", ["purge", "--id", "9999", "--confirm"]),
        ("nmem purge", ["purge", "--query", "nothing matches this", "--confirm"]),
        ("nmem index", ["index", "--backend", "hashing"]),
        ("nmem export", ["export", "--trail", "--tombstones"]),  # --format json: the document itself
        ("nmem import", ["import", "mcp-memory", ids["graph"]]),
        ("nmem backup", ["backup", ids["backup"]]),
        ("nmem restore", ["restore", ids["backup"]]),
        ("nmem config show", ["config", "show"]),
        ("nmem config get", ["config", "get", "cli.format"]),
        ("nmem config set", ["config", "set", "search.default_limit", "30"]),
        ("nmem config path", ["config", "path"]),
        ("nmem sync", ["sync", "--remote", ids["remote"]]),
        ("nmem sweep", ["sweep", "--dry-run"]),
        ("nmem sweep", ["sweep"]),
        ("nmem remember, capture, update", ["remember", "Use WAL mode", "-n", "decisions"]),
        ("nmem consolidate", ["consolidate", "--dry-run"]),
        ("nmem consolidate", ["consolidate"]),
        ("nmem consolidate", ["consolidate", "--runs"]),
        ("nmem consolidate", ["consolidate", "--undo", "1"]),
        ("nmem encrypt, decrypt", ["encrypt", "--generate-key"]),
        ("nmem encrypt, decrypt", ["decrypt", "--keep-backup"]),
    ]


def test_every_json_key_is_documented(populated: dict[str, str]) -> None:
    docs = sections()
    records = docs["Records"]
    seen_sections = set()
    for section, args in commands(populated):
        assert section in docs, f"docs/json.md has no '## {section}' section"
        seen_sections.add(section)
        allowed = docs[section] + records
        for key, where in keys(as_json(*args)):
            assert f"`{key}`" in allowed, f"`nmem {' '.join(args)}` prints {where}, not in docs/json.md"
    command_sections = {name for name in docs if name.startswith("nmem ")}
    assert command_sections == seen_sections  # every documented command is exercised


def test_session_summary_keys_are_documented_once_closed(populated: dict[str, str]) -> None:
    [session] = [h for h in as_json("search", "--scope", "sessions", "--full") if h["id"] == "s1"]
    assert isinstance(session["summary"], dict) and isinstance(session["signature"], dict)
    assert session["summary"]["intent"] == "fix the flaky auth test"


def test_export_and_import_summaries_are_documented(populated: dict[str, str], tmp_path: Path) -> None:
    """Their --format names the file's format, so the summary's format is the global one."""
    docs = sections()
    target = str(tmp_path / "all.md")
    for section, args in [("nmem export", ["export", "-o", target, "--trail"]), ("nmem import", ["import", target])]:
        printed = json.loads(ok("--format", "json", *args).stdout)
        for key, where in keys(printed):
            assert f"`{key}`" in docs[section], f"`nmem {' '.join(args)}` prints {where}, not in docs/json.md"
