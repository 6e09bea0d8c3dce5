"""Codex's `apply_patch` tool call → one file change observation.

The patch format (openai/codex `codex-rs/apply-patch`, its `apply_patch_tool_instructions.md`):

    *** Begin Patch
    *** Add File: path          (then `+` lines: the new file)
    *** Update File: path       (then optional `*** Move to: path`, `@@` hunks of ` `/`-`/`+` lines)
    *** Delete File: path
    *** End Patch

Paths are relative to the session's working directory. One call can change several files:
the observation is on the first, and its metadata lists every file with what happened to it.
As for Claude Code's edits, the patch body itself is not stored: hashes, sizes and a head.
"""

from __future__ import annotations

from nmem.capture.events import Extracted, HookEvent
from nmem.capture.fields import absolute, digest, head

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ACTIONS = (("*** Add File: ", "add"), ("*** Update File: ", "update"), ("*** Delete File: ", "delete"))
MOVE = "*** Move to: "
LISTED_FILES = 20


def parse_patch(text: str) -> list[dict[str, Any]]:
    """[{path, action, added, removed, moved_to?}] for each file the patch touches."""
    files: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        for prefix, action in ACTIONS:
            if line.startswith(prefix):
                current = {"path": line[len(prefix):].strip(), "action": action, "added": 0, "removed": 0}
                files.append(current)
                break
        else:
            if current is None or line.startswith("*** "):
                if current is not None and line.startswith(MOVE):
                    current["moved_to"] = line[len(MOVE):].strip()
                continue
            if line.startswith("+"):
                current["added"] += 1
            elif line.startswith("-"):
                current["removed"] += 1
    return [f for f in files if f["path"]]


def patch_text(tool_input: dict[str, Any]) -> str:
    for key in ("command", "patch", "input"):
        value = tool_input.get(key)
        if isinstance(value, str) and "*** " in value:
            return value
        if isinstance(value, list):  # the old shell form: ["apply_patch", "<patch>"]
            found = next((v for v in value if isinstance(v, str) and "*** Begin Patch" in v), None)
            if found:
                return found
    return ""


def apply_patch(event: HookEvent) -> Extracted | None:
    text = patch_text(event.tool_input)
    files = parse_patch(text)
    if not files:
        return None
    for f in files:
        f["path"] = absolute(f["path"], event.cwd)
        if "moved_to" in f:
            f["moved_to"] = absolute(f["moved_to"], event.cwd)
    first = files[0]
    added = "\n".join(line[1:] for line in text.splitlines() if line.startswith("+"))
    obs_type = "file_write" if all(f["action"] == "add" for f in files) else "file_edit"
    meta: dict[str, Any] = {"sha256": digest(text), "bytes": len(text.encode("utf-8", "replace")),
                            "head": head(added), "files": files[:LISTED_FILES]}
    if len(files) > 1:
        meta["file_count"] = len(files)
    content = first["path"]
    if len(files) > 1:
        content += f" (+{len(files) - 1} more: " + ", ".join(f["path"] for f in files[1:4]) + ")"
    return Extracted(obs_type, content, first["path"], meta)
