"""Who the current request acts for on a team server, and what that user may see.

The HTTP guard sets the viewer for each request (`acting_as`); the service reads it
(`current`) where it stores or returns curated memories. Outside a team server (the CLI, hooks,
a single-user server) there is no viewer and nothing is filtered or attributed.

The one rule: a memory in the `user` domain belongs to its writer; nobody else can read,
search, get, change or forget it. `project:*` and `org` are shared by the team.

Standard library only: the hook path's context block reads it.
"""

from __future__ import annotations

from contextvars import ContextVar

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from nmem.models import Memory


SCOPE_KEY = "nmem.viewer"   # where the HTTP guard leaves the signed-in user in an ASGI scope


class Viewer:
    __slots__ = ("admin", "name")

    def __init__(self, name: str, admin: bool = False) -> None:
        self.name = name
        self.admin = admin

    def __repr__(self) -> str:
        return f"Viewer({self.name!r}, admin={self.admin})"


_VIEWER: ContextVar[Viewer | None] = ContextVar("nmem_viewer", default=None)


def current() -> Viewer | None:
    return _VIEWER.get()


class acting_as:
    """Act for `viewer` inside the block (None: nobody, as in single-user mode)."""

    def __init__(self, viewer: Viewer | None) -> None:
        self.viewer = viewer
        self.token: Any = None

    def __enter__(self) -> Viewer | None:
        self.token = _VIEWER.set(self.viewer)
        return self.viewer

    def __exit__(self, *exc: object) -> None:
        _VIEWER.reset(self.token)


def hidden_memories(store: Any, memories: Sequence[Memory]) -> set[str]:
    """The uids among `memories` the current viewer may not see: other writers' `user` memories."""
    viewer = _VIEWER.get()
    if viewer is None:
        return set()
    private = [m.id for m in memories if m.domain == "user"]
    if not private:
        return set()
    writers = store.memory_writers(private)
    return {uid for uid in private if writers.get(uid) != viewer.name}


def visible(store: Any, memories: Sequence[Memory]) -> list[Memory]:
    hidden = hidden_memories(store, memories)
    return [m for m in memories if m.id not in hidden] if hidden else list(memories)
