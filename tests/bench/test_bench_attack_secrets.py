"""bench/attack_secrets.py in quick mode: one secret of every format, and prose passwords, placed in
every field of every way in (hook processes, the spool, `nmem remember`, MCP through the official
client, HTTP, `nmem import`); none may be found on disk, and no hash-like line of real text
(git SHAs, RECORD digests, UUIDs) may be redacted."""

from __future__ import annotations

from pathlib import Path

from conftest import load_bench

load_bench("attack")
attack_secrets = load_bench("attack_secrets")


def test_no_secret_reaches_disk_and_no_digest_is_redacted(tmp_path: Path) -> None:
    rows = list(attack_secrets.scenarios(tmp_path, quick=True))
    surfaces = {row.scenario.split()[0] for row in rows}
    assert {"hook", "cli", "mcp", "http", "nmem", "false"} <= surfaces
    assert all(row.tried > 0 for row in rows)
    hook = next(row for row in rows if row.scenario.startswith("hook (nmem record)"))
    assert hook.tried >= 21  # every field of every event
    assert [(r.scenario, r.leaked, r.errors, r.note) for r in rows if not r.clean] == []


def test_the_search_finds_a_secret_that_is_there(tmp_path: Path) -> None:
    """The detector itself: a placement whose secret is in the bytes is a leak, lower-cased too."""
    placement = attack_secrets.Placement("hook", "prompt", "pw Zq8mK2vT5wLp", ("Zq8mK2vT5wLp",))
    assert attack_secrets.leaks([placement], b"xx zq8mk2vt5wlp xx") == [placement]
    assert attack_secrets.leaks([placement], b"pw [REDACTED:password]") == []
