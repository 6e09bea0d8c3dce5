"""Open work carried across sessions, as a user meets it: four sessions of a real git project
recorded through the hook process. The first leaves failures and to-dos open (and probes a missing
file), the second only asks a question, the third fixes part of it; each next SessionStart prints
what is still open and what was fixed.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from fixtures.harness import event, hook_ok

LINT = "web/org.ts:3:7  error  'x' is assigned a value but never used\n\n1 problem (1 error, 0 warnings)"
TESTS = "not ok 1 - parser handles empty input\n# tests 4\n# pass 3\n# fail 1"
FIRST_CLOSING = ("The parser now reads the new header.\n\nNext steps:\n"
                 "- document the --strict flag in docs/guide.md\n- add retries to the HTTP fetcher\n")


def bash(sid: str, cwd: str, command: str, code: int = 0, out: str = "") -> dict[str, Any]:
    return event("PostToolUse", sid, cwd, tool_name="Bash", tool_input={"command": command},
                 tool_response={"stdout": out, "stderr": "", "exit_code": code, "interrupted": False})


def edit(sid: str, cwd: str, path: str) -> dict[str, Any]:
    return event("PostToolUse", sid, cwd, tool_name="Edit",
                 tool_input={"file_path": path, "old_string": "a", "new_string": "b"}, tool_response={"filePath": path})


def part(block: str, heading: str) -> list[str]:
    lines = block.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    out = []
    for line in lines[start + 1:]:
        if not line.startswith("- "):
            break
        out.append(line)
    return out


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("carry")
    repo = base / "code" / "shop"
    (repo / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    home = base / "nmem"
    cwd = root = str(repo)
    s1, s2, s3 = "sess-work-0001", "sess-ask-0002", "sess-fix-0003"
    for payload in [
        event("SessionStart", s1, cwd, source="startup"),
        event("UserPromptSubmit", s1, cwd, prompt="make the parser read the new header"),
        event("PostToolUseFailure", s1, cwd, tool_name="Read", tool_input={"file_path": f"{root}/NOTES.md"},
              tool_use_id="toolu_1", error="File does not exist.", is_interrupt=False),
        edit(s1, cwd, f"{root}/src/parser.js"),
        bash(s1, cwd, "npm test", code=1, out=TESTS),
        bash(s1, cwd, "npm run lint", code=1, out=LINT),
        event("Stop", s1, cwd, last_assistant_message=FIRST_CLOSING),
        event("SessionEnd", s1, cwd, reason="prompt_input_exit"),
        # a trivial session in between: a question, a read, an answer
        event("SessionStart", s2, cwd, source="startup"),
        event("UserPromptSubmit", s2, cwd, prompt="what does the config loader do?"),
        event("PostToolUse", s2, cwd, tool_name="Read", tool_input={"file_path": f"{root}/src/config.js"}),
        event("Stop", s2, cwd, last_assistant_message="It reads config.toml and merges the environment over it."),
        event("SessionEnd", s2, cwd, reason="prompt_input_exit"),
    ]:
        hook_ok(home, payload)
    after_trivial = hook_ok(home, event("SessionStart", s3, cwd, source="startup"))
    for payload in [
        event("UserPromptSubmit", s3, cwd, prompt="document the strict flag and fix the parser test"),
        edit(s3, cwd, f"{root}/docs/guide.md"),
        edit(s3, cwd, f"{root}/src/parser.js"),
        bash(s3, cwd, "npm test", out="# tests 4\n# pass 4\n# fail 0"),
        event("Stop", s3, cwd, last_assistant_message="Documented --strict and fixed the empty-input case."),
        event("SessionEnd", s3, cwd, reason="prompt_input_exit"),
    ]:
        hook_ok(home, payload)
    after_fix = hook_ok(home, event("SessionStart", "sess-next-0004", cwd, source="startup"))
    return {"after_trivial": after_trivial, "after_fix": after_fix}


def test_a_trivial_session_does_not_erase_what_the_one_before_left_open(sessions: dict[str, Any]) -> None:
    block = sessions["after_trivial"]
    assert "## Last session ssess-ask" in block, "the lead is the trivial session"
    carried = part(block, "Still open from earlier sessions")
    assert carried[0].startswith("- ✗ npm test — failed: 1 failed, 3 passed") and "ssess-wor just now)" in carried[0]
    assert carried[1].startswith("- ✗ npm run lint — failed: web/org.ts:3:7") and "ssess-wor" in carried[1]
    assert carried[2:] == [
        '- "document the --strict flag in docs/guide.md" (ssess-wor\'s closing message, just now)',
        '- "add retries to the HTTP fetcher" (ssess-wor\'s closing message, just now)',
    ]


def test_a_read_of_a_missing_file_is_a_probe_not_open_work(sessions: dict[str, Any]) -> None:
    for block in sessions.values():
        assert "NOTES.md" not in block


def test_a_later_session_resolves_what_it_fixed_and_carries_the_rest(sessions: dict[str, Any]) -> None:
    block = sessions["after_fix"]
    assert "## Last session ssess-fix" in block
    carried = part(block, "Still open from earlier sessions")
    assert len(carried) == 2, carried
    assert carried[0].startswith("- ✗ npm run lint — failed: "), "still failing: never passed since"
    assert carried[1] == '- "add retries to the HTTP fetcher" (ssess-wor\'s closing message, just now)'
    fixed = next(line for line in block.splitlines() if line.startswith("Fixed: "))
    assert "✓ npm test (failed, fixed by " in fixed and "(from ssess-wor)" in fixed
    assert "docs/guide.md" not in "\n".join(carried), "the edit of docs/guide.md closed that to-do"
