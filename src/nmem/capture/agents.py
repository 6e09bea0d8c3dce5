"""The coding agents nmem captures, and the one entry that turns any agent's hook payload into a
HookEvent and a context block into what that agent reads on stdout.

Each agent has an adapter module (`nmem.capture.<module>`) with `parse(payload, now=)` and
`output(event_name, text)`; only the adapter of the agent at hand is imported, so a hook pays
for one. An event spooled or sent to a team server carries its agent in `_nmem_agent`, so a
replay parses it the way the hook did.
"""

from __future__ import annotations

from nmem.capture import claude_code
from nmem.capture import events as ev
from nmem.errors import InvalidArgument

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

AGENT_FIELD = "_nmem_agent"
# agent name -> its adapter module under nmem.capture
ADAPTERS: dict[str, str] = {
    ev.CLAUDE_CODE: "claude_code",
    "codex": "codex",
    "gemini": "gemini",
    "cursor": "cursor",
    "opencode": "opencode",
}
AGENTS: tuple[str, ...] = tuple(ADAPTERS)


def check(agent: str) -> str:
    if agent not in ADAPTERS:
        raise InvalidArgument(f"unknown agent {agent!r}; use one of: {', '.join(AGENTS)}")
    return agent


def _adapter(agent: str) -> Any:
    module = ADAPTERS[check(agent)]
    if module == "claude_code":
        return claude_code
    return __import__(f"nmem.capture.{module}", fromlist=["parse"])  # no importlib on the hook path


def agent_of(payload: object, agent: str | None = None) -> str:
    """The agent a payload comes from: the one named, else the one it carries, else Claude Code."""
    if agent:
        return check(agent)
    carried = payload.get(AGENT_FIELD) if isinstance(payload, dict) else None
    return check(carried) if isinstance(carried, str) and carried else ev.CLAUDE_CODE


def parse(payload: object, agent: str | None = None, *, now: float | None = None) -> ev.HookEvent:
    """Any agent's hook payload → a HookEvent with its `agent` set."""
    name = agent_of(payload, agent)
    event: ev.HookEvent = _adapter(name).parse(payload, now=now)
    event.agent = name
    return event


def tagged(payload: dict[str, Any], agent: str) -> dict[str, Any]:
    """The payload as a spool file or a team server keeps it: with its agent when not Claude Code."""
    return payload if agent == ev.CLAUDE_CODE else {**payload, AGENT_FIELD: agent}


def output(agent: str, event_name: str, text: str, *, plain_ok: bool = True) -> str:
    """What the agent reads as context on stdout for this event (empty for no context)."""
    if not text:
        return ""
    result: str = _adapter(agent).output(event_name, text, plain_ok=plain_ok)
    return result
