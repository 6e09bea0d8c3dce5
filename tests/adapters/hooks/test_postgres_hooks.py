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


# -- with a running `nmem serve` on the same store -----------------------------------------------

CWD = "/home/dev/code/team"


def searched(port: int, query: str) -> list[str]:
    import httpx2

    response = httpx2.get(f"http://127.0.0.1:{port}/api/v1/search", params={"query": query, "scope": "prompts",
                                                                            "project": "*"}, timeout=60)
    assert response.status_code == 200, response.text
    return [str(r.get("content") or r.get("content_preview") or r.get("title")) for r in response.json()["results"]]


def spooled(home: Path) -> list[str]:
    try:
        return [n for n in os.listdir(home / "spool") if n.endswith(".json")]
    except FileNotFoundError:
        return []


def test_a_running_server_stores_what_hooks_spool_within_seconds(tmp_path: Path, pg_url: str) -> None:
    import time

    from mcp_support import http_server

    home = tmp_path / "home"
    env = hook_env(home, NMEM_STORE_URL=pg_url)
    with http_server(home, env={"NMEM_STORE_URL": pg_url, "NMEM_SERVER_DRAIN_MS": "200"}) as server:
        env["NMEM_MCP_PORT"] = str(server.port)
        prompt = event("UserPromptSubmit", "pg-live", CWD, prompt="rotate the staging certificates")
        done = nmem(["record"], env, json.dumps(prompt))
        assert done.returncode == 0 and done.stdout == "", done.stderr
        deadline = time.monotonic() + 30
        while "rotate the staging certificates" not in searched(server.port, "certificates"):
            assert time.monotonic() < deadline, "the server did not store the spooled event"
            time.sleep(0.2)
        assert spooled(home) == []


def test_session_start_prints_the_block_of_a_local_server_on_the_same_store(tmp_path: Path, pg_url: str) -> None:
    from mcp_support import free_port, http_server

    home = tmp_path / "home"
    env = hook_env(home, NMEM_STORE_URL=pg_url, NMEM_BUSY_BUDGET_MS="30000")  # a loaded test machine
    for payload in (event("UserPromptSubmit", "hist", CWD, prompt="make invoice totals round half up"),
                    event("Stop", "hist", CWD, last_assistant_message="Done.")):
        assert nmem(["record"], env, json.dumps(payload)).returncode == 0
    assert nmem(["drain"], env).returncode == 0

    env["NMEM_MCP_PORT"] = str(free_port())  # no server there: spooled, nothing printed, as before
    alone = nmem(["record"], env, json.dumps(event("SessionStart", "s-alone", CWD, source="startup")))
    assert alone.returncode == 0 and alone.stdout == "" and len(spooled(home)) == 1, alone.stderr

    with http_server(tmp_path / "other", env={"NMEM_STORE_URL": pg_url + "&application_name=other"}) as other:
        env["NMEM_MCP_PORT"] = str(other.port)  # a server of another store (its URL differs): not used
        done = nmem(["record"], env, json.dumps(event("SessionStart", "s-other", CWD, source="startup")))
        assert done.returncode == 0 and done.stdout == "" and len(spooled(home)) == 2, done.stderr

    with http_server(home, env={"NMEM_STORE_URL": pg_url, "NMEM_SERVER_DRAIN_MS": "0"}) as server:
        env["NMEM_MCP_PORT"] = str(server.port)
        done = nmem(["record"], env, json.dumps(event("SessionStart", "s-next", CWD, source="startup")))
        assert done.returncode == 0, done.stderr
        block = done.stdout.strip()
        assert block.startswith("<nmem-context>") and block.endswith("</nmem-context>"), \
            (done.stdout, spooled(home), server.log.read_text())
        assert "make invoice totals round half up" in block
        assert len(spooled(home)) == 2, "stored by the server, not spooled"
    store = open_store(pg_url)
    try:
        assert store.get_session("s-next") is not None
        assert store.get_session("s-alone") is None, "still waiting in the spool"
    finally:
        store.close()
