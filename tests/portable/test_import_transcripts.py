"""Backfill from Claude Code transcripts (`~/.claude/projects/<dir>/<session>.jsonl`).

The fixture transcript (tests/fixtures/transcript_import.jsonl) has a slash-command line,
user prompts as a string and as text blocks, thinking, one API message split over several
lines, tool_use/tool_result pairs (one failing), a sidechain line, a compact boundary with
its summary, metadata lines of unknown types, garbage lines and a partial last line.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

from conftest import run_nmem
from fixtures.harness import FIXTURES, counts, event, hook_env, hook_ok
from nmem.portable.sources.transcripts import find_transcripts, import_transcripts
from nmem.service.api import Service

TRANSCRIPT = FIXTURES / "transcript_import.jsonl"
SID = "imp-7f3c2a10-0b1d-4c55-9e2a-5d1f00c0ffee"
CWD = "/home/dev/code/ledger-api"


def epoch(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp())


def rows(service: Service, sql: str, *params: Any) -> list[dict[str, Any]]:
    cur = service.store._reader().execute(sql, params)  # type: ignore[attr-defined]
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def test_import_records_the_session_as_the_hooks_would_have(service: Service) -> None:
    report = import_transcripts(service, [TRANSCRIPT])
    assert report.to_dict() == {"files": 1, "imported_sessions": 1, "updated_sessions": 0, "skipped_sessions": 0,
                                "events": 14, "errors": []}

    (session,) = rows(service, "SELECT * FROM sessions")
    assert (session["id"], session["project"]) == (SID, "ledger-api")
    assert session["started_at"] == epoch("2026-11-02T09:00:01Z")
    assert session["ended_at"] == epoch("2026-11-02T09:31:07Z")

    obs = rows(service, "SELECT * FROM observations ORDER BY id")
    assert [(o["obs_type"], o["timestamp"]) for o in obs] == [
        ("session_start", epoch("2026-11-02T09:00:01Z")),
        ("file_read", epoch("2026-11-02T09:00:09Z")),
        ("command_error", epoch("2026-11-02T09:00:15Z")),
        ("file_edit", epoch("2026-11-02T09:00:21Z")),
        ("session_compact", epoch("2026-11-02T09:30:00Z")),
        ("git_commit", epoch("2026-11-02T09:31:05Z")),
    ]
    assert obs[1]["file_path"] == f"{CWD}/tests/test_balance.py"
    error = json.loads(obs[2]["metadata"])
    assert error["exit_code"] == 1 and "assert 28 == 29" in error["error"]
    assert obs[3]["file_path"] == f"{CWD}/src/ledger/balance.py"
    commit = json.loads(obs[5]["metadata"])
    assert (commit["sha"], commit["branch"]) == ("5e4d3c2", "main")
    assert commit["message"] == "fix: leap-year february balance"
    assert all("sidechain" not in o["content"] for o in obs), "subagent internals are not the parent's calls"

    prompts = rows(service, "SELECT id, source, content FROM prompts ORDER BY id")
    users = [p for p in prompts if p["source"] == "user"]
    assert [p["content"] for p in users] == ["why does the ledger balance test fail on leap years?",
                                             "commit the leap year fix"]
    assert [o["prompt_id"] for o in obs] == [None, users[0]["id"], users[0]["id"], users[0]["id"], None,
                                             users[1]["id"]]
    agent = [p["content"] for p in prompts if p["source"] != "user"]
    assert [p["source"] for p in prompts if p["source"] != "user"] == ["thinking", "agent", "thinking", "agent"]
    assert agent == ["Leap years: February has 29 days; the fixture probably hard-codes 28.",
                     "The fixture hard-codes 28 days; I'll use calendar.monthrange.",   # said between tool calls
                     "Stage only balance.py; the lockfile change is unrelated.",
                     "Committed 5e4d3c2: February balances now use calendar.monthrange."]
    said_mid_turn = next(p for p in prompts if p["content"].startswith("The fixture hard-codes"))
    assert users[0]["id"] < said_mid_turn["id"] < users[1]["id"], "a reply follows the prompt of its turn"

    summary = json.loads(session["summary"])
    assert summary["files_changed"] == [f"{CWD}/src/ledger/balance.py"]
    assert summary["commits"] == ["5e4d3c2 fix: leap-year february balance"]
    assert summary["errors"] == ["pytest tests/test_balance.py -q"]
    assert json.loads(session["signature"])["compactions"] == 1
    (checkpoint,) = rows(service, "SELECT namespace, summary, tags FROM memories")
    assert checkpoint["namespace"] == "progress" and checkpoint["summary"].startswith("Checkpoint before compaction")


def test_imported_reasoning_is_not_duplicated(service: Service) -> None:
    import_transcripts(service, [TRANSCRIPT])
    agent = [p["content"] for p in rows(service, "SELECT content FROM prompts WHERE source <> 'user'")]
    assert len(agent) == len(set(agent)), f"agent prompts stored twice: {agent}"


def test_reimport_is_idempotent(service: Service) -> None:
    import_transcripts(service, [TRANSCRIPT])
    before = counts(Path(service.settings.home))
    report = import_transcripts(service, [TRANSCRIPT, TRANSCRIPT])
    assert (report.imported, report.updated, report.skipped, report.events) == (0, 0, 2, 0)
    assert counts(Path(service.settings.home)) == before


def test_a_session_captured_live_is_skipped(service: Service, nmem_home: Path) -> None:
    hook_ok(nmem_home, event("SessionStart", SID, CWD, source="startup"))
    hook_ok(nmem_home, event("UserPromptSubmit", SID, CWD, prompt="why does the ledger balance test fail?"))
    before = counts(nmem_home)
    report = import_transcripts(service, [TRANSCRIPT])
    assert (report.imported, report.updated, report.skipped) == (0, 0, 1)
    assert counts(nmem_home) == before


def test_unreadable_and_empty_transcripts_are_tolerated(service: Service, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(b"\x00\xff not json\n{\"type\": \"user\"\n[]\n")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    missing = tmp_path / "missing.jsonl"
    no_cwd = tmp_path / "no-cwd.jsonl"
    no_cwd.write_text(json.dumps({"type": "user", "sessionId": "x", "message": {"content": "hi"}}) + "\n",
                      encoding="utf-8")
    report = import_transcripts(service, [garbage, empty, missing, no_cwd, TRANSCRIPT])
    assert report.imported == 1 and report.files == 5
    assert counts(Path(service.settings.home))["sessions"] == 1


def test_find_transcripts_skips_subagent_files(tmp_path: Path) -> None:
    root = tmp_path / "projects"
    project_dir = root / "-home-dev-code-ledger-api"
    (project_dir / SID / "subagents").mkdir(parents=True)
    shutil.copy(TRANSCRIPT, project_dir / f"{SID}.jsonl")
    shutil.copy(TRANSCRIPT, project_dir / SID / "subagents" / "agent-x.jsonl")
    (project_dir / "notes.txt").write_text("not a transcript", encoding="utf-8")
    assert find_transcripts(root) == [project_dir / f"{SID}.jsonl"]
    assert find_transcripts(project_dir) == [project_dir / f"{SID}.jsonl"]
    assert find_transcripts(project_dir / f"{SID}.jsonl") == [project_dir / f"{SID}.jsonl"]
    assert find_transcripts(tmp_path / "nowhere") == []


def test_progress_callback_sees_every_file(service: Service, tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    other.write_text(TRANSCRIPT.read_text(encoding="utf-8").replace(SID, "imp-second"), encoding="utf-8")
    seen: list[Path] = []
    report = import_transcripts(service, [TRANSCRIPT, other], progress=seen.append)
    assert seen == [TRANSCRIPT, other]
    assert report.imported == 2
    assert {r["id"] for r in rows(service, "SELECT id FROM sessions")} == {SID, "imp-second"}


def test_cli_import(tmp_path: Path) -> None:
    home = tmp_path / "home"
    root = tmp_path / "projects" / "-home-dev-code-ledger-api"
    root.mkdir(parents=True)
    shutil.copy(TRANSCRIPT, root / f"{SID}.jsonl")
    first = run_nmem(["import", "claude-code", str(tmp_path / "projects"), "--format", "json"], env=hook_env(home))
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert (report["imported_sessions"], report["events"]) == (1, 14)
    assert counts(home)["observations"] == 6
    again = run_nmem(["import", "claude-code", str(root), "--format", "json"], env=hook_env(home))
    assert again.returncode == 0 and json.loads(again.stdout)["skipped_sessions"] == 1
    assert counts(home)["observations"] == 6
