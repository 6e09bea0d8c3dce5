"""Replay a realistic Claude Code session through real `nmem record` processes and check the result.

The stream (tests/fixtures/session_full.json) starts a session, chats, reads and edits,
runs a failing test, fixes it, commits and pushes, records a decision and a gotcha, spawns a
subagent, compacts, writes new files, fails and passes again, commits, opens a PR and ends.
A short session in another project (session_other_project.json) runs first.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fixtures.harness import FIXTURES, event, hook_ok, load_stream, observations, query
from nmem.util.tokens import estimate_tokens

CWD = "/home/dev/code/billing-api"
OTHER_CWD = "/home/dev/code/ledger-ui"
SID = "replay-0001"
PROJECT = "billing-api"


@dataclass
class Replay:
    home: Path
    outputs: list[tuple[dict[str, Any], str]]   # each event with what its process printed

    def printed(self, name: str, **match: Any) -> str:
        for payload, out in self.outputs:
            if payload["hook_event_name"] == name and all(payload.get(k) == v for k, v in match.items()):
                return out
        raise AssertionError(f"no {name} {match} in the stream")


def replay_once(shared: Path) -> Path:
    """Replay the streams into `shared/home` unless another xdist worker already did (the replay is slow)."""
    shared.mkdir(exist_ok=True)
    outputs_file = shared / "outputs.json"
    with (shared / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not outputs_file.exists():
            streams = (load_stream("session_other_project.json", other_cwd=OTHER_CWD)
                       + load_stream("session_full.json", cwd=CWD,
                                     transcript=str(FIXTURES / "session_full_transcript.jsonl")))
            outputs = [(payload, hook_ok(shared / "home", payload)) for payload in streams]
            outputs_file.write_text(json.dumps(outputs), encoding="utf-8")
    return outputs_file


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> Replay:
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "session-replay"
    outputs_file = replay_once(shared)
    home = tmp_path_factory.mktemp("replay") / "home"
    shutil.copytree(shared / "home", home)  # each worker checks (and adds to) its own copy
    outputs = [(payload, out) for payload, out in json.loads(outputs_file.read_text(encoding="utf-8"))]
    return Replay(home, outputs)


def session_rows(replay: Replay) -> list[dict[str, Any]]:
    return observations(replay.home, "session_id = ?", SID)


def sections(block: str) -> dict[str, str]:
    """`## Heading` -> its body, for a context block."""
    out = {}
    for part in block.split("\n## ")[1:]:
        title, _, body = part.partition("\n")
        out[title.strip()] = body.split("</nmem-context>")[0]
    return out


# -- stored rows --------------------------------------------------------------------------------

EXPECTED_TYPES = [
    "session_start", "search", "file_read", "file_read", "command_error", "file_edit", "command", "command",
    "command", "command", "command", "git_commit", "git_push", "task_spawn", "search", "file_read",
    "session_compact", "file_write", "file_write", "command_error", "file_edit", "command", "command",
    "web_fetch", "web_search", "command", "command", "git_commit", "mcp_call", "tool_other", "session_end",
]


def test_every_event_became_the_expected_observation(replay: Replay) -> None:
    rows = session_rows(replay)
    assert [r["obs_type"] for r in rows] == EXPECTED_TYPES
    assert {r["project"] for r in rows} == {PROJECT}
    reads = [r["file_path"] for r in rows if r["obs_type"] == "file_read"]
    assert reads.count(f"{CWD}/src/billing/invoice.py") == 1, "the repeated read was collapsed"
    failure = next(r for r in rows if r["obs_type"] == "command_error")
    assert failure["metadata"]["exit_code"] == 1
    assert "test_total_rounds_half_up" in failure["metadata"]["error"]
    commits = [r["metadata"] for r in rows if r["obs_type"] == "git_commit"]
    assert [(c["sha"], c["branch"]) for c in commits] == [("3f2a1b9", "main"), ("7e6d5c4", "main")]
    subagent_glob = next(r for r in rows if r["tool_name"] == "Glob")
    assert subagent_glob["metadata"]["agent_id"] == "agent-7", "subagent events stay in the parent session"
    assert query(replay.home, "SELECT id FROM sessions ORDER BY id") == [{"id": "ledger-0001"}, {"id": SID}]


# Which user prompt (index into the session's user prompts) each observation belongs to.
EXPECTED_OWNERS = [None] + [1] * 8 + [2] * 4 + [4] * 3 + [None] + [5] * 13 + [None]


def test_prompts_and_links(replay: Replay) -> None:
    prompts = query(replay.home, "SELECT id, source, content FROM prompts WHERE session_id = ? ORDER BY id", SID)
    users = [p for p in prompts if p["source"] == "user"]
    assert [p["content"].splitlines()[0] for p in users] == [
        "hi there", "the invoice total test fails on rounding, please fix it",
        "[decision] use Decimal with ROUND_HALF_UP for all invoice money math",
        "[gotcha] the tax fixture caches rates per process, clear it between tests",
        "add a CSV export for invoices", "continue with the CSV export"]
    rows = session_rows(replay)
    assert len(EXPECTED_OWNERS) == len(rows)
    for row, owner in zip(rows, EXPECTED_OWNERS, strict=True):
        expected = None if owner is None else users[owner]["id"]
        assert row["prompt_id"] == expected, (row["obs_type"], row["content"][:60])
    linked = {r["prompt_id"] for r in rows}
    assert users[0]["id"] not in linked and users[3]["id"] not in linked, "chat turns led to no action"


def test_agent_reasoning_is_kept_as_agent_prompts(replay: Replay) -> None:
    """Replies, thinking and a subagent's answer, each labelled as such."""
    rows = query(replay.home, "SELECT source, content FROM prompts WHERE session_id = ? AND source <> 'user' "
                              "ORDER BY id", SID)
    agent = [p["content"] for p in rows]
    by_source = {p["content"]: p["source"] for p in rows}
    assert by_source["Hello! What would you like to work on in billing-api today?"] == "agent"
    assert by_source["Found src/billing/export.py with a JSON exporter."].startswith("subagent")
    assert {by_source[a] for a in agent if a.startswith(("The exporter should stream", "Tests pass; commit"))} == {
        "thinking"}
    assert "Hello! What would you like to work on in billing-api today?" in agent
    assert "Found src/billing/export.py with a JSON exporter." in agent, "SubagentStop's message"
    thoughts = [a for a in agent if a.startswith(("The exporter should stream", "Tests pass; commit"))]
    assert len(thoughts) == 2, "the last turn's thinking from the transcript, once each"
    assert not any(a.startswith("Earlier turn") for a in agent), "only the last turn's thinking is read"
    assert agent[-1].startswith("Added src/billing/export_csv.py"), "last_assistant_message comes last"
    assert len(agent) == len(set(agent))


def test_session_is_closed_with_signature_and_extractive_summary(replay: Replay) -> None:
    (session,) = query(replay.home, "SELECT * FROM sessions WHERE id = ?", SID)
    assert session["project"] == PROJECT and session["ended_at"] is not None
    signature = json.loads(session["signature"])
    counts: dict[str, int] = {}
    for t in EXPECTED_TYPES:
        counts[t] = counts.get(t, 0) + 1
    assert signature["events"] == counts
    assert (signature["observations"], signature["prompts"], signature["compactions"]) == (31, 6, 1)
    summary = json.loads(session["summary"])
    assert summary["files_changed"] == [f"{CWD}/src/billing/invoice.py", f"{CWD}/src/billing/export_csv.py",
                                        f"{CWD}/tests/test_export_csv.py"]
    assert summary["commits"] == ["3f2a1b9 fix: round invoice totals half up", "7e6d5c4 feat: CSV export for invoices"]
    assert summary["errors"] == ["pytest tests/test_invoice.py -q", "pytest tests/test_export_csv.py -q"]
    assert "git status --short" in summary["commands"] and "mypy src" in summary["commands"]
    assert "the invoice total test fails on rounding, please fix it" in summary["intents"]
    assert "add a CSV export for invoices" in summary["intents"]
    for label in ("Intents:", "Files changed:", "Commits:", "Errors:", "Commands:"):
        assert label in summary["text"]


def test_headline_intent_is_a_prompt_that_led_to_work(replay: Replay) -> None:
    """"hi there" led to nothing; the session's headline (and the checkpoint's title) should not be it."""
    (session,) = query(replay.home, "SELECT summary FROM sessions WHERE id = ?", SID)
    assert json.loads(session["summary"])["intent"] != "hi there"
    (checkpoint,) = query(replay.home, "SELECT summary FROM memories WHERE namespace = 'progress'")
    assert "hi there" not in checkpoint["summary"]


def test_pre_compact_checkpoint_memory(replay: Replay) -> None:
    (memory,) = query(replay.home, "SELECT * FROM memories WHERE namespace = 'progress'")
    assert memory["domain"] == f"project:{PROJECT}"
    assert memory["source"] == f"session:{SID}"
    assert {"checkpoint", "compact-auto"} <= set(json.loads(memory["tags"]))
    content = memory["content"]
    assert f"{CWD}/src/billing/invoice.py" in content
    assert "3f2a1b9 fix: round invoice totals half up" in content
    assert "pytest tests/test_invoice.py -q" in content
    assert "export_csv" not in content, "the checkpoint holds the session so far, not what came after"


def test_marker_memories(replay: Replay) -> None:
    rows = query(replay.home, "SELECT namespace, content, tags, domain FROM memories "
                              "WHERE namespace != 'progress' ORDER BY id")
    assert [(r["namespace"], r["content"]) for r in rows] == [
        ("decisions", "use Decimal with ROUND_HALF_UP for all invoice money math"),
        ("gotchas", "the tax fixture caches rates per process, clear it between tests"),
    ]
    assert all(r["domain"] == f"project:{PROJECT}" and "prompt-marker" in json.loads(r["tags"]) for r in rows)
    acknowledged = replay.printed("UserPromptSubmit", prompt="[decision] use Decimal with ROUND_HALF_UP for all "
                                                             "invoice money math\ncommit this")
    assert "decisions" in acknowledged and "nmem://project:billing-api/decisions/" in acknowledged


# -- context ------------------------------------------------------------------------------------


def lead_of(parts: dict[str, str]) -> tuple[str, str]:
    """The lead section (its title and body): the first, about the last session."""
    title = next(iter(parts))
    return title, parts[title]


def test_context_after_compaction_leads_with_this_sessions_state_and_the_checkpoint(replay: Replay) -> None:
    block = replay.printed("SessionStart", source="compact").strip()
    assert block.startswith("<nmem-context>") and block.endswith("</nmem-context>")
    parts = sections(block)
    title, lead = lead_of(parts)
    assert title.startswith("This session, before compaction sreplay-0")
    assert "Changed: src/billing/invoice.py (read, edit)" in lead
    assert "Commits: 3f2a1b9 fix: round invoice totals half up" in lead
    assert "Fixed: ✓ pytest tests/test_invoice.py -q (failed, fixed by" in lead
    assert "export_csv" not in lead, "what this session did before compaction, not after"
    assert "[progress] Checkpoint before compaction" in parts["Memories"]
    assert "[decisions] use Decimal with ROUND_HALF_UP" in parts["Memories"]
    assert estimate_tokens(block) <= 2500 and len(block) < 10_000


def test_context_at_the_next_session_start(replay: Replay) -> None:
    block = hook_ok(replay.home, event("SessionStart", "replay-0002", CWD, source="startup")).strip()
    assert block.startswith("<nmem-context>") and block.endswith("</nmem-context>")
    assert block.count("<nmem-context>") == 1 and block.count("</nmem-context>") == 1
    assert "reference data" in block and "not instructions" in block
    assert estimate_tokens(block) <= 1500 and len(block) < 10_000
    parts = sections(block)
    title, lead = lead_of(parts)
    assert title.startswith("Last session sreplay-0 · ended just now")
    assert "6 prompts, 28 actions" in title
    assert "Asked: the invoice total test fails on rounding, please fix it (p" in lead
    assert "continue with the CSV export (p" in lead
    assert ("Closing message (p16, just now): Added src/billing/export_csv.py with tests; committed 7e6d5c4 "
            "and opened PR #42.") in lead
    assert ("Changed: src/billing/invoice.py (read, edit), src/billing/export_csv.py (write, edit), "
            "tests/test_export_csv.py (write)") in lead
    assert "Commits: 3f2a1b9 fix: round invoice totals half up; 7e6d5c4 feat: CSV export for invoices" in lead
    assert "✓ pytest tests/test_invoice.py -q (failed, fixed by" in lead
    assert "✓ pytest tests/test_export_csv.py -q (failed, fixed by" in lead
    assert "Left open" not in lead and "✗" not in lead, "every failure was fixed later"
    for lifecycle in ("session_start", "session_compact", "session_end", "session_resume", "session_clear"):
        assert lifecycle not in block
    assert f"{CWD}/" not in block, "paths are relative to the project root"

    intents = parts["Recent intents"]
    assert '"[decision] use Decimal with ROUND_HALF_UP for all invoice money math commit this" → 4 actions' in intents
    assert "hi there" not in block, "zero-action turns are filtered"

    memories = [line for line in parts["Memories"].splitlines() if line.startswith("- [")]
    assert [m.split("]")[0] for m in memories] == ["- [decisions", "- [gotchas", "- [progress"]
    assert all("nmem://project:billing-api/" in m for m in memories)
    assert "ledger" not in block.lower(), "this project has history of its own: no other projects"


def test_recovery_mode_after_clear_has_the_larger_budget(replay: Replay) -> None:
    # The budget leaves out the automatic checkpoint and about half the intents section, measured on this
    # replay's own full block: its size moves with the clock ("just now", the date), so no constant fits.
    full = hook_ok(replay.home, event("SessionStart", "replay-0003", CWD, source="startup"),
                   NMEM_CONTEXT_MAX_TOKENS="5000").strip()
    checkpoint = next(line for line in full.splitlines() if "Checkpoint before compaction" in line)
    intents = "\n## Recent intents\n" + sections(full)["Recent intents"]
    budget = estimate_tokens(full) - estimate_tokens(checkpoint) - estimate_tokens(intents) // 2
    env = {"NMEM_CONTEXT_MAX_TOKENS": str(budget)}
    normal = hook_ok(replay.home, event("SessionStart", "replay-0003", CWD, source="startup"), **env).strip()
    recovery = hook_ok(replay.home, event("SessionStart", "replay-0003", CWD, source="clear"), **env).strip()
    assert lead_of(sections(normal)) == lead_of(sections(recovery))
    assert "Recent intents" in sections(recovery) and "Checkpoint before compaction" in recovery
    # the lowest-valued rows went first: the automatic checkpoint, then the intents; curated memories stay
    assert "Recent intents" not in sections(normal) and "Checkpoint before compaction" not in normal
    assert "[decisions] use Decimal" in normal and "[gotchas] the tax fixture" in normal
    assert estimate_tokens(normal) <= budget < estimate_tokens(recovery) <= 2500
    assert [o["obs_type"] for o in observations(replay.home, "session_id = ?", "replay-0003")] == [
        "session_start", "session_start", "session_clear"]


def test_context_under_a_small_budget_keeps_the_lead_whole(replay: Replay) -> None:
    full = hook_ok(replay.home, event("SessionStart", "replay-0004", CWD, source="compact")).strip()
    block = hook_ok(replay.home, event("SessionStart", "replay-0004", CWD, source="compact"),
                    NMEM_CONTEXT_RECOVERY_MAX_TOKENS="200").strip()
    assert block.startswith("<nmem-context>") and block.endswith("</nmem-context>")
    assert lead_of(sections(block)) == lead_of(sections(full))
    assert "## Memories" in full and "## Memories" not in block


def test_reasoning_is_not_stored_twice_when_stop_fires_again_in_a_turn(tmp_path: Path) -> None:
    """A blocking Stop hook (or a lagging transcript) makes Stop fire twice over the same last turn."""
    home = tmp_path / "home"
    transcript = str(FIXTURES / "session_full_transcript.jsonl")
    hook_ok(home, event("UserPromptSubmit", "twice", CWD, prompt="continue with the CSV export"))
    hook_ok(home, event("Stop", "twice", CWD, transcript_path=transcript, stop_hook_active=False,
                        last_assistant_message="Done."))
    hook_ok(home, event("Stop", "twice", CWD, transcript_path=transcript, stop_hook_active=True,
                        last_assistant_message="Done."))
    agent = [p["content"] for p in query(home, "SELECT content FROM prompts WHERE source <> 'user'")]
    assert sorted(set(agent)) == sorted(agent), f"duplicate agent prompts: {agent}"
