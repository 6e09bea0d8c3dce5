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
from typing import NamedTuple

from nmem.errors import ValidationError
from nmem.models import NAMESPACES, OBS_TYPES

CLAUDE_TYPES: tuple[str, ...] = ("decision", "bugfix", "feature", "refactor", "discovery", "change")


class Selection(NamedTuple):
    """What a claude-mem type or shortcut selects: observations of these types, memories in
    these namespaces, and memories carrying any of these tags (`nmem import claude-mem` tags
    each memory with its claude-mem type and concepts)."""

    obs_types: tuple[str, ...]
    namespaces: tuple[str, ...]
    tags: tuple[str, ...]

    def __or__(self, other: object) -> Selection:
        assert isinstance(other, Selection)
        return Selection(*(tuple(dict.fromkeys(a + b)) for a, b in zip(self, other, strict=True)))


TYPE_MAP: dict[str, Selection] = {
    "decision": Selection((), ("decisions",), ("decision",)),
    "bugfix": Selection(("command_error", "file_error"), ("gotchas", "blockers", "system-quirks"), ("bugfix",)),
    "feature": Selection(("file_write",), (), ("feature",)),
    "refactor": Selection(("file_edit",), ("tech-debt",), ("refactor",)),
    "discovery": Selection(("file_read", "search", "web_fetch", "web_search"),
                           ("learnings", "api-behaviors", "apis", "context", "file-patterns"), ("discovery",)),
    "change": Selection(("file_write", "file_edit", "git_commit", "git_push"), ("progress",), ("change",)),
}

# The `changes` shortcut (claude-mem: type change or concept change/what-changed) and the
# `how_it_works` one (concept how-it-works): understanding lives in curated memories only.
CHANGES = TYPE_MAP["change"] | Selection((), (), ("what-changed",))
HOW_IT_WORKS = Selection((), ("patterns", "context", "apis", "config", "file-patterns", "api-behaviors",
                              "learnings"), ("how-it-works",))

# The claude-mem type a row shows: what it is from nmem's side, most specific first.
_OBS_TYPE_SHOWN = {
    "file_write": "change", "file_edit": "change", "git_commit": "change", "git_push": "change",
    "command_error": "bugfix", "file_error": "bugfix",
    "file_read": "discovery", "search": "discovery", "web_fetch": "discovery", "web_search": "discovery",
}
_NAMESPACE_SHOWN = {
    "decisions": "decision", "gotchas": "bugfix", "blockers": "bugfix", "system-quirks": "bugfix",
    "progress": "change", "tech-debt": "refactor", "learnings": "discovery", "api-behaviors": "discovery",
    "apis": "discovery", "context": "discovery", "file-patterns": "discovery",
}


def resolve(op: str, name: str, values: Iterable[str]) -> Selection:
    """What a type filter selects: claude-mem types, nmem observation types and nmem
    namespaces, mixed as the caller likes."""
    found = Selection((), (), ())
    for value in values:
        key = value.strip().lower()
        if key in TYPE_MAP:
            found = found | TYPE_MAP[key]
        elif key in OBS_TYPES:
            found = found | Selection((key,), (), ())
        elif key in NAMESPACES:
            found = found | Selection((), (key,), ())
        else:
            raise ValidationError(f"{op}: unknown {name} {value!r}; valid: {', '.join(CLAUDE_TYPES)}, "
                                  "or an nmem observation type or memory namespace")
    return found


def shown_type(obs_type: str | None = None, namespace: str | None = None, tags: Iterable[str] = ()) -> str:
    """The claude-mem type a row carries (an imported memory's own); nmem's type when
    claude-mem has none for it."""
    if namespace is not None:
        imported = next((t for t in tags if t in TYPE_MAP), None)
        return imported or _NAMESPACE_SHOWN.get(namespace, namespace)
    return _OBS_TYPE_SHOWN.get(obs_type or "", obs_type or "")
