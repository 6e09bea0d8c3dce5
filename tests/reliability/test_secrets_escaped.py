"""Secrets inside escaped text: a JSON string (a tool's JSON output, an MCP result, a JSON-encoded
argument, a `docker inspect` or `kubectl get -o json`), once or twice encoded, where a line break
is the two characters `\\n` and a quote is `\\"`. Every case of the corpus is redacted there too,
through each agent's hook process, and the escaping is kept when it was the text's only way to
write those characters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import hook_payload
from fixtures import codex_shapes as cx
from fixtures import cursor_shapes as cu
from fixtures import gemini_shapes as gm
from fixtures.harness import db_path, hook, raw_bytes
from nmem.capture.privacy import scrub
from reliability.secret_corpus import SECRET_CASES, Case, leaked

CWD = "/home/dev/code/billing-api"


def escaped(text: str) -> str:
    """The text as one JSON string between two lines, the way a tool's JSON output holds it."""
    return json.dumps("first line\n" + text + "\nnext line")


@pytest.mark.parametrize("times", [1, 2])
def test_every_secret_of_the_corpus_is_redacted_inside_escaped_text(times: int) -> None:
    missed = []
    for case in SECRET_CASES:
        text = case.text
        for _ in range(times):
            text = escaped(text)
        if leaked(scrub(text), [case]):
            missed.append(f"{case.id}: {scrub(text)[:160]!r}")
    assert missed == [], "\n".join(missed)


def test_a_json_string_keeps_its_escapes_and_a_mixed_text_is_read_decoded() -> None:
    token = "GITHUB_TOKEN=abcdef123456ghijk"
    out = scrub(json.dumps(f"A=1\n{token}\nB=2"))
    assert out == '"A=1\\nGITHUB_TOKEN=[REDACTED:secret]\\nB=2"'
    assert json.loads(out) == "A=1\nGITHUB_TOKEN=[REDACTED:secret]\nB=2"
    out = scrub(f'{{"env": "A=1\\n{token}\\nB=2"}}\nexit 0')  # a real line break beside escaped ones
    assert out == '{"env": "A=1\nGITHUB_TOKEN=[REDACTED:secret]\nB=2"}\nexit 0'
    assert scrub(out) == out
    plain = '{"log": "line one\\nline two\\tdone", "path": "C:\\\\new\\\\tmp"}'
    assert scrub(plain) == plain  # nothing secret: not a character changed


def chunks(cases: tuple[Case, ...], size: int) -> list[str]:
    out, part = [], ""
    for case in cases:
        if part and len(part) + len(case.text) > size:
            out.append(part)
            part = ""
        part += case.text + "\n"
    return [*out, part]


def agent_events(part: str, n: int) -> list[tuple[str, dict[str, Any]]]:
    """Each agent's hook payloads carrying `part` JSON-encoded where a tool's answer or arguments go."""
    text = escaped(part)
    return [
        ("claude-code", hook_payload("PostToolUse", session_id=f"cc-{n}", cwd=CWD, tool_name="mcp__vault__read",
                                     tool_input={"query": text}, tool_response=text)),
        ("claude-code", hook_payload("PostToolUse", session_id=f"cc-{n}", cwd=CWD, tool_name="Bash",
                                     tool_input={"command": "kubectl get secret app -o json"},
                                     tool_response={"stdout": text, "stderr": "", "exit_code": 0})),
        ("codex", cx.tool(CWD, "mcp__vault__read", {"query": text}, text, session_id=f"cx-{n}")),
        ("codex", cx.bash(CWD, "docker inspect app", text, session_id=f"cx-{n}")),
        ("gemini", gm.shell(CWD, "cat config.json", text, session_id=f"gm-{n}")),
        ("gemini", gm.after_tool(CWD, "mcp_vault_read", {"query": text}, text, session_id=f"gm-{n}")),
        ("cursor", cu.mcp(CWD, "vault", json.dumps({"query": text}), text, conversation=f"cu-{n}")),
        ("cursor", cu.shell(CWD, "cat config.json", text, conversation=f"cu-{n}")),
    ]


AGENTS = ("claude-code", "codex", "gemini", "cursor")


@pytest.mark.parametrize("agent", AGENTS)   # one database each: the four run side by side under xdist
def test_no_escaped_secret_reaches_the_database_through_any_agents_hook(tmp_path: Path, agent: str) -> None:
    home = tmp_path / "home"
    # a few cases share a value with another case's harmless field (a GCP key file's private_key_id)
    plain = scrub("\n".join(case.text for case in SECRET_CASES))
    cases = tuple(case for case in SECRET_CASES if not leaked(plain, [case]))
    assert len(cases) > len(SECRET_CASES) - 5

    def start(n: int) -> dict[str, Any]:
        return {"claude-code": lambda: hook_payload("SessionStart", session_id=f"cc-{n}", cwd=CWD, source="startup"),
                "codex": lambda: cx.session_start(CWD, session_id=f"cx-{n}"),
                "gemini": lambda: gm.session_start(CWD, session_id=f"gm-{n}"),
                "cursor": lambda: cu.session_start(CWD, conversation=f"cu-{n}")}[agent]()

    sent = 0
    for n, part in enumerate(chunks(cases, 1500)):  # within the head a tool's answer keeps
        done = hook(home, start(n), args=("record", "--agent", agent))
        assert done.returncode == 0, done.stderr
        for _, payload in (event for event in agent_events(part, n) if event[0] == agent):
            done = hook(home, payload, args=("record", "--agent", agent))
            assert done.returncode == 0, done.stderr
            assert leaked(done.stdout + done.stderr, cases) == {}
            sent += 1
    assert sent >= 2
    on_disk = raw_bytes(db_path(home), home / "nmem.db-wal", home / "spool", home / "logs")
    assert b"[REDACTED:" in on_disk
    assert leaked(on_disk, cases) == {}, "secret pieces found in nmem's files"


def test_code_with_escapes_keeps_them_when_its_secret_is_found_as_written() -> None:
    key = "sk-proj-Zr8bq2QKx7L0nDfT9wYhAaBbCcDdEeFfGgHhIiJj"
    code = f'API_KEY = "{key}"\nprint("done\\n\\tnext")\n'
    assert scrub(code) == 'API_KEY = "[REDACTED:openai-key]"\nprint("done\\n\\tnext")\n'
