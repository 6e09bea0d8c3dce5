"""The harness-neutral event that adapters produce and the service records."""

from __future__ import annotations

from nmem.models import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
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
REPLY = "reply"                      # an assistant text message read from a transcript (no hook of its own)
OTHER = "other"                      # anything else: accepted, ignored

CLAUDE_CODE = "claude-code"          # the agent an event comes from when nothing says otherwise


class HookEvent:
    """One hook event, normalised. A plain class: a hook builds one per process and
    `dataclasses` costs more to import than a hook may spend."""

    __slots__ = (
        "agent",
        "agent_id",
        "agent_type",
        "assistant_message",
        "branch",
        "cwd",
        "decisions",
        "error",
        "hook_event_name",
        "kind",
        "prompt",
        "session_id",
        "source",
        "timestamp",
        "tool_input",
        "tool_name",
        "tool_response",
        "transcript_path",
    )

    def __init__(self, kind: str, session_id: str, cwd: str, timestamp: int, hook_event_name: str,
                 source: str | None = None, prompt: str | None = None, assistant_message: str | None = None,
                 tool_name: str | None = None, tool_input: dict[str, Any] | None = None,
                 tool_response: Any = None, error: str | None = None, transcript_path: str | None = None,
                 agent_id: str | None = None, agent: str = CLAUDE_CODE, decisions: list[str] | None = None,
                 branch: str | None = None, agent_type: str | None = None) -> None:
        self.kind = kind
        self.session_id = session_id
        self.cwd = cwd
        self.timestamp = timestamp
        self.hook_event_name = hook_event_name
        self.source = source                      # SessionStart source / SessionEnd reason / PreCompact trigger
        self.prompt = prompt
        self.assistant_message = assistant_message
        self.tool_name = tool_name
        self.tool_input: dict[str, Any] = {} if tool_input is None else tool_input
        self.tool_response = tool_response
        self.error = error
        self.transcript_path = transcript_path
        self.agent_id = agent_id                  # set on subagent events; the parent session is kept
        self.agent = agent                        # the coding agent that sent it (capture.agents.AGENTS)
        self.branch = branch                      # subcog's `git_branch`, shown in its SessionStart output
        self.decisions: list[str] = [] if decisions is None else decisions  # subcog's PreCompact key_decisions
        self.agent_type = agent_type              # a subagent's type (`Explore`), when its events say it

    def __repr__(self) -> str:
        return f"HookEvent({self.hook_event_name}, session={self.session_id!r}, tool={self.tool_name!r})"


class Extracted(Record):
    """What one tool call contributes: zero or one observation's worth of fields."""

    obs_type: str
    content: str
    file_path: str | None = None
    metadata: dict[str, Any] | None = None
