"""Navigation through the official MCP client: the `get` tool opens every id and URN nmem
prints, session prefixes, strict search, and relative paths read from the project root."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from conftest import record
from mcp_support import AUTH_FILE, PROJECT, T0, Seeded, bash, check_output, structured, tool_error
from nmem.adapters.mcp.resources import as_uri
from nmem.service.api import Service

pytestmark = pytest.mark.anyio


async def call(client: Client, name: str, arguments: dict[str, Any]) -> Any:
    result = structured(await client.call_tool(name, arguments))
    tools = {t.name: t for t in (await client.list_tools()).tools}
    check_output(tools[name], result)
    return result


async def error(client: Client, name: str, arguments: dict[str, Any]) -> str:
    return tool_error(await client.call_tool(name, arguments))


async def test_get_opens_every_kind_by_every_form(client: Client, seeded: Seeded) -> None:
    refs: list[Any] = [seeded.failure, str(seeded.failure), f"#{seeded.failure}",
                       f"nmem://project:{PROJECT}/observations/{seeded.failure}",
                       f"p{seeded.prompt}", f"nmem://project:{PROJECT}/prompts/{seeded.prompt}",
                       "ss1", "ss-lon", f"nmem://project:{PROJECT}/sessions/s1",
                       seeded.memory_id, seeded.memory_urn, as_uri(seeded.memory_urn), "p999"]
    out = await call(client, "get", {"refs": refs})
    assert [(r["kind"], r["id"]) for r in out["results"]] == [
        *[("observation", seeded.failure)] * 4, *[("prompt", seeded.prompt)] * 2,
        ("session", "s1"), ("session", "s-lonely"), ("session", "s1"), *[("memory", seeded.memory_id)] * 3]
    assert out["count"] == 12
    assert out["missing"] == ["p999"]
    prompt = out["results"][4]
    assert (prompt["ref"], prompt["content"]) == (f"p{seeded.prompt}", "fix the flaky login redirect test")


async def test_get_errors(client: Client, seeded: Seeded) -> None:
    ambiguous = await error(client, "get", {"refs": ["ss"]})
    assert ambiguous.startswith("session ss is ambiguous: it starts ")
    for candidate in ("ss1 (demo, ", "ss2 (other, ", "ss-lonely (demo, "):
        assert candidate in ambiguous
    assert (await call(client, "get", {"refs": ["p999", "s-nothing"]}))["missing"] == ["p999", "s-nothing"]
    assert "refs" in await error(client, "get", {"refs": []})


async def test_every_ref_and_urn_a_search_prints_opens(client: Client, seeded: Seeded) -> None:
    found = await call(client, "search", {"query": "login", "scope": "all", "project": None})
    kinds = {r["kind"] for r in found["results"]}
    assert {"observation", "prompt", "memory"} <= kinds
    by_ref = await call(client, "get", {"refs": [r["ref"] for r in found["results"]]})
    by_urn = await call(client, "get", {"refs": [r["urn"] for r in found["results"]]})
    expected = [(r["kind"], r["id"]) for r in found["results"]]
    assert [(r["kind"], r["id"]) for r in by_ref["results"]] == expected
    assert [(r["kind"], r["id"]) for r in by_urn["results"]] == expected
    for hit in found["results"]:
        read = await client.read_resource(as_uri(hit["urn"]))
        assert str(hit["id"]) in text_of_resource(read), hit["urn"]


def text_of_resource(result: Any) -> str:
    (content,) = result.contents
    return str(content.text)


async def test_session_trace_and_search_take_session_prefixes(client: Client, seeded: Seeded) -> None:
    for ref in ("s-lon", "ss-lon", "s-lonely", "nmem://project:demo/sessions/s-lonely"):
        assert (await call(client, "session_trace", {"session_id": ref}))["session_id"] == "s-lonely", ref
    found = await call(client, "search", {"query": "pytest", "session_id": "ss1"})
    assert {r["session_id"] for r in found["results"]} == {"s1"}
    message = await error(client, "session_trace", {"session_id": "s"})
    assert message.startswith("session s is ambiguous: it starts ")
    assert await error(client, "session_trace", {"session_id": "zzz"}) == "session not found: zzz"
    assert await error(client, "search", {"query": "x", "session_id": "zzz"}) == "session not found: zzz"


async def test_search_strict_keeps_only_what_holds_every_word(client: Client, seeded: Seeded) -> None:
    ranked = await call(client, "search", {"scope": "observations", "query": "login redirect test", "project": None})
    assert len(ranked["results"]) > 1
    strict = await call(client, "search", {"scope": "observations", "query": "login redirect test", "project": None,
                                           "strict": True})
    assert [r["id"] for r in strict["results"]] == [seeded.failure]
    assert strict["match"] == '"login" AND "redirect" AND "test"'


@pytest.fixture
def shop(service: Service, seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository the MCP server runs in (CLAUDE_PROJECT_DIR) with two invoice.py touched."""
    root = tmp_path / "shop"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for i, rel in enumerate(("billing/invoice.py", "legacy/invoice.py")):
        record(service, "PostToolUse", now=T0 + 200 + i, session_id="shop-1", cwd=str(root), tool_name="Edit",
               tool_input={"file_path": str(root / rel), "old_string": "a", "new_string": "b"})
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(root / "billing"))  # a subdirectory: the root still counts
    return root


async def test_file_history_and_search_files_read_paths_from_the_project_root(client: Client, shop: Path) -> None:
    out = await call(client, "file_history", {"file_path": "billing/invoice.py"})
    assert out["file_path"] == str(shop / "billing" / "invoice.py")
    assert [s["session_id"] for s in out["sessions"]] == ["shop-1"]
    # a suffix: the only recorded path ending so, here one of another project
    assert (await call(client, "file_history", {"file_path": "src/auth.py"}))["file_path"] == AUTH_FILE
    found = await call(client, "search", {"files": ["legacy/invoice.py"], "project": None})
    assert {r["file_path"] for r in found["results"]} == {str(shop / "legacy" / "invoice.py")}
    for name, args in (("file_history", {"file_path": "invoice.py"}), ("search", {"files": "invoice.py"})):
        message = await error(client, name, args)
        assert message == (f"invoice.py is ambiguous: it ends 2 recorded paths: {shop}/billing/invoice.py, "
                           f"{shop}/legacy/invoice.py; give more of the path"), name


async def test_timeline_query_prefers_the_current_project(client: Client, service: Service, seeded: Seeded) -> None:
    bash(service, "npm run login-e2e --retry", T0 + 300, session_id="s2", cwd="/work/other")
    mine = await call(client, "timeline", {"query": "login", "before": 0, "after": 0})
    assert mine["anchor"]["project"] == PROJECT
    other = await call(client, "timeline", {"query": "login", "project": "other", "before": 0, "after": 0})
    assert other["anchor"]["project"] == "other"
