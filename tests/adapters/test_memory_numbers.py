"""The number `recall` shows names one memory in `pin`, `update` and `forget` on every surface: a
real `nmem` process, REST, and the MCP `forget` tool (the official client). A bare number no
memory has is refused with a hint (observations are `o42`), and URNs always work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from fixtures.harness import hook_env
from http_support import CSRF, http_client
from mcp_support import structured, tool_error
from nmem.adapters.mcp.server import NmemServer
from nmem.service.api import Service

pytestmark = pytest.mark.anyio
HINT = "(a bare number is the `number` recall shows)"


def nmem(home: Path, cwd: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "nmem", *args], cwd=cwd, capture_output=True, text=True,
                          env=hook_env(home), timeout=60, check=False)
    assert done.returncode == code, (args, done.stdout, done.stderr)
    return done


@pytest.fixture
def project(tmp_path: Path) -> Path:
    here = tmp_path / "shop"
    here.mkdir()
    return here


def recalled(home: Path, cwd: Path, query: str) -> dict[str, Any]:
    [hit] = json.loads(nmem(home, cwd, "recall", query, "--format", "json").stdout)["results"]
    return dict(hit)


def test_the_cli_takes_the_number_recall_shows_in_pin_update_and_forget(nmem_home: Path, project: Path) -> None:
    nmem(nmem_home, project, "remember", "Money is Decimal, never float.", "-n", "decisions")
    hit = recalled(nmem_home, project, "Decimal")
    number = str(hit["number"])
    assert json.loads(nmem(nmem_home, project, "pin", number, "--format", "json").stdout)["urn"] == hit["urn"]
    nmem(nmem_home, project, "update", number, "--summary", "Decimal money")
    assert recalled(nmem_home, project, "Decimal")["summary"] == "Decimal money"
    missing = nmem(nmem_home, project, "pin", "9999", code=10)
    assert missing.stderr.strip() == f"nmem: memory not found: 9999 {HINT}"
    assert "memory not found: 9999" in nmem(nmem_home, project, "update", "9999", "--summary", "x", code=10).stderr
    nmem(nmem_home, project, "forget", number)
    assert json.loads(nmem(nmem_home, project, "recall", "Decimal", "--format", "json").stdout)["results"] == []


def test_the_number_a_person_reads_in_recalls_text_is_the_one_update_takes(nmem_home: Path, project: Path) -> None:
    """The text shows each memory's number as `[N]`, not its place in the list: the memory
    listed first here is number 2, and `update 2` changes it, not the other one."""
    nmem(nmem_home, project, "remember", "Invoices round half-even.", "-n", "decisions")
    nmem(nmem_home, project, "remember", "Invoices carry the customer's VAT id.", "-n", "decisions")
    text = nmem(nmem_home, project, "recall", "VAT").stdout
    heading = next(line for line in text.splitlines() if "VAT id" in line)
    assert heading.startswith("[2] decisions/"), text
    nmem(nmem_home, project, "update", heading[1:heading.index("]")], "--summary", "VAT id on invoices")
    assert recalled(nmem_home, project, "VAT")["summary"] == "VAT id on invoices"
    assert recalled(nmem_home, project, "half-even")["summary"] == "Invoices round half-even."


async def test_rest_and_mcp_take_the_number_and_urns(service: Service) -> None:
    first = service.remember("Retries back off exponentially.", namespace="decisions", project="shop")
    second = service.remember("Invoices round half-even.", namespace="decisions", project="shop")
    number = service.recall_results("Retries", project="shop")[0]["number"]
    async with http_client(service, project="shop", headers=CSRF) as api:
        pinned = await api.put(f"/api/v1/pins/{number}")
        assert pinned.status_code == 200 and pinned.json()["urn"] == first.urn
        changed = await api.patch(f"/api/v1/memories/{number}", json={"summary": "Exponential retries"})
        assert changed.status_code == 200 and changed.json()["summary"] == "Exponential retries"
        refused = await api.put("/api/v1/pins/9999")
        assert refused.status_code == 404 and HINT in refused.json()["error"]["message"]
        by_urn = await api.patch(f"/api/v1/memories/{second.urn}", json={"summary": "Half-even invoices"})
        assert by_urn.status_code == 200 and by_urn.json()["id"] == second.id
    async with Client(NmemServer(service, project="shop").server, mode="legacy") as client:
        assert tool_error(await client.call_tool("forget", {"id": 9999})).startswith("memory not found: 9999")
        gone = structured(await client.call_tool("forget", {"id": number}))
        assert gone["urn"] == first.urn
        assert structured(await client.call_tool("forget", {"id": second.urn}))["urn"] == second.urn
