"""Sessions of several coding agents about one invoice export, for the agent filter's tests:
events in each agent's own payload shape (tests/fixtures/*_shapes.py), parsed by the adapter
the hook uses (`nmem.capture.agents.parse`)."""

from __future__ import annotations

from typing import Any

from conftest import hook_payload
from fixtures import codex_shapes as cx
from fixtures import gemini_shapes as gm
from nmem.capture.agents import parse
from nmem.service.api import Service

T0 = 1_790_000_000
CWD = "/work/demo"
CC, LEGACY, CODEX, GEMINI = "cc-session-1", "cc-before-agents", cx.SESSION, gm.SESSION


def feed(service: Service, agent: str, payloads: list[dict[str, Any]], start: int) -> None:
    for i, payload in enumerate(payloads):
        service.record_event(parse(payload, agent, now=start + i))


def claude(event: str, session_id: str, **fields: Any) -> dict[str, Any]:
    return hook_payload(event, session_id=session_id, cwd=CWD, **fields)


def seed_agents(service: Service) -> Service:
    """Four sessions about one invoice export: Claude Code's, an older Claude Code one whose
    agent was never recorded, Codex's and Gemini CLI's; and a curated memory on the same words."""
    service.store.ensure_session(LEGACY, "demo", T0 - 500, agent=None)  # as migration 16 left it
    feed(service, "claude-code", [
        claude("UserPromptSubmit", LEGACY, prompt="why does the invoice export time out"),
        claude("PostToolUse", LEGACY, tool_name="Bash", tool_input={"command": "pytest tests/test_invoice_export.py"},
               tool_response={"stdout": "invoice export timed out", "exit_code": 1}),
    ], T0 - 400)
    feed(service, "claude-code", [
        claude("SessionStart", CC, source="startup"),
        claude("UserPromptSubmit", CC, prompt="make the invoice export stream rows"),
        claude("PostToolUse", CC, tool_name="Read", tool_input={"file_path": f"{CWD}/src/invoice_export.py"}),
    ], T0)
    feed(service, "codex", [
        cx.session_start(CWD), cx.prompt(CWD, "finish the invoice export streaming"),
        cx.bash(CWD, "pytest -q tests/test_invoice_export.py", "Process exited with code 1\nOutput:\n"
                "FAILED tests/test_invoice_export.py::test_stream - invoice export buffered every row\n"),
        cx.stop(CWD, "The invoice export streams now."),
    ], T0 + 100)
    feed(service, "gemini", [
        gm.session_start(CWD), gm.before_agent(CWD, "document the invoice export"),
        gm.shell(CWD, "grep -rn invoice_export docs", "docs/export.md:3: invoice export"),
    ], T0 + 200)
    service.remember("The invoice export streams rows; never buffer.", summary="invoice export streams",
                     namespace="decisions", project="demo", at=T0 + 300)
    return service
