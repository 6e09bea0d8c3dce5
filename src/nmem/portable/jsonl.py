"""JSON Lines: one record a line, each with its `kind`, after a header line. The format for
big exports: it is written and read a record at a time."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TextIO

from nmem.errors import InvalidArgument
from nmem.portable.export import Export
from nmem.portable.limits import InputLimits, Skipped, json_line
from nmem.portable.records import FORMAT_VERSION, SKIPPED, check_version


def line(kind: str, record: dict[str, Any]) -> str:
    return json.dumps({"kind": kind, **record}, ensure_ascii=False) + "\n"


def write(export: Export, out: TextIO, progress: Callable[[int], None]) -> None:
    out.write(json.dumps({"kind": "nmem_export", "version": FORMAT_VERSION}) + "\n")
    for memory in export.memories():
        out.write(line("memory", memory))
    for rows in export.sessions():
        for kind, record in rows.records():
            out.write(line(kind, record))
        progress(1)


def read(lines: Iterable[str], limits: InputLimits) -> Iterator[tuple[str, str, Any]]:
    """The records of JSON Lines; a line too long or too deep comes as a (SKIPPED, where, reason).
    A line repeated word for word gives the same object again, parsed once."""
    seen: dict[str, tuple[str, Any]] = {}
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        at = f"line {number}"
        if text in seen:
            yield seen[text][0], at, seen[text][1]
            continue
        try:
            data = json_line(text, limits)
        except json.JSONDecodeError as exc:
            raise InvalidArgument(f"{at}: not a JSON object ({exc.msg})") from None
        if isinstance(data, Skipped):
            yield SKIPPED, at, data.reason
            continue
        if not isinstance(data, dict):
            raise InvalidArgument(f"{at}: expected a JSON object, got {type(data).__name__}")
        kind = data.pop("kind", "memory")
        if kind == "nmem_export":
            check_version(data.get("version"), at)
            continue
        seen[text] = (kind, data)
        yield kind, at, data
