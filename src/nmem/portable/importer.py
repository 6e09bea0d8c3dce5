"""What `nmem import` writes: a checked batch of records, idempotently.

- A memory is keyed by its uid and goes through `Service.merge_memory` (the newer
  `updated_at` wins; a memory without a uid is new unless one of its domain and namespace
  already says the same).
- A session is keyed by its id: a new one is added; a known one keeps its project, takes the
  earlier start, and the later end with its signature and summary (or the incoming summary
  when it had none).
- A prompt is keyed by its session, source and text, within PROMPT_SLACK_S seconds (another
  tool may stamp the same prompt a moment apart); an observation by its session, time, type,
  event, tool, file and text. Each key counts: a file holding a row twice adds it twice
  once, and never again.

Everything is read and checked before the first write, so bad input changes nothing. Writes
go in short transactions (a few hundred memories, or one session with its rows), so hooks
keep recording meanwhile and a killed import leaves no half session; running it again
finishes the job.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from nmem.capture.privacy import scrub, scrub_record
from nmem.models import Memory, Session
from nmem.portable import document, jsonl, markdown
from nmem.portable.limits import InputLimits
from nmem.portable.records import Batch, TrailSession, read_batch
from nmem.store import NewObservation

TYPE_CHECKING = False
if TYPE_CHECKING:
    from nmem.service.api import Service

MEMORIES_PER_TRANSACTION = 500
PROMPT_SLACK_S = 2
MEMORY_RESULTS = ("added", "updated", "deleted", "unchanged", "kept")

READERS: dict[str, Callable[[str, InputLimits], Iterator[tuple[str, str, Any]]]] = {
    "jsonl": lambda text, limits: jsonl.read(text.split("\n"), limits),
    "json": document.read_json,
    "yaml": document.read_yaml,
    "markdown": markdown.read,
}


@dataclass
class ImportReport:
    memories: Counter[str] = field(default_factory=Counter)
    sessions: Counter[str] = field(default_factory=Counter)
    prompts: Counter[str] = field(default_factory=Counter)
    observations: Counter[str] = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        return {
            "memories": {k: self.memories[k] for k in MEMORY_RESULTS},
            "sessions": {k: self.sessions[k] for k in ("added", "updated", "unchanged")},
            "prompts": {k: self.prompts[k] for k in ("added", "unchanged")},
            "observations": {k: self.observations[k] for k in ("added", "unchanged")},
        }


def read(service: Service, text: str, fmt: str, limits: InputLimits | None = None) -> Batch:
    """Parse and check a whole file in one of the formats (`nmem.portable.FORMATS`); lines and
    records past the limits are left out and listed in `Batch.skipped`."""
    limits = limits or InputLimits()
    return read_batch(READERS[fmt](text, limits), service.now(), service.importable, limits.max_depth)


def apply(service: Service, batch: Batch, progress: Callable[[int], None] = lambda n: None) -> ImportReport:
    service.check_writable()  # memory off (globally or here): an import writes nothing
    report = ImportReport()
    store = service.store
    texts: dict[tuple[str, str], set[str]] = {}
    for start in range(0, len(batch.memories), MEMORIES_PER_TRANSACTION):
        chunk = batch.memories[start:start + MEMORIES_PER_TRANSACTION]
        with store.transaction():
            for memory in chunk:
                result = _unkeyed(service, memory, texts) if not memory.id else service.merge_memory(memory)
                report.memories[result] += 1
        progress(len(chunk))
    if report.memories["deleted"]:
        store.reclaim()  # the batches' tombstones: fold the WAL so their text leaves the files
    for trail in batch.sessions:
        with store.transaction():
            _session(service, trail, report)
        progress(trail.rows)
    return report


def _unkeyed(service: Service, memory: Memory, texts: dict[tuple[str, str], set[str]]) -> str:
    """A memory without a uid (written by hand), as `merge_memory` takes it: new unless a live
    memory of its domain and namespace says the same. Each place's texts are read once per
    import, not once per memory (which made 3,000 hand-written memories take minutes). The
    batch's memories are checked already (`Service.importable`)."""
    place = (memory.domain, memory.namespace)
    known = texts.get(place)
    if known is None:
        known = texts[place] = {m.content for m in service.store.iter_memories(*place)}
    if memory.content in known:
        return "unchanged"
    service.check_writable(memory.domain)
    service.remember(memory.content, summary=memory.summary, namespace=memory.namespace, tags=memory.tags,
                     domain=memory.domain, source=memory.source, relates_to=memory.relates_to, tier=memory.tier,
                     pinned=memory.is_pinned, at=memory.created_at)
    known.add(memory.content)
    return "added"


def _merged(local: Session, incoming: Session, fill_only: bool) -> Session:
    if fill_only:
        if local.summary is not None or incoming.summary is None:
            return local
        return local.replace(ended_at=local.ended_at if local.ended_at is not None else incoming.ended_at,
                             summary=incoming.summary)
    merged = local.replace(started_at=min(local.started_at, incoming.started_at))
    ends_later = incoming.ended_at is not None and (local.ended_at is None or incoming.ended_at > local.ended_at)
    if ends_later or (local.summary is None and incoming.summary is not None):
        merged = merged.replace(ended_at=incoming.ended_at if ends_later else local.ended_at,
                                signature=incoming.signature if incoming.signature is not None else local.signature,
                                summary=incoming.summary if incoming.summary is not None else local.summary)
    return merged


def _session(service: Service, trail: TrailSession, report: ImportReport) -> None:
    store = service.store
    incoming = scrub_record(trail.session)  # every field, the summary's JSON too
    local = store.get_session(incoming.id)
    if local is None:
        store.put_session(incoming)
        report.sessions["added"] += 1
        project = incoming.project
    else:
        merged = _merged(local, incoming, trail.fill_only)
        if merged != local:
            store.put_session(merged)
        report.sessions["updated" if merged != local else "unchanged"] += 1
        project = local.project

    # Local prompts by (source, text): their times and ids, each matched at most once.
    prompts: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for p in store.session_prompts(incoming.id, None, None):
        prompts.setdefault((p.source, p.content), []).append((p.timestamp, p.id))
    prompt_ids: dict[int, int] = {}
    for prompt in trail.prompts:
        content = scrub(prompt.content)
        candidates = prompts.get((prompt.source, content), [])
        match = next((i for i, (ts, _) in enumerate(candidates) if abs(ts - prompt.timestamp) <= PROMPT_SLACK_S), None)
        if match is not None:
            prompt_ids[prompt.seq] = candidates.pop(match)[1]
            report.prompts["unchanged"] += 1
        else:
            prompt_ids[prompt.seq] = store.add_prompt(incoming.id, prompt.timestamp, prompt.source, content)
            report.prompts["added"] += 1

    observations: dict[tuple[Any, ...], list[tuple[int, bool]]] = {}
    for o in store.session_observations(incoming.id, None, None):
        key = (o.timestamp, o.obs_type, o.source_event, o.tool_name, o.file_path, o.content)
        observations.setdefault(key, []).append((o.id, o.is_pinned))
    for obs in trail.observations:
        content, file_path = scrub(obs.content), scrub(obs.file_path) if obs.file_path else obs.file_path
        same = observations.get((obs.timestamp, obs.obs_type, obs.source_event, obs.tool_name, file_path, content))
        if same:
            obs_id, pinned = same.pop(0)
            if obs.is_pinned and not pinned:  # a pin on either side keeps the row
                store.set_observation_pin(obs_id, True)
            report.observations["unchanged"] += 1
            continue
        obs_id = store.add_observation(scrub_record(NewObservation(
            session_id=incoming.id, project=project, timestamp=obs.timestamp, obs_type=obs.obs_type,
            source_event=obs.source_event, content=content, tool_name=obs.tool_name, file_path=file_path,
            metadata=obs.metadata,
            prompt_id=prompt_ids.get(obs.prompt_seq) if obs.prompt_seq is not None else None)))
        if obs.is_pinned:
            store.set_observation_pin(obs_id, True)
        report.observations["added"] += 1
