"""Hostile and broken hook input: bad bytes are replaced and the event stored; anything else a
hook cannot use is refused with exit 1, one line on stderr and a warning in the log that
`nmem doctor` reads. Never an "internal error", never exit 2, never a traceback.

The fuzzed cases run the hook entry (`nmem.adapters.hooks.run.run`) in this process on raw stdin bytes,
hundreds of events against one real database; the fixed cases run `nmem record` processes.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures.harness import hook_env, query
from nmem.adapters.hooks import run as hooks
from nmem.setup.doctor import _LOG_LINE

CWD = "/home/dev/code/fuzz"
EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "PostToolUseFailure", "PreCompact", "Stop",
          "SubagentStop", "SessionEnd", "Notification")
TOOLS = ("Bash", "Read", "Edit", "MultiEdit", "Write", "NotebookEdit", "Grep", "Glob", "WebFetch", "WebSearch",
         "Task", "TodoWrite", "mcp__github__get_issue")
INPUT_KEYS = ("command", "file_path", "old_string", "new_string", "content", "pattern", "path", "url", "prompt",
              "edits", "description", "notebook_path", "new_source", "query", "todos")

# Any text, lone surrogates included (hypothesis leaves them out unless asked).
texts = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)


@st.composite
def hook_payloads(draw: st.DrawFn) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "hook_event_name": draw(st.sampled_from(EVENTS) | texts),
        "session_id": draw(st.sampled_from(("fuzz-1", "fuzz-2")) | texts),
        "cwd": draw(st.just(CWD) | texts),
    }
    optional = {
        "tool_name": st.sampled_from(TOOLS) | texts,
        "tool_input": st.dictionaries(st.sampled_from(INPUT_KEYS) | texts, json_values, max_size=5),
        "tool_response": json_values | st.dictionaries(st.sampled_from(("stdout", "stderr", "filePath", "success",
                                                                        "interrupted", "content")), json_values),
        "prompt": texts, "last_assistant_message": texts, "error": texts, "source": texts, "reason": texts,
        "transcript_path": st.just("") | texts, "agent_id": texts, "tool_use_id": texts,
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            payload[key] = draw(strategy | json_values)
    if draw(st.integers(0, 9)) == 0:  # now and then a required field of the wrong type
        payload[draw(st.sampled_from(("hook_event_name", "session_id", "cwd")))] = draw(json_values)
    return payload


@st.composite
def hook_inputs(draw: st.DrawFn) -> bytes:
    """A payload as bytes: escaped, raw surrogates (not UTF-8), or with stray bytes dropped in."""
    payload = draw(hook_payloads())
    form = draw(st.sampled_from(("escaped", "raw", "stray bytes")))
    if form == "escaped":
        return json.dumps(payload).encode()
    raw = json.dumps(payload, ensure_ascii=False).encode("utf-8", "surrogatepass")
    if form == "stray bytes":
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.sampled_from((b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\x80\x80"))) + raw[at:]
    return raw


def run_hook_entry(home: Path, raw: bytes) -> tuple[int, str]:
    stdin = io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    code = hooks.run(["record"], stdin, out, err, env={"NMEM_HOME": str(home)})
    return code, err.getvalue()


def error_lines(home: Path) -> list[str]:
    log = home / "logs" / "nmem.log"
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return [line for line in lines if " ERROR " in line]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=hook_inputs())
def test_any_input_is_stored_or_refused_in_one_clear_line(tmp_path: Path, raw: bytes) -> None:
    home = tmp_path / "home"
    code, err = run_hook_entry(home, raw)
    assert code in (0, 1), (code, err)
    if code == 0:
        assert err == ""
    else:
        assert err.startswith("nmem: ") and err.endswith("\n") and err.count("\n") == 1, err
        assert "internal error" not in err and "Traceback" not in err, err
    assert error_lines(home) == []


def test_fuzzed_events_reach_the_database(tmp_path: Path) -> None:
    """The property above must not pass by refusing everything: well-formed events among
    the fuzzed ones are stored."""
    home = tmp_path / "home"
    stored = 0
    for i, text in enumerate(("plain", "caf\udce9 \ud800", "emoji \U0001f600", "nul \x00 byte")):
        payload = {"hook_event_name": "UserPromptSubmit", "session_id": f"fz-{i}", "cwd": CWD, "prompt": text}
        code, err = run_hook_entry(home, json.dumps(payload).encode())
        assert (code, err) == (0, "")
        stored += 1
    assert len(query(home, "SELECT id FROM prompts")) == stored


# -- bad bytes through real processes ----------------------------------------------------------------


def hook_bytes(home: Path, raw: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "nmem", "record"], input=raw, capture_output=True,
                          env=hook_env(home), timeout=60, check=False)


def test_invalid_utf8_in_a_prompt_is_replaced_and_the_prompt_stored(tmp_path: Path) -> None:
    home = tmp_path / "home"
    raw = (b'{"hook_event_name": "UserPromptSubmit", "session_id": "bytes", "cwd": "' + CWD.encode()
           + b'", "prompt": "fix the caf\xe9 export \xff\xfe for \xed\xa0\x80 rows"}')
    done = hook_bytes(home, raw)
    assert (done.returncode, done.stderr) == (0, b"")
    (row,) = query(home, "SELECT content FROM prompts")
    assert row["content"] == "fix the caf\ufffd export \ufffd\ufffd for \ufffd\ufffd\ufffd rows"


def test_lone_surrogate_escapes_become_replacement_characters_everywhere(tmp_path: Path) -> None:
    home = tmp_path / "home"
    payload = {"hook_event_name": "PostToolUse", "session_id": "sur\ud800", "cwd": CWD, "tool_name": "Bash",
               "tool_input": {"command": "echo \udfff half a pair", "\ud83d key": "x"},
               "tool_response": {"stdout": "\ud83d", "stderr": "", "interrupted": False}}
    done = hook_bytes(home, json.dumps(payload).encode())  # ensure_ascii: `\ud800` escapes
    assert (done.returncode, done.stderr) == (0, b"")
    (obs,) = query(home, "SELECT session_id, content FROM observations")
    assert obs == {"session_id": "sur\ufffd", "content": "echo \ufffd half a pair"}


def test_a_valid_surrogate_pair_is_kept(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = hook_bytes(home, b'{"hook_event_name": "UserPromptSubmit", "session_id": "pair", "cwd": "/x", '
                            b'"prompt": "ship it \\ud83d\\ude80"}')
    assert (done.returncode, done.stderr) == (0, b"")
    assert query(home, "SELECT content FROM prompts") == [{"content": "ship it \U0001f680"}]


@pytest.mark.parametrize("depth", [200, 5_000, 200_000])
def test_deeply_nested_input_is_refused_in_one_line_or_stored(tmp_path: Path, depth: int) -> None:
    home = tmp_path / "home"
    nested = "[" * depth + "]" * depth
    raw = ('{"hook_event_name": "PostToolUse", "session_id": "deep", "cwd": "/x", "tool_name": "mcp__x__y", '
           f'"tool_input": {{"deep": {nested}}}}}').encode()
    done = hook_bytes(home, raw)
    err = done.stderr.decode()
    if depth == 200:
        assert (done.returncode, err) == (0, "")
    else:
        assert done.returncode == 1 and err.count("\n") == 1 and "nested too deeply" in err, err
    assert error_lines(home) == []


# -- refusals are logged where `nmem doctor` looks -----------------------------------------------------


@pytest.mark.parametrize(("raw", "reason"), [
    (b"{not json", "hook input is not valid JSON"),
    (b'{"hook_event_name": "PostToolUse", "session_id": "s", "cwd": "/x"}', "PostToolUse without 'tool_name'"),
    (b'{"hook_event_name": "Stop", "cwd": "/x"}', "missing required field 'session_id'"),
])
def test_refused_input_is_logged_as_one_warning_line(tmp_path: Path, raw: bytes, reason: str) -> None:
    home = tmp_path / "home"
    done = hook_bytes(home, raw)
    assert done.returncode == 1 and done.stderr.decode().count("\n") == 1
    lines = (home / "logs" / "nmem.log").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1, lines
    match = _LOG_LINE.match(lines[0])
    assert match is not None and match.group(2) == "WARNING", lines
    assert match.group(3).startswith("hook input rejected: ") and reason in match.group(3)


def test_an_unreadable_input_file_is_refused_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    missing = tmp_path / "no-such-event.json"
    done = subprocess.run([sys.executable, "-m", "nmem", "record", "--input", str(missing)], capture_output=True,
                          text=True, env=hook_env(home), timeout=60, check=False)
    assert (done.returncode, done.stderr) == (1, f"nmem: cannot read --input {missing}: No such file or directory\n")
    (line,) = (home / "logs" / "nmem.log").read_text(encoding="utf-8").splitlines()
    assert " WARNING hook input rejected: cannot read --input " in line
