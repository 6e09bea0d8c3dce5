"""A Markdown export is for people: its times read as ISO dates (UTC), in the memories' YAML and
the sessions' lines, and the file still imports back to the same records (real `nmem` processes,
a session recorded through the hook)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from fixtures.harness import event, hook_env, hook_ok

ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def nmem(home: Path, *args: str, stdin: str = "") -> str:
    done = subprocess.run([sys.executable, "-m", "nmem", *args], input=stdin, capture_output=True, text=True,
                          env=hook_env(home), timeout=60, check=False)
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


def test_markdown_export_writes_iso_dates_and_imports_back(tmp_path: Path) -> None:
    home, other = tmp_path / "home", tmp_path / "other"
    cwd = "/home/dev/code/shop"
    hook_ok(home, event("UserPromptSubmit", "sess-md", cwd, prompt="add the CSV importer"))
    hook_ok(home, event("Stop", "sess-md", cwd, last_assistant_message="The importer is in."))
    nmem(home, "remember", "Money is Decimal.", "-n", "decisions", "--project", "shop")
    text = nmem(home, "export", "--format", "markdown", "--trail")
    yaml_dates = re.findall(r"^(created_at|updated_at|accessed_at): (.*)$", text, re.M)
    assert {name for name, value in yaml_dates if value != "null"} == {"created_at", "updated_at"}
    assert all(re.fullmatch(ISO, value.strip("'\"")) for _, value in yaml_dates if value != "null"), yaml_dates
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    session = next(line for line in lines if line["kind"] == "session")
    assert re.fullmatch(ISO, session["started_at"])
    assert all(re.fullmatch(ISO, line["timestamp"]) for line in lines if line["kind"] == "prompt")
    nmem(other, "import", "--format", "markdown", stdin=text)
    assert nmem(other, "export", "--format", "markdown", "--trail") == text
    assert json.loads(nmem(other, "export", "--format", "json", "--trail"))["sessions"][0]["started_at"] == \
        json.loads(nmem(home, "export", "--format", "json", "--trail"))["sessions"][0]["started_at"]
