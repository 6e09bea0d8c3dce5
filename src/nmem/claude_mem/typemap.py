"""claude-mem's observation types and concepts, read onto what nmem records.

claude-mem has a model write typed notes (decision, bugfix, feature, refactor, discovery,
change) about each tool call; nmem records the tool calls themselves (typed by action:
file_edit, command_error…) and keeps curated memories in namespaces (decisions, gotchas…).
A claude-mem type therefore names some observation types *and* some namespaces; docs/claude-mem.md
explains each row. Where nmem cannot know a thing (that an edit was a refactor rather than
a fix), the mapping says what nmem can show instead, never pretends.
"""

from __future__ import annotations

from collections.abc import Iterable

from nmem.errors import ValidationError
from nmem.models import NAMESPACES, OBS_TYPES

CLAUDE_TYPES: tuple[str, ...] = ("decision", "bugfix", "feature", "refactor", "discovery", "change")

# claude-mem type -> (nmem observation types, nmem memory namespaces)
TYPE_MAP: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "decision": ((), ("decisions",)),
    "bugfix": (("command_error", "file_error"), ("gotchas", "blockers", "system-quirks")),
    "feature": (("file_write",), ("progress",)),
    "refactor": (("file_edit",), ("tech-debt", "patterns", "conventions", "naming-conventions")),
    "discovery": (("file_read", "search", "web_fetch", "web_search"),
                  ("learnings", "api-behaviors", "apis", "context", "file-patterns")),
    "change": (("file_write", "file_edit", "git_commit", "git_push"), ("progress",)),
}

# The `changes` shortcut (claude-mem: type change or concept change/what-changed) and the
# `how_it_works` one (concept how-it-works): understanding lives in curated memories only.
CHANGES = TYPE_MAP["change"]
HOW_IT_WORKS: tuple[tuple[str, ...], tuple[str, ...]] = (
    (), ("patterns", "context", "apis", "config", "file-patterns", "api-behaviors", "learnings"))

# The claude-mem type a row shows: what it is from nmem's side, most specific first.
_OBS_TYPE_SHOWN = {
    "file_write": "change", "file_edit": "change", "git_commit": "change", "git_push": "change",
    "command_error": "bugfix", "file_error": "bugfix",
    "file_read": "discovery", "search": "discovery", "web_fetch": "discovery", "web_search": "discovery",
}
_NAMESPACE_SHOWN = {
    "decisions": "decision", "gotchas": "bugfix", "blockers": "bugfix", "system-quirks": "bugfix",
    "progress": "change", "tech-debt": "refactor", "patterns": "refactor", "conventions": "refactor",
    "naming-conventions": "refactor", "learnings": "discovery", "api-behaviors": "discovery",
    "apis": "discovery", "context": "discovery", "file-patterns": "discovery",
}


def resolve(op: str, name: str, values: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(observation types, namespaces) a type filter names: claude-mem types, nmem
    observation types and nmem namespaces, mixed as the caller likes."""
    obs: list[str] = []
    spaces: list[str] = []
    for value in values:
        key = value.strip().lower()
        if key in TYPE_MAP:
            obs += TYPE_MAP[key][0]
            spaces += TYPE_MAP[key][1]
        elif key in OBS_TYPES:
            obs.append(key)
        elif key in NAMESPACES:
            spaces.append(key)
        else:
            raise ValidationError(f"{op}: unknown {name} {value!r}; valid: {', '.join(CLAUDE_TYPES)}, "
                                  "or an nmem observation type or memory namespace")
    return tuple(dict.fromkeys(obs)), tuple(dict.fromkeys(spaces))


def shown_type(obs_type: str | None = None, namespace: str | None = None) -> str:
    """The claude-mem type a row carries; nmem's own type when claude-mem has none for it."""
    if namespace is not None:
        return _NAMESPACE_SHOWN.get(namespace, namespace)
    return _OBS_TYPE_SHOWN.get(obs_type or "", obs_type or "")
