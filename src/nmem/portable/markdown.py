"""Markdown: one readable document that imports back losslessly.

    <!-- nmem-export version=1 -->
    # nmem export

    <!-- nmem:memory -->
    ## Use PostgreSQL for the data layer

    ```yaml
    uid: 01JH…
    domain: project:shop
    created_at: 2026-05-01T09:00:00Z
    …every field but the content…
    ```

    The content, as written (markdown).

    <!-- nmem:session -->
    ### Session s1a2b3c4d · shop · 2026-05-01 09:00 UTC

    ```jsonl
    {"kind": "session", …}
    {"kind": "prompt", …}
    ```

Times are ISO 8601 in UTC (`2026-05-01T09:00:00Z`), in the memories' YAML and the sessions'
lines alike, where the other formats keep Unix seconds; both read back the same.
Each memory is a section: an HTML comment (invisible once rendered) opens it, a heading
shows its summary, a YAML block holds its fields and the rest, up to the next marker, is its
content. A content line that itself begins like a marker (`<!-- nmem`) is written with one
more leading backslash and read back without it. Trail sessions (with `--trail`) follow as
JSON Lines blocks, one per session. Headings are for people: reading ignores them, except
that a memory section written by hand, without a `summary` field, takes its heading as one.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from nmem.errors import InvalidArgument
from nmem.portable import jsonl
from nmem.portable.document import dates_as_text, yaml_dump, yaml_load
from nmem.portable.export import Export
from nmem.portable.limits import InputLimits, too_deep
from nmem.portable.records import FORMAT_VERSION, SKIPPED

HEADER = f"<!-- nmem-export version={FORMAT_VERSION} -->"
_HEADER = re.compile(r"^<!-- nmem-export version=(\S+) -->$")
MEMORY = "<!-- nmem:memory -->"
SESSION = "<!-- nmem:session -->"
_ESCAPED = re.compile(r"^\\*<!-- nmem")
_UNESCAPE = re.compile(r"^\\+<!-- nmem")


def _escape(line: str) -> str:
    return "\\" + line if _ESCAPED.match(line) else line


def _unescape(line: str) -> str:
    return line[1:] if _UNESCAPE.match(line) else line


def _heading(text: str) -> str:
    return " ".join(text.split())[:120]


DATE_FIELDS = frozenset(("created_at", "updated_at", "accessed_at", "deleted_at", "started_at", "ended_at",
                         "timestamp"))


def iso_dates(record: dict[str, Any]) -> dict[str, Any]:
    """The record with its times (Unix seconds) written as ISO 8601 in UTC, for people to read."""
    return {k: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(v))
            if k in DATE_FIELDS and isinstance(v, int) and not isinstance(v, bool) else v
            for k, v in record.items()}


def _memory_section(record: dict[str, Any]) -> str:
    fields = iso_dates({k: v for k, v in record.items() if k != "content"})
    title = record["summary"] if record["deleted_at"] is None else f"(forgotten) {record['uid']}"
    meta = str(yaml_dump(fields))
    body = "\n".join(_escape(line) for line in record["content"].split("\n"))
    parts = [MEMORY, f"## {_heading(title) or record['uid']}", "", "```yaml", meta.rstrip("\n"), "```", ""]
    if body:
        parts += [body, ""]
    return "\n".join(parts) + "\n"


def write(export: Export, out: TextIO, progress: Callable[[int], None]) -> None:
    out.write(f"{HEADER}\n# nmem export\n\n")
    for record in export.memories():
        out.write(_memory_section(record))
    for rows in export.sessions():
        session = rows.session
        started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(session["started_at"]))
        out.write(f"{SESSION}\n### Session s{_heading(session['id'])[:8]} · {_heading(session['project'])} · "
                  f"{started}\n\n```jsonl\n")
        for kind, record in rows.records():
            out.write(jsonl.line(kind, iso_dates(record)))
        out.write("```\n\n")
        progress(1)


def read(text: str, limits: InputLimits) -> Iterator[tuple[str, str, Any]]:
    if text.lstrip().startswith(HEADER + "\r\n"):
        text = text.replace("\r\n", "\n")  # the whole file went through a CRLF conversion
    lines = text.split("\n")
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    match = _HEADER.match(lines[first].strip()) if first is not None else None
    if first is None or match is None:
        raise InvalidArgument(f"not an nmem markdown export: its first line must be {HEADER}")
    if match.group(1) != str(FORMAT_VERSION):
        raise InvalidArgument(f"nmem export version {match.group(1)} is not one this nmem reads "
                              f"(it reads version {FORMAT_VERSION})")
    kind, start = "", first + 1
    section: list[str] = []
    for number, line in enumerate(lines[first + 1:], start=first + 2):
        if line in (MEMORY, SESSION):
            if kind:
                yield from _section(kind, section, start, limits)
            kind, start, section = ("memory" if line == MEMORY else "session"), number, []
        elif kind:
            section.append(line)
        elif line.strip() and not line.startswith("#"):
            raise InvalidArgument(f"line {number}: text before the first memory or session")
    if kind:
        yield from _section(kind, section, start, limits)


def _fence(lines: list[str], start: int, info: str) -> tuple[list[str], list[str]]:
    """The lines of the section's fenced block (```info … ```) and the lines after it."""
    i = 0
    while i < len(lines) and (not lines[i].strip() or lines[i].startswith("#")):
        i += 1
    if i >= len(lines) or lines[i].strip() != f"```{info}":
        raise InvalidArgument(f"line {start + i + 1}: expected a ```{info} block after the section's heading")
    try:
        end = lines.index("```", i + 1)
    except ValueError:
        raise InvalidArgument(f"line {start + i + 1}: the ```{info} block is never closed") from None
    return lines[i + 1:end], lines[end + 1:]


def _section(kind: str, lines: list[str], start: int, limits: InputLimits) -> Iterator[tuple[str, str, Any]]:
    where = f"line {start}"
    if kind == "session":
        block, rest = _fence(lines, start, "jsonl")
        if any(line.strip() for line in rest):
            raise InvalidArgument(f"{where}: text after a session's block")
        for sub_kind, sub_where, data in jsonl.read(block, limits):
            yield sub_kind, f"{where} ({sub_where} of its block)", data
        return
    import yaml

    block, rest = _fence(lines, start, "yaml")
    try:
        fields = yaml_load("\n".join(block), limits)
    except yaml.YAMLError as exc:
        problem = " ".join(str(exc).split())
        raise InvalidArgument(f"{where}: the memory's YAML block does not parse: {problem}") from None
    if not isinstance(fields, dict):
        raise InvalidArgument(f"{where}: the memory's YAML block must be a mapping of fields")
    if too_deep(fields, limits.max_depth):
        yield SKIPPED, where, f"nested deeper than import.max_depth ({limits.max_depth})"
        return
    if "content" in fields:
        raise InvalidArgument(f"{where}: the content goes below the YAML block, not in it")
    content = "\n".join(_unescape(line) for line in rest).strip()
    before_block = lines[:len(lines) - len(rest) - len(block) - 2]
    heading = next((line.lstrip("#").strip() for line in before_block if line.startswith("#")), "")
    if heading and "summary" not in fields:  # a section written by hand: its heading is its summary
        fields["summary"] = heading
    yield "memory", where, {**dates_as_text(fields), "content": content}
