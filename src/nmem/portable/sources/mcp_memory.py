"""Import from the MCP reference memory server's knowledge graph (`memory.jsonl`).

That server (modelcontextprotocol/servers, `src/memory`) keeps one JSON object a line:
entities `{"type": "entity", "name", "entityType", "observations": [...]}` and relations
`{"type": "relation", "from", "to", "relationType"}`, relations in the active voice.

Each entity becomes one curated memory (domain `user` and namespace `context` unless told
otherwise, since the graph is what an agent learned about the user and their world): the
summary is its name and type, the content its observations as a list followed by its
relations in both directions, the tags `mcp-memory` and its type, and `relates_to` holds
the uids of the entities it is related to. The uid is derived from the entity's name, and
its times are the file's modification time, so importing the file again changes nothing,
importing it after the graph changed updates those memories, and a memory edited in nmem
since is kept.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from nmem.errors import InvalidArgument, NmemError
from nmem.models import Memory, preview
from nmem.portable.limits import InputLimits, Skipped, decode, json_line, read_file
from nmem.portable.records import Batch, derived_uid

SOURCE = "mcp-memory"


@dataclass
class _Entity:
    name: str
    entity_type: str
    observations: list[str] = field(default_factory=list)
    relations: list[str] = field(default_factory=list)
    related: list[str] = field(default_factory=list)


def entity_uid(name: str) -> str:
    return derived_uid(f"{SOURCE}\x00{name}")


def _text(item: dict[str, object], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise InvalidArgument(f"{where}: {key} must be a string")
    return value


def read(path: Path, domain: str, namespace: str, check_memory: Callable[[Memory], Memory],
         limits: InputLimits | None = None) -> tuple[Batch, list[str]]:
    """The graph's entities as memories, and a note per entity or line left out."""
    limits = limits or InputLimits()
    text = decode(read_file(str(path), limits), str(path))
    try:
        modified = int(path.stat().st_mtime)
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path}: {exc.strerror}") from None
    entities: dict[str, _Entity] = {}
    relations: list[tuple[str, str, str]] = []
    skipped: list[str] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{path.name}, line {number}"
        try:
            item = json_line(line, limits)
        except json.JSONDecodeError as exc:
            raise InvalidArgument(f"{where}: not JSON ({exc.msg})") from None
        if isinstance(item, Skipped):
            skipped.append(f"{where}: {item.reason}")
            continue
        if not isinstance(item, dict):
            raise InvalidArgument(f"{where}: expected an object")
        kind = item.get("type")
        if kind == "entity":
            name = _text(item, "name", where)
            observations = item.get("observations") or []
            if not isinstance(observations, list) or not all(isinstance(o, str) for o in observations):
                raise InvalidArgument(f"{where}: observations must be a list of strings")
            entity = entities.setdefault(name, _Entity(name, str(item.get("entityType") or "")))
            entity.observations.extend(o for o in observations if o not in entity.observations)
        elif kind == "relation":
            relations.append((_text(item, "from", where), _text(item, "relationType", where), _text(item, "to", where)))
        else:
            raise InvalidArgument(f"{where}: type must be entity or relation, got {kind!r}")
    for source, relation, target in relations:
        if source in entities:
            entities[source].relations.append(f"{relation} → {target}")
            if target in entities:
                entities[source].related.append(entity_uid(target))
        if target in entities:
            entities[target].relations.append(f"← {relation} (from {source})")
            if source in entities:
                entities[target].related.append(entity_uid(source))

    batch = Batch()
    for entity in entities.values():
        if not entity.name.strip():
            skipped.append("an entity without a name")
            continue
        title = f"{entity.name} ({entity.entity_type})" if entity.entity_type else entity.name
        parts = [title]
        if entity.observations:
            parts.append("\n".join(f"- {o}" for o in entity.observations))
        if entity.relations:
            parts.append("Relations:\n" + "\n".join(f"- {r}" for r in dict.fromkeys(entity.relations)))
        memory = Memory(
            id=entity_uid(entity.name), domain=domain, namespace=namespace,
            summary=preview(" ".join(title.split()), 100),
            content="\n\n".join(parts), tags=[SOURCE, *([entity.entity_type] if entity.entity_type else [])],
            source=SOURCE, relates_to=list(dict.fromkeys(entity.related)), created_at=modified, updated_at=modified,
        )
        try:
            batch.memories.append(check_memory(memory))
        except NmemError as exc:
            skipped.append(f"entity {entity.name!r}: {exc.message}")
    return batch, skipped
