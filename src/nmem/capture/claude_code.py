"""Claude Code adapter: one hook payload (the JSON on stdin) → a harness-neutral HookEvent."""

from __future__ import annotations

import time

from nmem.capture import events as ev
from nmem.errors import InvalidArgument

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

EVENT_KINDS: dict[str, str] = {
    "SessionStart": ev.SESSION_START,
    "UserPromptSubmit": ev.PROMPT,
    "PostToolUse": ev.TOOL,
    "PostToolUseFailure": ev.TOOL_FAILURE,
    "PreCompact": ev.PRE_COMPACT,
    "Stop": ev.STOP,
    "SubagentStop": ev.SUBAGENT_STOP,
    "SessionEnd": ev.SESSION_END,
}

# `nmem hook <name>` accepts subcog's kebab-case names as well as Claude Code's.
HOOK_ALIASES: dict[str, str] = {
    "UserPrompt": "UserPromptSubmit",   # subcog's enum names
    "PostTool": "PostToolUse",
    "session-start": "SessionStart",
    "user-prompt": "UserPromptSubmit",
    "user-prompt-submit": "UserPromptSubmit",
    "post-tool": "PostToolUse",
    "post-tool-use": "PostToolUse",
    "post-tool-failure": "PostToolUseFailure",
    "post-tool-use-failure": "PostToolUseFailure",
    "pre-compact": "PreCompact",
    "stop": "Stop",
    "subagent-stop": "SubagentStop",
    "session-end": "SessionEnd",
}


def _required_str(payload: Mapping[str, Any], key: str) -> str:
    value = payload.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"hook input: missing required field {key!r}")
    return value


def _optional_str(payload: Mapping[str, Any], key: str) -> str | None:
    value = payload.get(key)
    return value if isinstance(value, str) else None


# subcog's field -> Claude Code's; Claude Code's wins when both are present.
SUBCOG_FIELDS = (("project_path", "cwd"), ("tool_output", "tool_response"),
                 ("conversation_summary", "last_assistant_message"))


def with_working_dir(payload: object, cwd: str | None) -> object:
    """The payload with `cwd` set to the hook process's own directory when it names none
    (subcog's UserPromptSubmit, PostToolUse, PreCompact and Stop carry no directory: the harness
    runs the hook in it). A directory given but empty stays an error."""
    if cwd and isinstance(payload, dict) and payload.get("cwd") is None and payload.get("project_path") is None:
        return {**payload, "cwd": cwd}
    return payload


def _subcog_shape(payload: dict[str, Any]) -> dict[str, Any]:
    """subcog's hook input names the working directory `project_path`, the event `hook`
    (PascalCase or kebab-case), a tool's answer `tool_output` and a compaction's summary
    `conversation_summary`; Claude Code's names win when both are present."""
    for theirs, ours in SUBCOG_FIELDS:
        if payload.get(ours) is None and payload.get(theirs) is not None:
            payload = {**payload, ours: payload[theirs]}
    hook = payload.get("hook")
    if not isinstance(payload.get("hook_event_name"), str) and isinstance(hook, str):
        payload = {**payload, "hook_event_name": HOOK_ALIASES.get(hook, hook)}
    return payload


def _decisions(payload: Mapping[str, Any]) -> list[str]:
    """subcog's PreCompact `key_decisions`: the non-empty strings of the list, nothing else."""
    given = payload.get("key_decisions")
    if not isinstance(given, list):
        return []
    return [d.strip() for d in given if isinstance(d, str) and d.strip()]


def parse(payload: object, *, now: float | None = None) -> ev.HookEvent:
    """Validate the common fields and normalise; unknown fields are ignored. Claude Code's
    shape, or subcog's (`project_path`, `hook`)."""
    if not isinstance(payload, dict):
        raise InvalidArgument("hook input: expected a JSON object")
    payload = _subcog_shape(payload)
    name = _required_str(payload, "hook_event_name")
    session_id = _required_str(payload, "session_id")
    if not isinstance(payload.get("cwd"), str) or not payload["cwd"].strip():
        raise InvalidArgument("hook input: missing required field 'cwd' (or subcog's 'project_path')")
    cwd = payload["cwd"]
    kind = EVENT_KINDS.get(name, ev.OTHER)
    tool_name = _optional_str(payload, "tool_name")
    if kind in (ev.TOOL, ev.TOOL_FAILURE) and not tool_name:
        raise InvalidArgument(f"hook input: {name} without 'tool_name'")
    tool_input = payload.get("tool_input")
    if kind == ev.PROMPT and not isinstance(payload.get("prompt"), str):
        raise InvalidArgument("hook input: UserPromptSubmit without 'prompt'")
    source = (_optional_str(payload, "source") or _optional_str(payload, "reason")
              or _optional_str(payload, "trigger"))
    return ev.HookEvent(
        kind=kind,
        session_id=session_id,
        cwd=cwd,
        timestamp=int(now if now is not None else time.time()),
        hook_event_name=name,
        source=source,
        prompt=_optional_str(payload, "prompt"),
        assistant_message=_optional_str(payload, "last_assistant_message"),
        tool_name=tool_name,
        tool_input=tool_input if isinstance(tool_input, dict) else {},
        tool_response=payload.get("tool_response"),
        error=_optional_str(payload, "error"),
        # the file the event's words are in: a SubagentStop's own (Claude Code 2.0.42+), never the parent's
        transcript_path=_optional_str(payload, "agent_transcript_path" if kind == ev.SUBAGENT_STOP
                                      else "transcript_path"),
        agent_id=_optional_str(payload, "agent_id"),
        decisions=_decisions(payload) if kind == ev.PRE_COMPACT else None,
        branch=_optional_str(payload, "git_branch"),
        agent_type=_optional_str(payload, "agent_type"),
    )


def output(event_name: str, text: str, *, plain_ok: bool = True) -> str:
    """Context for Claude Code: plain text, or `hookSpecificOutput` JSON when plain text is not
    wanted (`context.format = json`), and always for PostToolUse, whose plain output Claude
    Code does not pass to the model."""
    if event_name == "PostToolUse" or not plain_ok:
        from nmem import jsonlite

        return jsonlite.dumps({"hookSpecificOutput": {"hookEventName": event_name, "additionalContext": text}}) + "\n"
    return text + "\n"
