"""Hooks with a PostgreSQL store: they spool (never importing psycopg) and `nmem drain` stores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.harness import event, hook_env
from nmem.store import SearchFilters, open_store
from test_hook_imports import POST_TOOL_USE, check_hook_imports, importtime

pytestmark = pytest.mark.postgres


def nmem(args: list[str], env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nmem", *args], input=stdin, capture_output=True, text=True,
                          env=env, timeout=60, check=False)


def test_hooks_spool_without_psycopg_and_drain_stores_every_event(tmp_path: Path, pg_url: str) -> None:
    home = tmp_path / "home"
    env = hook_env(home, NMEM_STORE_URL=pg_url)
    startup = set(importtime(["-c", "pass"], "", hook_env(tmp_path / "bare"))[1])
    prompt = event("UserPromptSubmit", "pg-1", "/home/dev/code/team", prompt="migrate the billing tables")
    done = nmem(["record"], env, json.dumps(prompt))
    assert done.returncode == 0 and done.stdout == "", done.stderr
    done, modules = importtime(["-m", "nmem", "record"], json.dumps({**POST_TOOL_USE, "session_id": "pg-1"}), env)
    assert done.returncode == 0, done.stderr[-2000:]
    check_hook_imports(modules, startup)
    assert len([n for n in os.listdir(home / "spool") if n.endswith(".json")]) == 2

    drained = nmem(["drain", "--format", "json"], env)
    assert drained.returncode == 0, drained.stderr
    assert json.loads(drained.stdout) == {"stored": 2, "waiting": 0}
    store = open_store(pg_url)
    try:
        prompts = store.search_prompts("billing", SearchFilters(), "relevance", 5, 0)
        assert [p.content for p, _ in prompts] == ["migrate the billing tables"]
        commands = store.search_observations("pytest", SearchFilters(), "date_desc", 5, 0)
        assert [(o.session_id, o.prompt_id) for o, _ in commands] == [("pg-1", prompts[0][0].id)]
    finally:
        store.close()
    again = nmem(["drain", "--format", "json"], env)
    assert json.loads(again.stdout) == {"stored": 0, "waiting": 0}
