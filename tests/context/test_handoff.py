"""Where a session left off: which failures a later run fixed, and what a closing message leaves to do."""

from __future__ import annotations

import pytest

from nmem.context.handoff import command_key, display_command, error_gist, failures, pending_lines
from nmem.models import Observation


@pytest.mark.parametrize("content,shown", [
    ("pytest -q", "pytest -q"),
    ("cd /repo && .venv/bin/pytest -q tests/x.py 2>&1 | tail -20", ".venv/bin/pytest -q tests/x.py"),
    ("cd a && cd b && make test | grep -v warning | head", "make test"),
    ("npm test || true", "npm test || true"),
    ("make build\nOutput: boom", "make build"),
    ("FOO=1 ./run.sh >/dev/null 2>&1", "FOO=1 ./run.sh"),
    ("cd /repo; source .venv/bin/activate && pytest -x; echo done", "pytest -x; echo done"),
    ("cd /repo", "cd /repo"),
])
def test_display_command_drops_scene_setting_and_output_filters(content: str, shown: str) -> None:
    assert display_command(content) == shown


@pytest.mark.parametrize("failed,passed,fixes", [
    ("pytest tests/test_a.py", "pytest tests/test_a.py", True),
    ("pytest tests/test_a.py::test_x", "python -m pytest tests/", True),          # a directory holds it
    ("pytest tests/test_a.py::test_x", ".venv/bin/pytest -q", True),              # the whole suite
    ("pytest -q tests/test_a.py", "uv run pytest tests/test_a.py -x", True),      # options and wrappers aside
    ("cd /r && pytest tests/test_a.py 2>&1 | tail", "pytest tests/test_a.py", True),
    ("pytest tests/test_a.py", "pytest tests/test_b.py", False),
    ("pytest tests/", "pytest tests/test_a.py", False),                           # a part does not fix the whole
    ("pytest -k login", "pytest tests/test_other.py", False),
    ("pytest -k login", "pytest -k login -q", True),
    ("pytest tests/test_a.py", "pytest -k login tests/", False),                  # a subset of the directory
    ("pytest -k login", "pytest", True),
    ("cargo test parser", "cargo test", True),
    ("cargo test parser", "cargo test lexer", False),
    ("npm run test -- auth", "npm run test", True),
    ("make lint", "make lint", True),
    ("make lint", "make", False),
    ("npm run lint", "npm run lint -- --fix", False),
    ("FOO=1 timeout 60 make check", "make check", True),
])
def test_a_passing_run_fixes_the_same_command_or_test_target(failed: str, passed: str, fixes: bool) -> None:
    assert command_key(passed).covers(command_key(failed)) is fixes


def obs(i: int, obs_type: str, content: str, *, path: str | None = None,
        metadata: dict[str, object] | None = None, tool: str = "Bash") -> Observation:
    return Observation(i, "s1", "p", None, 1000 + i, obs_type, "PostToolUse", tool, path, content, metadata)


def test_failures_fold_repeats_and_remember_the_fix() -> None:
    found = failures([
        obs(1, "command_error", "pytest tests/a.py\n1 failed", metadata={"error": "E assert 1 == 2\n1 failed in 0.1s"}),
        obs(2, "command_error", "pytest -q tests/a.py", metadata={"error": "1 failed in 0.1s"}),
        obs(3, "command_error", "make lint", metadata={"error": "x.py:1: error: bad"}),
        obs(4, "command", "pytest tests/"),
        obs(5, "command_error", "make lint", metadata={"error": "x.py:1: error: bad"}),
        obs(6, "command", "make lint"),
        obs(7, "command_error", "make lint", metadata={"error": "x.py:9: error: worse"}),
    ])
    assert [(f.label, f.fails, f.fixed_by.id if f.fixed_by else None, f.last.id) for f in found] == [
        ("pytest tests/a.py", 2, 4, 2),
        ("make lint", 3, None, 7),       # failed again after its fix: open
    ]
    assert found[1].error == "x.py:9: error: worse"


def test_failed_file_tools_are_fixed_by_the_same_kind_of_success() -> None:
    found = failures([
        obs(1, "file_error", "/r/a.py", path="/r/a.py", metadata={"tool": "Edit", "error": "not found"}, tool="Edit"),
        obs(2, "file_error", "/r/b.py", path="/r/b.py", metadata={"tool": "Read", "denied": True}, tool="Read"),
        obs(3, "file_read", "/r/a.py", path="/r/a.py", tool="Read"),   # a read does not redo an edit
        obs(4, "file_edit", "/r/b.py", path="/r/b.py", tool="Edit"),   # an edit does not redo a read
        obs(5, "file_edit", "/r/a.py", path="/r/a.py", tool="Edit"),
    ])
    assert [(f.label, f.path, f.open, f.denied) for f in found] == [
        ("Edit", "/r/a.py", False, False), ("Read", "/r/b.py", True, True)]


@pytest.mark.parametrize("output,gist", [
    ("collected 4 items\n\ntests/x.py ..F.\n=== FAILURES ===\nE  assert 1 == 2\n=== 1 failed, 3 passed in 0.2s ===",
     "1 failed, 3 passed in 0.2s"),
    ('Traceback (most recent call last):\n  File "x.py", line 1\nModuleNotFoundError: No module named \'yaml\'',
     "ModuleNotFoundError: No module named 'yaml'"),
    ("src/a.ts:3:7  error  'x' is unused\nsrc/b.ts:1:1  error  'y' is unused\n\n2 problems",
     "src/a.ts:3:7 error 'x' is unused"),
    ("Exit code 1\nE   ModuleNotFoundError: No module named 'billing.pdf'\n1 error in 0.05s",
     "1 error in 0.05s · ModuleNotFoundError: No module named 'billing.pdf'"),
    ("just some output\nlast line", "last line"),
    ("", ""),
])
def test_error_gist_picks_the_telling_line(output: str, gist: str) -> None:
    assert error_gist(output) == gist


def test_pending_lines_find_what_is_still_to_do() -> None:
    message = (
        "I fixed the redirect and added a regression test. All tests pass now.\n\n"
        "Still pending: the SSO flow fails against the staging IdP.\n\n"
        "## Next steps\n1. mock the IdP in tests\n2. ask ops for a staging tenant\n\n"
        "No remaining lint errors. TODO: update the changelog.\n"
        "- [ ] wire the retry (not yet done)\n"
        "- [x] bump the version\n"
        "The remaining tests all pass, nothing is pending.\n"
    )
    assert pending_lines(message) == [
        "Still pending: the SSO flow fails against the staging IdP.",
        "mock the IdP in tests",
        "ask ops for a staging tenant",
        "TODO: update the changelog.",
        "wire the retry (not yet done)",
    ]
    assert pending_lines(message, limit=2) == pending_lines(message)[:2]
    assert pending_lines("Done. Everything passes and there is nothing left to do.") == []


def test_pending_lines_are_cut_at_word_boundaries() -> None:
    long = "Still failing: " + "the importer chokes on very large CSV files with quoted newlines " * 4
    (line,) = pending_lines(long, size=80)
    assert len(line) <= 80 and line.endswith("…") and long.startswith(line[:-1].rstrip())
    assert long[len(line) - 1] == " "
