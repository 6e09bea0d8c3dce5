"""One extractor per tool: a tool call → the fact worth keeping (path, command, pattern, error).

Content reads `subject`, then `→ result` on its second line when the call has one (a
failure's key line, a match count, the head of an answer, the lines of a command's output
worth quoting), which is what previews show.
A failed call keeps `error` (a tail) and `error_line` (its key line, see `errorline`); a
failed or refused file tool is a `file_error`, never a read or a change. Bodies of writes
and edits are never stored whole: a hash, a size and a short head stand in for them. Large
responses are cut to a tail or a head, at a word boundary.
"""

from __future__ import annotations

from nmem import jsonlite
from nmem.capture.errorline import clean, key_line, scan_window
from nmem.capture.events import TOOL_FAILURE, Extracted, HookEvent
from nmem.capture.fields import CUT_MARGIN, absolute, digest, head
from nmem.capture.outputlines import quoted_lines, reads_files
from nmem.capture.privacy import scrub
from nmem.text import ELLIPSIS, WORD_MARGIN, word_start
from nmem.util.lazyregex import LazyRegex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

COMMAND_CHARS = 2000
ERROR_TAIL_CHARS = 800
ARGS_CHARS = 300
PROMPT_CHARS = 400
ERROR_CONTENT_CHARS = 400
# What a subagent, an MCP tool or a fetched page answered: enough to find it by its words.
EXCERPT_CHARS = 600
# What a successful command printed that a person would quote (see `outputlines`), read from
# the output's head and tail only.
OUTPUT_CHARS = 300
QUOTE_HEAD = 2_000
QUOTE_TAIL = 6_000
FILE_TOOLS = frozenset({"Read", "Write", "Edit", "MultiEdit", "NotebookEdit"})

_COMMIT_LINE = LazyRegex(r"\[(?P<branch>[^\s\]]+)(?: \(root-commit\))? (?P<sha>[0-9a-f]{7,40})\] (?P<msg>.+)")
_PUSH_LINE = LazyRegex(r"(?P<old>[0-9a-f]{7,40})\.\.(?P<new>[0-9a-f]{7,40})\s+(?P<src>\S+)\s+->\s+(?P<dst>\S+)")
_PUSH_NEW = LazyRegex(r"\*\s+\[new branch\]\s+(?P<src>\S+)\s+->\s+(?P<dst>\S+)")
_EXIT_LINE = LazyRegex(r"\s*(?:Error: )?Exit code (-?\d+)\s*")
_GIT = LazyRegex(r"(^|[;&|]\s*|\s)git(\s+-C\s+\S+)?\s+(?P<verb>commit|push)\b")
# How Claude Code words a tool call the user (or a permission rule) refused.
_DENIED = LazyRegex(r"(?i)doesn't want to (?:proceed with this tool use|take this action)|user rejected tool use"
                    r"|permission to use \S+ (?:has been|was) denied")

def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return jsonlite.dumps(value, ensure_ascii=False, default=str)


# Cuts scrub a margin around the cut first, so a secret straddling it is still recognised whole.


def tail(text: str, size: int = ERROR_TAIL_CHARS) -> str:
    text = text.strip()
    if len(text) <= size:
        return text
    start = max(len(text) - size - CUT_MARGIN, 0)
    scrubbed = scrub(text[start:])
    kept = scrubbed[-size:]
    preceding = scrubbed[-size - 1:-size] if len(scrubbed) > size else (text[start - 1:start] if start else " ")
    if not preceding.isspace():
        kept = word_start(kept, min(WORD_MARGIN, size // 4))
    return ELLIPSIS + kept.lstrip()


def _response_field(response: Any, *names: str) -> Any:
    if isinstance(response, dict):
        for name in names:
            if name in response:
                return response[name]
    return None


def _exit_code(response: Any) -> int | None:
    code = _response_field(response, "exit_code", "exitCode", "returncode", "return_code", "code")
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def error_key(error: str, *, last: bool = True) -> str:
    """The key line of an error output (see `errorline`), from scrubbed text: a cut can never
    leave part of a secret that the privacy filter would no longer recognise."""
    return key_line(scrub(scan_window(error)), last=last)


def _with_result(content: str, result: str, rest: str = "") -> str:
    """Content in the shape previews read: `subject`, then `→ result`, then anything else."""
    subject, _, more = content.partition("\n")
    return "\n".join(part for part in (subject, f"→ {result}" if result else "", more, rest) if part)


def _quotable(output: str) -> str:
    """The part of a command's output `quoted_lines` reads: its head and tail (versions come
    first, summaries last), in whole lines. Already scrubbed whole, with the event, before extraction."""
    if len(output) > QUOTE_HEAD + QUOTE_TAIL:
        first = output[:QUOTE_HEAD]
        last = output[-QUOTE_TAIL:]
        output = (first.rpartition("\n")[0] or first) + "\n" + (last.partition("\n")[2] or last)
    return output


def bash(event: HookEvent) -> Extracted | None:
    command = str(event.tool_input.get("command") or "").strip()
    if not command:
        return None
    response = event.tool_response
    stdout = _text(_response_field(response, "stdout", "output")) if isinstance(response, dict) else _text(response)
    stderr = _text(_response_field(response, "stderr"))
    code = _exit_code(response)
    meta: dict[str, Any] = {}
    if description := event.tool_input.get("description"):
        meta["description"] = head(str(description))
    if code is not None:
        meta["exit_code"] = code
    if _response_field(response, "interrupted") is True:
        meta["interrupted"] = True
    failed = event.kind == TOOL_FAILURE or (code is not None and code != 0)
    if failed:
        error = event.error or "\n".join(part for part in (stdout, stderr) if part.strip())
        if code is None and "Exit code" in error[:200] and (found_code := _EXIT_LINE.get().match(error)):
            meta["exit_code"] = int(found_code.group(1))
            error = error[found_code.end():]
        if not error.strip():
            return Extracted("command_error", head(command, COMMAND_CHARS), None, meta)
        meta["error"] = tail(error)
        key = error_key(error)
        if key:
            meta["error_line"] = key
        short = tail(error, ERROR_CONTENT_CHARS)
        content = "\n".join(part for part in (head(command, COMMAND_CHARS), f"→ {key}" if key else "",
                                               short if short.lstrip(ELLIPSIS) != key else "") if part)
        return Extracted("command_error", content, None, meta)
    git = _GIT.get().search(command) if "git" in command else None
    if git and git.group("verb") == "commit":
        found = _COMMIT_LINE.get().search(stdout)
        if found:
            meta.update(branch=found.group("branch"), sha=found.group("sha"), message=head(found.group("msg")))
            return Extracted("git_commit", f"{found.group('sha')} {found.group('msg')}", None, meta)
        return Extracted("git_commit", head(command, COMMAND_CHARS), None, meta)
    if git and git.group("verb") == "push":
        combined = f"{stdout}\n{stderr}"
        found = _PUSH_LINE.get().search(combined)
        if found:
            meta.update(old=found.group("old"), sha=found.group("new"), branch=found.group("dst"))
        elif new := _PUSH_NEW.get().search(combined):
            meta.update(branch=new.group("dst"), new_branch=True)
        said = _said(command, stdout, stderr)   # kept when it links to a pull request to open
        return Extracted("git_push", said if "://" in said.partition("\n→ ")[2] else head(command, COMMAND_CHARS),
                         None, meta)
    return Extracted("command", _said(command, stdout, stderr), None, meta or None)


def _said(command: str, stdout: str, stderr: str) -> str:
    """The command, then `→` the lines of its output a person would quote, if any."""
    said = "" if reads_files(command) else quoted_lines(_quotable(stdout), _quotable(stderr), OUTPUT_CHARS)
    if said in command:  # `echo 1.2.3`: the output says nothing the command does not
        said = ""
    return _with_result(head(command, COMMAND_CHARS), head(said, OUTPUT_CHARS) if said else "")


def read(event: HookEvent) -> Extracted | None:
    path = absolute(event.tool_input.get("file_path") or event.tool_input.get("notebook_path"), event.cwd)
    if not path:
        return None
    meta = {k: event.tool_input[k] for k in ("offset", "limit") if isinstance(event.tool_input.get(k), int)}
    return Extracted("file_read", path, path, meta or None)


def write(event: HookEvent) -> Extracted | None:
    path = absolute(event.tool_input.get("file_path"), event.cwd)
    if not path:
        return None
    body = _text(event.tool_input.get("content"))
    meta = {"sha256": digest(body), "bytes": len(body.encode("utf-8", "replace")),
            "lines": body.count("\n") + (1 if body and not body.endswith("\n") else 0),
            "head": head(body)}
    return Extracted("file_write", path, path, meta)


def edit(event: HookEvent) -> Extracted | None:
    path = absolute(event.tool_input.get("file_path") or event.tool_input.get("notebook_path"), event.cwd)
    if not path:
        return None
    if isinstance(event.tool_input.get("edits"), list):  # MultiEdit
        edits = [e for e in event.tool_input["edits"] if isinstance(e, dict)]
        new = "\n".join(_text(e.get("new_string")) for e in edits)
        old = "\n".join(_text(e.get("old_string")) for e in edits)
        meta: dict[str, Any] = {"edits": len(edits)}
    else:
        new = _text(event.tool_input.get("new_string") or event.tool_input.get("new_source"))
        old = _text(event.tool_input.get("old_string"))
        meta = {}
        if event.tool_input.get("replace_all") is True:
            meta["replace_all"] = True
        if mode := event.tool_input.get("edit_mode"):
            meta["edit_mode"] = str(mode)
    meta.update(old_sha256=digest(old), new_sha256=digest(new), old_bytes=len(old), new_bytes=len(new),
                head=head(new))
    return Extracted("file_edit", path, path, meta)


def _response_error(response: Any, *, reads: bool) -> str | None:
    """The error a file tool's response reports, or None when it reports none: Claude Code
    answers with `<tool_use_error>…`, `Error: …` or a refusal, or a `{"success": false}` object.
    A read's text may be the file itself, so only Claude Code's own wrappings count there."""
    if isinstance(response, str):
        text = response.strip()
        if text.startswith("<tool_use_error>") or (not reads and text.startswith("Error")):
            return text
        if not reads and text and _DENIED.get().search(text[:300]):
            return text
        return None
    if isinstance(response, dict):
        if response.get("success") is False or response.get("is_error") is True or response.get("isError") is True:
            return _text(_response_field(response, "error", "message", "content", "result")) or "failed"
        error = response.get("error")
        if isinstance(error, str) and error.strip():
            return error
    return None


def denial_line(error: str) -> str:
    """What a refusal says: who refused, and what the user said instead (when they did)."""
    said = error.partition("the user said:")[2].strip()
    if said:
        return head(f"denied by the user: {' '.join(said.split())}", 160)
    found = _DENIED.get().search(error)
    if found and found.group(0).lower().startswith("permission to use"):
        return f"denied: {found.group(0)}"
    return "denied by the user"


def tool_message(error: str) -> str:
    """A tool's error message without Claude Code's wrapping (`<tool_use_error>`, `Error: `)."""
    return clean(error).strip().removeprefix("Error: ").strip() or "failed"


def file_error(event: HookEvent, attempt: Extracted, error: str) -> Extracted:
    """A failed or refused file tool: what it tried, on which file, and why it did not happen."""
    error = tool_message(error)
    denied = bool(_DENIED.get().search(error))
    key = denial_line(error) if denied else error_key(error, last=False)
    meta: dict[str, Any] = {**(attempt.metadata or {}), "tool": event.tool_name, "error": tail(error)}
    if key:
        meta["error_line"] = key
    if denied:
        meta["denied"] = True
    content = _with_result(f"{event.tool_name} {attempt.file_path}", key)
    return Extracted("file_error", content, attempt.file_path, meta)


def _count(n: int, unit: str) -> str:
    return f"{n} {unit}" if n == 1 else f"{n} {unit}{'es' if unit.endswith('ch') else 's'}"


def search(event: HookEvent) -> Extracted | None:
    pattern = str(event.tool_input.get("pattern") or "").strip()
    if not pattern:
        return None
    where = absolute(event.tool_input.get("path"), event.cwd)
    meta: dict[str, Any] = {"tool": event.tool_name}
    if where:
        meta["path"] = where
    if glob := event.tool_input.get("glob"):
        meta["glob"] = str(glob)
    # Grep reports by output mode: matches in count mode, lines in content mode, else files.
    mode = str(_response_field(event.tool_response, "mode"))
    keys = {"count": ("numMatches", "numLines", "numFiles"),
            "content": ("numLines", "numMatches", "numFiles")}.get(mode, ("numFiles", "numMatches", "numLines"))
    counts = [_response_field(event.tool_response, key) for key in (*keys, "count")]
    found = next((c for c in counts if isinstance(c, int) and not isinstance(c, bool)), None)
    if found is None:
        names = _response_field(event.tool_response, "filenames")
        found = len(names) if isinstance(names, list) else None
    content = f'"{pattern}"' + (f" in {where}" if where else "")
    if found is not None:
        meta["matches"] = found
        unit = {"count": "match", "content": "line"}.get(mode, "file")
        content += f" → {_count(found, unit)}"
    return Extracted("search", content, None, meta)


def answer_text(value: Any) -> str:
    """The text a tool answered with: a string, text content blocks (MCP, a subagent's final
    message), or an object's `content`/`result`/`text`; images and other blocks say nothing."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(text for text in map(answer_text, value) if text.strip())
    if isinstance(value, dict):
        if value.get("type") not in (None, "text"):
            return ""
        for key in ("content", "result", "text", "output"):
            if key in value:
                return answer_text(value[key])
    return ""


def excerpt(text: str) -> str:
    """The head of an answer, on one line, cut at a word boundary (scrubbed with `head`)."""
    return head(" ".join(text.split()), EXCERPT_CHARS) if text.strip() else ""


def web_fetch(event: HookEvent) -> Extracted | None:
    url = str(event.tool_input.get("url") or "").strip()
    if not url:
        return None
    meta: dict[str, Any] = {}
    if prompt := event.tool_input.get("prompt"):
        meta["prompt"] = head(str(prompt))
    code = _response_field(event.tool_response, "code", "status")
    if isinstance(code, int):
        meta["status"] = code
    answer = excerpt(answer_text(_response_field(event.tool_response, "result")
                                 if isinstance(event.tool_response, dict) else event.tool_response))
    return Extracted("web_fetch", _with_result(url, answer), None, meta or None)


def web_search(event: HookEvent) -> Extracted | None:
    query = str(event.tool_input.get("query") or "").strip()
    return Extracted("web_search", query, None, None) if query else None


def task(event: HookEvent) -> Extracted | None:
    description = str(event.tool_input.get("description") or "").strip()
    prompt = str(event.tool_input.get("prompt") or "").strip()
    if not (description or prompt):
        return None
    meta: dict[str, Any] = {}
    if agent := event.tool_input.get("subagent_type"):
        meta["subagent_type"] = str(agent)
    answer = excerpt(answer_text(event.tool_response))
    if description:
        content = _with_result(description, answer, head(prompt, PROMPT_CHARS) if prompt else "")
    else:
        content = _with_result(head(prompt, PROMPT_CHARS), answer)
    return Extracted("task_spawn", content, None, meta or None)


def mcp_call(event: HookEvent) -> Extracted | None:
    name = event.tool_name or ""
    _, server, tool = [*name.split("__", 2), "", ""][:3]
    args = head(_text(event.tool_input), ARGS_CHARS) if event.tool_input else ""
    meta: dict[str, Any] = {"server": server, "tool": tool}
    response = event.tool_response
    answer = answer_text(response)
    if not answer.strip() and isinstance(response, dict) and response:
        answer = _text(response)  # a structured result with no text content: its JSON
    if isinstance(response, dict) and (response.get("isError") is True or response.get("is_error") is True):
        meta["error"] = tail(answer or "failed")
        if key := error_key(answer or "failed", last=False):
            meta["error_line"] = key
        return Extracted("mcp_call", _with_result(f"{server}.{tool} {args}".strip(), key), None, meta)
    return Extracted("mcp_call", _with_result(f"{server}.{tool} {args}".strip(), excerpt(answer)), None, meta)


def other(event: HookEvent) -> Extracted | None:
    args = head(_text(event.tool_input), ARGS_CHARS) if event.tool_input else ""
    return Extracted("tool_other", f"{event.tool_name} {args}".strip(), None, {"tool": event.tool_name})


EXTRACTORS: dict[str, Callable[[HookEvent], Extracted | None]] = {
    "Bash": bash,
    "BashOutput": other,
    "Read": read,
    "Write": write,
    "Edit": edit,
    "MultiEdit": edit,
    "NotebookEdit": edit,
    "Grep": search,
    "Glob": search,
    "WebFetch": web_fetch,
    "WebSearch": web_search,
    "Task": task,
    "Agent": task,
}


def _failed(found: Extracted, event: HookEvent) -> Extracted:
    """Any other tool's failure: it keeps its type, and its metadata and content say it failed."""
    error = tool_message(event.error or "")
    meta: dict[str, Any] = {**(found.metadata or {}), "error": tail(error)}
    key = error_key(error, last=False)
    if key:
        meta["error_line"] = key
    subject = found.content.partition("\n→ ")[0]  # a failed call answered nothing
    return Extracted(found.obs_type, _with_result(subject, key), found.file_path, meta)


def extract(event: HookEvent) -> Extracted | None:
    name = event.tool_name or ""
    if name == "apply_patch":  # Codex's file changes (nmem.capture.patch); loaded only when one comes
        from nmem.capture.patch import apply_patch

        return apply_patch(event)
    extractor = mcp_call if name.startswith("mcp__") else EXTRACTORS.get(name, other)
    found = extractor(event)
    if found is None:
        return None
    if name in FILE_TOOLS and found.file_path:
        error = ((event.error or "failed") if event.kind == TOOL_FAILURE
                 else _response_error(event.tool_response, reads=name == "Read"))
        if error is not None:
            return file_error(event, found, error)
        return found
    if event.kind == TOOL_FAILURE and "error" not in (found.metadata or {}):
        return _failed(found, event)
    return found
