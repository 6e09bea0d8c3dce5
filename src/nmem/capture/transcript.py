"""Reading Claude Code transcripts (`~/.claude/projects/<dir>/<session>.jsonl`).

The format is not documented and changes between versions, so every reader here is
tolerant: unreadable files, partial last lines, unknown line types and missing fields
are skipped, never raised.
"""

from __future__ import annotations

import os

from nmem import jsonlite
from nmem.capture import events as ev

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

TAIL_BYTES = 256 * 1024
REASONING_CHARS = 4000


def iter_lines(path: str, tail_bytes: int | None = None) -> Iterator[dict[str, Any]]:
    """JSON objects of a JSONL file (or of its last `tail_bytes`), skipping anything unreadable."""
    try:
        with open(path, "rb") as fh:
            if tail_bytes is not None:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(max(0, size - tail_bytes))
                if size > tail_bytes:
                    fh.readline()  # drop the partial first line
            for raw in fh:
                try:
                    obj = jsonlite.loads(raw)
                except ValueError:
                    continue
                if isinstance(obj, dict):
                    yield obj
    except OSError:
        return


def _blocks(line: dict[str, Any]) -> list[dict[str, Any]]:
    message = line.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _is_user_prompt(line: dict[str, Any]) -> bool:
    if line.get("type") != "user" or line.get("isMeta") or line.get("isCompactSummary"):
        return False
    blocks = _blocks(line)
    return bool(blocks) and all(b.get("type") == "text" for b in blocks)


def _prompt_text(line: dict[str, Any]) -> str:
    text = "\n".join(str(b.get("text") or "") for b in _blocks(line) if b.get("type") == "text").strip()
    if text.startswith(("<command-", "<local-command", "<system-reminder")):
        return ""
    return text


def latest_reasoning(path: str | None) -> list[str]:
    """The agent's thinking in the last turn (after the last user prompt), oldest first."""
    if not path:
        return []
    thoughts: list[str] = []
    for line in iter_lines(path, TAIL_BYTES):
        if _is_user_prompt(line):
            thoughts = []
        elif line.get("type") == "assistant":
            for block in _blocks(line):
                if block.get("type") == "thinking" and isinstance(block.get("thinking"), str):
                    text = block["thinking"].strip()
                    if text:
                        thoughts.append(text[:REASONING_CHARS])
    return thoughts


def _epoch(value: Any, fallback: int) -> int:
    if isinstance(value, str):
        # Only a backfill replays whole transcripts; a hook (Stop) reads reasoning, not times.
        from datetime import datetime

        try:
            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp())
        except ValueError:
            return fallback
    if isinstance(value, (int, float)):
        return int(value / 1000 if value > 1e11 else value)
    return fallback


def transcript_events(path: str) -> Iterator[ev.HookEvent]:
    """Replay a transcript as the hook events Claude Code would have sent for it."""
    session_id = cwd = None
    started = False
    pending: dict[str, tuple[str, dict[str, Any]]] = {}
    last_text = ""
    ts = 0
    for line in iter_lines(path):
        if line.get("isSidechain"):
            continue  # subagent internals; the parent's Task call is what we keep
        session_id = session_id or line.get("sessionId")
        cwd = line.get("cwd") or cwd
        ts = _epoch(line.get("timestamp"), ts)
        if not (isinstance(session_id, str) and isinstance(cwd, str)):
            continue
        base: dict[str, Any] = {"session_id": session_id, "cwd": cwd, "timestamp": ts, "transcript_path": path}
        if not started:
            started = True
            yield ev.HookEvent(kind=ev.SESSION_START, hook_event_name="SessionStart", source="startup", **base)
        kind = line.get("type")
        if kind == "system" and line.get("subtype") == "compact_boundary":
            yield ev.HookEvent(kind=ev.SESSION_START, hook_event_name="SessionStart", source="compact", **base)
        elif kind == "user" and _is_user_prompt(line):
            text = _prompt_text(line)
            if text:
                yield ev.HookEvent(kind=ev.PROMPT, hook_event_name="UserPromptSubmit", prompt=text, **base)
        elif kind == "assistant":
            for block in _blocks(line):
                btype = block.get("type")
                if btype == "tool_use" and isinstance(block.get("id"), str):
                    tool_input = block.get("input")
                    pending[block["id"]] = (str(block.get("name") or ""),
                                            tool_input if isinstance(tool_input, dict) else {})
                elif btype == "thinking" and isinstance(block.get("thinking"), str) and block["thinking"].strip():
                    yield ev.HookEvent(kind=ev.REASONING, hook_event_name="Transcript",
                                       assistant_message=block["thinking"].strip()[:REASONING_CHARS], **base)
                elif btype == "text" and isinstance(block.get("text"), str):
                    last_text = block["text"].strip()
        elif kind == "user":
            for block in _blocks(line):
                if block.get("type") != "tool_result":
                    continue
                call = pending.pop(str(block.get("tool_use_id")), None)
                if call is None or not call[0]:
                    continue
                result = line.get("toolUseResult")
                failed = block.get("is_error") is True
                error = None
                if failed:
                    error = result if isinstance(result, str) else _result_text(block.get("content"))
                yield ev.HookEvent(
                    kind=ev.TOOL_FAILURE if failed else ev.TOOL,
                    hook_event_name="PostToolUseFailure" if failed else "PostToolUse",
                    tool_name=call[0], tool_input=call[1],
                    tool_response=result if isinstance(result, dict) else _result_text(block.get("content")),
                    error=error, **base,
                )
    if started and isinstance(session_id, str) and isinstance(cwd, str):
        yield ev.HookEvent(kind=ev.STOP, hook_event_name="Stop", session_id=session_id, cwd=cwd,
                           timestamp=ts, assistant_message=last_text or None, transcript_path=path)


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text") or "") for b in content if isinstance(b, dict))
    return ""


def session_id_of(path: str) -> str | None:
    """The session a transcript belongs to (first line that names one)."""
    for line in iter_lines(path):
        if isinstance(line.get("sessionId"), str):
            return str(line["sessionId"])
    return None
