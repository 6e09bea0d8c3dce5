"""Gemini CLI adapter: one Gemini CLI hook payload → a HookEvent, and context as Gemini reads it.

From google-gemini/gemini-cli `docs/hooks/reference.md` and `docs/hooks/index.md`: every input
has `session_id`, `transcript_path`, `cwd`, `hook_event_name`, `timestamp`; events and their
fields: SessionStart (`source`: startup, resume, clear), BeforeAgent (`prompt`), AfterAgent
(`prompt`, `prompt_response`), BeforeTool / AfterTool (`tool_name`, `tool_input`, AfterTool's
`tool_response` = {`llmContent`, `returnDisplay`, `error`?}), PreCompress (`trigger`), SessionEnd
(`reason`), Notification, BeforeModel, AfterModel, BeforeToolSelection. Built-in tools:
`run_shell_command` (`command`, `description`, `directory`), `read_file`, `read_many_files`,
`write_file`, `replace` (`file_path`, `old_string`, `new_string`), `glob`, `search_file_content`
(`grep_search` in later versions), `list_directory`, `web_fetch` (`prompt` holding the URLs),
`google_web_search` (`query`), `save_memory`, `write_todos`. MCP tools are named
`mcp_<server>_<tool>` (one underscore, so the name alone does not say where the server's name
ends); BeforeTool / AfterTool carry `mcp_context` {`server_name`, `tool_name`, ...} for them
(packages/core/src/hooks/types.ts `McpToolContext`), which nmem reads as Claude Code's
`mcp__<server>__<tool>`.

The events map onto Claude Code's (Gemini's own migration table: BeforeAgent = UserPromptSubmit,
AfterTool = PostToolUse, AfterAgent = Stop, PreCompress = PreCompact) and the tools onto
Claude Code's, so the same extractors read them. stdout must hold JSON only; context goes in
`hookSpecificOutput.additionalContext` (SessionStart, BeforeAgent, AfterTool).
"""

from __future__ import annotations

from nmem import jsonlite
from nmem.capture import claude_code
from nmem.errors import InvalidArgument

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from nmem.capture.events import HookEvent

AGENT = "gemini"
EVENTS = {"SessionStart": "SessionStart", "BeforeAgent": "UserPromptSubmit", "AfterTool": "PostToolUse",
          "AfterAgent": "Stop", "PreCompress": "PreCompact", "SessionEnd": "SessionEnd"}
TOOLS = {"run_shell_command": "Bash", "read_file": "Read", "write_file": "Write", "replace": "Edit",
         "glob": "Glob", "search_file_content": "Grep", "grep_search": "Grep", "google_web_search": "WebSearch",
         "web_fetch": "WebFetch"}
CONTEXT_EVENTS = frozenset({"SessionStart", "BeforeAgent", "AfterTool"})
HOOK_CONTEXT = ("<hook_context>", "</hook_context>")


def _shell_response(content: str) -> dict[str, Any]:
    """run_shell_command's llmContent (`Command: …`, `Output: …`, `Exit Code: N` lines) → stdout, exit_code."""
    out: dict[str, Any] = {"stdout": content}
    lines = content.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Output:"):
            rest = [line[len("Output:"):].strip(), *lines[i + 1:]]
            end = next((j for j, r in enumerate(rest) if r.startswith(("Error:", "Exit Code:", "Signal:"))),
                       len(rest))
            out["stdout"] = "\n".join(rest[:end]).strip()
        elif line.startswith("Exit Code:"):
            number = line[len("Exit Code:"):].strip()
            if number.lstrip("-").isdigit():
                out["exit_code"] = int(number)
    return out


def _tool(shaped: dict[str, Any]) -> None:
    name = str(shaped.get("tool_name") or "")
    raw_input = shaped.get("tool_input")
    tool_input: dict[str, Any] = dict(raw_input) if isinstance(raw_input, dict) else {}
    response = shaped.get("tool_response")
    content = response.get("llmContent") if isinstance(response, dict) else response
    text = content if isinstance(content, str) else jsonlite.dumps(content) if content is not None else ""
    error = response.get("error") if isinstance(response, dict) else None
    if error:
        shaped["hook_event_name"] = "PostToolUseFailure"
        shaped["error"] = error if isinstance(error, str) else jsonlite.dumps(error)
    mcp = shaped.get("mcp_context")
    if isinstance(mcp, dict) and mcp.get("server_name") and mcp.get("tool_name"):
        shaped["tool_name"] = f"mcp__{mcp['server_name']}__{mcp['tool_name']}"
        shaped["tool_input"] = tool_input
        # The parts the model saw (text parts are read as the answer); on a failure, the error.
        shaped["tool_response"] = {"content": shaped["error"], "isError": True} if error else content
        return
    mapped = TOOLS.get(name)
    if mapped is None:
        shaped["tool_response"] = text
        return
    shaped["tool_name"] = mapped
    if mapped in ("Read", "Write", "Edit") and "file_path" not in tool_input and "absolute_path" in tool_input:
        tool_input["file_path"] = tool_input["absolute_path"]
    if mapped == "WebFetch" and "url" not in tool_input:
        words = str(tool_input.get("prompt") or "").split()
        tool_input["url"] = next((w for w in words if w.startswith(("http://", "https://"))), "")
    shaped["tool_input"] = tool_input
    if mapped == "Bash":
        shaped["tool_response"] = _shell_response(text)
    elif mapped in ("Read", "Write", "Edit"):
        # A failure came as `error` above; the text is the tool's message (or the file), nothing
        # for Claude Code's refusal wording to be looked for in (which would load `re`).
        shaped["tool_response"] = {"output": text}
    else:
        shaped["tool_response"] = text


def without_hook_context(prompt: str) -> str:
    """The user's prompt without the hooks' context Gemini CLI put into it. Run with a prompt
    (`gemini -p`, piped input), Gemini prepends SessionStart's additionalContext to the first
    prompt as `<hook_context>...</hook_context>\n\n` (packages/cli/src/gemini.tsx), and BeforeAgent
    then carries it in `prompt`; a BeforeAgent's own context is appended to the turn's request
    the same way (core/src/core/client.ts), which a chat file keeps. Recorded as it comes, nmem's
    own recall would be stored as what the user asked. The context is escaped, so it holds no
    closing tag of its own."""
    opening, closing = HOOK_CONTEXT
    end = prompt.find(closing)
    while end >= 0:
        start = prompt.rfind(opening, 0, end)  # the block's own opening: none can be inside it
        if start < 0:
            break
        before, after = prompt[:start].rstrip("\n"), prompt[end + len(closing):].lstrip("\n")
        prompt = f"{before}\n\n{after}" if before.strip() and after.strip() else before + after
        end = prompt.find(closing, len(before))
    return prompt.strip("\n")


def parse(payload: object, *, now: float | None = None) -> HookEvent:
    if not isinstance(payload, dict):
        raise InvalidArgument("hook input: expected a JSON object")
    shaped: dict[str, Any] = dict(payload)
    name = shaped.get("hook_event_name")
    if isinstance(name, str) and name in EVENTS:
        shaped["hook_event_name"] = EVENTS[name]
    if isinstance(shaped.get("prompt"), str):
        shaped["prompt"] = without_hook_context(shaped["prompt"])
    if name == "AfterAgent" and isinstance(shaped.get("prompt_response"), str):
        shaped["last_assistant_message"] = shaped["prompt_response"]
    if name == "AfterTool":
        _tool(shaped)
    event = claude_code.parse(shaped, now=now)
    event.hook_event_name = name if isinstance(name, str) else event.hook_event_name
    event.transcript_path = None  # Gemini's session file, not a Claude Code transcript
    return event


def output(event_name: str, text: str, *, plain_ok: bool = True) -> str:
    if event_name not in CONTEXT_EVENTS:
        return ""
    return jsonlite.dumps({"hookSpecificOutput": {"hookEventName": event_name, "additionalContext": text}}) + "\n"
