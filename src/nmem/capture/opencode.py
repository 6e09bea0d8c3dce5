"""OpenCode adapter: the events nmem's OpenCode plugin (`nmem/setup/opencode_plugin.js`)
sends → HookEvents.

The plugin runs inside OpenCode and turns its plugin hooks (opencode.ai/docs/plugins) into one
JSON object a process, with `cwd` (the worktree) and `session_id` (OpenCode's session id):
`session.created`; `chat.message` with `prompt` (the text parts of the user's message);
`tool.execute.after` with `tool`, `args` (read in `tool.execute.before`), `title`, `output`,
`metadata` (bash's `exit`); `session.idle` (the agent finished its turn) with
`last_assistant_message`, the text of its last reply (read from `message.updated` and
`message.part.updated`), which becomes the turn's reply as Claude Code's Stop's does;
`session.compacted`.
OpenCode's tools and their arguments (packages/opencode/src/tool): bash (`command`,
`description`), read (`filePath`, `offset`, `limit`), write (`filePath`, `content`), edit
(`filePath`, `oldString`, `newString`, `replaceAll`), glob and grep (`pattern`, `path`,
`include`), webfetch (`url`), task (`description`, `prompt`), MCP tools as `<server>_<tool>`.

No context goes back: OpenCode's plugin API has no documented hook that adds to the model's
context at a session's start, so an OpenCode agent recalls through nmem's MCP tools.
"""

from __future__ import annotations

from nmem.capture import claude_code
from nmem.errors import InvalidArgument

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from nmem.capture.events import HookEvent

AGENT = "opencode"
EVENTS = {"session.created": "SessionStart", "chat.message": "UserPromptSubmit", "tool.execute.after": "PostToolUse",
          "session.idle": "Stop", "session.compacted": "PreCompact"}
TOOLS = {"bash": "Bash", "read": "Read", "write": "Write", "edit": "Edit", "glob": "Glob", "grep": "Grep",
         "webfetch": "WebFetch", "task": "Task"}
ARG_NAMES = {"filePath": "file_path", "oldString": "old_string", "newString": "new_string",
             "replaceAll": "replace_all", "include": "glob"}


def parse(payload: object, *, now: float | None = None) -> HookEvent:
    if not isinstance(payload, dict):
        raise InvalidArgument("hook input: expected a JSON object")
    name = payload.get("hook_event_name")
    if not isinstance(name, str) or not name:
        raise InvalidArgument("hook input: missing required field 'hook_event_name'")
    shaped: dict[str, Any] = {"hook_event_name": EVENTS.get(name, name), "session_id": payload.get("session_id"),
                              "cwd": payload.get("cwd"), "prompt": payload.get("prompt")}
    if name == "session.created":
        shaped["source"] = "startup"
    elif name == "session.idle":
        shaped["last_assistant_message"] = payload.get("last_assistant_message")
    elif name == "session.compacted":
        shaped["trigger"] = "auto"
    elif name == "tool.execute.after":
        tool = str(payload.get("tool") or "")
        raw_args, raw_meta = payload.get("args"), payload.get("metadata")
        args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        metadata: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        output = payload.get("output")
        mapped = TOOLS.get(tool)
        if mapped is None:
            shaped["tool_name"] = tool  # an MCP tool (`<server>_<tool>`) or another of OpenCode's
            shaped["tool_input"] = args
            shaped["tool_response"] = output
        else:
            shaped["tool_name"] = mapped
            shaped["tool_input"] = {ARG_NAMES.get(k, k): v for k, v in args.items()}
            if mapped == "Bash":
                response: Any = {"stdout": output if isinstance(output, str) else ""}
                code = metadata.get("exit")
                if isinstance(code, int) and not isinstance(code, bool):
                    response["exit_code"] = code
                shaped["tool_response"] = response
            else:
                shaped["tool_response"] = {"output": output if isinstance(output, str) else ""}
    event = claude_code.parse(shaped, now=now)
    event.hook_event_name = name
    return event


def output(event_name: str, text: str, *, plain_ok: bool = True) -> str:
    return ""
