"""Extractive session summaries and signatures: what happened, without an LLM."""

from __future__ import annotations

from nmem.text import clip

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from nmem.store import ObsOutline, PromptOutline

CHANGES = ("file_write", "file_edit")
# Failed tool calls: a failed or denied Read/Write/Edit is a failure, never a change.
FAILURES = ("command_error", "file_error")
LINE_CHARS = 120


def _first_line(text: str, size: int = LINE_CHARS) -> str:
    """The text's first line, cut at a word boundary."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return clip(line, size)


def _failure(path: str | None, text: str) -> str:
    """A failed file tool's line: what its content says, naming the file when only the path is there."""
    line = _first_line(text)  # `Edit /repo/a.py` (capture writes the error on the next line)
    return f"failed: {line}" if path and path in line and not line.startswith("failed") else line


def _distinct(items: list[str], limit: int) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        if item and item not in seen:
            seen[item] = None
        if len(seen) >= limit:
            break
    return list(seen)


def signature(observations: Sequence[ObsOutline], prompts: Sequence[PromptOutline]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for obs_type, _, _, _ in observations:
        counts[obs_type] = counts.get(obs_type, 0) + 1
    return {
        "events": dict(sorted(counts.items())),
        "observations": len(observations),
        "prompts": sum(1 for _, source, _ in prompts if source == "user"),
        "compactions": counts.get("session_compact", 0),
    }


def framing_prompts(observations: Sequence[ObsOutline], prompts: Sequence[PromptOutline]) -> list[tuple[int, str]]:
    """The user prompts (id, text) that frame a session: those that led to work; "hi" or
    "thanks" do not (unless nothing else did)."""
    acted_on = {prompt_id for _, _, _, prompt_id in observations}
    users = [(pid, text) for pid, source, text in prompts if source == "user" and text.strip()]
    return [(pid, text) for pid, text in users if pid in acted_on] or users


def summarize(observations: Sequence[ObsOutline], prompts: Sequence[PromptOutline]) -> dict[str, Any]:
    """Intents, files changed, commits, errors and commands of a session, from its outline."""
    framing = [text for _, text in framing_prompts(observations, prompts)]

    def first_lines(kinds: tuple[str, ...], limit: int) -> list[str]:
        return _distinct([_failure(path, text) if obs_type == "file_error" else _first_line(text)
                          for obs_type, path, text, _ in observations if obs_type in kinds], limit)

    intents = _distinct([_first_line(text) for text in framing], 5)
    files = _distinct([path or "" for obs_type, path, _, _ in observations if obs_type in CHANGES], 20)
    commands = first_lines(("command",), 10)
    errors = first_lines(FAILURES, 5)
    commits = first_lines(("git_commit",), 5)
    parts = []
    if intents:
        parts.append("Intents: " + "; ".join(intents))
    if files:
        parts.append("Files changed: " + ", ".join(files))
    if commits:
        parts.append("Commits: " + "; ".join(commits))
    if errors:
        parts.append("Errors: " + "; ".join(errors))
    if commands:
        parts.append("Commands: " + "; ".join(commands))
    return {
        "intent": intents[0] if intents else "",
        "last_intent": _first_line(framing[-1]) if framing else "",  # what was under way at the end
        "intents": intents,
        "files_changed": files,
        "commands": commands,
        "errors": errors,
        "commits": commits,
        "text": "\n".join(parts),
    }
