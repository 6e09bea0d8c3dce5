"""Extractive session summaries and signatures: what happened, without an LLM."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from nmem.models import Observation, Prompt

CHANGES = ("file_write", "file_edit")


def _first_line(text: str, size: int = 120) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= size else line[:size] + "…"


def _distinct(items: list[str], limit: int) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        if item and item not in seen:
            seen[item] = None
        if len(seen) >= limit:
            break
    return list(seen)


def signature(observations: list[Observation], prompts: list[Prompt]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for o in observations:
        counts[o.obs_type] = counts.get(o.obs_type, 0) + 1
    return {
        "events": dict(sorted(counts.items())),
        "observations": len(observations),
        "prompts": sum(1 for p in prompts if p.source == "user"),
        "compactions": counts.get("session_compact", 0),
    }


def summarize(observations: list[Observation], prompts: list[Prompt]) -> dict[str, Any]:
    # Turns that led to work frame the session; "hi" or "thanks" do not (unless nothing else did).
    acted_on = {o.prompt_id for o in observations}
    users = [p for p in prompts if p.source == "user"]
    framing = [p for p in users if p.id in acted_on] or users
    intents = _distinct([_first_line(p.content) for p in framing], 5)
    files = _distinct([o.file_path or "" for o in observations if o.obs_type in CHANGES], 20)
    commands = _distinct([_first_line(o.content) for o in observations if o.obs_type == "command"], 10)
    errors = _distinct([_first_line(o.content) for o in observations if o.obs_type == "command_error"], 5)
    commits = _distinct([_first_line(o.content) for o in observations if o.obs_type == "git_commit"], 5)
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
        "intents": intents,
        "files_changed": files,
        "commands": commands,
        "errors": errors,
        "commits": commits,
        "text": "\n".join(parts),
    }
