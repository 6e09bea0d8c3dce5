"""Privacy: private blocks, nmem's own context and secrets never reach disk.

Every secret below is FAKE but has the real format of its kind. The corpus proves each
pattern on the filter itself; the end-to-end test sends every secret in every field through
real `nmem record` processes and then searches the raw bytes of the database, its WAL, the
spool and the log for any 12-character piece of any secret.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import hook_payload
from fixtures.harness import db_path, event, hook, observations, query, raw_bytes
from nmem.capture.claude_code import parse
from nmem.capture.privacy import scrub, scrub_value, strip_private
from nmem.service.api import Service

T0 = 1_790_000_000
CWD = "/home/dev/code/billing-api"
WINDOW = 12  # any run of this many characters of a secret counts as a leak


@dataclass(frozen=True)
class Secret:
    kind: str
    text: str             # the secret as it appears in a command, a file or a message
    value: str            # the part that must disappear
    kept: str = ""        # a label the placeholder must leave in place

    def pieces(self) -> set[str]:
        v = self.value.replace("\n", "")
        if len(v) <= WINDOW:
            return {v}
        return {v[i:i + WINDOW] for i in range(len(v) - WINDOW + 1)}


PEM_BODY = ("MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
            "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
            "LxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo9z+\n")
SSH_BODY = ("b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
            "QyNTUxOQAAACBf7r2Jq9Lm3Qp8Zx4Vw6Ks1Nb2Hc3Jd5Fg0AyT7uPXkwAAAJgAAAAA")
GITHUB_PAT = "github_pat_11ABCDEFG0aBcDeFgHiJkL_ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210zyxwvutsrqponmlkjihg"
ANTHROPIC_KEY = ("sk-ant-api03-Qz7Lk3m2PaXy7Wv5Ut4Sr1QpNo0MlKjIhGfEdCbA-9x8w7v6u5t4s3r2q1p0"
                 "Zq8Lk3m2PaXy7Wv5Ut4Sr1QpNo0MlKjIhGfEdAA")
OPENAI_KEY = "sk-proj-Zq8Lk3m2PaXy7Wv5Ut4Sr1QpNo0MlKjIhGfEdCbA_9x8w7v6u5t4s3r2q1p0"
JWT_HEADER = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
JWT_BODY = ("eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
            ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")

SECRETS: tuple[Secret, ...] = (
    Secret("aws-access-key", "aws_access_key_id = AKIAZ3MHQ7VXR2KD4PLE", "AKIAZ3MHQ7VXR2KD4PLE"),
    Secret("aws-secret-key", "aws_secret_access_key = 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",
           "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8Lk3m2Pa", "aws_secret_access_key"),
    Secret("github-token", "GH_TOKEN ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8 set",
           "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"),
    Secret("github-pat", f"git remote set-url origin https://{GITHUB_PAT}@github.com/acme/app.git", GITHUB_PAT),
    Secret("gitlab-token", "git clone https://oauth2:glpat-Ab3dEf6hIj9kLm2nOp5q@gitlab.com/acme/app.git",
           "glpat-Ab3dEf6hIj9kLm2nOp5q", "gitlab.com/acme/app.git"),
    Secret("slack-token", "SLACK_BOT=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
           "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"),
    Secret("slack-webhook", "curl -X POST https://hooks.slack.com/services/T0ABCDEF1/B0ABCDEF2/Zq8Lk3m2PaXy7Wv5Ut4Sr1Qp",
           "T0ABCDEF1/B0ABCDEF2/Zq8Lk3m2PaXy7Wv5Ut4Sr1Qp"),
    Secret("openai-key", f"client = OpenAI(api_key='{OPENAI_KEY}')", OPENAI_KEY),
    Secret("anthropic-key", f"ANTHROPIC_API_KEY={ANTHROPIC_KEY}", ANTHROPIC_KEY),
    Secret("google-api-key", "maps.googleapis.com/maps/api/js?key=AIzaSyD-9tSrke72PouQMnMX7a7eZSW0jkFMBWY",
           "AIzaSyD-9tSrke72PouQMnMX7a7eZSW0jkFMBWY"),
    Secret("stripe-key", "stripe.api_key = \"sk_live_4eC39HqLyjWDarjtT1zdp7dc\"", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    Secret("jwt", f"Cookie: session={JWT_HEADER}.{JWT_BODY}", JWT_BODY),
    Secret("private-key", f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}-----END RSA PRIVATE KEY-----", PEM_BODY),
    Secret("openssh-key", f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SSH_BODY}\n-----END OPENSSH PRIVATE KEY-----",
           SSH_BODY),
    Secret("password-url", "DATABASE_URL=postgres://admin:S3cr3tPassw0rd@db.internal:5432/billing",
           "S3cr3tPassw0rd", "db.internal:5432/billing"),
    Secret("password-assignment", "mysql --user=app password=Hunt3r2Go --host=db", "Hunt3r2Go", "--host=db"),
    Secret("token-assignment", 'config: {token: "tok_7fQ2mZx9LpW4", retries: 3}', "tok_7fQ2mZx9LpW4", "retries: 3"),
    Secret("api-key-export", "export X_API_KEY=xk9f8e7d6c5b4a3210fedcba", "xk9f8e7d6c5b4a3210fedcba",
           "export X_API_KEY="),
    Secret("bearer-header", 'curl -H "Authorization: Bearer abc123def456ghi789jkl012mno" https://api.acme.dev/v1/me',
           "abc123def456ghi789jkl012mno", "https://api.acme.dev/v1/me"),
    Secret("bearer-prose", "then send it as Bearer Zk3r9Qw2Lm8Vt5Ny1Hb6Pc4Jd7 in the header",
           "Zk3r9Qw2Lm8Vt5Ny1Hb6Pc4Jd7", "in the header"),
    Secret("high-entropy", "session cookie value Zx8Qp2Lm9Rt4Vw7Ks1Nb6Hc3Jd5Fg0Ay for staging",
           "Zx8Qp2Lm9Rt4Vw7Ks1Nb6Hc3Jd5Fg0Ay", "for staging"),
)

NOT_SECRETS: tuple[str, ...] = (
    "/home/dev/code/billing-api/src/billing/token_refresh.py",
    "src/main/java/org/springframework/security/oauth2/client/web/OAuth2AuthorizationCodeGrantFilter.java",
    "OAuth2AuthorizedClientArgumentResolver",
    "commit 3f2a1b9c4d5e6f708192a3b4c5d6e7f8091a2b3c",
    "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "request 550e8400-e29b-41d4-a716-446655440000 failed",
    "ID 550E8400-E29B-41D4-A716-446655440000",
    "token = tokens[0]",
    "api_key = os.environ[\"API_KEY\"]",
    "secret = get_secret(name)",
    "password_field = form.password",
    "if not token: raise AuthError('missing token')",
    "def test_refresh_token_rotates_after_expiry_window_2():",
    "pytest tests/test_invoice.py::test_total_rounds_half_up -q",
    "https://docs.python.org/3/library/decimal.html#decimal.ROUND_HALF_UP",
    "postgres://db.internal:5432/billing",
    "git push origin feat/csv-export",
)


def leaks(blob: bytes, secrets: tuple[Secret, ...] = SECRETS) -> dict[str, list[str]]:
    """Secret kind -> pieces of it found in `blob` (case-insensitively too: FTS stores lower-case tokens)."""
    lowered = blob.lower()
    found: dict[str, list[str]] = {}
    for secret in secrets:
        hits = sorted(p for p in secret.pieces() if p.encode() in blob or p.lower().encode() in lowered)
        if hits:
            found[secret.kind] = hits[:3]
    return found


# -- the filter, pattern by pattern -------------------------------------------------------------


@pytest.mark.parametrize("secret", SECRETS, ids=[s.kind for s in SECRETS])
def test_each_secret_is_replaced_by_a_visible_placeholder(secret: Secret) -> None:
    out = scrub(secret.text)
    assert "[REDACTED:" in out
    assert leaks(out.encode(), (secret,)) == {}, out
    if secret.kept:
        assert secret.kept in out, f"the label {secret.kept!r} should stay readable: {out!r}"


@pytest.mark.parametrize("secret", SECRETS, ids=[s.kind for s in SECRETS])
def test_secrets_are_found_inside_longer_text(secret: Secret) -> None:
    text = f"Running deploy.\n  step 1: {secret.text}\n  step 2: done (exit 0)"
    out = scrub(text)
    assert leaks(out.encode(), (secret,)) == {}, out
    assert out.startswith("Running deploy.") and out.endswith("done (exit 0)")


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_non_secrets_are_untouched(text: str) -> None:
    assert scrub(text) == text


def test_scrub_is_idempotent() -> None:
    for secret in SECRETS:
        once = scrub(secret.text)
        assert scrub(once) == once


@pytest.mark.parametrize("text,value", [
    ("export DB_PASSWORD=letmein", "letmein"),
    ("PGPASSWORD=correcthorse psql -h db.internal", "correcthorse"),
    ("mysql -u root --password=swordfish billing", "swordfish"),
])
def test_password_assignments_without_digits(text: str, value: str) -> None:
    """Human-chosen passwords often have no digit; an assignment to a password variable is still one."""
    out = scrub(text)
    assert value not in out, out


def test_scrub_value_reaches_nested_strings_and_keeps_keys() -> None:
    value = {"token": "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "list": ["AKIAZ3MHQ7VXR2KD4PLE", 3, None],
             "nested": {"url": "postgres://u:S3cr3tPassw0rd@h/db"}}
    out = scrub_value(value)
    assert set(out) == {"token", "list", "nested"}
    assert leaks(json.dumps(out).encode()) == {}
    assert out["list"][1:] == [3, None]


# -- private blocks and nmem's own context --------------------------------------------------------


@pytest.mark.parametrize("text,expected", [
    ("keep <private>my card 4111 1111 1111 1111</private> this", "keep  this"),
    ("a <private>one</private> b <private>two</private> c", "a  b  c"),
    ("before <PRIVATE>shouting</Private> after", "before  after"),
    ("line1\n<private>\nmulti\nline\n</private>\nline2", "line1\n\nline2"),
    ("visible <private>everything after an unclosed tag is hidden", "visible "),
    ("<private>all of it</private>", ""),
])
def test_private_blocks_are_stripped(text: str, expected: str) -> None:
    assert strip_private(text) == expected
    assert scrub(text) == expected


def test_injected_context_is_stripped() -> None:
    text = ("as you said:\n<nmem-context>\n# nmem context\n| #12 | edit | src/a.py |\n</nmem-context>\nnow fix it")
    assert scrub(text) == "as you said:\n\nnow fix it"
    assert scrub("x <nmem-context>unclosed recalled rows") == "x "


# -- truncation must not cut a secret in two ----------------------------------------------------


def recorded(service: Service, name: str, **fields: Any) -> dict[str, Any]:
    outcome = service.record_event(parse(hook_payload(name, cwd=CWD, **fields), now=T0))
    assert outcome.observation_id is not None
    (obs,) = service.get_observations([outcome.observation_id])
    return {"content": obs.content, "metadata": obs.metadata}


def test_secret_across_the_head_cut_of_a_write_is_redacted(service: Service) -> None:
    body = "# settings\n" + "x" * 120 + " ci: ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8\n"
    row = recorded(service, "PostToolUse", tool_name="Write",
                   tool_input={"file_path": f"{CWD}/settings.py", "content": body})
    assert "ghp_a1B2" not in json.dumps(row), row["metadata"]["head"]


def test_secret_across_the_tail_cut_of_an_error_is_redacted(service: Service) -> None:
    error = "Exit code 1\nauth failed for sk_live_4eC39HqLyjWDarjtT1zdp7dc\n" + "retrying...\n" * 65
    row = recorded(service, "PostToolUseFailure", tool_name="Bash", tool_input={"command": "./deploy.sh"},
                   error=error)
    assert leaks(json.dumps(row).encode()) == {}, row["metadata"]["error"][:80]


def test_memory_tags_pass_the_filter(service: Service) -> None:
    token = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    memory = service.remember("CI reads the deploy token from the vault", tags=[token, "ci", "<private>x</private>"])
    assert memory.tags == ["[REDACTED:github-token]", "ci"]
    updated = service.update(memory.id, tags=f"release,{token}")
    assert updated.tags == ["release", "[REDACTED:github-token]"]


def test_a_file_path_passes_the_filter(service: Service) -> None:
    path = f"{CWD}/.cache/ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8.json"
    outcome = service.record_event(parse(hook_payload("PostToolUse", cwd=CWD, tool_name="Read",
                                                      tool_input={"file_path": path}), now=T0))
    (obs,) = service.get_observations([outcome.observation_id or 0])
    assert obs.file_path == f"{CWD}/.cache/[REDACTED:github-token].json"


# -- end to end: real processes, raw bytes --------------------------------------------------------

BLOB = "\n".join(s.text for s in SECRETS)
PRIVATE = "<private>PRIVATE_NOTE_MARKER my home address</private>"
INJECTED = "<nmem-context>\nINJECTED_CONTEXT_MARKER | #1 | old row |\n</nmem-context>"
EVERYTHING = f"{BLOB}\n{PRIVATE}\n{INJECTED}\n{BLOB}"
MARKERS = (b"PRIVATE_NOTE_MARKER", b"INJECTED_CONTEXT_MARKER")


def write_transcript(path: Path, session: str) -> None:
    lines = [
        {"type": "user", "sessionId": session, "cwd": CWD, "timestamp": "2026-11-01T10:00:00Z",
         "uuid": "u1", "parentUuid": None, "message": {"role": "user", "content": "deploy it"}},
        {"type": "assistant", "sessionId": session, "cwd": CWD, "timestamp": "2026-11-01T10:00:05Z",
         "uuid": "a1", "parentUuid": "u1",
         "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
                     "content": [{"type": "thinking", "thinking": f"The user wants a deploy.\n{EVERYTHING}",
                                  "signature": "sig"}]}},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")


def secret_events(session: str, transcript: Path) -> list[dict[str, Any]]:
    def ev(name: str, **fields: Any) -> dict[str, Any]:
        return event(name, session, CWD, **fields)

    return [
        ev("SessionStart", source="startup"),
        ev("UserPromptSubmit", prompt=f"please deploy with these credentials\n{EVERYTHING}\n"
           "[decision] CI uses ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8 and postgres://admin:S3cr3tPassw0rd@db.internal:5432/billing\n"
           "remember: the staging key is sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
        ev("PostToolUse", tool_name="Bash", tool_input={"command": f"./deploy.sh <<'EOF'\n{EVERYTHING}\nEOF",
                                                        "description": f"deploy {BLOB}"},
           tool_response={"stdout": EVERYTHING, "stderr": EVERYTHING, "interrupted": False}),
        ev("PostToolUseFailure", tool_name="Bash", tool_input={"command": f"psql {BLOB}"},
           error=f"Exit code 2\n{EVERYTHING}\nFATAL: password authentication failed"),
        ev("PostToolUse", tool_name="Write", tool_input={"file_path": f"{CWD}/.env", "content": EVERYTHING},
           tool_response={"type": "create", "filePath": f"{CWD}/.env", "content": EVERYTHING}),
        ev("PostToolUse", tool_name="Edit", tool_input={"file_path": f"{CWD}/config.py", "old_string": EVERYTHING,
                                                        "new_string": EVERYTHING},
           tool_response={"filePath": f"{CWD}/config.py", "originalFile": EVERYTHING}),
        ev("PostToolUse", tool_name="Grep", tool_input={"pattern": SECRETS[2].value, "glob": BLOB},
           tool_response={"numFiles": 1, "filenames": [".env"]}),
        ev("PostToolUse", tool_name="WebFetch",
           tool_input={"url": "https://api.acme.dev/v1/report?access_token=tok_7fQ2mZx9LpW4", "prompt": BLOB},
           tool_response={"code": 200, "result": EVERYTHING}),
        ev("PostToolUse", tool_name="mcp__vault__put", tool_input={"path": "kv/prod", "value": EVERYTHING},
           tool_response=EVERYTHING),
        ev("PostToolUseFailure", tool_name="mcp__vault__get", tool_input={"path": BLOB}, error=EVERYTHING),
        ev("PostToolUse", tool_name="Agent", tool_input={"description": "rotate keys", "prompt": EVERYTHING,
                                                         "subagent_type": "general-purpose"}),
        ev("PostToolUse", tool_name="SomeFutureTool", tool_input={"payload": EVERYTHING}),
        ev("PreCompact", trigger="manual", custom_instructions=EVERYTHING),
        ev("SessionStart", source="compact"),
        ev("SubagentStop", agent_id="agent-1", agent_type="general-purpose", last_assistant_message=EVERYTHING,
           agent_transcript_path=str(transcript)),
        ev("Stop", last_assistant_message=f"Deployed.\n{EVERYTHING}", transcript_path=str(transcript)),
        ev("SessionEnd", reason="prompt_input_exit"),
    ]


def test_no_secret_or_private_text_reaches_any_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    transcript = tmp_path / "transcript.jsonl"
    write_transcript(transcript, "leak-1")
    outputs: list[str] = []
    for payload in secret_events("leak-1", transcript):
        done = hook(home, payload)
        assert done.returncode == 0, (payload["hook_event_name"], done.stderr)
        outputs += [done.stdout, done.stderr]

    # A busy database: the event goes to the spool, which must be scrubbed too.
    conn = sqlite3.connect(db_path(home), isolation_level=None, timeout=5)
    conn.execute("BEGIN IMMEDIATE")
    try:
        done = hook(home, event("UserPromptSubmit", "leak-1", CWD, prompt=EVERYTHING), NMEM_BUSY_BUDGET_MS="100")
        assert done.returncode == 0
        spool_bytes = raw_bytes(home / "spool")
        assert spool_bytes, "the event was not spooled"
    finally:
        conn.rollback()
        conn.close()
    assert leaks(spool_bytes) == {}
    assert not any(m in spool_bytes for m in MARKERS)

    # An internal error with secrets in the payload: the log must not quote them.
    broken = tmp_path / "db-dir"
    broken.mkdir()
    done = hook(home, event("UserPromptSubmit", "leak-2", CWD, prompt=EVERYTHING), NMEM_DB=str(broken))
    outputs += [done.stdout, done.stderr]
    done = hook(home, "{" + json.dumps(EVERYTHING))  # malformed JSON that contains secrets
    outputs += [done.stdout, done.stderr]

    # The next session: drains the spool and prints context built from everything stored.
    done = hook(home, event("SessionStart", "leak-3", CWD, source="clear"))
    outputs += [done.stdout, done.stderr]
    assert "<nmem-context>" in done.stdout
    assert not (home / "spool").exists() or not list((home / "spool").glob("*.json"))

    stored = query(home, "SELECT COUNT(*) AS n FROM observations")[0]["n"]
    assert stored >= 14, "events were dropped, so the check below would prove little"
    assert query(home, "SELECT COUNT(*) AS n FROM memories WHERE namespace = 'decisions'")[0]["n"] == 1
    assert query(home, "SELECT COUNT(*) AS n FROM memories WHERE namespace = 'progress'")[0]["n"] == 1
    assert query(home, "SELECT COUNT(*) AS n FROM prompts WHERE source <> 'user'")[0]["n"] >= 3
    heads = [o["metadata"].get("head", "") for o in observations(home, "obs_type IN ('file_write', 'file_edit')")]
    assert heads and all("[REDACTED:" in h for h in heads)

    on_disk = raw_bytes(db_path(home), home / "nmem.db-wal", home / "spool", home / "logs")
    assert len(on_disk) > 10_000
    assert leaks(on_disk) == {}, "secret pieces found in nmem's files"
    assert not any(m in on_disk for m in MARKERS), "private or injected text was stored"
    printed = "\n".join(outputs).encode()
    assert leaks(printed) == {}, "secret pieces printed to the agent"


def test_a_prompt_that_is_entirely_private_stores_no_prompt(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = hook(home, event("UserPromptSubmit", "p", CWD, prompt="<private>my salary is 120k</private>"))
    assert (done.returncode, done.stdout) == (0, "")
    assert query(home, "SELECT COUNT(*) AS n FROM prompts")[0]["n"] == 0
    assert b"120k" not in raw_bytes(db_path(home), home / "nmem.db-wal")


@pytest.mark.parametrize(("text", "redacted"), [
    ("aws_secret wJalrXUtnFEMI/K7MDENG+bPxRfiCYzq8Lk3m2Pa end", True),       # base64 with `/`: judged whole
    ("see src/main/java/org/acme/billing/InvoiceService2Impl/Factory.java", False),   # a path: mostly words
    ("golang.org/x/text v0.14.0 h1:ScX5w1eTa3QqT8oi6+ziP7dTV1S2+ALU0bI+0zXKWiQ=", False),  # go.sum digest
    ('"integrity": "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg=="',
     False),
    ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl dev@laptop", False),
])
def test_runs_with_slashes_and_the_digests_kept(text: str, redacted: bool) -> None:
    assert (scrub(text) != text) is redacted, scrub(text)


def test_the_one_search_for_trigger_words_agrees_with_the_in_tests() -> None:
    """Once `re` is loaded, one regex search replaces the `in` test of each root trigger: same answer."""
    from nmem.capture import privacy

    texts = [s.text.lower() for s in SECRETS] + [t.lower() for t in NOT_SECRETS] + ["", "plain words only"]
    search = privacy._ROOTS_PATTERN.get().search
    assert [bool(search(t)) for t in texts] == [any(r in t for r in privacy._ROOTS) for t in texts]


@pytest.mark.parametrize(("run", "redacted"), [
    ("Zx8Qp2Lm9Rt4Vw7Ks1Nb6Hc3Jd5Fg0AyUe", True),      # lower, upper and digits, varied
    ("ZxhQpkLmqRtaVwzKsyNbmHcuJdvFgoAyUe", False),     # no digit
    ("zx8qp2lm9rt4vw7ks1nb6hc3jd5fg0ayue", False),     # no upper case
    ("ZX8QP2LM9RT4VW7KS1NB6HC3JD5FG0AYUE", False),     # no lower case
    ("Aa1Aa1Aa1Aa1Aa1Aa1Aa1Aa1Aa1Aa1Aa1Aa1", False),   # every class, little entropy
])
def test_a_long_run_is_high_entropy_only_with_every_character_class(run: str, redacted: bool) -> None:
    out = scrub(f"value {run} end")
    assert (run not in out) is redacted, out
