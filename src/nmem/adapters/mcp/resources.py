"""`nmem://` resources: what each URN names, and how to list and read them (no SDK here).

  nmem://{domain}/{namespace}/{id}   one memory; or an observation, prompt or session
  nmem://{domain}/{namespace}        the memories of a namespace (or a project's recent observations)
  nmem://{domain}                    the namespaces of a domain with their counts

A URN is written as nmem writes it everywhere (`nmem://project:web/decisions/…`), but a
URI's authority cannot hold a `:` other than before a port (RFC 3986), and strict clients
(pydantic's `AnyUrl`, which the 1.x Python SDK validates every resource URI with) refuse
it. So the URIs the MCP layer hands out are the URN with such characters %-encoded
(`nmem://project%3Aweb/…`), which is also what a client gets by expanding the templates
(RFC 6570 encodes `:` in a simple `{domain}`); both forms are read, subscribed and notified.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from nmem.errors import NotFound
from nmem.models import Memory, urn_parts
from nmem.service.api import Service
from nmem.store import SearchFilters
from nmem.util.numbers import INT_MAX

PAGE_SIZE = 50
LISTING_LIMIT = 100
TRAIL_NAMESPACES = ("observations", "prompts", "sessions")

TEMPLATES: tuple[tuple[str, str, str], ...] = (
    ("nmem://{domain}/{namespace}/{id}", "record",
     "One memory (domain project:<name>, user or org), or an observation, prompt or session of a project "
     "(namespace observations, prompts or sessions)."),
    ("nmem://{domain}/{namespace}", "namespace",
     "The memories of a namespace, or a project's recent observations, prompts or sessions."),
    ("nmem://{domain}", "domain", "The namespaces of a domain, with how many memories each holds."),
)


@dataclass(frozen=True)
class Urn:
    domain: str
    namespace: str | None = None
    id: str | None = None

    @property
    def project(self) -> str | None:
        return self.domain.removeprefix("project:") if self.domain.startswith("project:") else None

    def parts(self) -> list[str]:
        return [p for p in (self.domain, self.namespace, self.id) if p is not None]

    def text(self) -> str:
        """The URN as nmem writes it (`nmem://project:web/observations/12`)."""
        return "nmem://" + "/".join(self.parts())

    def uri(self) -> str:
        """The URN as an RFC 3986 URI (`nmem://project%3Aweb/observations/12`)."""
        domain, *path = self.parts()
        return "nmem://" + "/".join([quote(domain, safe=_HOST_SAFE), *(quote(p, safe=_SEGMENT_SAFE) for p in path)])


# What RFC 3986 lets through unencoded besides letters, digits and -._~: in a host (reg-name)
# the sub-delimiters, in a path segment those and ':' and '@'.
_HOST_SAFE = "!$&'()*+,;="
_SEGMENT_SAFE = _HOST_SAFE + ":@"


def parse_urn(uri: str) -> Urn:
    """The parts a URN names, from either form (`nmem.models.urn_parts`); NotFound if it is none."""
    parts = urn_parts(uri)
    if parts is None:
        raise NotFound(f"resource not found: {uri}")
    return Urn(*parts)


def as_uri(urn: str) -> str:
    """A URN written as an RFC 3986 URI, for MCP clients that validate URIs strictly."""
    return parse_urn(urn).uri()


def canonical(uri: str) -> str:
    """The URN a URI of either form names, as nmem writes it; NotFound if it names none."""
    return parse_urn(uri).text()


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def read(service: Service, uri: str) -> str:
    """The JSON text a URN names; NotFound for anything that does not exist."""
    urn = parse_urn(uri)
    if urn.id is not None and urn.namespace is not None:
        return _json(_read_record(service, urn, uri))
    if urn.namespace is not None:
        return _json(_read_namespace(service, urn))
    return _json(_read_domain(service, urn, uri))


def _read_record(service: Service, urn: Urn, uri: str) -> dict[str, Any]:
    project = urn.project
    if project is not None and urn.namespace in TRAIL_NAMESPACES:
        if urn.namespace == "sessions":
            trace = service.session_trace(urn.id or "")
            if trace["project"] != project:
                raise NotFound(f"resource not found: {uri}")
            return trace
        row_id = _row_id(urn.id or "")
        if row_id is None:
            raise NotFound(f"resource not found: {uri}")
        store = service.store
        found: list[Any] = (store.get_observations([row_id]) if urn.namespace == "observations"
                            else store.get_prompts([row_id]))
        if not found or found[0].project != project:
            raise NotFound(f"resource not found: {uri}")
        return dict(found[0].to_dict())
    memory = service.store.get_memory(urn.id or "")
    if memory is None or memory.deleted_at is not None or memory.domain != urn.domain \
            or memory.namespace != urn.namespace:
        raise NotFound(f"resource not found: {uri}")
    return memory.to_dict()


def _row_id(text: str) -> int | None:
    """The row id a URN's last segment names; None if no row can have it (not digits, beyond 64 bits)."""
    if not (text.isascii() and text.isdigit() and len(text) <= len(str(INT_MAX))):
        return None
    number = int(text)
    return number if number <= INT_MAX else None


def _read_namespace(service: Service, urn: Urn) -> dict[str, Any]:
    if urn.project is not None and urn.namespace in TRAIL_NAMESPACES:
        scope = urn.namespace
        result = service.search(None, scope=scope, project=urn.project, order_by="date_desc", limit=LISTING_LIMIT)
        return {"uri": Urn(urn.domain, scope).uri(), "items": result.to_list()}
    memories = list(service.store.iter_memories(urn.domain, urn.namespace))[:LISTING_LIMIT]
    return {"uri": Urn(urn.domain, urn.namespace).uri(), "items": [m.index_entry() for m in memories]}


def _read_domain(service: Service, urn: Urn, uri: str) -> dict[str, Any]:
    counts = Counter(m.namespace for m in service.store.iter_memories(urn.domain, None))
    namespaces = [{"namespace": ns, "count": n, "uri": Urn(urn.domain, ns).uri()}
                  for ns, n in sorted(counts.items())]
    if urn.project is not None:
        namespaces.extend({"namespace": ns, "uri": Urn(urn.domain, ns).uri()} for ns in TRAIL_NAMESPACES)
    elif not namespaces and urn.domain not in ("user", "org"):
        raise NotFound(f"resource not found: {uri}")
    return {"uri": Urn(urn.domain).uri(), "namespaces": namespaces}


def list_page(service: Service, cursor: str | None) -> tuple[list[Memory], str | None]:
    """One page of live memories, newest first; the cursor is an opaque offset."""
    try:
        offset = int(cursor) if cursor else 0
    except ValueError:
        offset = -1
    if not 0 <= offset <= INT_MAX - PAGE_SIZE - 1:
        raise ValueError("invalid cursor")
    rows = service.store.search_memories(None, SearchFilters(include_archived=True), "date_desc",
                                         PAGE_SIZE + 1, offset)
    memories = [m for m, _ in rows]
    next_cursor = str(offset + PAGE_SIZE) if len(memories) > PAGE_SIZE else None
    return memories[:PAGE_SIZE], next_cursor

