"""`nmem export` and `nmem import FILE`: every format round-trips, imports are idempotent,
bad input changes nothing. Everything runs through the CLI, on real SQLite files."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import Clock, record
from nmem.service.api import Service
from test_cli_support import CWD, invoke, ok, seed

FORMATS = ("jsonl", "json", "yaml", "markdown")
EXTENSION = {"jsonl": "jsonl", "json": "json", "yaml": "yml", "markdown": "md"}
# Content that looks like each format's own syntax, so a careless writer would break on it.
AWKWARD = ("Line one\n<!-- nmem:memory -->\n\\<!-- nmem:session -->\n```\n```yaml\n---\nkey: value\n- item\n"
           "  indented  \n\ttabbed\r\ncarriage\n{\"kind\": \"memory\"}\n…unicode ✓ 日本語\n\n\nlast")


def populate(service: Service) -> dict[str, str]:
    """Trail in two projects, memories of every shape: tagged, related, pinned, archived,
    updated, accessed, forgotten, user-wide, with awkward text."""
    seed(service)
    record(service, "SessionEnd", session_id="s1", cwd=CWD, reason="logout")
    service.pin("o2")
    wal = service.remember("Use WAL mode\n\nReaders never block writers.", namespace="decisions",
                           tags=["sqlite", "db"], project="demo", source="session:s1")
    awkward = service.remember(AWKWARD, summary="Awkward: --- ``` <!-- nmem", namespace="gotchas", project="demo",
                               relates_to=[wal.id])
    service.remember("Prefer tabs in Makefiles", namespace="conventions", domain="user", tier="cold", pinned=True)
    service.remember("Old idea", namespace="learnings", project="demo", tier="archived")
    gone = service.remember("Wrong: use DELETE journal", namespace="decisions", project="demo")
    service.update(wal.id, tags=["sqlite", "wal"])
    service.recall("WAL")  # an access: accessed_at and access_count travel too
    service.forget(gone.id)
    return {"wal": wal.id, "awkward": awkward.id, "gone": gone.id}


def export(home: Path | None, *args: str) -> str:
    prefix = ["--home", str(home)] if home else []
    return ok(*prefix, "export", *args).stdout


def db_rows(home: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(home / "nmem.db")
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_round_trips_byte_for_byte(service: Service, tmp_path: Path, fmt: str) -> None:
    populate(service)
    first = tmp_path / f"first.{EXTENSION[fmt]}"
    ok("export", "--trail", "--tombstones", "-o", str(first))  # format from the extension
    empty = tmp_path / "empty-home"
    imported = json.loads(ok("--home", str(empty), "--format", "json", "import", str(first)).stdout)
    assert imported["format"] == fmt
    assert imported["imported"]["memories"] == {"added": 4, "updated": 0, "deleted": 1, "unchanged": 0, "kept": 0}
    assert imported["imported"]["sessions"]["added"] == 2
    again = export(empty, "--trail", "--tombstones", "--format", fmt)
    assert again == first.read_text(encoding="utf-8")

    # the copy is the same data, not just the same text: the awkward memory, times, pins, ids
    original = json.loads(export(None, "--trail", "--tombstones", "--format", "json"))
    copy = json.loads(export(empty, "--trail", "--tombstones", "--format", "json"))
    assert copy == original
    assert AWKWARD.strip() in [m["content"] for m in copy["memories"]]
    assert db_rows(empty, "SELECT count(*) FROM observations WHERE is_pinned = 1") == [(1,)]
    assert db_rows(empty, "SELECT count(*) FROM memories WHERE deleted_at IS NOT NULL") == [(1,)]


@pytest.mark.parametrize("fmt", FORMATS)
def test_importing_the_same_file_twice_adds_nothing(service: Service, tmp_path: Path, fmt: str) -> None:
    populate(service)
    path = tmp_path / f"all.{EXTENSION[fmt]}"
    ok("export", "--trail", "--tombstones", "-o", str(path))
    # into the database it came from: everything is already there
    same = json.loads(ok("--format", "json", "import", str(path)).stdout)["imported"]
    assert same["memories"]["added"] == same["memories"]["updated"] == 0
    assert same["memories"]["unchanged"] == 5
    assert same["prompts"]["added"] == same["observations"]["added"] == same["sessions"]["added"] == 0
    counts = ("SELECT (SELECT count(*) FROM memories), (SELECT count(*) FROM prompts), "
              "(SELECT count(*) FROM observations)")
    before = db_rows(Path(service.settings.home), counts)
    ok("import", str(path))
    assert db_rows(Path(service.settings.home), counts) == before


def test_export_filters(service: Service, clock: Clock) -> None:
    ids = populate(service)
    clock.advance(3600)
    later = service.remember("Late learning", namespace="learnings", project="other")
    decisions = json.loads(export(None, "--format", "json", "--namespace", "decisions"))
    assert [m["uid"] for m in decisions["memories"]] == [ids["wal"]]  # the forgotten one needs --tombstones
    assert "sessions" not in decisions, "the trail only with --trail"
    users = json.loads(export(None, "--format", "json", "--domain", "user"))["memories"]
    assert {m["domain"] for m in users} == {"user"}
    here = service.project_for()
    mine = service.remember("Here", namespace="context", project=here)
    assert [m["uid"] for m in json.loads(export(None, "--format", "json", "--domain", "project"))["memories"]] == [
        mine.id]  # `project` is the current project
    other = json.loads(export(None, "--format", "json", "--project", "other", "--trail"))
    assert [m["uid"] for m in other["memories"]] == [later.id]
    assert [s["id"] for s in other["sessions"]] == ["s2"]
    assert {o["session_id"] for o in other["observations"]} == {"s2"}
    recent = json.loads(export(None, "--format", "json", "--since", str(clock.now - 60)))
    assert [m["uid"] for m in recent["memories"]] == sorted([later.id, mine.id])


def test_since_keeps_the_prompts_its_observations_followed(service: Service) -> None:
    t = 1_790_000_000
    record(service, "UserPromptSubmit", now=t, session_id="s9", cwd=CWD, prompt="fix the login bug")
    record(service, "PostToolUse", now=t + 500, session_id="s9", cwd=CWD, tool_name="Bash",
           tool_input={"command": "pytest"}, tool_response={"stdout": "ok", "exit_code": 0})
    out = json.loads(export(None, "--format", "json", "--trail", "--since", str(t + 100)))
    assert [p["content"] for p in out["prompts"]] == ["fix the login bug"]
    assert [o["prompt_seq"] for o in out["observations"]] == [1]


def test_a_newer_copy_wins_and_an_older_one_is_kept(service: Service, clock: Clock, tmp_path: Path) -> None:
    memory = service.remember("Cache for 60 seconds", namespace="decisions", project="demo")
    old = tmp_path / "old.json"
    ok("export", "-o", str(old))
    clock.advance(100)
    service.update(memory.id, content="Cache for 3600 seconds")
    newer = tmp_path / "newer.json"
    ok("export", "-o", str(newer))

    # ours is newer than the old file: kept
    result = json.loads(ok("--format", "json", "import", str(old)).stdout)["imported"]["memories"]
    assert result["kept"] == 1 and service.get_memory(memory.id).content == "Cache for 3600 seconds"

    # another database holding the old version takes the newer one
    other = tmp_path / "other"
    ok("--home", str(other), "import", str(old))
    result = json.loads(ok("--home", str(other), "--format", "json", "import", str(newer)).stdout)["imported"]
    assert result["memories"]["updated"] == 1
    copy = json.loads(export(other, "--format", "json"))["memories"][0]
    assert (copy["content"], copy["updated_at"]) == ("Cache for 3600 seconds", int(clock.now))

    # a tombstone that is newer forgets it there too
    clock.advance(100)
    service.forget(memory.id)
    gone = tmp_path / "gone.jsonl"
    ok("export", "--tombstones", "-o", str(gone))
    result = json.loads(ok("--home", str(other), "--format", "json", "import", str(gone)).stdout)["imported"]
    assert result["memories"]["deleted"] == 1
    assert json.loads(export(other, "--format", "json"))["memories"] == []


def test_batch_capture_from_hand_written_yaml_on_stdin(service: Service) -> None:
    text = """\
- namespace: decisions
  summary: Use PostgreSQL for the data layer
  content: |
    We need JSONB and row-level locks.
  tags: [db, postgres]
- content: Lint with ruff
  namespace: convention
  domain: user
  created_at: 2026-01-15
"""
    first = json.loads(ok("--format", "json", "import", "--format", "yaml", input=text).stdout)
    assert first["file"] == "-" and first["imported"]["memories"]["added"] == 2
    again = json.loads(ok("--format", "json", "import", "--format", "yaml", input=text).stdout)
    assert again["imported"]["memories"] == {"added": 0, "updated": 0, "deleted": 0, "unchanged": 2, "kept": 0}
    hits = {h.record.summary: h.record for h in service.recall(None, domain="all", limit=10)}
    pg = hits["Use PostgreSQL for the data layer"]
    assert (pg.namespace, pg.tags, pg.domain) == ("decisions", ["db", "postgres"], f"project:{service.project_for()}")
    ruff = hits["Lint with ruff"]
    assert (ruff.namespace, ruff.domain, ruff.created_at) == ("conventions", "user", 1768435200)


def test_get_output_imports_too(service: Service, tmp_path: Path) -> None:
    memory = service.remember("Pin the CI image", namespace="decisions", project="demo")
    shown = ok("get", memory.id, "--format", "json").stdout
    other = tmp_path / "other"
    result = json.loads(ok("--home", str(other), "--format", "json", "import", "--format", "json", input=shown).stdout)
    assert result["imported"]["memories"]["added"] == 1
    assert json.loads(export(other, "--format", "json"))["memories"][0]["uid"] == memory.id


BAD_INPUTS = [
    ("jsonl", '{"kind": "memory", "content": "fine"}\n{"kind": "memory", "content": "x", "tagz": ["a"]}\n',
     "line 2: unknown memory field 'tagz'"),
    ("jsonl", '{"kind": "memory", "content": "fine"}\nnot json\n', "line 2: not a JSON object"),
    ("jsonl", '{"kind": "nmem_export", "version": 9}\n', "version 9 is not one this nmem reads"),
    ("json", '{"memories": [{"content": "ok"}, {"content": ""}]}', "memories[1]: content is required"),
    ("json", '{"memories": [{"content": "ok", "tier": "lukewarm"}]}', "memories[0]: invalid tier 'lukewarm'"),
    ("json", '{"memories": [{"content": "ok", "uid": "not-a-ulid"}]}', "memories[0]: invalid memory id"),
    ("json", '{"memories": [{"content": "ok", "updated_at": "yesterday-ish"}]}', "memories[0]: updated_at"),
    ("json", '{"prompts": [{"session_id": "nope", "seq": 1, "timestamp": 1, "content": "x"}]}',
     "prompts[0]: session 'nope' is not in the file"),
    ("yaml", "memories:\n  - content: [unclosed\n", "not valid YAML"),
    ("markdown", "# my notes\n\nsome text\n", "not an nmem markdown export"),
    ("markdown", "<!-- nmem-export version=1 -->\n<!-- nmem:memory -->\n## x\n\n```yaml\nuid: 1\n",
     "never closed"),
]


@pytest.mark.parametrize(("fmt", "text", "message"), BAD_INPUTS)
def test_bad_input_is_a_clear_error_and_changes_nothing(service: Service, fmt: str, text: str, message: str) -> None:
    result = invoke("import", "--format", fmt, input=text)
    assert result.exit_code in (2, 11), result.stderr
    assert message in result.stderr
    assert result.stderr.startswith("nmem: standard input: ")
    assert db_rows(Path(service.settings.home), "SELECT count(*) FROM memories") == [(0,)]


def test_import_needs_a_format_it_can_tell(service: Service, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello", encoding="utf-8")
    result = invoke("import", str(notes))
    assert result.exit_code == 2 and "cannot tell the format" in result.stderr
    assert "--format" in invoke("import", input="{}").stderr
    assert invoke("import", str(tmp_path / "missing.json")).exit_code == 2


def test_export_to_a_file_is_private_and_complete(service: Service, tmp_path: Path) -> None:
    populate(service)
    target = tmp_path / "out.yaml"
    summary = json.loads(ok("--format", "json", "export", "-o", str(target), "--trail").stdout)
    assert summary == {"format": "yaml", "output": str(target), "memories": 4, "tombstones": 0, "sessions": 2,
                       "prompts": 1, "observations": 7}
    assert target.stat().st_mode & 0o777 == 0o600
    assert yaml.safe_load(target.read_text(encoding="utf-8"))["nmem_export"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nmem-home", "out.yaml"], "no temporary file left"


def test_export_to_stdout_keeps_its_summary_on_stderr(service: Service) -> None:
    populate(service)
    result = ok("export", "--trail")
    lines = result.stdout.splitlines()
    assert json.loads(lines[0]) == {"kind": "nmem_export", "version": 1}
    assert all(json.loads(line)["kind"] in ("memory", "session", "prompt", "observation") for line in lines[1:])
    assert result.stderr.strip() == "nmem: exported 4 memories, 2 sessions (1 prompt, 7 observations) as jsonl"


def test_import_claude_code_keeps_its_shape(nmem_home: Path) -> None:
    assert "Backfill from Claude Code transcripts" in ok("import", "claude-code", "--help").stdout
    group = ok("import", "--help").stdout
    for line in ("nmem import FILE", "claude-code", "claude-mem", "mcp-memory"):
        assert line in group


def test_markdown_survives_a_crlf_conversion_and_takes_hand_written_sections(service: Service,
                                                                              tmp_path: Path) -> None:
    service.remember("Line A\nLine B", namespace="learnings", project="demo")
    text = export(None, "--format", "markdown")
    other = tmp_path / "other"
    ok("--home", str(other), "import", "--format", "markdown", input=text.replace("\n", "\r\n"))
    assert export(other, "--format", "markdown") == text

    by_hand = text + ("<!-- nmem:memory -->\n## Run tests with -x\n\n```yaml\nnamespace: conventions\nproject: demo\n"
                      "tags: [pytest]\n```\n\nStop at the first failure.\n")
    result = json.loads(ok("--format", "json", "import", "--format", "markdown", input=by_hand).stdout)
    assert result["imported"]["memories"] == {"added": 1, "updated": 0, "deleted": 0, "unchanged": 1, "kept": 0}
    (hit,) = service.recall("first failure", project="demo")
    assert (hit.record.summary, hit.record.namespace, hit.record.tags) == (
        "Run tests with -x", "conventions", ["pytest"])


def test_an_imported_tombstone_forgets_the_text_from_the_files_and_is_logged_for_sync(
        service: Service, clock: Clock, tmp_path: Path) -> None:
    """Imports write memories like any other write: logged for sync, and a tombstone leaves no
    trace of the text in the database or its WAL."""
    word = "marmotquill"
    memory = service.remember(f"the staging vault hint is {word}", namespace="gotchas", project="demo")
    copy = tmp_path / "copy.jsonl"
    ok("export", "-o", str(copy))
    other = tmp_path / "other"
    ok("--home", str(other), "import", str(copy))
    db = other / "nmem.db"

    def raw() -> bytes:
        wal = db.with_name("nmem.db-wal")
        return db.read_bytes() + (wal.read_bytes() if wal.exists() else b"")

    assert word.encode() in raw()
    ops = db_rows(other, "SELECT uid, line FROM sync_ops")
    assert [uid for uid, _ in ops] == [memory.id]  # the import is logged for sync
    clock.advance(100)
    service.forget(memory.id)
    gone = tmp_path / "gone.jsonl"
    ok("export", "--tombstones", "-o", str(gone))
    ok("--home", str(other), "import", str(gone))
    assert word.encode() not in raw()
    assert [json.loads(line)["op"] for _, line in db_rows(other, "SELECT uid, line FROM sync_ops")] == ["delete"]
