"""Curated memories: remember and capture, read one, update, forget, pin, and merge copies
from elsewhere. A bare integer names a memory by the `number` recall shows, everywhere here."""

from __future__ import annotations

from nmem import jsonlite as json
from nmem.capture.privacy import scrub, scrub_record
from nmem.errors import ContentBlocked, InvalidArgument, NotFound, ValidationError
from nmem.ids import new_uid
from nmem.models import TIERS, Memory, preview, project_domain, urn_parts
from nmem.service.args import SUMMARY_CHARS, as_list, is_uid, tags_and_spec
from nmem.service.base import Base
from nmem.store import NewMemory

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any


def _merge_key(memory: Memory) -> str:
    """What two copies of a memory must share to be the same version (times aside)."""
    return json.dumps([memory.domain, memory.namespace, memory.summary, memory.content, memory.tags,
                       memory.source, memory.relates_to, memory.tier, memory.is_pinned, memory.deleted_at])


def _number_text(ref: str | int) -> str | None:
    """The digits of a bare integer (an int, or digits shorter than an id), else None."""
    if isinstance(ref, bool):
        raise InvalidArgument(f"a memory id must be a string or an integer, got {ref!r}")
    text = str(ref).strip()
    if isinstance(ref, int) or (text.isascii() and text.isdigit() and len(text) < 26):
        return text
    return None


class Memories(Base):
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
            timestamp=at if at is not None else self.now(), tags=_read_tags(tags), source=source,
            relates_to=as_list(relates_to, "relates_to"), tier=tier, is_pinned=pinned,
        ))
        with self.store.transaction():
            memory = self.store.insert_memory(new)
            self._audit("remember", memory, written=True)
        return memory

    def capture(self, content: str, *, summary: str | None = None, namespace: str | None = None,
                spec: str | None = None, tags: Iterable[str] | str | None = None, **options: Any) -> dict[str, Any]:
        """`remember` with subcog's answer (§2.2.1): the memory plus `memory_id`, `uri`, `indexed`
        (the full-text index holds it) and `warning` (secrets redacted, a duplicate kept), or
        None. `spec` is kept as the tag `spec:<name>`, which `recall --spec` filters on."""
        wanted = tags_and_spec(tags, spec)
        target = self._domain(options.get("domain"), options.get("project"))
        body = scrub(content or "").strip()
        twins = [m.id for m in self.store.iter_memories(target, self._namespace(namespace))
                 if body and m.content == body]
        memory = self.remember(content, summary=summary, namespace=namespace, tags=wanted, **options)
        warnings: list[str] = []
        if body != (content or "").strip() or (summary is not None and memory.summary != summary.strip()) \
                or any(scrub(t) != t for t in wanted):
            warnings.append("secrets redacted")
        if twins:
            warnings.append(f"duplicate of {', '.join(twins[:3])} (kept as a new memory)")
        return {"success": True, "memory_id": memory.id, "uri": memory.urn,
                "indexed": self.store.memory_indexed(memory.id), "warning": "; ".join(warnings) or None,
                **memory.to_dict()}

    def memory_ref(self, ref: str | int) -> str:
        """A memory's id or URN; a bare integer (or digits shorter than an id) is the `number`
        recall shows."""
        text = _number_text(ref)
        if text is None:
            return str(ref).strip()
        from nmem.util.numbers import as_int  # a memory named by number: never on a hook's way

        uid = self.store.memory_uid(as_int(text, "id", low=1))
        if uid is None:
            raise NotFound(f"memory not found: {text} (a bare number is the `number` recall shows)")
        return uid

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

    def _named_memory(self, ref: str | int) -> Memory:
        """The memory an id, URN or recall `number` names; NotFound says the ref as given."""
        uid = self.memory_ref(ref)
        try:
            return self.get_memory(uid)
        except NotFound:
            raise NotFound(f"memory not found: {str(ref).strip()}") from None

    def update(self, ref: str | int, *, content: str | None = None, summary: str | None = None,
               namespace: str | None = None, tags: Iterable[str] | str | None = None,
               tier: str | None = None, relates_to: Iterable[str] | str | None = None) -> Memory:
        """Change a memory named by its id, URN or recall `number`."""
        current = self._named_memory(ref)
        self.check_writable(current.domain)
        fields = self._updated_fields(current, content, summary, namespace, tags, tier, relates_to)
        with self.store.transaction():
            updated = self.store.update_memory(current.id, fields, self.now())
            if updated is None:
                raise NotFound(f"memory not found: {ref}")
            self._audit("update", updated)
        return updated

    def _updated_fields(self, current: Memory, content: str | None, summary: str | None, namespace: str | None,
                        tags: Iterable[str] | str | None, tier: str | None,
                        relates_to: Iterable[str] | str | None) -> dict[str, Any]:
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
            fields["tags"] = _read_tags(tags)
        if relates_to is not None:
            fields["relates_to"] = [scrub(r) for r in as_list(relates_to, "relates_to")]
        if tier is not None:
            if tier not in TIERS:
                raise ValidationError(f"invalid tier {tier!r}: use one of {', '.join(TIERS)}")
            fields["tier"] = tier
        if not fields:
            raise InvalidArgument("nothing to update: give content, summary, namespace, tags, tier or relates_to")
        return fields

    def forget(self, ref: str | int) -> Memory:
        """Erase a memory's text, keeping a tombstone so the delete can sync. `ref` is its id,
        URN, or the integer row id recall shows as `number` (srvrmgr's `forget(id: integer)`)."""
        memory = self._named_memory(ref)
        # Not one transaction with the audit row: the tombstone scrubs the freed pages after its commit.
        self.store.tombstone_memory(memory.id, self.now())
        self._audit("forget", memory)
        return memory

    def pin(self, ref: str | int, pinned: bool = True) -> dict[str, Any]:
        """Pin a memory (id, URN or recall `number`) or an observation (o42, #42 or its URN):
        exempt from retention and listed first."""
        if _number_text(ref) is None:
            from nmem.refs import OBSERVATION, PROMPT, SESSION, parse_ref  # its `re` stays off the hook path

            parsed = parse_ref(str(ref))
            if parsed.kind == OBSERVATION:
                return self._pin_observation(int(parsed.key), parsed.project, str(ref).strip(), pinned)
            if parsed.kind == PROMPT or (parsed.kind == SESSION and (parsed.prefix or parsed.project is not None)):
                raise InvalidArgument(f"{str(ref).strip()} names a {parsed.kind}: only observations and memories "
                                      "can be pinned")
        memory = self._named_memory(ref)
        self.check_writable(memory.domain)
        with self.store.transaction():
            self.store.update_memory(memory.id, {"is_pinned": pinned}, self.now())
            self._audit("pin" if pinned else "unpin", memory)
        return {"kind": "memory", "id": memory.id, "urn": memory.urn, "is_pinned": pinned}

    def _pin_observation(self, obs_id: int, project: str | None, text: str, pinned: bool) -> dict[str, Any]:
        found = self.store.get_observations([obs_id])
        if project is not None and (not found or found[0].project != project):
            raise NotFound(f"observation not found: {text}")  # a URN naming another project's observation
        self.check_writable(project_domain(found[0].project) if found else None)
        if not self.store.set_observation_pin(obs_id, pinned):
            raise NotFound(f"observation not found: {text}")
        return {"kind": "observation", "id": obs_id, "is_pinned": pinned}

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
        if uid and not is_uid(uid):
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


def _read_tags(value: object) -> tuple[str, ...]:
    """Tags as stored: through the privacy filter like every other field. (Here, not in
    `service.args`, which every service loads: the filter's patterns are for writes.)"""
    return tuple(tag for tag in (scrub(t).strip() for t in as_list(value, "tags")) if tag)
