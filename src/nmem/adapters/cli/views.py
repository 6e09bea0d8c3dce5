"""What the read and capture commands print, without click: the blocks each command hands to
`output.render`, and the argument readers they share.

Both command lines use these: the click commands (`query.py`, `curate.py`) and the light path
(`light.py`), which runs `search`, `recall`, `get`, `status` and `capture` without loading click
or the other commands, so the two print the same bytes.
"""

from __future__ import annotations

import sys

from nmem.adapters.cli.output import (
    Bars,
    Block,
    Body,
    Fields,
    Heading,
    Table,
    human_size,
    one_line,
    record_fields,
    shown_ref,
    when,
)
from nmem.errors import InvalidArgument, StorageError
from nmem.util.timeutil import parse_age, parse_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from nmem.service.api import SearchResult, Service


# -- arguments ----------------------------------------------------------------------------

def split_values(values: Iterable[str] | None) -> list[str]:
    """Repeated options, each of which may also be comma-separated."""
    out: list[str] = []
    for value in values or ():
        out.extend(part.strip() for part in value.split(",") if part.strip())
    return out


def read_stdin() -> str:
    text = sys.stdin.read()
    if not text.strip():
        raise InvalidArgument("--stdin was given but standard input is empty")
    return text


def time_bound(service: Service, value: str | None, *, name: str, end: bool = False) -> int | None:
    """A date, an epoch time, an age such as `7d` (that long before now), `now`, or `today` and
    `yesterday`: local days, their first second (with `end`, an upper bound: their last). Read
    here, so what cannot be read is named by the option the user typed (`name`, e.g. `--since`)."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text[-1:].isalpha() and text[:-1].strip().isdigit():
        return service.now() - parse_age(text, name=name)
    word = text.lower()
    if word == "now":
        return service.now()
    if word in ("today", "yesterday"):
        import time

        t = time.localtime(service.now())
        day = t.tm_mday - (word == "yesterday")
        if not end:
            return int(time.mktime((t.tm_year, t.tm_mon, day, 0, 0, 0, 0, 0, -1)))
        return int(time.mktime((t.tm_year, t.tm_mon, day + 1, 0, 0, 0, 0, 0, -1))) - 1  # a DST day included
    return parse_time(text, name=name, end_of_day=end)


def time_range(service: Service, since: str | None, until: str | None) -> tuple[int | None, int | None]:
    """`--since` and `--until` read (`time_bound`), and in order."""
    start = time_bound(service, since, name="--since")
    end = time_bound(service, until, name="--until", end=True)
    if start is not None and end is not None and start > end:
        raise InvalidArgument("--since is after --until")
    return start, end


# -- search -------------------------------------------------------------------------------

def _hit_type(hit: dict[str, Any]) -> str:
    kind = hit.get("kind")
    if kind == "observation":
        return str(hit.get("obs_type", ""))
    if kind == "memory":
        return f"memory:{hit.get('namespace', '')}"
    if kind == "prompt":  # prompt (the user's), reply, thinking, ↳ Explore (a subagent's)
        label = str(hit.get("label") or hit.get("source") or "")
        return "prompt" if label == "user" else label
    return str(kind)


def _hit_row(hit: dict[str, Any]) -> list[str]:
    where = hit.get("project") or hit.get("domain") or ""
    text = hit.get("summary") or hit.get("content_preview") or hit.get("content") or ""
    return [shown_ref(hit), when(hit.get("timestamp") or hit.get("updated_at") or hit.get("started_at")),
            _hit_type(hit), str(where), one_line(text)]


def search_blocks(result: SearchResult, full: bool) -> list[Block]:
    hits = result.to_list(full=full)
    if not hits:
        return [Body("No results.")]
    if not full:
        return [Table(("id", "when", "type", "project", "preview"), [_hit_row(h) for h in hits])]
    blocks: list[Block] = []
    for hit in hits:
        blocks.append(Heading(f"{_hit_type(hit)} {shown_ref(hit)}", 2))
        blocks.append(record_fields(hit, skip=("content",)))
        if hit.get("content"):
            blocks.append(Body(str(hit["content"])))
    return blocks


def count_line(count: int, query: str | None) -> str:
    return f'{count} results for "{query}"' if query else f"{count} results"


# -- get ----------------------------------------------------------------------------------

def record_blocks(records: list[dict[str, Any]]) -> list[Block]:
    blocks: list[Block] = []
    for rec in records:
        blocks.append(Heading(str(rec.get("urn", rec.get("id"))), 2))
        blocks.append(record_fields(rec, skip=("content", "urn")))
        if rec.get("content"):
            blocks.append(Body(str(rec["content"])))
        if rec["kind"] == "session":
            blocks.append(Body(f"Its prompts and actions: nmem trace {rec['ref']}"))
    return blocks


# -- status -------------------------------------------------------------------------------

def _by_type(counts: dict[str, int]) -> str:
    return " (" + ", ".join(f"{n} ↳ {kind}" for kind, n in counts.items()) + ")" if counts else ""


def status_blocks(data: dict[str, Any], verbose: bool) -> list[Block]:
    domains = ", ".join(f"{n} {d}" for d, n in data["by_domain"].items())
    blocks: list[Block] = [
        Heading("nmem status"),
        Fields([
            ("database", str(data["database"])),
            ("schema", f"v{data['schema_version']}"),
            ("size", human_size(int(data["size_bytes"]))
             + (", encrypted (SQLCipher)" if data.get("encrypted") else "")),
            ("capture", "enabled" if data["enabled"] else "disabled (memory.enabled = false)"),
            ("trail", f"{data['sessions']} sessions, {data['prompts']} prompts, "
                      f"{data['observations']} observations"),
            ("agent", f"{data.get('agent_replies', 0)} replies, {data.get('thinking', 0)} thinking, "
                      f"{data.get('subagent_replies', 0)} subagent answers"
                      + _by_type(data.get("subagent_replies_by_type") or {})),
            ("memories", f"{data['memories']}" + (f" in {data['domain']}" if "domain" in data
                                                   else f" ({domains})" if domains else "")),
            ("llm", f"{data.get('llm', 'disabled')} (consolidation summaries)"),
            ("last sync", when(data["last_sync"]) if data.get("last_sync") else "never"),
        ]),
    ]
    if verbose or "domain" not in data:
        blocks.append(Bars("By type", list(data["by_obs_type"].items())))
    blocks += [Bars("By namespace", list(data["by_namespace"].items())),
               Bars("By tier", list(data["by_tier"].items()))]
    if verbose or "domain" not in data:
        blocks.append(Bars("Sessions by project", list(data["by_project"].items())))
    if verbose:
        blocks.append(Bars("Memories by domain", list(data["by_domain"].items())))
    if "verify" in data:
        check = data["verify"]
        blocks.append(Heading("Verify", 2))
        blocks.append(Fields([("integrity", check["integrity"]),
                              *((f"{name}", result) for name, result in check["fts"].items()),
                              ("result", "ok" if check["ok"] else "FAILED")]))
    return blocks


def verify_failure(data: dict[str, Any]) -> StorageError:
    """What `status --verify` raises when the integrity check or an index found a problem."""
    check = data["verify"]
    return StorageError("status --verify found problems: " + "; ".join(
        [f"integrity: {check['integrity']}"] * (check["integrity"] != "ok")
        + [f"{name}: {result}" for name, result in check["fts"].items() if result != "ok"]))


# -- memories -----------------------------------------------------------------------------

def recall_blocks(hits: list[dict[str, Any]]) -> list[Block]:
    if not hits:
        return [Body("No memories found.")]
    blocks: list[Block] = [Body(f"Found {len(hits)} memor{'y' if len(hits) == 1 else 'ies'}:")]
    for hit in hits:
        similarity = f"  ({hit['similarity']:.2f} similarity)" if "similarity" in hit else ""
        # [N] is the memory's number, what `pin`, `update` and `forget` take; never its place in the list
        number = f"[{hit['number']}] " if hit.get("number") is not None else ""
        blocks.append(Heading(f"{number}{hit['namespace']}/{hit['id']}{similarity}  {one_line(hit['summary'], 100)}",
                              2))
        pairs = [("urn", hit["urn"])]
        if "domain" in hit:
            pairs[:0] = [("domain", hit["domain"]), ("tags", ", ".join(hit["tags"]) or "-"),
                         ("tier", hit["tier"]), ("updated", when(hit.get("timestamp", hit.get("updated_at"))))]
        blocks.append(Fields(pairs))
        if "content" in hit:
            blocks.append(Body(hit["content"]))
    return blocks


def capture_blocks(data: dict[str, Any]) -> list[Block]:
    lines = [f"✓ Captured memory: {data['namespace']}/{data['memory_id']}",
             f"  Domain: {data['domain']}", f"  URI: {data['uri']}"]
    if data["warning"]:
        lines.append(f"  Warning: {data['warning']}")
    return [Body("\n".join(lines))]
