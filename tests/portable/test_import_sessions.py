"""`nmem import claude-code` on transcript trees shaped like Claude Code's (bench/cc_transcripts.py):
subagent work under its session, what counts as an intent, compactions as checkpoints, and
imports that append only what a transcript gained, also after the hooks captured it live."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import load_bench
from fixtures.harness import counts, hook_env, hook_ok, query
from nmem.capture.transcript import TranscriptCursor, TranscriptReplay
from nmem.portable.sources.transcripts import find_transcripts, import_transcripts
from nmem.service.api import Service
from store_engines import both_engines, sql_dicts
from test_cli_support import ok

__all__ = ["both_engines"]  # every test here runs on SQLite and PostgreSQL

cc = load_bench("cc_transcripts")
T0 = 1_790_000_000
CWD = "/home/dev/code/ledger-api"


def epoch(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp())


def rows(service: Service, sql: str, *params: Any) -> list[dict[str, Any]]:
    return sql_dicts(service.store, sql, *params)


def observations(service: Service) -> list[dict[str, Any]]:
    found = rows(service, "SELECT * FROM observations ORDER BY timestamp, id")
    for row in found:
        row["metadata"] = json.loads(row["metadata"]) if row["metadata"] else {}
    return found


def user_prompts(service: Service) -> list[str]:
    return [r["content"] for r in rows(service, "SELECT content FROM prompts WHERE source = 'user' ORDER BY id")]


def work_with_a_subagent(tree: Any, layout: str, start: float = T0) -> Any:
    s = tree.session(CWD, start=start, subagent_layout=layout)
    s.prompt("why does the balance test fail on leap years?")
    s.bash("pytest tests/test_balance.py -q", stdout="1 failed, 4 passed", exit_code=1)
    with s.subagent("Find date helpers", "List every helper that builds month ranges") as agent:
        agent.thinking("Grep for monthrange first.")
        agent.tool("Grep", {"pattern": "monthrange", "output_mode": "files_with_matches"},
                   result="Found 1 file\nsrc/ledger/dates.py",
                   tool_use_result={"mode": "files_with_matches", "filenames": ["src/ledger/dates.py"],
                                    "numFiles": 1})
        agent.read(f"{CWD}/src/ledger/dates.py", "def month_range(y, m):\n    return 28")
        agent.say("dates.py hard-codes 28 days for February.")
    s.edit(f"{CWD}/src/ledger/dates.py", "return 28", "return calendar.monthrange(y, m)[1]")
    s.say("Fixed: month_range uses calendar.monthrange.")
    s.save()
    return s


@pytest.mark.parametrize("layout", ["subagents", "project-dir", "inline"])
def test_subagent_work_is_recorded_under_the_parent_session(service: Service, tmp_path: Path, layout: str) -> None:
    tree = cc.Projects(tmp_path / "projects")
    s = work_with_a_subagent(tree, layout)
    assert find_transcripts(tree.root) == [s.path], "subagent files are not sessions of their own"
    report = import_transcripts(service, find_transcripts(tree.root))
    assert (report.imported, report.errors) == (1, [])

    assert [r["id"] for r in rows(service, "SELECT id FROM sessions")] == [s.session_id]
    obs = observations(service)
    kinds = [(o["obs_type"], o["metadata"].get("agent_id")) for o in obs]
    agent_id = next(a for _, a in kinds if a)
    assert kinds == [("session_start", None), ("command_error", None), ("search", agent_id),
                     ("file_read", agent_id), ("task_spawn", None), ("file_edit", None)]
    assert obs[2]["file_path"] is None and "monthrange" in obs[2]["content"]
    assert obs[3]["file_path"] == f"{CWD}/src/ledger/dates.py"
    assert obs[4]["content"].startswith("Find date helpers"), "the parent keeps its Task call"
    # the subagent's task prompt is not the user's, its thinking not the session's; its answer is kept
    assert user_prompts(service) == ["why does the balance test fail on leap years?"]
    said = {r["content"]: r["source"] for r in rows(service, "SELECT source, content FROM prompts "
                                                             "WHERE source <> 'user' ORDER BY id")}
    assert "Grep for monthrange first." not in said
    assert said["dates.py hard-codes 28 days for February."].startswith("subagent"), "a subagent's, labelled so"
    assert list(said.items())[-1] == ("Fixed: month_range uses calendar.monthrange.", "agent")


def test_slash_commands_keep_their_arguments_and_notices_are_not_intents(service: Service, tmp_path: Path) -> None:
    tree = cc.Projects(tmp_path / "projects")
    s = tree.session(CWD, start=T0)
    s.local_command("clear")
    s.prompt("add a test for the leap-year balance")
    s.system_reminder("The TodoWrite tool hasn't been used recently.")
    s.bash("pytest -q", stdout="5 passed")
    s.interrupt()
    s.interrupt(for_tool_use=True)
    s.task_notification("b91x", 'Background command "npm run build" completed (exit code 0)', tool_use_id="toolu_1")
    s.local_command("model", "opus", stdout="Set model to opus (claude-opus-4-1)")
    s.slash_command("review", "src/api.py", expansion="Review the given file for correctness bugs.")
    s.thinking("Reading src/api.py first.")
    s.read(f"{CWD}/src/api.py", "def handler(): ...")
    s.say("One bug: the handler swallows errors.")
    s.slash_command("pr-comments", expansion="Answer the open review comments.")  # never answered
    s.prompt("thanks")
    s.say("You're welcome.")
    s.save()

    import_transcripts(service, [s.path])
    assert user_prompts(service) == ["add a test for the leap-year balance", "/review src/api.py", "thanks"]
    read = next(o for o in observations(service) if o["obs_type"] == "file_read")
    review = rows(service, "SELECT id FROM prompts WHERE content = '/review src/api.py'")[0]["id"]
    assert read["prompt_id"] == review, "the command's work hangs off the command"


def test_the_hook_path_sees_the_same_intents(tmp_path: Path) -> None:
    """The same session replayed through real hook processes stores the same user prompts."""
    tree = cc.Projects(tmp_path / "projects")
    s = tree.session(CWD, start=T0)
    s.prompt("add a test for the leap-year balance")
    s.interrupt()
    s.slash_command("review", "src/api.py", expansion="Review the given file.")
    s.say("Reviewed.")
    s.save()
    hooked = tmp_path / "hooked"
    for payload in s.hook_payloads():
        hook_ok(hooked, payload)
    imported = tmp_path / "imported"
    ok("import", "claude-code", str(s.path), env=hook_env(imported))
    prompts = "SELECT content FROM prompts WHERE source = 'user' ORDER BY id"
    assert [r["content"] for r in query(imported, prompts)] == [r["content"] for r in query(hooked, prompts)] == [
        "add a test for the leap-year balance", "/review src/api.py"]


def test_a_compaction_becomes_a_checkpoint_as_precompact_makes_one(service: Service, tmp_path: Path) -> None:
    tree = cc.Projects(tmp_path / "projects")
    s = tree.session(CWD, start=T0)
    s.prompt("fix the leap-year balance")
    s.edit(f"{CWD}/src/ledger/balance.py", "28", "monthrange(y, 2)[1]")
    s.compact("1. Primary request: fix the leap-year balance.\n2. Pending: run the full suite.", pre_tokens=150_000)
    s.prompt("run the full suite")
    s.bash("pytest -q", stdout="40 passed")
    s.compact("1. The suite passes.", trigger="manual")
    s.save()

    import_transcripts(service, [s.path])
    compacts = [o["timestamp"] for o in observations(service) if o["obs_type"] == "session_compact"]
    boundaries = [line["timestamp"] for line in cc.lines_of(s.path) if line.get("subtype") == "compact_boundary"]
    assert compacts == [epoch(t) for t in boundaries] and len(compacts) == 2
    memories = rows(service, "SELECT namespace, summary, content, tags FROM memories ORDER BY id")
    assert [m["namespace"] for m in memories] == ["progress", "progress"]
    assert memories[0]["summary"] == "Checkpoint before compaction: fix the leap-year balance"
    assert memories[0]["content"].startswith("1. Primary request: fix the leap-year balance.")
    assert "This session is being continued" not in memories[0]["content"]
    assert json.loads(memories[0]["tags"]) == ["checkpoint", "compact-auto"]
    assert json.loads(memories[1]["tags"]) == ["checkpoint", "compact-manual"]
    assert memories[1]["content"] == "1. The suite passes."
    assert memories[1]["summary"] == "Checkpoint before compaction: run the full suite", "named after the latest intent"
    assert "/compact" not in user_prompts(service), "a /compact command prompts nobody"


def write_without_last_lines(path: Path, n: int) -> bytes:
    """Cut the last n lines off (as if Claude Code had not written them yet); returns them."""
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    cut = b"".join(lines[-n:])
    path.write_bytes(data[: len(data) - len(cut)])
    return cut


def test_a_grown_transcript_adds_only_its_new_events(service: Service, tmp_path: Path) -> None:
    tree = cc.Projects(tmp_path / "projects")
    s = work_with_a_subagent(tree, "subagents")
    # the last turn's tool call is running: its result line is not written yet
    s.prompt("now run the whole suite")
    s.bash("pytest -q", stdout="41 passed")
    s.save()
    tail = write_without_last_lines(s.path, 1)

    first = import_transcripts(service, [s.path])
    assert (first.imported, first.errors) == (1, [])
    before = observations(service)
    assert [o["obs_type"] for o in before][-1] == "file_edit"
    assert user_prompts(service)[-1] == "now run the whole suite"

    with s.path.open("ab") as fh:
        fh.write(tail[: len(tail) // 2])          # the result line, half written
    assert import_transcripts(service, [s.path]).to_dict()["events"] == 0
    with s.path.open("ab") as fh:
        fh.write(tail[len(tail) // 2:])
    with s.subagent("Check the changelog", "Is the fix in CHANGELOG.md?") as agent:
        agent.read(f"{CWD}/CHANGELOG.md", "## Unreleased\n- leap-year fix")
        agent.say("Yes.")
    s.slash_command("review", "src/ledger/dates.py", expansion="Review the file.")
    s.say("Looks right.")
    s.save()

    second = import_transcripts(service, [s.path])
    assert (second.imported, second.updated, second.errors) == (0, 1, [])
    after = observations(service)
    assert after[: len(before)] == before, "nothing recorded before changes"
    added = [(o["obs_type"], bool(o["metadata"].get("agent_id"))) for o in after[len(before):]]
    assert added == [("command", False), ("file_read", True), ("task_spawn", False)]
    assert user_prompts(service)[-2:] == ["now run the whole suite", "/review src/ledger/dates.py"]
    assert len(user_prompts(service)) == 3
    assert len(rows(service, "SELECT id FROM sessions")) == 1

    snapshot = counts(Path(service.settings.home))
    third = import_transcripts(service, [s.path])
    assert (third.imported, third.updated, third.skipped, third.events) == (0, 0, 1, 0)
    assert counts(Path(service.settings.home)) == snapshot


def test_a_command_at_the_end_waits_for_its_answer(tmp_path: Path) -> None:
    tree = cc.Projects(tmp_path)
    s = tree.session(CWD, start=T0)
    s.prompt("hello")
    s.slash_command("review", "a.py", expansion="Review the file.")
    s.say("Reviewed a.py.")
    s.save()
    tail = write_without_last_lines(s.path, 1)
    replay = TranscriptReplay(str(s.path))
    assert [e.prompt for e in replay.events() if e.prompt] == ["hello"]
    command_at = replay.cursor.offset
    assert command_at < s.path.stat().st_size, "the cursor stays before the unanswered command"
    with s.path.open("ab") as fh:
        fh.write(tail)
    again = TranscriptReplay(str(s.path), cursor=TranscriptCursor(command_at, replay.cursor.pending))
    assert [e.prompt for e in again.events() if e.prompt] == ["/review a.py"]
    assert again.cursor.offset == s.path.stat().st_size


def test_a_session_captured_live_then_imported_gets_no_duplicates(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tree = cc.Projects(tmp_path / "projects")
    now = time.time()
    s = tree.session(CWD, start=now - 300)       # the transcript's times are the session's own
    s.prompt("fix the leap-year balance")
    s.bash("pytest -q", stdout="1 failed", exit_code=1)
    with s.subagent("Find helpers", "Find the month helpers") as agent:
        agent.tool("Grep", {"pattern": "month"}, result="src/dates.py")
        agent.say("src/dates.py")
    s.edit(f"{CWD}/src/dates.py", "28", "29")
    s.say("Fixed.")
    s.save()
    for payload in s.hook_payloads():                  # the hooks saw it all, live
        hook_ok(home, payload)
    live = counts(home)
    assert live["observations"] >= 4

    result = ok("import", "claude-code", str(tree.root), "--format", "json", env=hook_env(home))
    report = json.loads(result.stdout)
    assert (report["imported_sessions"], report["updated_sessions"], report["events"]) == (0, 0, 0)
    assert counts(home) == live

    # the session went on after the hooks were removed: only that part is new
    s.now = time.time() + 600
    s.prompt("and commit it")
    s.bash("git commit -am 'fix: leap-year balance'", stdout="[main 5e4d3c2] fix: leap-year balance")
    s.say("Committed 5e4d3c2.")
    s.save()
    result = ok("import", "claude-code", str(tree.root), "--format", "json", env=hook_env(home))
    report = json.loads(result.stdout)
    assert (report["imported_sessions"], report["updated_sessions"]) == (0, 1)
    grown = counts(home)
    assert grown["observations"] == live["observations"] + 1
    assert grown["sessions"] == 1
    user = [r["content"] for r in query(home, "SELECT content FROM prompts WHERE source = 'user' ORDER BY id")]
    assert user == ["fix the leap-year balance", "and commit it"]
    again = json.loads(ok("import", "claude-code", str(tree.root), "--format", "json", env=hook_env(home)).stdout)
    assert again["events"] == 0 and counts(home) == grown


def test_a_resumed_sessions_file_skips_the_history_it_copied(service: Service, tmp_path: Path) -> None:
    tree = cc.Projects(tmp_path / "projects")
    first = tree.session(CWD, start=T0)
    first.prompt("first session's question")
    first.say("first answer")
    first.save()
    second = tree.session(CWD, start=T0 + 3600)
    copied = list(cc.lines_of(first.path))   # what a resume copies in, with its sessionId
    second.prompt("a question of the resumed session")
    second.say("second answer")
    second.save()
    body = second.path.read_bytes()
    second.path.write_bytes(b"".join(json.dumps(line).encode() + b"\n" for line in copied) + body)

    report = import_transcripts(service, find_transcripts(tree.root))
    assert (report.imported, report.errors) == (2, [])
    by_session = rows(service, "SELECT session_id, content FROM prompts WHERE source = 'user' ORDER BY id")
    assert sorted((r["session_id"], r["content"]) for r in by_session) == sorted([
        (first.session_id, "first session's question"),
        (second.session_id, "a question of the resumed session")])


def test_a_rewritten_transcript_is_reported_and_left_alone(service: Service, tmp_path: Path) -> None:
    tree = cc.Projects(tmp_path / "projects")
    s = work_with_a_subagent(tree, "subagents")
    import_transcripts(service, [s.path])
    snapshot = counts(Path(service.settings.home))
    s.path.write_bytes(s.path.read_bytes()[:200])
    report = import_transcripts(service, [s.path])
    assert report.events == 0 and len(report.errors) == 1 and "changed since it was imported" in report.errors[0]
    assert counts(Path(service.settings.home)) == snapshot


def test_cli_import_reports_new_and_updated_sessions(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tree = cc.Projects(tmp_path / "projects")
    s = work_with_a_subagent(tree, "project-dir")
    text = ok("import", "claude-code", str(tree.root), env=hook_env(home)).stdout
    table = {line.rsplit(None, 1)[0].strip(): line.rsplit(None, 1)[1] for line in text.splitlines()
             if line.strip() and line.rsplit(None, 1)[-1].isdigit()}
    assert text.startswith("Claude Code import\n") and table["transcripts"] == "1"
    assert table["sessions imported"] == "1" and table["sessions updated (new events)"] == "0"
    s.prompt("one more thing")
    s.say("Done.")
    s.save()
    report = json.loads(ok("import", "claude-code", str(tree.root), "--format", "json", env=hook_env(home)).stdout)
    assert (report["imported_sessions"], report["updated_sessions"], report["skipped_sessions"]) == (0, 1, 0)
