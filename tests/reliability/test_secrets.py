"""Secrets never reach disk; look-alikes come through untouched.

The corpora live in secret_corpus.py: about 700 cases of some 90 secret formats in the contexts
an agent meets, and about 170 harmless look-alikes. The filter must redact every secret (recall exactly 1) and
leave every look-alike unchanged (false-positive rate exactly 0). End to end, one case of every
format travels through real `nmem` processes in every field nmem stores, and the raw bytes of the
database, its WAL, the spool, the log and everything printed are searched for any 12-character
piece of any secret.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import nmem
from conftest import run_nmem
from fixtures.harness import db_path, event, hook, hook_env, query, raw_bytes
from nmem.capture.privacy import scrub
from nmem.capture.secret_formats import FORMATS, Format
from reliability.secret_corpus import FORMATS as CORPUS_FORMATS
from reliability.secret_corpus import GIT_SHA, LOOKALIKES, PREFIXED, SECRET_CASES, Case, leaked

CWD = "/home/dev/code/billing-api"
CONTEXTS = {"prose", "export", "dotenv", "json", "yaml", "header", "url", "output", "cli"}


def missed(cases: tuple[Case, ...] | list[Case]) -> list[str]:
    """Cases whose scrubbed text still holds a piece of a secret, or shows no placeholder."""
    out = []
    for case in cases:
        scrubbed = scrub(case.text)
        if leaked(scrubbed, [case]) or "[REDACTED:" not in scrubbed:
            out.append(f"{case.id}: {scrubbed[:160]!r}")
    return out


# -- the corpora themselves -------------------------------------------------------------------------


def test_the_corpora_are_as_broad_as_promised() -> None:
    assert len(CORPUS_FORMATS) >= 40
    assert len(SECRET_CASES) >= 600 and len(LOOKALIKES) >= 150
    # every token format with a prefix of its own is tried in all nine contexts
    contexts: dict[str, set[str]] = {}
    for case in SECRET_CASES:
        contexts.setdefault(case.fmt, set()).add(case.context)
    assert all(contexts[fmt] == CONTEXTS for fmt in PREFIXED)
    assert len({case.text for case in SECRET_CASES}) == len(SECRET_CASES)


def test_every_format_in_the_filter_is_proven_by_a_case() -> None:
    """No format in the table is dead weight: each one redacts at least one corpus case by itself."""
    def proven(fmt: Format) -> bool:
        return any(fmt.redact(case.text) != case.text for case in SECRET_CASES)

    assert [f"{fmt.kind}: {fmt.regex.source[:60]}" for fmt in FORMATS if not proven(fmt)] == []


# -- recall and false positives, exactly ------------------------------------------------------------


def test_every_secret_of_the_corpus_is_redacted() -> None:
    misses = missed(SECRET_CASES)
    recall = (len(SECRET_CASES) - len(misses)) / len(SECRET_CASES)
    assert misses == [], "\n".join(misses)
    assert recall == 1.0


def test_every_look_alike_comes_through_unchanged() -> None:
    changed = [f"{text[:80]!r} -> {scrub(text)[:120]!r}" for text in LOOKALIKES if scrub(text) != text]
    false_positive_rate = len(changed) / len(LOOKALIKES)
    assert changed == [], "\n".join(changed)
    assert false_positive_rate == 0.0


def test_secrets_are_found_inside_longer_text_and_the_rest_stays() -> None:
    wrapped = [Case(c.fmt, c.context, f"Running deploy.\n  step 1: {c.text}\n  step 2: done (exit 0)", c.values)
               for c in SECRET_CASES]
    assert missed(wrapped) == []
    for case in wrapped:
        out = scrub(case.text)
        assert out.startswith("Running deploy.\n  step 1: ") and out.endswith("\n  step 2: done (exit 0)"), out


def test_look_alikes_survive_beside_a_secret() -> None:
    """A secret in the same text does not drag its neighbours into the redaction."""
    secret = PREFIXED["github-classic"][0]
    for text in LOOKALIKES:
        out = scrub(f"{text}\nGH_TOKEN={secret}")
        assert out == f"{text}\nGH_TOKEN=[REDACTED:github-token]", out


def test_scrub_is_idempotent() -> None:
    for text in [c.text for c in SECRET_CASES] + list(LOOKALIKES):
        once = scrub(text)
        assert scrub(once) == once, text[:80]


# -- the decisions docs/privacy.md describes ---------------------------------------------------------

UUID = "550e8400-e29b-41d4-a716-446655440000"
HEX32 = "3f2a1b9c4d5e6f708192a3b4c5d6e7f8"


@pytest.mark.parametrize(("text", "redacted"), [
    # a UUID or a hex string is an id beside a neutral name, a key beside a key-like one
    (f"session_id: {UUID}", False),
    (f"X-Request-Id: {UUID}", False),
    (f'{{"id": "{UUID}"}}', False),
    (f"apikey {UUID}", True),
    (f"X-Api-Key: {UUID}", True),
    (f'{{"client_secret": "{UUID}"}}', True),
    (f"commit {HEX32}{HEX32[:8]}", False),
    (f"md5 {HEX32}", False),
    (f"--token {HEX32}", True),
    (f"DD_API_KEY={HEX32}", True),
    # a name holds a secret only when the secret word ends it
    ("token_type: 'bearer'", False),
    ("apiKeySource: 'none'", False),
    ("password_field = form.password", False),
    ("token: 'tok_7fQ2mZx9LpW4'", True),
    # a value naming a secret in code is a variable; in configuration it is the value
    ("password = user_password", False),
    ("DB_PASSWORD=user_password", True),
    # a password flag takes any word; `-p` alone prompts; `-p 8080:80` is a port map
    ("mysql -u root -pletmein billing", True),
    ("mysql -u root -p billing", False),
    ("docker run -p 8080:80 nginx", False),
    ("docker login -u bob -p letmein", True),
    ("docker login -u bob --password-stdin", False),
    ("curl -u bob:letmein https://x.test", True),
    ("curl -u bob https://x.test", False),
])
def test_documented_decisions(text: str, redacted: bool) -> None:
    assert (scrub(text) != text) is redacted, scrub(text)


def test_labels_stay_readable() -> None:
    assert scrub("export X_API_KEY=xk9f8e7d6c5b4a3210fedcba") == "export X_API_KEY=[REDACTED:secret]"
    assert scrub('{"password": "Zq8!mK2#vT5w"}') == '{"password": "[REDACTED:password]"}'
    assert scrub("mysql -u root -pZq8mK2vT5w db") == "mysql -u root -p[REDACTED:password] db"
    assert scrub("curl -u admin:Zq8mK2vT5w https://x.test") == "curl -u admin:[REDACTED:password] https://x.test"
    assert (scrub("postgres://app:Zq8mK2vT5w@db.internal:5432/billing")
            == "postgres://app:[REDACTED:password]@db.internal:5432/billing")


PLAIN = (
    "Fixed the flaky test: the retry loop now waits for the server to be ready before it sends.",
    "/home/dev/code/billing-api/src/billing/invoices/rounding.py",
    "pytest tests/test_invoice.py::test_total_rounds_half_up -q",
    "===== 128 passed, 2 skipped in 4.31s =====",
    f"commit {GIT_SHA}\nAuthor: Dev <dev@acme.io>\n\n    fix rounding of totals",
    '{"id": "550e8400-e29b-41d4-a716-446655440000", "status": "done", "items": 3}',
    "OAuth2AuthorizedClientArgumentResolver handles the request",
    "NotificationPreferencesController#update returned 422",
    "git push origin feat/invoice-rounding",
    "background: url(data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAC)",
)


def test_text_without_secrets_never_loads_the_regex_module() -> None:
    """Scrubbing runs in every hook; `re` costs ~8 ms to import, so ordinary text must not need it."""
    code = ("import sys\n"
            "from nmem import jsonlite\n"
            "from nmem.capture.privacy import scrub\n"
            "texts = jsonlite.loads(sys.stdin.read())\n"
            "assert all(scrub(t) == t for t in texts)\n"
            "print('re' in sys.modules)\n")
    # -S, as the hook entry runs: site's .pth files are not nmem's to account for
    src = str(Path(nmem.__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, "-S", "-c", code], input=json.dumps(PLAIN), capture_output=True,
                          text=True, env=hook_env(Path("/nonexistent"), PYTHONPATH=src), timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


# -- end to end: real processes, every stored field, raw bytes ----------------------------------------


def one_case_per_format() -> list[Case]:
    """The shortest case of each format: every format, in as few characters as possible."""
    best: dict[str, Case] = {}
    for case in SECRET_CASES:
        if case.fmt not in best or len(case.text) < len(best[case.fmt].text):
            best[case.fmt] = case
    return sorted(best.values(), key=lambda c: c.fmt)


class Rotation:
    """Hands out cases in turn, as many as fit a field's stored size, until each was used once."""

    def __init__(self, cases: list[Case]) -> None:
        self.cases = cases
        self.next = 0
        self.used = 0

    def take(self, size: int) -> str:
        taken: list[str] = []
        while True:
            case = self.cases[self.next % len(self.cases)]
            if taken and sum(len(t) + 1 for t in taken) + len(case.text) > size:
                break
            taken.append(case.text)
            self.next += 1
            self.used += 1
        return "\n".join(taken)

    @property
    def done(self) -> bool:
        return self.used >= len(self.cases)


def chunks(cases: list[Case], size: int) -> list[str]:
    rotation = Rotation(cases)
    out = []
    while not rotation.done:
        out.append(rotation.take(size))
    return out


def write_transcript(path: Path, session: str, thinking: str) -> None:
    lines = [
        {"type": "user", "sessionId": session, "cwd": CWD, "timestamp": "2026-11-01T10:00:00Z",
         "uuid": "u1", "parentUuid": None, "message": {"role": "user", "content": "deploy it"}},
        {"type": "assistant", "sessionId": session, "cwd": CWD, "timestamp": "2026-11-01T10:00:05Z",
         "uuid": "a1", "parentUuid": "u1",
         "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
                     "content": [{"type": "thinking", "thinking": thinking, "signature": "sig"}]}},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")


def field_events(cases: list[Case], session: str, transcript: Path) -> Iterator[dict[str, Any]]:
    """Hook events that carry the cases through every field nmem stores, each within its stored size."""
    def ev(name: str, **fields: Any) -> dict[str, Any]:
        return event(name, session, CWD, **fields)

    everything = "\n".join(c.text for c in cases)
    yield ev("SessionStart", source="startup")
    for part in chunks(cases, 7500):       # prompts keep 8,000 characters
        yield ev("UserPromptSubmit", prompt=f"please deploy with these\n{part}")
    yield ev("UserPromptSubmit", prompt="[decision] CI uses " + cases[0].text.replace("\n", " ")
             + "\nremember: the staging credentials are " + cases[1].text.replace("\n", " "))
    for part in chunks(cases, 1900):       # commands keep 2,000
        yield ev("PostToolUse", tool_name="Bash", tool_input={"command": part}, tool_response={"stdout": "ok"})
    # the fields kept only in part (heads of 150-400 characters, tails of 400-800) take turns
    small = Rotation(cases)
    rounds = 0
    while not small.done:
        rounds += 1
        yield ev("PostToolUseFailure", tool_name="Bash",
                 tool_input={"command": "./deploy.sh", "description": small.take(150)},
                 error="Exit code 1\n" + small.take(750))
        output = small.take(750)  # a failed command keeps its stderr, else its stdout
        yield ev("PostToolUse", tool_name="Bash", tool_input={"command": "./deploy.sh --verbose"},
                 tool_response={"stdout": "" if rounds % 2 else output, "stderr": output if rounds % 2 else "",
                                "exit_code": 2})
        yield ev("PostToolUse", tool_name="Write",
                 tool_input={"file_path": f"{CWD}/.env.{rounds}", "content": small.take(150)})
        yield ev("PostToolUse", tool_name="Edit",
                 tool_input={"file_path": f"{CWD}/config_{rounds}.py", "old_string": everything,
                             "new_string": small.take(150)})
        yield ev("PostToolUse", tool_name="WebFetch",
                 tool_input={"url": f"https://docs.example.com/{rounds}", "prompt": small.take(150)})
        yield ev("PostToolUseFailure", tool_name="mcp__vault__put", tool_input={"value": small.take(280)},
                 error=small.take(750))
        yield ev("PostToolUse", tool_name="Task", tool_input={"description": f"rotate keys {rounds}",
                                                              "prompt": small.take(390)})
        yield ev("PostToolUse", tool_name="SomeFutureTool", tool_input={"payload": small.take(280)})
    # fields stored whole
    yield ev("PostToolUse", tool_name="Grep", tool_input={"pattern": everything, "glob": everything},
             tool_response={"numFiles": 1, "filenames": [".env"]})
    yield ev("PostToolUse", tool_name="WebFetch", tool_input={"url": "https://api.example.com/?q=" + everything},
             tool_response={"code": 200})
    yield ev("PostToolUse", tool_name="WebSearch", tool_input={"query": everything})
    yield ev("PostToolUse", tool_name="Agent", tool_input={"description": everything, "prompt": "go",
                                                           "subagent_type": "general-purpose"})
    yield ev("PreCompact", trigger="manual", custom_instructions=everything)
    yield ev("SessionStart", source="compact")
    for part in chunks(cases, 7500):       # agent messages keep 8,000 characters
        yield ev("SubagentStop", agent_id="agent-1", agent_type="general-purpose", last_assistant_message=part)
    write_transcript(transcript, session, everything)
    for part in chunks(cases, 7500):
        yield ev("Stop", last_assistant_message=f"Deployed.\n{part}", transcript_path=str(transcript))
    yield ev("SessionEnd", reason="prompt_input_exit")


STORED_FIELDS = {   # field -> (table, row filter, where in the row)
    "user prompt": ("prompts", "source = 'user'", "content"),
    "agent message and reasoning": ("prompts", "source <> 'user'", "content"),
    "Bash command": ("observations", "obs_type = 'command'", "content"),
    "Bash error": ("observations", "obs_type = 'command_error'", "error"),
    "Bash description": ("observations", "obs_type = 'command_error'", "description"),
    "Write head": ("observations", "obs_type = 'file_write'", "head"),
    "Edit head": ("observations", "obs_type = 'file_edit'", "head"),
    "Grep pattern": ("observations", "obs_type = 'search'", "content"),
    "Grep glob": ("observations", "obs_type = 'search'", "glob"),
    "WebFetch URL": ("observations", "obs_type = 'web_fetch'", "content"),
    "WebFetch prompt": ("observations", "obs_type = 'web_fetch'", "prompt"),
    "WebSearch query": ("observations", "obs_type = 'web_search'", "content"),
    "MCP input": ("observations", "obs_type = 'mcp_call'", "content"),
    "MCP error": ("observations", "obs_type = 'mcp_call'", "error"),
    "Task prompt": ("observations", "obs_type = 'task_spawn'", "content"),
    "other tool input": ("observations", "obs_type = 'tool_other'", "content"),
    "memory content": ("memories", "1 = 1", "content"),
    "memory tags": ("memories", "1 = 1", "tags"),
}


def fields_without_placeholders(home: Path) -> list[str]:
    empty = []
    for field, (table, where, column) in STORED_FIELDS.items():
        rows = query(home, f"SELECT * FROM {table} WHERE {where}")
        values = [str(row[column]) if column in row else str(json.loads(row["metadata"] or "{}").get(column, ""))
                  for row in rows]
        if not any("[REDACTED:" in value for value in values):
            empty.append(f"{field}: {len(rows)} rows")
    return empty


def test_no_secret_reaches_any_file_through_any_field(tmp_path: Path) -> None:
    cases = one_case_per_format()
    assert len(cases) == len(CORPUS_FORMATS)
    home = tmp_path / "home"
    outputs: list[str] = []

    def run(payload: dict[str, Any] | str, check: bool = True, **env: str) -> None:
        done = hook(home, payload, **env)
        assert done.returncode == 0 or not check, done.stderr
        outputs.extend((done.stdout, done.stderr))

    events = list(field_events(cases, "leak-1", tmp_path / "transcript.jsonl"))
    for payload in events:
        run(payload)

    # `nmem remember`: content, summary and tags
    for part in chunks(cases, 7500):
        done = run_nmem(["remember", "--stdin", "--summary", "staging access", "--tag", cases[-1].text[:60]],
                        stdin=part, env=hook_env(home, NMEM_PROJECT="billing-api"))
        assert done.returncode == 0, done.stderr
        outputs.extend((done.stdout, done.stderr))

    # a busy database: the event waits in the spool, which must be scrubbed too
    conn = sqlite3.connect(db_path(home), isolation_level=None, timeout=5)
    conn.execute("BEGIN IMMEDIATE")
    try:
        for part in chunks(cases, 7500):
            run(event("UserPromptSubmit", "leak-1", CWD, prompt=part), NMEM_BUSY_BUDGET_MS="50")
        spool_bytes = raw_bytes(home / "spool")
        assert spool_bytes, "the events were not spooled"
    finally:
        conn.rollback()
        conn.close()
    assert leaked(spool_bytes, cases) == {}

    # internal errors and malformed input with secrets in them: the log must not quote them
    broken = tmp_path / "db-dir"
    broken.mkdir()
    run(event("UserPromptSubmit", "leak-2", CWD, prompt="\n".join(c.text for c in cases)), check=False,
        NMEM_DB=str(broken))
    run("{" + json.dumps("\n".join(c.text for c in cases)), check=False)
    assert (home / "logs" / "nmem.log").exists()

    # the next session drains the spool and prints context built from everything stored
    run(event("SessionStart", "leak-3", CWD, source="clear"))
    assert not list((home / "spool").glob("*.json"))

    # every field really carried secrets into the store (none was cut away before the filter saw it)
    assert fields_without_placeholders(home) == []

    on_disk = raw_bytes(db_path(home), home / "nmem.db-wal", home / "spool", home / "logs")
    assert len(on_disk) > 50_000
    assert leaked(on_disk, cases) == {}, "secret pieces found in nmem's files"
    assert leaked("\n".join(outputs), cases) == {}, "secret pieces printed"
