"""The harness-neutral event that adapters produce and the service records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Normalised event kinds (Claude Code names in comments).
SESSION_START = "session_start"      # SessionStart
PROMPT = "prompt"                    # UserPromptSubmit
TOOL = "tool"                        # PostToolUse
TOOL_FAILURE = "tool_failure"        # PostToolUseFailure
PRE_COMPACT = "pre_compact"          # PreCompact
STOP = "stop"                        # Stop
SUBAGENT_STOP = "subagent_stop"      # SubagentStop
SESSION_END = "session_end"          # SessionEnd
REASONING = "reasoning"              # agent thinking read from a transcript (no hook of its own)
OTHER = "other"                      # anything else: accepted, ignored


@dataclass(frozen=True)
class HookEvent:
    kind: str
    session_id: str
    cwd: str
    timestamp: int
    hook_event_name: str
    source: str | None = None            # SessionStart source / SessionEnd reason / PreCompact trigger
    prompt: str | None = None
    assistant_message: str | None = None
    tool_name: str | None = None
    tool_input: dict[str, Any] = field(default_factory=dict)
    tool_response: Any = None
    error: str | None = None
    transcript_path: str | None = None
    agent_id: str | None = None          # set on subagent events; the parent session is kept


@dataclass(frozen=True)
class Extracted:
    """What one tool call contributes: zero or one observation's worth of fields."""

    obs_type: str
    content: str
    file_path: str | None = None
    metadata: dict[str, Any] | None = None
