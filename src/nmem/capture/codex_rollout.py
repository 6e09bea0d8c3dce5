"""Reading Codex session files (`~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`).

Each line is `{"timestamp": ISO, "type": T, "payload": {...}}` (openai/codex `codex-rs/protocol`,
`RolloutItem`); the types read here:
- `session_meta`: `id` (the session id hooks see), `cwd`;
- `turn_context`: the turn's `cwd`;
- `response_item`: `message` (role user/assistant, `content` of `input_text`/`output_text`),
  `reasoning` (`summary` of `summary_text`), `function_call` (`name`, `arguments` as a JSON
  string, `call_id`), `function_call_output` (`call_id`, `output`: text, or JSON text with
  `output` and `metadata.exit_code`), `custom_tool_call` / `custom_tool_call_output`
  (`apply_patch` with the patch as `input`), `local_shell_call` (`action.command`),
  `web_search_call` (`action.query`);
- `event_msg`: `user_message`, `agent_message`, `agent_reasoning` (the same text as the
  response items, written beside them by newer versions; read once);
- `compacted`: `message`, the summary a compaction left.
Unknown types and fields are skipped, never raised: the format changes between versions.

The events are the ones Codex's hooks would have sent, with `agent` codex: prompts, tool calls
with their results (the shell as `Bash`, patches as `apply_patch`), every assistant reply and
reasoning summary, compactions (PreCompact with the summary, then SessionStart `compact`).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from typing import Any

from nmem import jsonlite
from nmem.capture import events as ev
from nmem.capture.codex import AGENT, shell_response
from nmem.capture.transcript import REASONING_CHARS, TranscriptCursor, _epoch, complete_lines, iter_lines

# User messages Codex writes that nobody typed: the environment and instruction blocks it sends.
NOT_TYPED = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<turn_aborted>",
             "<user_shell_command>", "<permissions instructions>")
SHELL_TOOLS = frozenset({"shell", "shell_command", "exec_command", "local_shell", "container.exec"})
SKIPPED_TOOLS = frozenset({"update_plan", "write_stdin"})


def shell_text(command: Any) -> str:
    """A shell call's command as one string: `["bash", "-lc", "ls"]` → `ls`."""
    if isinstance(command, list) and all(isinstance(c, str) for c in command):
        if len(command) == 3 and command[1] in ("-lc", "-c") and command[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh"):
            return str(command[2])
        return shlex.join(command)
    return command if isinstance(command, str) else ""


def tool_call(name: str, arguments: Any) -> tuple[str, dict[str, Any]] | None:
    """(hook tool name, tool_input) for a call as Codex's hooks name it, or None to skip it."""
    args: Any = arguments
    if isinstance(arguments, str):
        try:
            args = jsonlite.loads(arguments)
        except ValueError:
            args = {"input": arguments}
    if not isinstance(args, dict):
        args = {}
    if name in SKIPPED_TOOLS:
        return None
    if name in SHELL_TOOLS:
        command = shell_text(args.get("command") if "command" in args else args.get("cmd"))
        if not command:
            return None
        tool_input: dict[str, Any] = {"command": command}
        if isinstance(args.get("workdir"), str):
            tool_input["workdir"] = args["workdir"]
        return "Bash", tool_input
    if name == "apply_patch":
        patch = args.get("input") or args.get("patch") or args.get("command")
        return ("apply_patch", {"command": patch}) if isinstance(patch, str) else None
    return name, args


def tool_result(tool_name: str, output: Any) -> tuple[Any, str | None]:
    """(tool_response, error) from a call's output: JSON text with `output` and `metadata`, or text."""
    text = output if isinstance(output, str) else ""
    parsed: Any = None
    if text.lstrip().startswith("{"):
        try:
            parsed = jsonlite.loads(text)
        except ValueError:
            parsed = None
    if isinstance(parsed, dict) and "output" in parsed:
        meta = parsed.get("metadata")
        code = meta.get("exit_code") if isinstance(meta, dict) else None
        response: Any = {"stdout": str(parsed.get("output") or "")}
        if isinstance(code, int) and not isinstance(code, bool):
            response["exit_code"] = code
    elif tool_name == "Bash":
        response = shell_response(text)
    else:
        response = output if isinstance(output, (str, dict, list)) else text
    code = response.get("exit_code") if isinstance(response, dict) else None
    if tool_name != "Bash" and isinstance(code, int) and code != 0:
        return response, str(response.get("stdout") or "") or f"exit code {code}"
    return response, None


def _texts(content: Any, kinds: tuple[str, ...]) -> str:
    if not isinstance(content, list):
        return ""
    return "\n".join(str(b.get("text") or "") for b in content
                     if isinstance(b, dict) and b.get("type") in kinds).strip()


class RolloutReplay:
    """The hook events one rollout file stands for, read from a cursor onwards; the attributes
    `nmem.portable.sources.transcripts.Importer` reads (session_id, cwd, first_ts, last_ts, last_text,
    path, cursor) as `TranscriptReplay` has them."""

    def __init__(self, path: str, *, cursor: TranscriptCursor | None = None, session_id: str | None = None,
                 cwd: str | None = None) -> None:
        self.path = path
        self.cursor = cursor or TranscriptCursor()
        self.session_id = session_id
        self.cwd = cwd
        self.first_ts: int | None = None
        self.last_ts = 0
        self.last_text = ""
        self._said: dict[str, str] = {}   # kind -> the last text recorded, so the twin line is read once

    def events(self) -> Iterator[ev.HookEvent]:
        if self.cursor.offset and (self.session_id is None or self.cwd is None):
            self._read_meta()  # resumed past the meta line
        for end, line in complete_lines(self.path, self.cursor.offset):
            if isinstance(line, dict):
                yield from self._line(line)
            self.cursor.offset = end

    def _read_meta(self) -> None:
        for line in iter_lines(self.path):
            payload = line.get("payload")
            if line.get("type") == "session_meta" and isinstance(payload, dict):
                self.session_id = self.session_id or _str(payload.get("id"))
                self.cwd = self.cwd or _str(payload.get("cwd"))
                return

    def _once(self, kind: str, text: str) -> bool:
        if self._said.get(kind) == text:
            return False
        self._said[kind] = text
        return True

    def _line(self, line: dict[str, Any]) -> Iterator[ev.HookEvent]:
        kind, payload = line.get("type"), line.get("payload")
        if not isinstance(payload, dict):
            return
        if kind == "session_meta":
            if self.session_id is None:
                self.session_id = _str(payload.get("id"))
            self.cwd = self.cwd or _str(payload.get("cwd"))
            return
        if kind == "turn_context":
            self.cwd = _str(payload.get("cwd")) or self.cwd
            return
        if self.session_id is None or self.cwd is None:
            return
        self.last_ts = _epoch(line.get("timestamp"), self.last_ts)
        if self.first_ts is None:
            self.first_ts = self.last_ts
        base: dict[str, Any] = {"session_id": self.session_id, "cwd": self.cwd, "timestamp": self.last_ts,
                                "agent": AGENT}
        if kind == "response_item":
            yield from self._item(payload, base)
        elif kind == "event_msg":
            yield from self._event_msg(payload, base)
        elif kind == "compacted":
            summary = _str(payload.get("message")) or ""
            yield ev.HookEvent(kind=ev.PRE_COMPACT, hook_event_name="PreCompact", source="auto",
                               assistant_message=summary.strip() or None, **base)
            yield ev.HookEvent(kind=ev.SESSION_START, hook_event_name="SessionStart", source="compact", **base)

    def _prompt(self, text: str, base: dict[str, Any]) -> Iterator[ev.HookEvent]:
        text = text.strip()
        if text and not text.startswith(NOT_TYPED) and self._once("user", text):
            yield ev.HookEvent(kind=ev.PROMPT, hook_event_name="UserPromptSubmit", prompt=text, **base)

    def _reply(self, text: str, base: dict[str, Any]) -> Iterator[ev.HookEvent]:
        text = text.strip()
        if text and self._once("assistant", text):
            self.last_text = text
            yield ev.HookEvent(kind=ev.REPLY, hook_event_name="Transcript", assistant_message=text, **base)

    def _thought(self, text: str, base: dict[str, Any]) -> Iterator[ev.HookEvent]:
        text = text.strip()
        if text and self._once("reasoning", text):
            yield ev.HookEvent(kind=ev.REASONING, hook_event_name="Transcript",
                               assistant_message=text[:REASONING_CHARS], **base)

    def _item(self, item: dict[str, Any], base: dict[str, Any]) -> Iterator[ev.HookEvent]:
        itype = item.get("type")
        if itype == "message":
            if item.get("role") == "user":
                yield from self._prompt(_texts(item.get("content"), ("input_text", "text")), base)
            elif item.get("role") == "assistant":
                yield from self._reply(_texts(item.get("content"), ("output_text", "text")), base)
        elif itype == "reasoning":
            yield from self._thought(_texts(item.get("summary"), ("summary_text",)), base)
        elif itype in ("function_call", "custom_tool_call", "local_shell_call"):
            self._call(item)
        elif itype in ("function_call_output", "custom_tool_call_output"):
            yield from self._result(item, base)
        elif itype == "web_search_call":
            action = item.get("action")
            query = _str(action.get("query")) if isinstance(action, dict) else None
            if query:
                yield ev.HookEvent(kind=ev.TOOL, hook_event_name="PostToolUse", tool_name="WebSearch",
                                   tool_input={"query": query}, tool_response=None, **base)

    def _call(self, item: dict[str, Any]) -> None:
        call_id = _str(item.get("call_id"))
        if call_id is None:
            return
        if item.get("type") == "local_shell_call":
            action = item.get("action")
            action = action if isinstance(action, dict) else {}
            found = tool_call("local_shell", {"command": action.get("command"),
                                              "workdir": action.get("working_directory")})
        elif item.get("type") == "custom_tool_call":
            found = tool_call(str(item.get("name") or ""), {"input": item.get("input")})
        else:
            found = tool_call(str(item.get("name") or ""), item.get("arguments"))
        if found is not None:
            self.cursor.pending[call_id] = found

    def _result(self, item: dict[str, Any], base: dict[str, Any]) -> Iterator[ev.HookEvent]:
        call = self.cursor.pending.pop(str(item.get("call_id")), None)
        if call is None:
            return
        name, tool_input = call
        response, error = tool_result(name, item.get("output"))
        yield ev.HookEvent(kind=ev.TOOL_FAILURE if error else ev.TOOL,
                           hook_event_name="PostToolUseFailure" if error else "PostToolUse",
                           tool_name=name, tool_input=tool_input, tool_response=response, error=error, **base)

    def _event_msg(self, msg: dict[str, Any], base: dict[str, Any]) -> Iterator[ev.HookEvent]:
        mtype = msg.get("type")
        if mtype == "user_message":
            yield from self._prompt(_str(msg.get("message")) or "", base)
        elif mtype == "agent_message":
            yield from self._reply(_str(msg.get("message")) or "", base)
        elif mtype == "agent_reasoning":
            yield from self._thought(_str(msg.get("text")) or "", base)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def session_meta(path: str) -> tuple[str | None, str | None]:
    """(session id, cwd) of a rollout file: its first `session_meta` line."""
    for line in iter_lines(path):
        payload = line.get("payload")
        if line.get("type") == "session_meta" and isinstance(payload, dict):
            return _str(payload.get("id")), _str(payload.get("cwd"))
    return None, None
