"""The half of the service API that capture needs: recording events and curating memories.

Hooks run as a fresh process per event, so they use `CoreService` and never import the
search machinery (`nmem.memory.Service` adds search, recall and navigation on top of it).
"""

from __future__ import annotations

import os
import time

from nmem import access
from nmem import jsonlite as json
from nmem.capture import events as ev
from nmem.capture.privacy import redact_url, scrub, scrub_event, scrub_record
from nmem.capture.project import project_name, project_root
from nmem.capture.recorder import Recorder, RecordOutcome
from nmem.config import Settings, load_settings, matches_any
from nmem.errors import ContentBlocked, Disabled, InvalidArgument, NotFound, ValidationError
from nmem.ids import new_uid
from nmem.models import (
    NAMESPACES,
    OBS_TYPES,
    TIERS,
    Memory,
    observation_urn,
    preview,
    project_domain,
    prompt_urn,
    urn_parts,
)
from nmem.store import NewMemory, open_store
from nmem.store.keys import database_key
from nmem.timeutil import MAX_AGE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, Self

    from nmem.store.protocol import Store

MAX_LIMIT = 100
MAX_IDS = 50
INT_MAX = 2**63 - 1  # SQLite's integers are signed 64-bit
INT_MIN = -INT_MAX   # as the MCP tools' schemas say
SUMMARY_CHARS = 100
NAMESPACE_ALIASES = {
    "decision": "decisions", "learning": "learnings", "learned": "learnings",
    "pattern": "patterns", "blocker": "blockers", "gotcha": "gotchas",
    "convention": "conventions", "api": "apis", "test": "testing",
}
# The events that start recording a session: what an agent did. Any other event (Stop, SessionEnd,
# PreCompact, Notification, PreToolUse...) of a session never seen creates nothing.
SESSION_OPENERS = frozenset((ev.SESSION_START, ev.PROMPT, ev.TOOL, ev.TOOL_FAILURE))
_SLUG_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")
_UID_CHARS = frozenset("0123456789ABCDEFGHJKMNPQRSTVWXYZ")  # ULIDs: Crockford's base32


def _is_slug(text: str) -> bool:
    return 0 < len(text) <= 40 and "a" <= text[0] <= "z" and all(c in _SLUG_CHARS for c in text)




def clamp(value: object, low: int, high: int, default: int, name: str = "value") -> int:
    """A count within `low..high`: None is the default, anything inside 64 bits is clamped to
    the range, anything beyond them is refused (`_as_int`)."""
    if value is None:
        return default
    return max(low, min(high, _as_int(value, name)))


def _as_int(value: object, name: str, low: int = INT_MIN, high: int = INT_MAX) -> int:
    """An integer argument: an int, an integral float (JSON's 1e2) or a digit string.

    Not an integer (a boolean, 1.5, "ten") is an InvalidArgument; an integer outside
    `low..high` a ValidationError. The default range is SQLite's: a wider integer would
    otherwise reach the database and fail there as an OverflowError.
    """
    if isinstance(value, bool):
        raise InvalidArgument(f"{name} must be an integer, got {value!r}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and _is_integer_text(value):
        text = value.strip()
        if len(text.lstrip("+-").lstrip("0")) > 20:  # past 64 bits; int() refuses 4,300 digits and more
            bound = f"at least {low}" if text.startswith("-") else f"at most {high}"
            raise ValidationError(f"{name} must be {bound}, got {_shown_text(text)}")
        number = int(text)
    else:
        raise InvalidArgument(f"{name} must be an integer, got {_shown_text(repr(value))}")
    if number < low:
        raise ValidationError(f"{name} must be at least {low}, got {_shown(number)}")
    if number > high:
        raise ValidationError(f"{name} must be at most {high}, got {_shown(number)}")
    return number


def _is_integer_text(value: str) -> bool:
    text = value.strip()
    digits = text[1:] if text[:1] in ("-", "+") else text
    return digits.isascii() and digits.isdigit()


def _shown(number: int) -> str:
    return _shown_text(str(number))


def _shown_text(text: str) -> str:
    """A refused value as typed, unless it is too long to be worth echoing."""
    return text if len(text) <= 40 else f"{text[:20]}… ({len(text)} characters)"


def _tags(value: object) -> tuple[str, ...]:
    """Tags as stored: through the privacy filter like every other field."""
    return tuple(tag for tag in (scrub(t).strip() for t in _as_list(value, "tags")) if tag)


def _as_list(value: object, name: str) -> tuple[str, ...]:
    """Accept a list or a comma-separated string (claude-mem sends `files: "a.ts,b.ts"`)."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value if v.strip())
    raise InvalidArgument(f"{name} must be a string or a list of strings")


def _is_uid(text: str) -> bool:
    return len(text) == 26 and text[0] in "01234567" and all(c in _UID_CHARS for c in text)


def _merge_key(memory: Memory) -> str:
    """What two copies of a memory must share to be the same version (times aside)."""
    return json.dumps([memory.domain, memory.namespace, memory.summary, memory.content, memory.tags,
                       memory.source, memory.relates_to, memory.tier, memory.is_pinned, memory.deleted_at])


class CoreService:
    """Recording and curation over one store. One per process (or per request in a server)."""

    def __init__(self, store: Store, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self.settings = settings
        self.clock = clock
        # Sessions never change project: one lookup per session per process (imports, servers).
        self._session_projects: dict[str, str] = {}

    @property
    def store(self) -> Store:
        """The store as the signed-in user of a team server may read it (`nmem.access`): every
        read of the service and of every adapter goes through here, so none forgets the rule."""
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

    def now(self) -> int:
        return int(self.clock())

    def project_for(self, cwd: str | None = None) -> str:
        return project_name(cwd or os.getcwd(), self.settings["project.name"], self.settings.project_dirs)

    def record_event(self, event: ev.HookEvent, *, spool_id: str | None = None) -> RecordOutcome:
        """Store one hook event: the session row on first sight, then what the event adds.

        `spool_id` names an event replayed from the hook spool: it is stored at most once,
        however often a replay is repeated (a drain killed between commit and unlink).
        Every field passes the privacy filter first, before anything reads, cuts or keeps it.
        """
        event = scrub_event(event)
        project = self.project_for(event.cwd)
        if not self.settings.project_enabled(project, event.cwd):
            return RecordOutcome(event.session_id, project, skipped="disabled")
        if event.kind in (ev.TOOL, ev.TOOL_FAILURE) and self._tool_excluded(event.tool_name or ""):
            return RecordOutcome(event.session_id, project, skipped="excluded")
        turn = self._transcript_turn(event)  # before the write lock: a file never holds it
        known = self._session_projects.get(event.session_id)
        with self.store.transaction():
            if spool_id is not None and not self._first_replay(spool_id):
                return RecordOutcome(event.session_id, project, skipped="duplicate")
            if known is None:
                # Subagent and resumed events keep the project their session started in.
                session = self.store.get_session(event.session_id)
                if session is None and event.kind not in SESSION_OPENERS:
                    # `claude mcp list`, Notification, PreToolUse, a Stop of a session never seen:
                    # no session worth a row
                    return RecordOutcome(event.session_id, project, skipped="no_session")
                if session is None:
                    session = self.store.ensure_session(event.session_id, project, event.timestamp,
                                                        project_root(event.cwd), event.agent)
                known = session.project
            if known != project and not self.settings.project_enabled(known):
                # a session of an opted-out project, resumed from elsewhere: still that project's
                return RecordOutcome(event.session_id, project, skipped="disabled")
            outcome = Recorder(self.store, self.settings, self.remember, turn).record(event, known)
            self._attribute_event(outcome)
        self._session_projects[event.session_id] = known  # only once committed
        return outcome

    def _attribute_event(self, outcome: RecordOutcome) -> None:
        """On a team server: the event's writer and its audit rows, in the event's transaction."""
        viewer = access.current()
        if viewer is None:
            return
        writes: list[tuple[str, str]] = []
        if outcome.observation_id is not None:
            writes.append(("record", observation_urn(outcome.project, outcome.observation_id)))
        if outcome.prompt_id is not None:
            writes.append(("record", prompt_urn(outcome.project, outcome.prompt_id)))
        writes.extend(("remember", m.urn) for m in outcome.memories)
        if writes:
            self.store.record_writes(  # type: ignore[attr-defined]
                viewer.name, self.now(), writes, memories=[m.id for m in outcome.memories],
                observations=[outcome.observation_id] if outcome.observation_id is not None else [])

    def _audit(self, action: str, memory: Memory, written: bool = False) -> None:
        """On a team server: an audit row for a memory write (and its writer, when `written`)."""
        viewer = access.current()
        if viewer is not None:
            self.store.record_writes(  # type: ignore[attr-defined]
                viewer.name, self.now(), [(action, memory.urn)], memories=[memory.id] if written else [])

    def _transcript_turn(self, event: ev.HookEvent) -> list[tuple[int, bool, str]]:
        if event.kind not in (ev.STOP, ev.SUBAGENT_STOP) or not self.settings["capture.read_transcript"]:
            return []
        from nmem.capture.transcript import turn_words

        return turn_words(event.transcript_path, subagent=event.kind == ev.SUBAGENT_STOP)

    def _first_replay(self, spool_id: str) -> bool:
        return self.store.mark_spooled(spool_id, self.now())

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
        if not _is_slug(ns):
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

    def remember(self, content: str, *, summary: str | None = None, namespace: str | None = None,
                 tags: Iterable[str] | str | None = None, domain: str | None = None,
                 project: str | None = None, source: str | None = None,
                 relates_to: Iterable[str] | str | None = None, tier: str = "warm",
                 pinned: bool = False, at: int | None = None) -> Memory:
        """Store a curated memory and return it (its `urn` names it everywhere)."""
        body = scrub(content or "").strip()
        if not body:
            if (content or "").strip():
                raise ContentBlocked("nothing left to store: the content is entirely private")
            raise ValidationError("content must not be empty")
        title = scrub(summary or "").strip() or body.splitlines()[0].strip()
        if summary and len(title) > SUMMARY_CHARS:
            raise ValidationError(f"summary is {len(title)} characters; the limit is {SUMMARY_CHARS}")
        title = preview(title, SUMMARY_CHARS)
        if tier not in TIERS:
            raise ValidationError(f"invalid tier {tier!r}: use one of {', '.join(TIERS)}")
        target = self._domain(domain, project)
        self.check_writable(target, project)
        new = scrub_record(NewMemory(  # every other field (source, relates_to) too
            uid=new_uid(self.clock()), domain=target,
            namespace=self._namespace(namespace), summary=title, content=body,
            timestamp=at if at is not None else self.now(), tags=_tags(tags), source=source,
            relates_to=_as_list(relates_to, "relates_to"), tier=tier, is_pinned=pinned,
        ))
        with self.store.transaction():
            memory = self.store.insert_memory(new)
            self._audit("remember", memory, written=True)
        return memory

    def memory_ref(self, ref: str | int) -> str:
        """A memory's id or URN; an integer (or digits shorter than an id) is its row number."""
        if isinstance(ref, bool):
            raise InvalidArgument(f"a memory id must be a string or an integer, got {ref!r}")
        text = str(ref).strip()
        if isinstance(ref, int) or (text.isascii() and text.isdigit() and len(text) < 26):
            number = _as_int(text, "id", low=1)
            uid = self.store.memory_uid(number)
            if uid is None:
                raise NotFound(f"memory not found: {text}")
            return uid
        return text

    def get_memory(self, ref: str) -> Memory:
        """A live memory by id or URN; a URN must name the memory's own domain and namespace."""
        ref = (ref or "").strip()
        if not ref:
            raise InvalidArgument("a memory id or URN is required")
        parts = urn_parts(ref)
        named = parts if parts is not None and len(parts) == 3 else None
        memory = self.store.get_memory(named[2] if named else ref)
        if memory is None or memory.deleted_at is not None or (
                named and named != [memory.domain, memory.namespace, memory.id]):
            raise NotFound(f"memory not found: {ref}")
        return memory

    def update(self, ref: str, *, content: str | None = None, summary: str | None = None,
               namespace: str | None = None, tags: Iterable[str] | str | None = None,
               tier: str | None = None, relates_to: Iterable[str] | str | None = None) -> Memory:
        current = self.get_memory(ref)
        self.check_writable(current.domain)
        uid = current.id
        fields: dict[str, Any] = {}
        if content is not None:
            if not content.strip():
                raise ValidationError("content must not be empty")
            fields["content"] = scrub(content).strip()
            derived = preview(current.content.splitlines()[0].strip(), SUMMARY_CHARS) if current.content else ""
            if summary is None and current.summary == derived:
                # the summary was the old first line: keep it in step with the new content
                fields["summary"] = preview(fields["content"].splitlines()[0].strip(), SUMMARY_CHARS)
        if summary is not None:
            if not summary.strip() or len(summary.strip()) > SUMMARY_CHARS:
                raise ValidationError(f"summary must be 1-{SUMMARY_CHARS} characters")
            fields["summary"] = scrub(summary).strip()
        if namespace is not None:
            fields["namespace"] = self._namespace(namespace)
        if tags is not None:
            fields["tags"] = _tags(tags)
        if relates_to is not None:
            fields["relates_to"] = [scrub(r) for r in _as_list(relates_to, "relates_to")]
        if tier is not None:
            if tier not in TIERS:
                raise ValidationError(f"invalid tier {tier!r}: use one of {', '.join(TIERS)}")
            fields["tier"] = tier
        if not fields:
            raise InvalidArgument("nothing to update: give content, summary, namespace, tags, tier or relates_to")
        with self.store.transaction():
            updated = self.store.update_memory(uid, fields, self.now())
            if updated is None:
                raise NotFound(f"memory not found: {ref}")
            self._audit("update", updated)
        return updated

    def forget(self, ref: str | int) -> Memory:
        """Erase a memory's text, keeping a tombstone so the delete can sync. `ref` is its id,
        URN, or the integer row id recall shows as `number` (srvrmgr's `forget(id: integer)`)."""
        try:
            memory = self.get_memory(self.memory_ref(ref))
        except NotFound:
            raise NotFound(f"memory not found: {str(ref).strip()}") from None  # as asked, not the id behind it
        # Not one transaction with the audit row: the tombstone scrubs the freed pages after its commit.
        self.store.tombstone_memory(memory.id, self.now())
        self._audit("forget", memory)
        return memory

    def merge_memory(self, incoming: Memory) -> str:
        """Bring in a memory from elsewhere (an export, another tool) under its own uid.

        The newer `updated_at` wins; on a tie the greater content does, so two databases that
        import each other's exports agree. A tombstone is a write like any other. The local
        access count and time stay local. A memory without a uid (a hand-written file) is
        new unless a live memory of its domain and namespace already says the same. Returns
        what happened: `added`, `updated`, `deleted` (a tombstone written), `unchanged`, or
        `kept` (the local copy is newer).
        """
        memory = self.importable(incoming)
        self.check_writable(memory.domain)
        if not memory.id:
            if any(m.content == memory.content for m in self.store.iter_memories(memory.domain, memory.namespace)):
                return "unchanged"
            self.remember(memory.content, summary=memory.summary, namespace=memory.namespace, tags=memory.tags,
                          domain=memory.domain, source=memory.source, relates_to=memory.relates_to,
                          tier=memory.tier, pinned=memory.is_pinned, at=memory.created_at)
            return "added"
        local = self.store.get_memory(memory.id)
        if local is None:
            self.store.put_memory(memory)
            return "added" if memory.deleted_at is None else "deleted"
        if _merge_key(memory) == _merge_key(local):
            return "unchanged"
        if (memory.updated_at, _merge_key(memory)) < (local.updated_at, _merge_key(local)):
            return "kept"
        self.store.put_memory(memory.replace(created_at=min(local.created_at, memory.created_at),
                                             accessed_at=local.accessed_at, access_count=local.access_count))
        return "updated" if memory.deleted_at is None else "deleted"

    def importable(self, memory: Memory) -> Memory:
        """The memory as this database would store it: checked, scrubbed, a tombstone emptied.
        An empty id (a memory written by hand) stays empty: `merge_memory` gives it one."""
        uid = memory.id.strip().upper()
        if uid and not _is_uid(uid):
            raise ValidationError(f"invalid memory id {memory.id!r}: expected a ULID (26 characters)")
        if memory.tier not in TIERS:
            raise ValidationError(f"invalid tier {memory.tier!r}: use one of {', '.join(TIERS)}")
        fields: dict[str, Any] = {"id": uid, "domain": self._domain(memory.domain, None),
                                  "namespace": self._namespace(memory.namespace)}
        if memory.deleted_at is not None:
            if not uid:
                raise ValidationError("a forgotten memory (deleted_at) needs its uid")
            fields.update(summary="", content="", tags=[], relates_to=[])
            return memory.replace(**fields)
        body = scrub(memory.content).strip()
        if not body:
            if memory.content.strip():
                raise ContentBlocked("nothing left to store: the content is entirely private")
            raise ValidationError("content must not be empty")
        title = scrub(memory.summary).strip() or preview(body.splitlines()[0].strip(), SUMMARY_CHARS)
        if len(title) > SUMMARY_CHARS:
            raise ValidationError(f"summary is {len(title)} characters; the limit is {SUMMARY_CHARS}")
        fields.update(summary=title, content=body, tags=list(memory.tags), relates_to=list(memory.relates_to))
        return scrub_record(memory.replace(**fields))

    def pin(self, ref: str | int, pinned: bool = True) -> dict[str, Any]:
        """Pin an observation (numeric id) or a memory (id or URN): exempt from retention."""
        text = str(ref).strip()
        if text.isdigit():
            obs_id = _as_int(text, "id")
            found = self.store.get_observations([obs_id])
            self.check_writable(project_domain(found[0].project) if found else None)
            if not self.store.set_observation_pin(obs_id, pinned):
                raise NotFound(f"observation not found: {text}")
            return {"kind": "observation", "id": obs_id, "is_pinned": pinned}
        memory = self.get_memory(text)
        self.check_writable(memory.domain)
        with self.store.transaction():
            self.store.update_memory(memory.id, {"is_pinned": pinned}, self.now())
            self._audit("pin" if pinned else "unpin", memory)
        return {"kind": "memory", "id": memory.id, "urn": memory.urn, "is_pinned": pinned}

    def purge(self, *, ids: Sequence[int | str] = (), obs_type: str | Sequence[str] | None = None,
              older_than: int | None = None, project: str | None = None,
              confirm: bool = False) -> int:
        """Delete observations by id, or by type and/or age (pinned rows are kept)."""
        if not confirm:
            raise InvalidArgument("purge deletes data: pass --confirm (confirm=true) to proceed")
        types = _as_list(obs_type, "obs_type") if obs_type else ()
        for t in types:
            self._check_obs_type(t)
        if isinstance(ids, (str, bytes)):
            raise InvalidArgument("ids must be a list of observation ids, not a string")
        if ids:
            if types or older_than is not None:
                raise InvalidArgument("purge takes either ids or a type/age selector, not both")
            return self.store.purge_observations([_as_int(i, "id") for i in ids])
        if not types and older_than is None:
            raise InvalidArgument("purge needs ids, a type or an age (--older-than)")
        cutoff = self.now() - _as_int(older_than, "older_than", 0, MAX_AGE) if older_than is not None else None
        return self.store.purge_observations_where(types, cutoff, project)

    @staticmethod
    def _check_obs_type(obs_type: str) -> None:
        if obs_type not in OBS_TYPES:
            raise InvalidArgument(f"unknown obs_type {obs_type!r}; valid: {', '.join(OBS_TYPES)}")

    def status(self) -> dict[str, Any]:
        st = self.store.status()
        return {
            "database": redact_url(st.url), "schema_version": st.schema_version, "size_bytes": st.size_bytes,
            "sessions": st.sessions, "prompts": st.prompts, "observations": st.observations,
            "memories": st.memories, "by_obs_type": st.by_obs_type,
            "by_namespace": st.by_namespace,
            "by_tier": {t: int(st.by_tier.get(t, 0)) for t in TIERS}, "by_project": st.by_project,
            "enabled": bool(self.settings["memory.enabled"]),
            "encrypted": bool(getattr(self.store, "encrypted", False)),
        }

