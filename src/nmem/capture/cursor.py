"""Cursor adapter: one Cursor agent hook payload → a HookEvent, and context as Cursor reads it.

Cursor's hooks (cursor.com/docs/agent/hooks; the shapes as the Cupcake and hookshot Cursor
references and claude-mem's and agentmemory's Cursor hooks.json use them): every input has
`hook_event_name` (camelCase), `conversation_id` (one chat, the session nmem records),
`generation_id`, `workspace_roots` (the first is the project), `model`, `cursor_version`.
Per event: `sessionStart` (`session_id`, `composer_mode`), `beforeSubmitPrompt` (`prompt`,
`attachments`), `afterShellExecution` (`command`, `cwd`, `output`, `duration`),
`afterMCPExecution` (`tool_name`, `tool_input` as a JSON string, `result_json`), `afterFileEdit`
(`file_path`, `edits` of `old_string`/`new_string`), `afterAgentResponse` (`text`),
`afterAgentThought` (`text`), `preCompact` (`trigger`), `stop` (`status`: completed, aborted,
error; `loop_count`), `sessionEnd` (`reason`). Others are accepted and ignored.

Context: only `sessionStart` takes any, as `{"additional_context": ...}`; Cursor versions
before its sessionStart hook (and, reported by users, some after it) do not pass it to the
model, so nmem's MCP tools are the dependable way for a Cursor agent to recall.
"""

from __future__ import annotations

from nmem import jsonlite
from nmem.capture import claude_code
from nmem.capture import events as ev
from nmem.errors import InvalidArgument

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from nmem.capture.events import HookEvent

AGENT = "cursor"
KINDS = {"sessionStart": "SessionStart", "beforeSubmitPrompt": "UserPromptSubmit", "afterShellExecution": "PostToolUse",
         "afterMCPExecution": "PostToolUse", "afterFileEdit": "PostToolUse", "preCompact": "PreCompact",
         "stop": "Stop", "sessionEnd": "SessionEnd"}


def _cwd(payload: dict[str, Any]) -> str | None:
    roots = payload.get("workspace_roots")
    if isinstance(roots, list) and roots and isinstance(roots[0], str) and roots[0]:
        return roots[0]
    cwd = payload.get("cwd")
    return cwd if isinstance(cwd, str) and cwd else None


def _json_or_text(value: Any) -> Any:
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        try:
            return jsonlite.loads(value)
        except ValueError:
            return value
    return value


def parse(payload: object, *, now: float | None = None) -> HookEvent:
    if not isinstance(payload, dict):
        raise InvalidArgument("hook input: expected a JSON object")
    name = payload.get("hook_event_name")
    if not isinstance(name, str) or not name:
        raise InvalidArgument("hook input: missing required field 'hook_event_name'")
    session = payload.get("conversation_id") or payload.get("session_id")
    shaped: dict[str, Any] = {"hook_event_name": KINDS.get(name, name), "session_id": session, "cwd": _cwd(payload)}
    if name == "sessionStart":
        shaped["source"] = "startup"
    elif name == "beforeSubmitPrompt":
        shaped["prompt"] = payload.get("prompt")
    elif name == "afterShellExecution":
        shaped.update(tool_name="Bash", tool_input={"command": payload.get("command")},
                      tool_response={"stdout": payload.get("output") or ""})
        if isinstance(payload.get("cwd"), str) and payload["cwd"]:
            shaped["cwd"] = shaped["cwd"] or payload["cwd"]
    elif name == "afterMCPExecution":
        tool = str(payload.get("tool_name") or "")
        tool_input = _json_or_text(payload.get("tool_input"))
        shaped.update(tool_name=tool if tool.startswith("mcp__") else f"mcp__cursor__{tool}",
                      tool_input=tool_input if isinstance(tool_input, dict) else {},
                      tool_response=_json_or_text(payload.get("result_json")))
    elif name == "afterFileEdit":
        edits = payload.get("edits") if isinstance(payload.get("edits"), list) else []
        shaped.update(tool_name="MultiEdit", tool_input={"file_path": payload.get("file_path"), "edits": edits},
                      tool_response={})
    elif name == "preCompact":
        shaped["trigger"] = payload.get("trigger")
    elif name == "stop":
        shaped["reason"] = payload.get("status")
    elif name == "sessionEnd":
        shaped["reason"] = payload.get("reason")
    event = claude_code.parse(shaped, now=now)
    if name in ("afterAgentResponse", "afterAgentThought") and isinstance(payload.get("text"), str):
        event.kind = ev.REPLY if name == "afterAgentResponse" else ev.REASONING  # a reply, or a thought
        event.assistant_message = payload["text"]
    event.hook_event_name = name
    return event


def output(event_name: str, text: str, *, plain_ok: bool = True) -> str:
    if event_name != "sessionStart":
        return ""
    return jsonlite.dumps({"additional_context": text}) + "\n"
