"""The filters claude-mem's timeline tools document (`obs_type`/`type`, `files`, the date
bounds), applied to the rows a timeline lists and to the search that picks its anchor.

A timeline lists observations; `concepts` are curated memories' tags, which observations
never carry, so a timeline refuses them (a clear error) rather than answering with nothing
or ignoring them. The anchor itself is always shown: it is what the caller asked about.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from nmem.compat.claude_mem import typemap as tm
from nmem.errors import ValidationError
from nmem.service.api import Service
from nmem.util.timeutil import parse_time

WINDOW = 100  # neighbours read on each side before the filters pick the closest
PAGE = 100


class Narrow(NamedTuple):
    """What a timeline keeps: observation types (None: every type; empty: none), recorded
    paths, and the date bounds (epoch seconds, inclusive)."""

    obs_types: tuple[str, ...] | None
    files: tuple[str, ...] | None
    start: int | None
    end: int | None

    @property
    def active(self) -> bool:
        return self.obs_types is not None or bool(self.files) or self.start is not None or self.end is not None

    def search_args(self) -> dict[str, Any]:
        """The same filters as `Service.search` arguments."""
        return {"obs_type": self.obs_types or None, "files": self.files, "date_start": self.start,
                "date_end": self.end}


def narrowing(op: str, p: dict[str, Any], type_name: str) -> Narrow:
    """The filters of one call, or a `ValidationError` naming the one a timeline cannot apply."""
    if p.get("concepts"):
        raise ValidationError(f"{op}: concepts are curated memories' tags and a timeline lists observations, "
                              "which carry none: use find_by_concept or search with concepts")
    values = p.get(type_name)
    obs_types = tm.resolve(op, type_name, values).obs_types if values else None
    start, end = p.get("dateStart"), p.get("dateEnd")
    start_at = parse_time(start, name="dateStart") if start is not None else None
    end_at = parse_time(end, name="dateEnd", end_of_day=True) if end is not None else None
    if start_at is not None and end_at is not None and start_at > end_at:
        raise ValidationError(f"{op}: dateStart is after dateEnd")
    return Narrow(obs_types, tuple(p["files"]) if p.get("files") else None, start_at, end_at)


def kept(service: Service, session_id: str, narrow: Narrow, first: int, last: int) -> set[int]:
    """Ids of the session's observations between `first` and `last` (epoch seconds) that pass."""
    if narrow.obs_types == ():
        return set()  # the types asked for select memories only (e.g. decision)
    start = first if narrow.start is None else max(first, narrow.start)
    end = last if narrow.end is None else min(last, narrow.end)
    if start > end:
        return set()
    found: set[int] = set()
    offset = 0
    while True:
        hits = service.search(None, scope="observations", session_id=session_id,
                              **{**narrow.search_args(), "date_start": start, "date_end": end},
                              order_by="date_asc", limit=PAGE, offset=offset).hits
        found.update(int(hit.record.id) for hit in hits)
        if len(hits) < PAGE:
            return found
        offset += PAGE


def around(service: Service, anchor: int, depth_before: int, depth_after: int,
           narrow: Narrow) -> dict[str, Any]:
    """`Service.timeline` around `anchor`, its neighbours narrowed to those that pass."""
    if not narrow.active:
        return service.timeline(anchor, before=depth_before, after=depth_after)
    wide = service.timeline(anchor, before=WINDOW, after=WINDOW)
    centre = wide["anchor"]
    rows = [*wide["before"], centre, *wide["after"]]
    keep = kept(service, str(centre["session_id"]), narrow, int(rows[0]["timestamp"]), int(rows[-1]["timestamp"]))
    before = [o for o in wide["before"] if o["id"] in keep]
    after = [o for o in wide["after"] if o["id"] in keep]
    return {"anchor": centre, "before": before[len(before) - depth_before:] if depth_before else [],
            "after": after[:depth_after]}
