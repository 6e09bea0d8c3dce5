"""The filters claude-mem's timeline tools document (`obs_type`/`type`, `concepts`, `files`,
the date bounds), read onto `Service.timeline`, which applies them (with `agent`) to the
anchor's search and to the neighbours it lists, the nearest that pass.

claude-mem's types name observation types and memory namespaces alike (`typemap`); types
that select memories only leave no observation to list. `concepts` are curated memories'
tags, which observations never carry: a timeline narrowed by them lists no neighbour, as a
search of observations narrowed by them finds none. An anchor given by id is always shown:
it is what the caller asked about.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from nmem.compat.claude_mem import typemap as tm
from nmem.errors import NotFound, ValidationError
from nmem.service.api import Service
from nmem.util.timeutil import parse_time


class Narrow(NamedTuple):
    """What a timeline keeps: observation types (None: every type; empty: none), concepts,
    recorded paths, and the date bounds (epoch seconds, inclusive)."""

    obs_types: tuple[str, ...] | None = None
    concepts: tuple[str, ...] = ()
    files: tuple[str, ...] | None = None
    start: int | None = None
    end: int | None = None

    def search_args(self) -> dict[str, Any]:
        """The same filters as `Service.search` (and `Service.timeline`) arguments."""
        return {"obs_type": self.obs_types or None, "tags": self.concepts or None, "files": self.files,
                "date_start": self.start, "date_end": self.end}


def narrowing(op: str, p: dict[str, Any], type_name: str) -> Narrow:
    """The filters of one call, or a `ValidationError` naming the one that is malformed."""
    values = p.get(type_name)
    obs_types = tm.resolve(op, type_name, values).obs_types if values else None
    start, end = p.get("dateStart"), p.get("dateEnd")
    start_at = parse_time(start, name="dateStart") if start is not None else None
    end_at = parse_time(end, name="dateEnd", end_of_day=True) if end is not None else None
    if start_at is not None and end_at is not None and start_at > end_at:
        raise ValidationError(f"{op}: dateStart is after dateEnd")
    return Narrow(obs_types, tuple(p.get("concepts") or ()), tuple(p["files"]) if p.get("files") else None,
                  start_at, end_at)


def around(service: Service, anchor: int | None, before: int, after: int, narrow: Narrow, *,
           query: str | None = None, **where: Any) -> dict[str, Any]:
    """`Service.timeline` around `anchor` (or the best match of `query`) with the filters of
    `narrow`; `where` is the rest of its arguments (project, prefer_project, agent, cwd)."""
    if narrow.obs_types == ():  # the types asked for select memories only
        if anchor is None and query and query.strip():
            raise NotFound(f"no observation matches {query!r} with those filters")
        before = after = 0
    return service.timeline(anchor, query=query, before=before, after=after, **where, **narrow.search_args())
