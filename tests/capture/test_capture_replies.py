"""What the agent said is kept: every assistant text message of every turn, through the hooks (Stop
reads the turn from the transcript) and through `nmem import claude-code`, once each either way;
and what a successful command printed, a few quotable lines of it.

Transcripts are written in Claude Code's shapes by bench/cc_transcripts.py; hooks run as real
processes fed the payloads Claude Code sends, saved turn by turn as Claude Code writes them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from conftest import load_bench
from fixtures.harness import counts, event, hook_env, hook_ok, observations, query
from test_cli_support import ok

cc = load_bench("cc_transcripts")
CWD = "/home/dev/code/ledger-api"
SECRET = "ghp_" + "Zx9" * 12


class Live:
    """A session whose transcript is written, and whose hooks run, as the conversation goes."""

    def __init__(self, home: Path, tree: Any, start: float) -> None:
        self.home = home
        self.s = tree.session(CWD, start=start)
        self.sent = 0

    def flush(self) -> None:
        self.s.save()
        payloads = self.s.hook_payloads()
        for payload in payloads[self.sent:]:
            hook_ok(self.home, payload)
        self.sent = len(payloads)


def agent_prompts(home: Path, session_id: str) -> list[str]:
    return [r["content"] for r in query(home, "SELECT content FROM prompts WHERE session_id = ? AND source = 'agent' "
                                              "ORDER BY id", session_id)]


def turn_of_each(home: Path, session_id: str) -> list[tuple[str, str]]:
    """(the user prompt a row follows, its content) for every agent prompt, in id order."""
    asked, out = "", []
    for r in query(home, "SELECT source, content FROM prompts WHERE session_id = ? ORDER BY id", session_id):
        if r["source"] == "user":
            asked = r["content"]
        else:
            out.append((asked, r["content"]))
    return out


def long_turn(live: Live) -> None:
    s = live.s
    s.prompt("the cron reminders fire twice; fix it")
    s.thinking("Two schedulers may both be running the job.")
    s.bash("pytest -q tests/test_reminders.py", stdout="F\n1 failed in 0.20s", exit_code=1)
    s.say("The job lock expires after 30 s but the mailer takes 45 s, so a second worker picks the job up.",
          final=False)
    s.read(f"{CWD}/src/ledger/jobs.py", "LOCK_TTL = 30\n")
    s.say(f"Going with croniter 1.3.8 over dateutil.rrule: it parses the crontab strings ops write. Token {SECRET}.",
          final=False)
    s.edit(f"{CWD}/src/ledger/jobs.py", "LOCK_TTL = 30", "LOCK_TTL = 120")
    s.bash("pytest -q tests/test_reminders.py", stdout="..\n2 passed in 0.21s")
    s.say("Fixed: the lock now outlives the mailer; reminders fire once.")


def test_stop_keeps_every_message_of_the_turn_once_and_import_adds_none(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tree = cc.Projects(tmp_path / "projects", seed=11)
    live = Live(home, tree, time.time() - 600)
    live.s.prompt("hi")
    live.s.say("Hello! What shall we work on?")
    live.flush()
    long_turn(live)
    live.flush()
    sid = live.s.session_id

    said = turn_of_each(home, sid)
    texts = [text.partition(" Token ")[0] for _, text in said]
    assert texts == [
        "Hello! What shall we work on?",
        "Two schedulers may both be running the job.",
        "The job lock expires after 30 s but the mailer takes 45 s, so a second worker picks the job up.",
        "Going with croniter 1.3.8 over dateutil.rrule: it parses the crontab strings ops write.",
        "Fixed: the lock now outlives the mailer; reminders fire once.",
    ], said
    assert said[3][1].partition(" Token ")[2].startswith("[REDACTED"), "redacted like everything else"
    assert {asked for asked, _ in said[1:]} == {"the cron reminders fire twice; fix it"}, "linked to their turn"
    assert SECRET not in json.dumps(query(home, "SELECT * FROM prompts"))

    # Stop fired again over the same turn (a blocking Stop hook), then the importer read the same transcript
    before = counts(home)
    hook_ok(home, event("Stop", sid, CWD, transcript_path=str(live.s.path), stop_hook_active=True,
                        last_assistant_message="Fixed: the lock now outlives the mailer; reminders fire once."))
    report = json.loads(ok("import", "claude-code", str(tree.root), "--format", "json", env=hook_env(home)).stdout)
    assert report["events"] == 0
    assert counts(home) == before

    found = json.loads(ok("search", "mailer lock expires", "--scope", "prompts", "--format", "json",
                          env=hook_env(home)).stdout)
    assert any("mailer takes 45 s" in str(hit) for hit in found), "a mid-turn message is searchable"


def test_an_interrupted_turn_is_kept_by_the_next_stop(tmp_path: Path) -> None:
    home = tmp_path / "home"
    live = Live(home, cc.Projects(tmp_path / "projects", seed=12), time.time() - 600)
    s = live.s
    s.prompt("migrate the ledger table")
    s.say("The migration must run before the seed data; reordering 0007 and 0008.", final=False)
    s.interrupt()
    s.prompt("actually, just add the index")
    s.say("Added the index on ledger(account_id).")
    live.flush()
    assert agent_prompts(home, s.session_id) == [
        "The migration must run before the seed data; reordering 0007 and 0008.",
        "Added the index on ledger(account_id).",
    ]


def test_subagent_stop_keeps_each_message_of_the_subagent(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tree = cc.Projects(tmp_path / "projects", seed=14)
    live = Live(home, tree, time.time() - 600)
    s = live.s
    s.prompt("where are the month helpers?")
    with s.subagent("Find date helpers", "List every helper that builds month ranges") as agent:
        agent.thinking("Grep first.")
        agent.say("Looking at src/ledger/dates.py now.")
        agent.tool("Grep", {"pattern": "monthrange"}, result="src/ledger/dates.py")
        agent.say("dates.py hard-codes 28 days for February.")
    s.say("The helpers are in src/ledger/dates.py; February is hard-coded to 28 days.")
    live.flush()
    said = query(home, "SELECT source, content FROM prompts WHERE session_id = ? "
                       "AND source NOT IN ('user', 'thinking') ORDER BY id", s.session_id)
    assert [(r["source"], r["content"]) for r in said] == [
        ("subagent:general-purpose", "Looking at src/ledger/dates.py now."),
        ("subagent:general-purpose", "dates.py hard-codes 28 days for February."),
        ("agent", "The helpers are in src/ledger/dates.py; February is hard-coded to 28 days."),
    ], "the subagent's messages (labelled with its type), not its thinking; its answer once"
    stored = counts(home)
    report = json.loads(ok("import", "claude-code", str(tree.root), "--format", "json", env=hook_env(home)).stdout)
    assert (report["events"], counts(home)) == (0, stored)


def test_stop_without_a_transcript_keeps_the_hooks_message(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hook_ok(home, event("UserPromptSubmit", "s1", CWD, prompt="first"))
    hook_ok(home, event("Stop", "s1", CWD, last_assistant_message="Done."))
    hook_ok(home, event("UserPromptSubmit", "s1", CWD, prompt="second"))
    hook_ok(home, event("Stop", "s1", CWD, last_assistant_message="Done."))
    hook_ok(home, event("Stop", "s1", CWD, last_assistant_message="Done.", stop_hook_active=True))
    assert turn_of_each(home, "s1") == [("first", "Done."), ("second", "Done.")], "once per turn, not per session"


def test_import_keeps_every_reply_and_the_subagents_and_twice_adds_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tree = cc.Projects(tmp_path / "projects", seed=13)
    s = tree.session(CWD, start=1_790_000_000)
    s.prompt("why does the balance test fail on leap years?")
    s.say("Checking the date helpers with a subagent first.", final=False)
    with s.subagent("Find date helpers", "List every helper that builds month ranges") as agent:
        agent.say("Looking at src/ledger/dates.py now.")
        agent.tool("Grep", {"pattern": "monthrange"}, result="src/ledger/dates.py")
        agent.say("dates.py hard-codes 28 days for February.")
    s.say("Root cause: the February fixture hard-codes 28 days.", final=False)
    s.edit(f"{CWD}/src/ledger/dates.py", "28", "monthrange(y, 2)[1]")
    s.say("Fixed the leap-year balance.")
    s.prompt("thanks")
    s.say("You're welcome.")
    s.save()

    first = json.loads(ok("import", "claude-code", str(tree.root), "--format", "json", env=hook_env(home)).stdout)
    assert first["imported_sessions"] == 1
    said = turn_of_each(home, s.session_id)
    assert said == [
        ("why does the balance test fail on leap years?", "Checking the date helpers with a subagent first."),
        ("why does the balance test fail on leap years?", "Looking at src/ledger/dates.py now."),
        ("why does the balance test fail on leap years?", "dates.py hard-codes 28 days for February."),
        ("why does the balance test fail on leap years?", "Root cause: the February fixture hard-codes 28 days."),
        ("why does the balance test fail on leap years?", "Fixed the leap-year balance."),
        ("thanks", "You're welcome."),
    ]
    stored = counts(home)
    again = json.loads(ok("import", "claude-code", str(tree.root), "--format", "json", env=hook_env(home)).stdout)
    assert (again["events"], counts(home)) == (0, stored)


def test_a_commands_quotable_output_is_kept_and_searchable(tmp_path: Path) -> None:
    home = tmp_path / "home"
    runs = {
        "pip show croniter": "Name: croniter\nVersion: 1.3.8\nSummary: cron iteration\nLocation: /venv/lib\n"
                             "Requires: python-dateutil\nRequired-by: ledger",
        "gh pr create --fill": "https://github.com/acme/ledger/pull/318\n",
        "pytest -q": "." * 60 + "\n=== 61 passed, 2 skipped in 3.10s ===",
        "cat notes.txt": "\n".join(f"plain line {n} with nothing to quote" for n in range(50)),
        "make build": "ok",
        "sed -n 1,3p pyproject.toml": '[project]\nname = "ledger"\nversion = "4.1.0"',   # a file's content
        "./deploy.sh": f"deployed release 2.3.1 with GITHUB_TOKEN={SECRET}\n",
        "./notes.sh": "<private>\nmy salary: 120000 dollars, 3 raises\n</private>\n12 notes exported",
    }
    for command, stdout in runs.items():
        hook_ok(home, event("PostToolUse", "out-1", CWD, tool_name="Bash", tool_input={"command": command},
                            tool_response={"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False}))
    content = {r["content"].partition("\n")[0]: r["content"] for r in observations(home)
               if r["obs_type"] == "command"}
    assert content["pip show croniter"] == "pip show croniter\n→ Version: 1.3.8"
    assert content["gh pr create --fill"].endswith("→ https://github.com/acme/ledger/pull/318")
    assert content["pytest -q"].endswith("→ 61 passed, 2 skipped in 3.10s")
    assert content["cat notes.txt"] == "cat notes.txt", "output with nothing worth quoting adds nothing"
    assert content["make build"] == "make build"
    assert content["sed -n 1,3p pyproject.toml"] == "sed -n 1,3p pyproject.toml", "reading a file is not a run"
    assert SECRET not in content["./deploy.sh"] and "2.3.1 with GITHUB_TOKEN=[REDACTED" in content["./deploy.sh"]
    assert content["./notes.sh"] == "./notes.sh\n→ 12 notes exported", "a private block stays out, across lines"
    found = json.loads(ok("search", "croniter 1.3.8", "--format", "json", env=hook_env(home)).stdout)
    assert any("Version: 1.3.8" in str(hit) for hit in found)


def test_long_replies_and_thoughts_are_kept_bounded_either_way(tmp_path: Path) -> None:
    """A reply is kept up to 8000 characters and a thinking block up to 4000, by the Stop hook and
    by the importer alike; what follows the cut is not stored."""
    tree = cc.Projects(tmp_path / "projects", seed=14)
    live = Live(tmp_path / "hooks", tree, time.time() - 600)
    live.s.prompt("explain the scheduler")
    live.s.thinking("T" * 3990 + " thinking-tail-beyond-the-bound " + "t" * 6000)
    live.s.say("R" * 7990 + " reply-tail-beyond-the-bound " + "r" * 12000)
    live.flush()
    ok("import", "claude-code", str(tree.root), env=hook_env(tmp_path / "imported"))
    for home in (tmp_path / "hooks", tmp_path / "imported"):
        rows = {r["source"]: r["content"] for r in query(home, "SELECT source, content FROM prompts "
                                                              "WHERE source != 'user'")}
        assert (len(rows["agent"]), len(rows["thinking"])) == (8000, 4000), home
        assert "tail-beyond" not in rows["agent"] + rows["thinking"]
