"""One extractor per tool: a tool call → the fact worth keeping (path, command, pattern, error).

Bodies of writes and edits are never stored whole: a hash, a size and a short head stand
in for them. Large responses are cut to a tail or a head.
"""

from __future__ import annotations

import os

from nmem import jsonlite
from nmem.capture.events import TOOL_FAILURE, Extracted, HookEvent
from nmem.capture.privacy import scrub
from nmem.lazyregex import LazyRegex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

HEAD_CHARS = 160
COMMAND_CHARS = 2000
ERROR_TAIL_CHARS = 800
ARGS_CHARS = 300

_COMMIT_LINE = LazyRegex(r"\[(?P<branch>[^\s\]]+)(?: \(root-commit\))? (?P<sha>[0-9a-f]{7,40})\] (?P<msg>.+)")
_PUSH_LINE = LazyRegex(r"(?P<old>[0-9a-f]{7,40})\.\.(?P<new>[0-9a-f]{7,40})\s+(?P<src>\S+)\s+->\s+(?P<dst>\S+)")
_PUSH_NEW = LazyRegex(r"\*\s+\[new branch\]\s+(?P<src>\S+)\s+->\s+(?P<dst>\S+)")
_EXIT_LINE = LazyRegex(r"\s*(?:Error: )?Exit code (-?\d+)\s*")
_GIT = LazyRegex(r"(^|[;&|]\s*|\s)git(\s+-C\s+\S+)?\s+(?P<verb>commit|push)\b")

try:  # the hash functions without hashlib, which loads OpenSSL (~4 ms) for what one digest needs
    from _sha256 import sha256 as _sha256  # type: ignore[import-not-found, unused-ignore]  # Python 3.11
except ImportError:
    try:
        from _sha2 import sha256 as _sha256  # type: ignore[import-not-found, no-redef, unused-ignore]  # 3.12+
    except ImportError:  # pragma: no cover - builds without the builtin module
        from hashlib import sha256 as _sha256  # type: ignore[assignment, unused-ignore]


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return jsonlite.dumps(value, ensure_ascii=False, default=str)


# Cuts scrub a margin around the cut first, so a secret straddling it is still recognised whole.
CUT_MARGIN = 512


def head(text: str, size: int = HEAD_CHARS) -> str:
    text = text.strip()
    if len(text) <= size:
        return text
    return scrub(text[: size + CUT_MARGIN])[:size] + "…"


def tail(text: str, size: int = ERROR_TAIL_CHARS) -> str:
    text = text.strip()
    if len(text) <= size:
        return text
    return "…" + scrub(text[-(size + CUT_MARGIN):])[-size:]


def digest(text: str) -> str:
    return str(_sha256(text.encode("utf-8", "replace")).hexdigest()[:16])


def absolute(path: str | None, cwd: str) -> str | None:
    if not path or not isinstance(path, str):
        return None
    expanded = os.path.expanduser(path)
    if not os.path.isabs(expanded):
        expanded = os.path.join(cwd, expanded)
    return os.path.normpath(expanded)


def _response_field(response: Any, *names: str) -> Any:
    if isinstance(response, dict):
        for name in names:
            if name in response:
                return response[name]
    return None


def _exit_code(response: Any) -> int | None:
    code = _response_field(response, "exit_code", "exitCode", "returncode", "return_code", "code")
    return code if isinstance(code, int) and not isinstance(code, bool) else None


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
        error = event.error or stderr or stdout
        if code is None and "Exit code" in error[:200] and (found_code := _EXIT_LINE.get().match(error)):
            meta["exit_code"] = int(found_code.group(1))
            error = error[found_code.end():]
        meta["error"] = tail(error)
        content = f"{head(command, COMMAND_CHARS)}\n{tail(error, 400)}" if error else head(command, COMMAND_CHARS)
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
        return Extracted("git_push", head(command, COMMAND_CHARS), None, meta)
    return Extracted("command", head(command, COMMAND_CHARS), None, meta or None)


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
    mode = _response_field(event.tool_response, "mode")
    keys = {"count": ("numMatches", "numLines", "numFiles"),
            "content": ("numLines", "numMatches", "numFiles")}.get(str(mode), ("numFiles", "numMatches", "numLines"))
    counts = [_response_field(event.tool_response, key) for key in (*keys, "count")]
    found = next((c for c in counts if isinstance(c, int) and not isinstance(c, bool)), None)
    if found is None:
        names = _response_field(event.tool_response, "filenames")
        found = len(names) if isinstance(names, list) else None
    if found is not None:
        meta["matches"] = found
    content = pattern if not where else f"{pattern} in {where}"
    return Extracted("search", content, None, meta)


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
    return Extracted("web_fetch", url, None, meta or None)


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
    content = description + (f"\n{head(prompt, 400)}" if prompt else "")
    return Extracted("task_spawn", content.strip(), None, meta or None)


def mcp_call(event: HookEvent) -> Extracted | None:
    name = event.tool_name or ""
    _, server, tool = [*name.split("__", 2), "", ""][:3]
    args = head(_text(event.tool_input), ARGS_CHARS) if event.tool_input else ""
    meta: dict[str, Any] = {"server": server, "tool": tool}
    if event.kind == TOOL_FAILURE and event.error:
        meta["error"] = tail(event.error)
    return Extracted("mcp_call", f"{server}.{tool} {args}".strip(), None, meta)


def other(event: HookEvent) -> Extracted | None:
    args = head(_text(event.tool_input), ARGS_CHARS) if event.tool_input else ""
    meta: dict[str, Any] = {"tool": event.tool_name}
    if event.kind == TOOL_FAILURE and event.error:
        meta["error"] = tail(event.error)
    return Extracted("tool_other", f"{event.tool_name} {args}".strip(), None, meta)


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


def extract(event: HookEvent) -> Extracted | None:
    name = event.tool_name or ""
    extractor = mcp_call if name.startswith("mcp__") else EXTRACTORS.get(name, other)
    found = extractor(event)
    if found is not None and event.kind == TOOL_FAILURE and event.error:
        meta = dict(found.metadata or {})
        if "error" not in meta:  # a failed read/edit/fetch must not read as a success
            meta["error"] = tail(event.error)
            return Extracted(found.obs_type, found.content, found.file_path, meta)
    return found
