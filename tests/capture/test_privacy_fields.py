"""The one scrub step: every field of an event before extraction, every field of a record as stored,
text read percent-decoded too, passwords given in prose; and real text that must stay as it is."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from conftest import hook_payload
from nmem.capture.claude_code import parse
from nmem.capture.privacy import OUTPUT_WINDOW, scrub, scrub_output, scrub_payload, scrub_value
from nmem.service.api import Service

REPO = Path(__file__).resolve().parents[2]
CWD = "/home/dev/code/billing-api"
PASSWORD = "Zq8mK2vT5wLp"


@pytest.mark.parametrize("text", [
    f"the db password is {PASSWORD}", "pw hunterblue", f"creds admin / {PASSWORD}", f"login with {PASSWORD}!",
    "my password is now hunterblue", f"the password for db.internal is {PASSWORD}.", "passwd: hunterblue",
    f"sign in as deploy / {PASSWORD}", f"my password for the staging db is {PASSWORD}",
    "the password for the prod database is hunterblue", f"password for the db is now {PASSWORD}",
])
def test_passwords_in_prose_are_redacted(text: str) -> None:
    out = scrub(text)
    assert "[REDACTED:password]" in out and PASSWORD not in out and "hunterblue" not in out, out


@pytest.mark.parametrize("text", [
    "the password is required", "password is hashed with bcrypt", "password reset link sent", "run pwd to see",
    "log in with your email", "login with GitHub", "===== 128 passed in 4.31s =====", "Enter password:",
    "password = getpass.getpass('Password: ')", "use hunterblue to log in", "the password is still wrong",
    "the password for the admin account is required", "the password for the new user is hashed with bcrypt",
])
def test_prose_about_passwords_is_kept(text: str) -> None:
    assert scrub(text) == text


def test_percent_encoded_secrets_are_read_decoded() -> None:
    url = "https://api.acme.dev/v1/a?q=password%3Dhunterblue%26x%3D1&page=2"
    assert "hunterblue" not in scrub(url)
    twice = "https://x.test/?next=%2Fcb%3Ftoken%253Dghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    assert "ghp_a1B2" not in scrub(twice)
    plain = "https://docs.example.com/a%20guide/page?q=hello%20world"
    assert scrub(plain) == plain


def test_a_value_is_judged_with_its_key_and_keys_are_scrubbed() -> None:
    out = scrub_value({"password": "hunterblue", "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8": True, "name": "prod"})
    assert out == {"password": "[REDACTED:password]", "[REDACTED:github-token]": True, "name": "prod"}


def test_a_long_tool_answer_keeps_its_scrubbed_head_and_tail() -> None:
    token = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    text = "x " * OUTPUT_WINDOW + token + " y" * OUTPUT_WINDOW
    out = scrub_output({"stdout": f"head {token}\n{text}\ntail {token}"})["stdout"]
    assert out.startswith("head [REDACTED:github-token]") and out.endswith("tail [REDACTED:github-token]")
    assert token not in out and len(out) < 2 * OUTPUT_WINDOW + 10
    assert scrub_payload({"tool_response": {"stdout": text}, "prompt": f"pw {PASSWORD}"})["prompt"] == \
        "pw [REDACTED:password]"


def recorded(service: Service, **fields: object) -> str:
    outcome = service.record_event(parse(hook_payload("PostToolUse", cwd=CWD, **fields), now=1_790_000_000))
    (obs,) = service.get_observations([outcome.observation_id or 0])
    return f"{obs.content}\n{obs.file_path}\n{obs.metadata}"


@pytest.mark.parametrize("tool,tool_input", [
    ("Read", {"file_path": f"{CWD}/postgres://app:{PASSWORD}@db.internal/x"}),       # normpath makes :// :/
    ("Grep", {"pattern": "htpasswd -bc /etc/nginx/.htpasswd admin " + PASSWORD}),  # quoted in the content
    ("WebFetch", {"url": "https://ex.com/" + "the%20db%20password%20is%20" + PASSWORD}),
    ("mcp__db__connect", {"dsn": f'<add key="DbPassword" value="{PASSWORD}" />'}),  # JSON-encoded arguments
])
def test_fields_are_scrubbed_before_extraction_changes_their_shape(service: Service, tool: str,
                                                                     tool_input: dict[str, str]) -> None:
    assert PASSWORD not in recorded(service, tool_name=tool, tool_input=tool_input)


def test_every_field_of_a_memory_is_scrubbed(service: Service) -> None:
    memory = service.remember("deploy notes", summary=f"pw {PASSWORD}", tags=[f"creds admin / {PASSWORD}"],
                              relates_to=[f"the db password is {PASSWORD}"], source=f"login with {PASSWORD}")
    assert PASSWORD not in repr(memory.to_dict())


def _git_log() -> list[str]:
    done = subprocess.run(["git", "-C", str(REPO), "log", "-n", "500", "--format=%H %h %s"], capture_output=True,
                          text=True, check=False)
    return done.stdout.splitlines()


def test_real_ids_and_digests_stay_as_they_are() -> None:
    """Commit SHAs, wheel RECORD and lock-file digests, UUIDs and base64-ish ids in paths are no secrets."""
    lines = _git_log()
    lines += [
        "execnet-2.1.2.dist-info/METADATA,sha256=c0MBXWKy6qGEHsBqfHwTKutIKSH3Orbg_RgzFJVoTGE,2905",
        "pip/_internal/cli/main.py,sha256=BDZef-bWe9g9Jx1_nyqdgU31X0JrA5RIwM8j5sFv0rg,2815",
        'hash = "sha256:58cd2187c01e70e6e26505bca751777aa9f2ee0b7f4300988b709f44e013003f"',
        "integrity sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxVjcXPs17LhbZVGedAJv8XZ1tvj5FvSg==",
        "/home/dev/.cache/pre-commit/repoq3k9v2lx/py_env-python3.12/bin/ruff",
        "/tmp/pytest-of-dev/pytest-42/test_import0/sessions/4f1c2d3e-5a6b-4c7d-8e9f-0a1b2c3d4e5f.jsonl",
        "~/.claude/projects/-home-dev-code-billing-api/01JD8X4Z5W6V7T8S9R0Q1P2N3M.jsonl",
        "node_modules/.pnpm/@esbuild+linux-x64@0.19.12/node_modules/@esbuild/linux-x64/bin/esbuild",
        "/var/lib/docker/overlay2/9c7a54a9a43cca047013b82af109fe963fde787f63f9e016fdc3384500c2823d/merged",
    ]
    lines += [f"request {uuid.uuid4()} trace {uuid.uuid4().hex}" for _ in range(200)]
    changed = [(line, scrub(line)) for line in lines if scrub(line) != line]
    assert len(lines) > 200 and changed == []


def test_a_password_named_with_a_few_words_between_never_reaches_the_database(service: Service) -> None:
    prompt = f"my password for the staging db is {PASSWORD}, use it for the migration"
    outcome = service.record_event(parse(hook_payload("UserPromptSubmit", cwd=CWD, prompt=prompt),
                                         now=1_790_000_000))
    (stored,) = service.store.get_prompts([outcome.prompt_id or 0])
    assert PASSWORD not in stored.content and "[REDACTED:password]" in stored.content
