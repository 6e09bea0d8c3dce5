"""The records an export holds (docs/json.md, "nmem export"), and reading them back.

Curated memories travel whole, keyed by their uid. Trail rows have no global id: a session
is keyed by its id, a prompt and an observation by what they say and when (see
`nmem.portable.importer`). An observation names the prompt it followed by that prompt's
`seq`, its position (from 1) among its session's prompts in the same export, so no local row
id ever leaves the database.

Reading is strict: a record with an unknown key, a wrong type or a missing field is an
error naming where it is (`line 3`, `memories[2]`), raised before anything is written.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from nmem.errors import InvalidArgument, NmemError
from nmem.ids import _ALPHABET
from nmem.models import Memory, Observation, Prompt, Record, Session
from nmem.portable.limits import too_deep
from nmem.util.timeutil import parse_time

FORMAT_VERSION = 1
SKIPPED = "skipped"   # a reader's (kind, where, reason) for a line or record it left out
KINDS: tuple[str, ...] = ("memory", "session", "prompt", "observation")
GROUPS: dict[str, str] = {"memories": "memory", "sessions": "session", "prompts": "prompt",
                          "observations": "observation"}

MEMORY_KEYS = ("uid", "domain", "namespace", "summary", "content", "tags", "source", "relates_to", "tier",
               "is_pinned", "created_at", "updated_at", "accessed_at", "access_count", "deleted_at")
SESSION_KEYS = ("id", "project", "started_at", "ended_at", "signature", "summary")
PROMPT_KEYS = ("session_id", "seq", "timestamp", "source", "content")
OBSERVATION_KEYS = ("session_id", "prompt_seq", "timestamp", "obs_type", "source_event", "tool_name", "file_path",
                    "content", "metadata", "is_pinned")
# What `nmem get --format json` adds to a record: read and ignored, so its output imports too.
DERIVED_KEYS = frozenset({"kind", "urn", "ref"})
# A prompt's or observation's project is its session's.
IGNORED_KEYS = {"prompt": frozenset({"project", "id"}), "observation": frozenset({"project", "id"})}
ALIASES = {"memory": {"id": "uid"}}


# -- writing -----------------------------------------------------------------------------

def memory_record(memory: Memory) -> dict[str, Any]:
    return {"uid": memory.id, "domain": memory.domain, "namespace": memory.namespace, "summary": memory.summary,
            "content": memory.content, "tags": list(memory.tags), "source": memory.source,
            "relates_to": list(memory.relates_to), "tier": memory.tier, "is_pinned": memory.is_pinned,
            "created_at": memory.created_at, "updated_at": memory.updated_at, "accessed_at": memory.accessed_at,
            "access_count": memory.access_count, "deleted_at": memory.deleted_at}


def session_record(session: Session) -> dict[str, Any]:
    return {"id": session.id, "project": session.project, "started_at": session.started_at,
            "ended_at": session.ended_at, "signature": session.signature, "summary": session.summary}


def prompt_record(prompt: Prompt, seq: int) -> dict[str, Any]:
    return {"session_id": prompt.session_id, "seq": seq, "timestamp": prompt.timestamp, "source": prompt.source,
            "content": prompt.content}


def observation_record(obs: Observation, prompt_seq: int | None) -> dict[str, Any]:
    return {"session_id": obs.session_id, "prompt_seq": prompt_seq, "timestamp": obs.timestamp,
            "obs_type": obs.obs_type, "source_event": obs.source_event, "tool_name": obs.tool_name,
            "file_path": obs.file_path, "content": obs.content, "metadata": obs.metadata,
            "is_pinned": obs.is_pinned}


def derived_uid(seed: str, millis: int = 0) -> str:
    """A ULID made from a record's identity in another tool (and its time, when known), so
    importing the same record again finds the memory it made the first time."""
    digest = int.from_bytes(hashlib.sha256(seed.encode("utf-8")).digest()[:10], "big")
    value = (max(0, millis) & ((1 << 48) - 1)) << 80 | digest
    return "".join(_ALPHABET[(value >> shift) & 31] for shift in range(125, -1, -5))


# -- reading -----------------------------------------------------------------------------

class TrailPrompt(Record):
    seq: int
    timestamp: int
    source: str
    content: str


class TrailObservation(Record):
    prompt_seq: int | None
    timestamp: int
    obs_type: str
    source_event: str
    tool_name: str | None
    file_path: str | None
    content: str
    metadata: dict[str, Any] | None
    is_pinned: bool


@dataclass
class TrailSession:
    """One session with the prompts and observations an import brings for it. From another
    tool (`fill_only`), it never replaces what nmem recorded about a session it knows: it
    only fills an end or summary that is missing."""

    session: Session
    prompts: list[TrailPrompt] = field(default_factory=list)
    observations: list[TrailObservation] = field(default_factory=list)
    fill_only: bool = False

    @property
    def rows(self) -> int:
        return 1 + len(self.prompts) + len(self.observations)


@dataclass
class Batch:
    """Everything one import brings, read and checked before anything is written. A memory
    without a uid (a hand-written file) has the id ""."""

    memories: list[Memory] = field(default_factory=list)
    sessions: list[TrailSession] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)   # "where: why", for each line or record left out

    @property
    def rows(self) -> int:
        return len(self.memories) + sum(s.rows for s in self.sessions)


class _Fields:
    """One record's fields, read with errors that say where the record is."""

    def __init__(self, data: Mapping[str, Any], kind: str, where: str, known: tuple[str, ...]) -> None:
        aliases = ALIASES.get(kind, {})
        self.where = where
        self.values: dict[str, Any] = {}
        for key, value in data.items():
            name = aliases.get(key, key)
            if name in known:
                self.values[name] = value
            elif key not in DERIVED_KEYS and key not in IGNORED_KEYS.get(kind, ()):
                raise InvalidArgument(f"{where}: unknown {kind} field {key!r} (known: {', '.join(known)})")

    def fail(self, message: str) -> InvalidArgument:
        return InvalidArgument(f"{self.where}: {message}")

    def text(self, name: str, default: str | None = None, *, required: bool = False) -> str:
        value = self.values.get(name)
        if value is None:
            if required:
                raise self.fail(f"{name} is required")
            return default or ""
        if not isinstance(value, str):
            raise self.fail(f"{name} must be a string, got {type(value).__name__}")
        return value

    def optional_text(self, name: str) -> str | None:
        return self.text(name) if self.values.get(name) is not None else None

    def strings(self, name: str) -> list[str]:
        value = self.values.get(name)
        if value is None or value == "":
            return []
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value)
        raise self.fail(f"{name} must be a list of strings")

    def flag(self, name: str) -> bool:
        value = self.values.get(name, False)
        if not isinstance(value, bool):
            raise self.fail(f"{name} must be true or false")
        return value

    def integer(self, name: str, default: int | None = None, *, required: bool = False) -> int | None:
        value = self.values.get(name)
        if value is None:
            if required:
                raise self.fail(f"{name} is required")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{name} must be an integer")
        return value

    def time(self, name: str, default: int | None = None, *, required: bool = False) -> int | None:
        value = self.values.get(name)
        if value is None:
            if required:
                raise self.fail(f"{name} is required")
            return default
        try:
            return parse_time(value, name=name)
        except InvalidArgument as exc:
            raise self.fail(exc.message) from None

    def mapping(self, name: str) -> dict[str, Any] | None:
        value = self.values.get(name)
        if value is not None and not isinstance(value, dict):
            raise self.fail(f"{name} must be an object")
        return value


def memory_from(data: Mapping[str, Any], where: str, now: int) -> Memory:
    f = _Fields(data, "memory", where, (*MEMORY_KEYS, "project"))
    project = f.optional_text("project")
    if project is not None and f.values.get("domain") is not None:
        raise f.fail("give domain or project, not both")
    deleted_at = f.time("deleted_at")
    created = f.time("created_at")
    updated = f.time("updated_at")
    created = created if created is not None else (updated if updated is not None else now)
    if deleted_at is None and not f.text("content").strip():
        raise f.fail("content is required (and must not be empty)")
    access_count = f.integer("access_count", 0) or 0
    if access_count < 0:
        raise f.fail("access_count must not be negative")
    return Memory(
        id=f.text("uid"), domain=f.text("domain", "project") if project is None else f"project:{project}",
        namespace=f.text("namespace", "context"),
        summary=f.text("summary"), content=f.text("content"), tags=f.strings("tags"),
        source=f.optional_text("source"), relates_to=f.strings("relates_to"), tier=f.text("tier", "warm"),
        is_pinned=f.flag("is_pinned"), created_at=created,
        updated_at=updated if updated is not None else max(created, deleted_at or created),
        accessed_at=f.time("accessed_at"), access_count=access_count, deleted_at=deleted_at,
    )


def session_from(data: Mapping[str, Any], where: str) -> Session:
    f = _Fields(data, "session", where, SESSION_KEYS)
    session_id = f.text("id", required=True).strip()
    if not session_id:
        raise f.fail("id must not be empty")
    started = f.time("started_at", required=True)
    assert started is not None
    return Session(session_id, f.text("project", required=True), started, f.time("ended_at"),
                   f.mapping("signature"), f.values.get("summary"))


def prompt_from(data: Mapping[str, Any], where: str) -> tuple[str, TrailPrompt]:
    f = _Fields(data, "prompt", where, PROMPT_KEYS)
    seq = f.integer("seq", required=True)
    timestamp = f.time("timestamp", required=True)
    assert seq is not None and timestamp is not None
    source = f.text("source", "user")
    if source not in ("user", "agent", "thinking") and not (source == "subagent" or source.startswith("subagent:")):
        raise f.fail(f"source must be user, agent, thinking or subagent[:<type>], got {source!r}")
    return f.text("session_id", required=True), TrailPrompt(seq, timestamp, source, f.text("content", required=True))


def observation_from(data: Mapping[str, Any], where: str, obs_types: Iterable[str]) -> tuple[str, TrailObservation]:
    f = _Fields(data, "observation", where, OBSERVATION_KEYS)
    obs_type = f.text("obs_type", required=True)
    if obs_type not in obs_types:
        raise f.fail(f"unknown obs_type {obs_type!r}")
    timestamp = f.time("timestamp", required=True)
    assert timestamp is not None
    return f.text("session_id", required=True), TrailObservation(
        f.integer("prompt_seq"), timestamp, obs_type, f.text("source_event", "import"), f.optional_text("tool_name"),
        f.optional_text("file_path"), f.text("content", required=True), f.mapping("metadata"), f.flag("is_pinned"))


def read_batch(items: Iterable[tuple[str, str, Any]], now: int,
               check_memory: Callable[[Memory], Memory] = lambda m: m, max_depth: int = 100) -> Batch:
    """Records as (kind, where, object) into one checked batch: each memory as `check_memory`
    returns it (errors name the record), prompts and observations joined to the session of
    the same file they name, whose `seq` numbers must be unique. A record nested deeper than
    `max_depth`, or one a reader skipped (kind SKIPPED), is left out and reported."""
    from nmem.models import OBS_TYPES

    batch = Batch()
    sessions: dict[str, TrailSession] = {}
    pending: list[tuple[str, str, TrailPrompt | TrailObservation]] = []
    # A memory object a reader gives again (a repeated line) is checked once; the object is kept
    # beside its result so that its id is never reused by another one meanwhile.
    checked: dict[int, tuple[Any, Memory]] = {}
    for kind, where, data in items:
        if kind == "memory" and id(data) in checked:
            batch.memories.append(checked[id(data)][1])
            continue
        if kind == SKIPPED:
            batch.skipped.append(f"{where}: {data}")
            continue
        if too_deep(data, max_depth):
            batch.skipped.append(f"{where}: nested deeper than import.max_depth ({max_depth})")
            continue
        if not isinstance(data, dict):
            raise InvalidArgument(f"{where}: expected an object, got {type(data).__name__}")
        if kind == "memory":
            memory = memory_from(data, where, now)
            try:
                checked[id(data)] = (data, check_memory(memory))
            except NmemError as exc:
                raise type(exc)(f"{where}: {exc.message}") from None
            batch.memories.append(checked[id(data)][1])
        elif kind == "session":
            session = session_from(data, where)
            if session.id in sessions:
                raise InvalidArgument(f"{where}: session {session.id} appears twice")
            sessions[session.id] = TrailSession(session)
            batch.sessions.append(sessions[session.id])
        elif kind == "prompt":
            pending.append((where, *prompt_from(data, where)))
        elif kind == "observation":
            pending.append((where, *observation_from(data, where, OBS_TYPES)))
        else:
            raise InvalidArgument(f"{where}: unknown kind {kind!r} (expected one of {', '.join(KINDS)})")
    for where, session_id, row in pending:
        trail = sessions.get(session_id)
        if trail is None:
            raise InvalidArgument(f"{where}: session {session_id!r} is not in the file")
        if isinstance(row, TrailPrompt):
            trail.prompts.append(row)
        else:
            trail.observations.append(row)
    for trail in batch.sessions:
        seqs = [p.seq for p in trail.prompts]
        if len(set(seqs)) != len(seqs):
            raise InvalidArgument(f"session {trail.session.id}: two prompts share a seq number")
        known = set(seqs)
        for obs in trail.observations:
            if obs.prompt_seq is not None and obs.prompt_seq not in known:
                raise InvalidArgument(f"session {trail.session.id}: an observation names prompt seq "
                                      f"{obs.prompt_seq}, which is not in the file")
    return batch


def grouped(document: Any, where: str) -> Iterator[tuple[str, str, Any]]:
    """The records of a JSON/YAML document: an export (`{"nmem_export": 1, "memories": [...],
    ...}`), a list of records (each with its `kind`, memory when absent), or one memory."""
    if isinstance(document, list):
        for i, item in enumerate(document):
            kind = item.get("kind", "memory") if isinstance(item, dict) else "memory"
            yield kind, f"{where}[{i}]", item
        return
    if not isinstance(document, dict):
        raise InvalidArgument(f"{where}: expected an nmem export, a list of memories or one memory")
    if not any(key in document for key in (*GROUPS, "nmem_export")):
        yield document.get("kind", "memory"), where, document
        return
    version = document.get("nmem_export", FORMAT_VERSION)
    check_version(version, where)
    for key in document:
        if key != "nmem_export" and key not in GROUPS:
            raise InvalidArgument(f"{where}: unknown key {key!r} (expected {', '.join(GROUPS)})")
    for group, kind in GROUPS.items():
        items = document.get(group) or []
        if not isinstance(items, list):
            raise InvalidArgument(f"{where}.{group}: expected a list")
        for i, item in enumerate(items):
            yield kind, f"{group}[{i}]", item


def check_version(version: Any, where: str) -> None:
    if version != FORMAT_VERSION:
        raise InvalidArgument(f"{where}: nmem export version {version!r} is not one this nmem reads "
                              f"(it reads version {FORMAT_VERSION})")
