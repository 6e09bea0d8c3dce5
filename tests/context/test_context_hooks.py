"""The SessionStart block as a user meets it: two sessions of a real git project recorded through the
hook process (prompts, reads, edits, a failing then passing pytest, a lint failure left open, a
`remember:` marker, six compactions, a commit, a closing message with work still pending), then the
next session's SessionStart prints the block.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from fixtures.harness import event, hook_env, hook_ok, query
from nmem.util.tokens import estimate_tokens

CLOSING = (
    "I fixed the org login redirect in `src/auth/login.py`: org accounts now land on their own "
    "dashboard instead of /home, and the login tests pass. I committed it as the first step of the SSO work.\n\n"
    "Still pending: `npm run lint` fails on an unused variable in web/org.ts.\n\n"
    "Next steps:\n- remove the unused variable in web/org.ts\n- add an e2e test for SSO org logins\n"
)


def bash(sid: str, cwd: str, command: str, code: int = 0, out: str = "") -> dict[str, Any]:
    return event("PostToolUse", sid, cwd, tool_name="Bash", tool_input={"command": command},
                 tool_response={"stdout": out, "stderr": "", "exit_code": code, "interrupted": False})


def edit(sid: str, cwd: str, path: str) -> dict[str, Any]:
    return event("PostToolUse", sid, cwd, tool_name="Edit",
                 tool_input={"file_path": path, "old_string": "a", "new_string": "b"}, tool_response={"filePath": path})


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("ctx-hooks")
    repo = base / "code" / "shop"
    (repo / "src" / "auth").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    home = base / "nmem"
    cwd = str(repo / "src")              # Claude Code started in a subdirectory of the repository
    root = str(repo)
    login = f"{root}/src/auth/login.py"
    first = [
        event("SessionStart", "sess-older-0001", cwd, source="startup"),
        event("UserPromptSubmit", "sess-older-0001", cwd, prompt="add the CSV importer"),
        event("PostToolUse", "sess-older-0001", cwd, tool_name="Write",
              tool_input={"file_path": f"{root}/src/importer.py", "content": "import csv\n"}),
        bash("sess-older-0001", cwd, "make build", out="ok"),
        event("Stop", "sess-older-0001", cwd, last_assistant_message="Added the importer."),
        event("SessionEnd", "sess-older-0001", cwd, reason="prompt_input_exit"),
    ]
    failing = "FAILED tests/test_login.py::test_org - AssertionError: '/home' != '/org'\n1 failed, 3 passed in 0.21s"
    lint = "web/org.ts:3:7  error  'x' is assigned a value but never used\n\n1 problem (1 error, 0 warnings)"
    second = [
        event("SessionStart", "sess-last-0002", cwd, source="startup"),
        event("UserPromptSubmit", "sess-last-0002", cwd,
              prompt="fix the login redirect for org accounts, they land on /home instead of their dashboard"),
        event("PostToolUse", "sess-last-0002", cwd, tool_name="Read", tool_input={"file_path": login}),
        *[edit("sess-last-0002", cwd, login) for _ in range(5)],
        bash("sess-last-0002", cwd, f"cd {root} && .venv/bin/pytest -q tests/test_login.py 2>&1 | tail -20",
             code=1, out=failing),
        bash("sess-last-0002", cwd, "pytest tests/test_login.py -q", code=1, out=failing),
        edit("sess-last-0002", cwd, login),
        bash("sess-last-0002", cwd, "pytest -q tests/", out="4 passed in 0.30s"),
        bash("sess-last-0002", cwd, "npm run lint", code=1, out=lint),
        event("UserPromptSubmit", "sess-last-0002", cwd,
              prompt="remember: org accounts use the /org/<slug> dashboard route"),
    ]
    for _ in range(6):
        second += [event("PreCompact", "sess-last-0002", cwd, trigger="auto"),
                   event("SessionStart", "sess-last-0002", cwd, source="compact")]
    second += [
        bash("sess-last-0002", cwd, "git commit -am 'fix org login redirect'",
             out="[main 1a2b3c4] fix org login redirect\n 1 file changed"),
        event("Stop", "sess-last-0002", cwd, last_assistant_message=CLOSING),
        event("SessionEnd", "sess-last-0002", cwd, reason="prompt_input_exit"),
        event("Notification", "sess-unrelated", cwd, message="Claude is waiting for your input"),
    ]
    for payload in first + second:
        hook_ok(home, payload)
    block = hook_ok(home, event("SessionStart", "sess-next-0003", cwd, source="startup")).strip()
    return {"home": home, "root": root, "block": block}


def part(block: str, title: str) -> str:
    body = block.split(f"\n## {title}", 1)[1]
    return body.split("\n## ", 1)[0].split("</nmem-context>")[0]


def test_the_block_leads_with_where_the_last_session_left_off(project: dict[str, Any]) -> None:
    block = project["block"]
    assert block.startswith("<nmem-context>") and block.endswith("</nmem-context>")
    headings = [line for line in block.splitlines() if line.startswith("## ")]
    assert headings[0].startswith("## Last session ssess-las · ended just now (")
    assert headings[0].endswith("· 2 prompts, 12 actions")
    lead = part(block, "Last session")
    assert "Asked: fix the login redirect for org accounts, they land on /home instead of their dashboard (p" in lead
    closing = next(line for line in lead.splitlines() if line.startswith("Closing message"))
    assert ("org accounts now land on their own dashboard instead of /home, and the login tests pass. I committed "
            "it as the first step of the SSO work. Still pending: `npm run lint` fails on an unused variable in "
            "web/org.ts.") in closing, "whole sentences"
    assert closing.endswith("web/org.ts."), "the opening prose only: the list under 'Next steps:' is left out"
    assert "Changed: src/auth/login.py (edit ×6, read)" in lead
    assert "Commits: 1a2b3c4 fix org login redirect" in lead


def test_what_was_left_open_and_what_was_fixed(project: dict[str, Any]) -> None:
    lead = part(project["block"], "Last session")
    left = lead.split("Left open:\n", 1)[1].split("\nFixed", 1)[0].splitlines()
    assert left[0].startswith("- ✗ npm run lint — failed: web/org.ts:3:7 error 'x' is assigned a value")
    assert left[1:] == [
        '- "Still pending: `npm run lint` fails on an unused variable in web/org.ts." (closing message)',
        '- "remove the unused variable in web/org.ts" (closing message)',
        '- "add an e2e test for SSO org logins" (closing message)',
    ]
    fixed = next(line for line in lead.splitlines() if line.startswith("Fixed: "))
    # both runs target tests/test_login.py: one failure, failed twice, fixed by `pytest -q tests/`
    assert fixed.startswith("Fixed: ✓ .venv/bin/pytest -q tests/test_login.py (failed 2×, fixed by ")
    assert "✗ pytest" not in project["block"] and "✗ .venv" not in project["block"]


def test_curated_memory_survives_six_compactions_beside_one_checkpoint(project: dict[str, Any]) -> None:
    memories = part(project["block"], "Memories").strip().splitlines()
    assert memories[0].startswith("- [context] org accounts use the /org/<slug> dashboard route (nmem://")
    assert len(memories) == 2 and memories[1].startswith("- [progress] Checkpoint before compaction: fix the login")
    checkpoints = query(project["home"], "SELECT uid FROM memories WHERE namespace = 'progress' ORDER BY id")
    assert len(checkpoints) == 6 and checkpoints[-1]["uid"] in memories[1], "the newest checkpoint"


def test_tables_paths_ids_and_budget(project: dict[str, Any]) -> None:
    block = project["block"]
    for lifecycle in ("session_start", "session_compact", "session_end", "session_clear", "session_resume"):
        assert lifecycle not in block
    assert f"{project['root']}/" not in block and "Project shop at " in block
    earlier = [line for line in part(block, "Earlier in shop").splitlines() if line.startswith("| ")]
    assert earlier[0] == "| ID | Last | Did | What |"
    rows = [r.strip("| ").split(" | ") for r in earlier[1:]]
    assert [(r[2], r[3]) for r in rows] == [("ran", "make build"), ("write", "src/importer.py")], "time order"
    assert all(r[0].isdigit() for r in rows), "observations by their bare ids"
    intents = part(block, "Recent intents")
    assert '"add the CSV importer" → 2 actions (p' in intents
    assert "Other projects" not in block
    assert estimate_tokens(block) <= 1500 and len(block) < 10_000
    sessions = [s["id"] for s in query(project["home"], "SELECT id FROM sessions ORDER BY started_at")]
    assert sessions == ["sess-older-0001", "sess-last-0002", "sess-next-0003"], "no session from a Notification"


def test_a_session_started_in_the_main_checkout_is_told_its_own_root(tmp_path: Any) -> None:
    """Yesterday's work happened in a linked worktree; today's session starts in the main checkout:
    one project, and the block's paths are relative to where the agent is now."""
    from conftest import load_bench

    main, worktree = load_bench("cc_transcripts").git_repo_with_worktree(tmp_path / "code", "shop", "sso")
    home = tmp_path / "home"
    hook_ok(home, event("SessionStart", "wt-1", str(worktree), source="startup"))
    hook_ok(home, event("UserPromptSubmit", "wt-1", str(worktree), prompt="add SSO login"))
    hook_ok(home, edit("wt-1", str(worktree), f"{worktree}/src/sso.py"))
    hook_ok(home, event("Stop", "wt-1", str(worktree), last_assistant_message="SSO login is in src/sso.py."))
    block = hook_ok(home, event("SessionStart", "main-2", str(main), source="startup"))
    intro = next(line for line in block.splitlines() if line.startswith("Project shop at "))
    assert intro.startswith((f"Project shop at {main} ", "Project shop at ~/")), intro
    assert "shop-sso" not in intro and "src/sso.py" in block


RUNNERS = {   # what each runner prints on a failing test, as Claude Code hands a failed Bash call to PostToolUseFailure
    "npm test": "> ledger@1.0.0 test\n> node --test\n\nTAP version 13\n# Subtest: parses dates\nok 1 - parses dates\n"
                "# Subtest: balance on leap years\nnot ok 2 - balance on leap years\n  ---\n  error: |-\n"
                "    Expected values to be strictly equal:\n\n    28 !== 29\n\n  code: 'ERR_ASSERTION'\n  ...\n"
                "1..2\n# tests 2\n# pass 1\n# fail 1",
    "npx jest": "FAIL src/balance.test.ts\n  ● balance › handles leap years\n\n    expect(received).toBe(expected)\n\n"
                "    Expected: 29\n    Received: 28\n\nTest Suites: 1 failed, 2 passed, 3 total\n"
                "Tests:       1 failed, 11 passed, 12 total\nTime:        1.52 s",
    "npx vitest run": " FAIL  src/balance.test.ts > balance > handles leap years\n"
                      "AssertionError: expected 28 to be 29\n\n Test Files  1 failed | 2 passed (3)\n"
                      "      Tests  1 failed | 11 passed (12)\n",
    "go test ./...": "--- FAIL: TestLeapYear (0.00s)\n    balance_test.go:12: days(2024, 2) = 28, want 29\nFAIL\n"
                     "FAIL\texample.com/ledger\t0.004s\nok  \texample.com/ledger/api\t0.010s\nFAIL",
    "cargo test": "running 2 tests\ntest balance::tests::leap_year ... FAILED\ntest dates::tests::parses ... ok\n\n"
                  "failures:\n\n---- balance::tests::leap_year stdout ----\nthread 'balance::tests::leap_year' "
                  "panicked at src/balance.rs:42:9:\nassertion `left == right` failed\n  left: 28\n right: 29\n\n"
                  "failures:\n    balance::tests::leap_year\n\ntest result: FAILED. 1 passed; 1 failed; 0 ignored\n",
}


def test_each_test_runners_failure_is_named_and_what_does_not_fit_is_counted(tmp_path: Any) -> None:
    """node:test (TAP), jest, vitest, go test and cargo test failures, recorded through the hook, are
    told in the next SessionStart and the trace by the failing test and its count; the one the
    block has no room for is counted, not dropped silently."""
    repo = tmp_path / "ledger"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    home, cwd = tmp_path / "nmem", str(repo)
    hook_ok(home, event("SessionStart", "runners-1", cwd, source="startup"))
    hook_ok(home, event("UserPromptSubmit", "runners-1", cwd, prompt="run every suite"))
    for command, output in RUNNERS.items():
        hook_ok(home, event("PostToolUseFailure", "runners-1", cwd, tool_name="Bash", tool_input={"command": command},
                            tool_use_id=f"toolu_{len(command)}", error="Exit code 1\n" + output, is_interrupt=False))
    hook_ok(home, event("Stop", "runners-1", cwd, last_assistant_message="Every suite fails on leap years."))
    block = hook_ok(home, event("SessionStart", "runners-2", cwd, source="startup"))
    left = block.split("Left open (+1 more):\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [line.split(" — ")[0] for line in left[:4]] == [
        "- ✗ npx jest", "- ✗ npx vitest run", "- ✗ go test ./...", "- ✗ cargo test"], block
    assert "1 failed, 11 passed, 12 total · ● balance › handles leap years" in left[0]
    assert "handles leap years" in left[1] and "TestLeapYear" in left[2] and "balance::tests::leap_year" in left[3]
    trace = subprocess.run([sys.executable, "-m", "nmem", "trace", "runners-1"], cwd=cwd, capture_output=True,
                           text=True, env=hook_env(home), timeout=60, check=True).stdout
    npm = next(line for line in trace.splitlines() if "npm test" in line)
    assert "1 failed, 1 passed" in npm and "not ok: balance on leap years" in npm, npm


def test_a_courtesy_reply_gives_way_to_the_answer_before_it(tmp_path: Any) -> None:
    """"You're welcome." after "thanks" is not where a session left off: the lead quotes the
    answer before it, as the closing message. A short reply that shares the request's words
    ("Done: the balance test passes.") is an answer, and stays the closing message."""
    home = tmp_path / "home"
    answer = "Root cause: the February fixture hard-codes 28 days; dates.py now asks calendar.monthrange."
    sessions = {
        "/home/dev/code/ledger": ("sess-thanks-0001", [("why does the balance test fail on leap years?", answer),
                                                       ("thanks!", "You're welcome."),
                                                       ("great, see you tomorrow", "See you!")]),
        "/home/dev/code/books": ("sess-short-0001", [("why does the balance test fail on leap years?", answer),
                                                     ("make the balance test pass", "Done: the balance test passes.")]),
    }
    for cwd, (sid, turns) in sessions.items():
        hook_ok(home, event("SessionStart", sid, cwd, source="startup"))
        for asked, said in turns:
            hook_ok(home, event("UserPromptSubmit", sid, cwd, prompt=asked))
            hook_ok(home, event("Stop", sid, cwd, last_assistant_message=said))
        hook_ok(home, event("SessionEnd", sid, cwd, reason="prompt_input_exit"))
    thanked = part(hook_ok(home, event("SessionStart", "sess-next-0002", "/home/dev/code/ledger", source="startup")),
                   "Last session")
    closing = next(line for line in thanked.splitlines() if "message (p" in line)
    assert closing.startswith("Closing message (p") and closing.endswith(answer), thanked
    assert "welcome" not in thanked and "See you" not in thanked
    short = part(hook_ok(home, event("SessionStart", "sess-next-0003", "/home/dev/code/books", source="startup")),
                 "Last session")
    assert next(line for line in short.splitlines() if "message (p" in line).startswith("Closing message (p")
    assert "Done: the balance test passes." in short and "Root cause" not in short


def test_to_dos_before_a_courtesy_carry_past_a_short_session(tmp_path: Any) -> None:
    """An earlier session's next steps stay open when it ended on "You're welcome.", and a
    question in between does not erase them."""
    home, cwd = tmp_path / "home", "/home/dev/code/ledger"
    turns = {"sess-steps-0001": [("tidy the org screens", "Tidied the org screens.\nNext steps:\n"
                                                          "- rename the org route in src/routes.ts"),
                                 ("thanks", "You're welcome!")],
             "sess-quick-0002": [("what time is it in Tokyo?", "It is 21:00 in Tokyo.")]}
    for sid, exchange in turns.items():
        hook_ok(home, event("SessionStart", sid, cwd, source="startup"))
        for asked, said in exchange:
            hook_ok(home, event("UserPromptSubmit", sid, cwd, prompt=asked))
            hook_ok(home, event("Stop", sid, cwd, last_assistant_message=said))
        hook_ok(home, event("SessionEnd", sid, cwd, reason="prompt_input_exit"))
    block = hook_ok(home, event("SessionStart", "sess-next-0003", cwd, source="startup"))
    still = block.split("Still open from earlier sessions:\n", 1)[1]
    assert still.startswith('- "rename the org route in src/routes.ts" (ssess-ste\'s closing message'), block


def test_a_session_of_courtesies_only_closes_on_its_last(tmp_path: Any) -> None:
    home, cwd = tmp_path / "home", "/home/dev/code/ledger"
    hook_ok(home, event("SessionStart", "sess-hello-0001", cwd, source="startup"))
    for asked, said in (("hi", "Hello!"), ("thanks, bye", "You're welcome, see you.")):
        hook_ok(home, event("UserPromptSubmit", "sess-hello-0001", cwd, prompt=asked))
        hook_ok(home, event("Stop", "sess-hello-0001", cwd, last_assistant_message=said))
    lead = part(hook_ok(home, event("SessionStart", "sess-next-0002", cwd, source="startup")), "Last session")
    closing = next(line for line in lead.splitlines() if "message (p" in line)
    assert closing.startswith("Closing message (p") and closing.endswith("You're welcome, see you."), lead
