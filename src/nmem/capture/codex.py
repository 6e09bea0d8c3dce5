"""Codex CLI adapter: one Codex hook payload → a HookEvent, and context in the shape Codex reads.

Codex's hooks take Claude Code's shape (openai/codex `codex-rs/hooks/schema/generated/
*.command.input.schema.json`): `session_id` (the thread id), `cwd`, `hook_event_name`,
`transcript_path` (the session's rollout file), `model`, `turn_id`, and per event `source`
(SessionStart: startup, resume, clear, compact), `prompt` (UserPromptSubmit), `tool_name`,
`tool_input`, `tool_response`, `tool_use_id` (PostToolUse), `trigger` (PreCompact),
`last_assistant_message` (Stop, SubagentStop), `agent_id`/`agent_type` (subagents). Events:
SessionStart, UserPromptSubmit, PreToolUse, PermissionRequest, PostToolUse, PreCompact,
PostCompact, Stop, StopFailure, SubagentStart, SubagentStop, SessionEnd (the root thread's
teardown: `session_id`, `transcript_path`, `cwd`, `reason` "other"; openai/codex#33895); those
nmem does not record are accepted and ignored.

What differs from Claude Code is the tools (codex-rs/core/src/tools/handlers): the shell is
`Bash` with `tool_input` `{"command": "<one string>"}` and `tool_response` the output text the
model saw, not an object with `stdout` and `exit_code`; file changes are `apply_patch` with the
patch text in `tool_input.command`; MCP tools are `mcp__<server>__<tool>` as in Claude Code.

Codex reads a SessionStart's context from `hookSpecificOutput.additionalContext` (or plain
stdout; JSON-looking stdout that does not parse fails the hook, so nmem always prints JSON).
"""

from __future__ import annotations

from nmem import jsonlite
from nmem.capture import claude_code
from nmem.errors import InvalidArgument

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from nmem.capture.events import HookEvent

AGENT = "codex"
# Codex's exec output as the model sees it: `Exit code: N` (shell) or `Process exited with code N`
# (unified exec) among a few header lines, then `Output:` and the command's output.
_EXIT_PREFIXES = ("Exit code:", "Process exited with code")
HEADER_LINES = 8
CONTEXT_EVENTS = frozenset({"SessionStart", "UserPromptSubmit", "PostToolUse", "SubagentStart"})


def shell_response(response: object) -> object:
    """Codex's shell output text → `{"stdout", "exit_code"}` when its header gives the code."""
    if not isinstance(response, str):
        return response
    lines = response.split("\n", HEADER_LINES)
    code: int | None = None
    for i, line in enumerate(lines[:HEADER_LINES]):
        stripped = line.strip()
        for prefix in _EXIT_PREFIXES:
            if stripped.startswith(prefix):
                number = stripped[len(prefix):].strip()
                if number.lstrip("-").isdigit():
                    code = int(number)
        if stripped == "Output:" and code is not None:
            return {"stdout": "\n".join(lines[i + 1:]), "exit_code": code}
    if code is None:
        return response
    return {"stdout": response, "exit_code": code}


def parse(payload: object, *, now: float | None = None) -> HookEvent:
    if not isinstance(payload, dict):
        raise InvalidArgument("hook input: expected a JSON object")
    shaped: dict[str, Any] = dict(payload)
    if shaped.get("tool_name") == "Bash":
        shaped["tool_response"] = shell_response(shaped.get("tool_response"))
    event = claude_code.parse(shaped, now=now)
    # A Codex rollout, not a Claude Code transcript: a Stop must not read it as one.
    event.transcript_path = None
    return event


def output(event_name: str, text: str, *, plain_ok: bool = True) -> str:
    if event_name not in CONTEXT_EVENTS:
        return ""
    return jsonlite.dumps({"hookSpecificOutput": {"hookEventName": event_name, "additionalContext": text}}) + "\n"


def codex_home(home: Path | None = None) -> Path:
    """Codex's directory: $CODEX_HOME, else ~/.codex (what its importer and installer read)."""
    import os
    from pathlib import Path  # only the importer and the installer ask; a hook never does

    if home is None and os.environ.get("CODEX_HOME"):
        return Path(os.environ["CODEX_HOME"])
    return (home or Path.home()) / ".codex"
