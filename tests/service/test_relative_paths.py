"""Paths relative to the project root wherever the project is known: a session of a real git
repository, started in a subdirectory, recorded through the hook process; then timeline, trace,
file history and search through a real `nmem` process, the MCP tools (the official client) and REST."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from fixtures.harness import event, hook_env, hook_ok
from http_support import http_client
from mcp_support import structured
from nmem.adapters.mcp.server import NmemServer
from nmem.service.api import Service

pytestmark = pytest.mark.anyio


@pytest.fixture
def repo(nmem_home: Path, tmp_path: Path) -> dict[str, Any]:
    root = tmp_path / "code" / "shop"
    (root / "src" / "billing").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    cwd = str(root / "src")                       # Claude Code started in a subdirectory
    invoice = f"{root}/src/billing/invoice.py"
    for payload in [
        event("SessionStart", "sess-rel", cwd, source="startup"),
        event("UserPromptSubmit", "sess-rel", cwd, prompt="round invoice totals half-even"),
        event("PostToolUse", "sess-rel", cwd, tool_name="Read", tool_input={"file_path": invoice}),
        event("PostToolUse", "sess-rel", cwd, tool_name="Edit", tool_response={"filePath": invoice},
              tool_input={"file_path": invoice, "old_string": "round(", "new_string": "quantize("}),
        event("Stop", "sess-rel", cwd, last_assistant_message="Totals now round half-even."),
    ]:
        hook_ok(nmem_home, payload)
    return {"root": str(root), "cwd": cwd, "invoice": invoice}


def nmem(home: Path, cwd: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "nmem", *args], cwd=cwd, capture_output=True, text=True,
                          env=hook_env(home), timeout=60, check=False)
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


def test_the_cli_shows_paths_relative_to_the_project_root(repo: dict[str, Any], nmem_home: Path) -> None:
    home, cwd, root = nmem_home, repo["cwd"], repo["root"]
    for args in (("trace",), ("timeline", "--query", "invoice"), ("file-history", "billing/invoice.py"),
                 ("search", "invoice")):
        text = nmem(home, cwd, *args)
        assert "src/billing/invoice.py" in text, (args, text)
        assert f"{root}/src/billing/invoice.py" not in text.replace(f"({repo['invoice']})", ""), (args, text)
    hits = json.loads(nmem(home, cwd, "search", "invoice", "--scope", "observations", "--format", "json"))
    assert {h["rel_path"] for h in hits} == {"src/billing/invoice.py"}
    assert {h["file_path"] for h in hits} == {repo["invoice"]}, "the absolute path stays: filters take it"


@pytest.mark.sqlite_only("the hook processes record into the home's SQLite file, which this service reads")
async def test_mcp_and_rest_give_rel_path_beside_file_path(repo: dict[str, Any], service: Service) -> None:
    async with Client(NmemServer(service, project="shop").server, mode="legacy") as client:
        trace = structured(await client.call_tool("session_trace", {}))
        timeline = structured(await client.call_tool("timeline", {"query": "invoice"}))
        history = structured(await client.call_tool("file_history", {"file_path": repo["invoice"]}))
    rows = [o for p in trace["prompts"] for o in p["observations"] if o.get("file_path")]
    assert trace["root"] == repo["root"]
    assert {(o["rel_path"], o["content_preview"].split(" ")[0]) for o in rows} == {
        ("src/billing/invoice.py", "src/billing/invoice.py")}
    assert timeline["anchor"]["rel_path"] == "src/billing/invoice.py"
    assert history["sessions"][0]["rel_path"] == "src/billing/invoice.py"
    async with http_client(service, project="shop") as api:
        found = (await api.get("/api/v1/search", params={"query": "invoice", "scope": "observations"})).json()
        traced = (await api.get("/api/v1/sessions/sess-rel/trace")).json()
        worker = (await api.get("/api/search", params={"query": "invoice", "format": "json"})).json()
        around = (await api.get("/api/timeline", params={"query": "invoice", "format": "json"})).json()
    assert {h["rel_path"] for h in found["results"]} == {"src/billing/invoice.py"}
    assert all(repo["root"] not in h["content_preview"] for h in found["results"])
    assert traced["root"] == repo["root"]
    # claude-mem's routes: titles and subtitles relative, files_* whole (its filters take them)
    named = [row for row in [*worker["observations"], *around["observations"]]
             if row["obs_type"] in ("file_read", "file_edit")]
    assert len(named) == 4, (worker, around)     # the read and the edit, found and around the anchor
    for row in named:
        assert (row["title"], row["subtitle"]) == ("src/billing/invoice.py", "src/billing/invoice.py"), row
        assert repo["invoice"] in row["files_read"] + row["files_modified"]
    [session] = worker["sessions"]
    assert "Files changed: src/billing/invoice.py" in session["notes"] and repo["root"] not in session["notes"]
    assert session["files_edited"] == [repo["invoice"]]
    for summary in (trace["summary"], traced["summary"]):     # the session's summary, as the viewer shows it
        assert summary["files_changed"] == ["src/billing/invoice.py"], summary
        assert "Files changed: src/billing/invoice.py" in summary["text"] and repo["root"] not in summary["text"]
