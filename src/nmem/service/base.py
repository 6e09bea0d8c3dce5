"""What every part of the service stands on: the store, the settings, the clock, and the
checks every write makes (memory enabled, project not opted out, a valid domain and namespace).

Each mixin of `nmem.service` derives from `Base` alone; `self.api` is the same object typed
as the whole `Service`, for the few calls one mixin makes into another.
"""

from __future__ import annotations

import os
import sys
import time

from nmem.capture.project import project_name
from nmem.config import Settings, load_settings, matches_any
from nmem.errors import Disabled, InvalidArgument, ValidationError
from nmem.models import NAMESPACES, OBS_TYPES, Memory, project_domain
from nmem.service.args import is_slug
from nmem.store import open_store
from nmem.store.keys import database_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import ModuleType
    from typing import Self

    from nmem.service.api import Service
    from nmem.store.protocol import Store

ACCESS = "nmem.team.access"


def team_access() -> ModuleType | None:
    """`nmem.team.access` when this process has loaded it, else None. Only it sets a viewer
    (`acting_as`, which a team server's guard enters per request), so a process that never loaded
    it (a hook, the CLI) acts for nobody: nothing to filter or attribute, and nothing to import."""
    return sys.modules.get(ACCESS)


NAMESPACE_ALIASES = {
    "decision": "decisions", "learning": "learnings", "learned": "learnings",
    "pattern": "patterns", "blocker": "blockers", "gotcha": "gotchas",
    "convention": "conventions", "api": "apis", "test": "testing",
}


class Base:
    """One store and its settings. One per process (or per request in a server)."""

    def __init__(self, store: Store, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self.settings = settings
        self.clock = clock
        # Sessions never change project: one lookup per session per process (imports, servers).
        self._session_projects: dict[str, str] = {}
        # Projects seen to have sessions (`Search._has_trail`): a project-first search reads the rest alone.
        self._trail_projects: set[str] = set()
        # Where accesses of memories go (`touch`): None, the store at once; a server sets a sink that
        # counts them later on its writer thread (nmem.adapters.http.threads.Touches).
        self.touch_sink: Callable[[Sequence[str], int], None] | None = None
        self._tiers_fresh_until = 0   # lifecycle tiers computed less than a day before this (`refresh_tiers`)

    def forget_uncommitted(self) -> None:
        """After a transaction this service wrote in was undone: drop what it cached of it."""
        self._session_projects.clear()

    def touch(self, uids: Sequence[str]) -> None:
        """Count an access of these memories (recall, get): their `accessed_at` and `access_count`."""
        if not uids:
            return
        sink = self.touch_sink
        if sink is not None:
            sink(uids, self.now())
        else:
            self.store.touch_memories(uids, self.now())

    @property
    def store(self) -> Store:
        """The store as the signed-in user of a team server may read it (`nmem.team.access`): every
        read of the service and of every adapter goes through here, so none forgets the rule."""
        access = team_access()
        if access is None:
            return self._store
        seen: Store = access.guarded(self._store)
        return seen

    @store.setter
    def store(self, store: Store) -> None:
        self._store = store

    @classmethod
    def open(cls, settings: Settings | None = None, *, busy_timeout_ms: int = 5000,
             readonly: bool = False) -> Self:
        settings = settings or load_settings()
        store = open_store(settings.store_url, busy_timeout_ms=busy_timeout_ms, readonly=readonly,
                           key=database_key(settings))
        return cls(store, settings)

    def close(self, checkpoint: bool = True) -> None:
        self.store.close(checkpoint=checkpoint)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def api(self) -> Service:
        """This service as the whole API, for a call from one mixin into another (the hook's
        `CaptureService` calls only what it has, and `Record._remember`)."""
        return self  # type: ignore[return-value]

    def now(self) -> int:
        return int(self.clock())

    def project_for(self, cwd: str | None = None) -> str:
        return project_name(cwd or os.getcwd(), self.settings["project.name"], self.settings.project_dirs)

    def check_enabled(self) -> None:
        """Refuse a write (Disabled, exit 3) while `memory.enabled` is false."""
        if not self.settings["memory.enabled"]:
            raise Disabled("memory is disabled (memory.enabled = false): nothing is written; "
                           "`nmem config set memory.enabled true` turns it back on")

    def check_writable(self, domain: str | None = None, project: str | None = None) -> None:
        """Refuse a write (Disabled, exit 3) when memory is off: globally (`memory.enabled = false`),
        or for the project the write belongs to (a `project:<name>` domain) or is made from
        (`project`; for a user or org memory without one, the working directory's) by
        `memory = false` in its `[projects."<name>"]` table or `capture.exclude_projects`.
        Hooks skip silently instead; deletions (forget, purge) are never refused."""
        self.check_enabled()
        names: list[tuple[str, str | None]] = []
        if domain and domain.startswith("project:"):
            names.append((domain[len("project:"):], None))
        if project is not None:
            names.append((project, None))
        elif not names:  # a user or org memory: the project it is written from
            here = os.getcwd()
            names.append((self.project_for(here), here))
        for name, cwd in names:
            if not self.settings.project_enabled(name, cwd):
                raise Disabled(f"memory is disabled for project {name!r} (its [projects] `memory = false` or "
                               "capture.exclude_projects): nothing is written")

    def _tool_excluded(self, tool: str) -> bool:
        return matches_any(tool, self.settings["capture.exclude_tools"])

    def _namespace(self, namespace: str | None) -> str:
        ns = (namespace or "context").strip().lower()
        ns = NAMESPACE_ALIASES.get(ns, ns)
        if not is_slug(ns):
            raise ValidationError(
                f"invalid namespace {namespace!r}: use a short lower-case slug such as "
                + ", ".join(NAMESPACES[:6])
            )
        return ns

    def _domain(self, domain: str | None, project: str | None) -> str:
        value = (domain or "project").strip()
        if value in ("user", "org"):
            return value
        if value == "project":
            return project_domain(project or self.project_for())
        if value.startswith("project:") and len(value) > len("project:"):
            return value
        raise ValidationError(f"invalid domain {domain!r}: use project, project:<name>, user or org")

    @staticmethod
    def _check_obs_type(obs_type: str) -> None:
        if obs_type not in OBS_TYPES:
            raise InvalidArgument(f"unknown obs_type {obs_type!r}; valid: {', '.join(OBS_TYPES)}")

    def _audit(self, action: str, memory: Memory, written: bool = False) -> None:
        """On a team server: an audit row for a memory write (and its writer, when `written`)."""
        access = team_access()
        viewer = access.current() if access is not None else None
        if viewer is not None:
            self.store.record_writes(  # type: ignore[attr-defined]
                viewer.name, self.now(), [(action, memory.urn)], memories=[memory.id] if written else [])
