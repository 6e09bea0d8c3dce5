"""Output formats for the CLI: one small document model, rendered as text or markdown.

Commands hand over two things: the JSON-ready data (printed as-is for `json` and `yaml`)
and a list of blocks describing how a person should see it (`text`, `markdown`). JSON is
the stable, documented shape; text and markdown are for reading and may change.
"""

from __future__ import annotations

import time

from nmem import jsonlite
from nmem.models import SESSION_REF_CHARS
from nmem.text import ARROW, joined, preview

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

# Plain classes, and `json`, `re` and `datetime` loaded by the formats that use them: every
# command renders through here, and the light path (`light.py`) keeps `dataclasses` (with
# `inspect`, `ast`, `tokenize` behind it) and `typing` out of a `nmem search` process.
FORMATS: tuple[str, ...] = ("text", "json", "yaml", "markdown", "quiet")  # quiet: nothing on stdout
CELL_CHARS = 80
BAR_WIDTH = 24
_URL_PASSWORD = r"(://[^:/@\s]+:)[^@\s]+@"


class Heading:
    __slots__ = ("text", "level")

    def __init__(self, text: str, level: int = 1) -> None:
        self.text = text
        self.level = level


class Table:
    __slots__ = ("headers", "rows")

    def __init__(self, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        self.headers = headers
        self.rows = rows


class Fields:
    """Aligned `key: value` lines."""

    __slots__ = ("pairs",)

    def __init__(self, pairs: Sequence[tuple[str, str]]) -> None:
        self.pairs = pairs


class Bars:
    """Counts with proportional bars (status breakdowns)."""

    __slots__ = ("title", "items")

    def __init__(self, title: str, items: Sequence[tuple[str, int]]) -> None:
        self.title = title
        self.items = items


class Body:
    """Free text, printed as written (record content, the context block)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


Block = Heading | Table | Fields | Bars | Body


# -- cell helpers -------------------------------------------------------------------------

def when(ts: Any) -> str:
    """Epoch seconds as local `YYYY-MM-DD HH:MM`; empty for missing values."""
    if ts is None or ts == "" or isinstance(ts, bool):
        return ""
    try:  # `time`, not `datetime`: loaded with the interpreter; the same local time, datetime's years only
        local = time.localtime(int(ts))
    except (TypeError, ValueError, OverflowError, OSError):
        return str(ts)
    return time.strftime("%Y-%m-%d %H:%M", local) if 1 <= local.tm_year <= 9999 else str(ts)


def one_line(text: Any, size: int = CELL_CHARS) -> str:
    """Whitespace collapsed to single spaces and cut to `size` characters, at a word boundary where
    one is near; a preview's `→ result` (a failure's key line) keeps its place in a narrow cell."""
    line = " ".join(str(text if text is not None else "").split())
    if len(line) > size and ARROW in line:
        subject, _, result = line.partition(ARROW)
        return joined(subject, result, size)
    return preview(line, size)


def shown_ref(record: dict[str, Any]) -> str:
    """A record's id as text tables show it (its `ref`; a session's cut to `s` + 8 characters)."""
    ref = str(record.get("ref") or record.get("id", ""))
    return ref[:1 + SESSION_REF_CHARS] if record.get("kind") == "session" else ref


def duration(seconds: Any) -> str:
    """A span of seconds as `45s`, `12m`, `2h05m` or `3d04h`; empty for None."""
    if seconds is None or isinstance(seconds, bool):
        return ""
    total = max(0, int(seconds))
    if total < 60:
        return f"{total}s"
    minutes, hours, days = total // 60, total // 3600, total // 86400
    if total < 3600:
        return f"{minutes}m"
    if total < 86400:
        return f"{hours}h{minutes % 60:02d}m"
    return f"{days}d{hours % 24:02d}h"


def scalar(value: Any) -> str:
    """A field value as one readable string (structures as compact JSON)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return ", ".join(value)
    if isinstance(value, (dict, list, tuple)):  # jsonlite: json's own encoder without `json` (and `re`)
        return jsonlite.dumps(value, ensure_ascii=False)
    return str(value)


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # unreachable: the loop returns on GB


def mask_secrets(value: Any) -> Any:
    """Passwords in URLs (`postgresql://user:secret@host`) shown as `***`; other values as they are."""
    if isinstance(value, str) and "@" in value:
        import re

        return re.sub(_URL_PASSWORD, r"\1***@", value)
    return value


def record_fields(record: dict[str, Any], skip: Sequence[str] = ()) -> Fields:
    """Every field of a record, times shown as dates, long text kept on one line."""
    pairs: list[tuple[str, str]] = []
    for key, value in record.items():
        if key in skip:
            continue
        shown = when(value) if key == "timestamp" or key.endswith("_at") else scalar(value)
        pairs.append((key, shown))
    return Fields(pairs)


# -- machine formats ----------------------------------------------------------------------

def to_json(data: Any) -> str:
    import json

    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def to_yaml(data: Any) -> str:
    import yaml  # only --format yaml needs it; every other command (and `nmem serve`) starts faster

    return str(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False))


# -- text ---------------------------------------------------------------------------------

def _text_table(table: Table) -> list[str]:
    headers = [h.upper() for h in table.headers]
    rows = [[one_line(cell) for cell in row] for row in table.rows]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = []
    for row in [headers, *rows]:
        padded = [cell.ljust(widths[i]) for i, cell in enumerate(row)]
        lines.append("  ".join(padded).rstrip())
    return lines


def _text_fields(fields: Fields, indent: str = "  ") -> list[str]:
    if not fields.pairs:
        return []
    width = max(len(k) for k, _ in fields.pairs) + 1
    return [f"{indent}{(key + ':').ljust(width)} {value}".rstrip() for key, value in fields.pairs]


def _bar(count: int, top: int) -> str:
    filled = round(BAR_WIDTH * count / top) if top else 0
    return "█" * max(filled, 1 if count else 0)


def _text_bars(bars: Bars) -> list[str]:
    lines = [f"{bars.title}:"]
    if not bars.items:
        return [*lines, "  (none)"]
    label = max(len(k) for k, _ in bars.items)
    number = max(len(str(v)) for _, v in bars.items)
    top = max(v for _, v in bars.items)
    for key, value in bars.items:
        lines.append(f"  {key.ljust(label)}  {str(value).rjust(number)} {_bar(value, top)}".rstrip())
    return lines


def render_text(blocks: Sequence[Block]) -> str:
    parts: list[list[str]] = []
    for block in blocks:
        if isinstance(block, Heading):
            if block.level == 1:
                parts.append([block.text, "═" * len(block.text)])
            else:
                parts.append([block.text])
        elif isinstance(block, Table):
            parts.append(_text_table(block))
        elif isinstance(block, Fields):
            parts.append(_text_fields(block))
        elif isinstance(block, Bars):
            parts.append(_text_bars(block))
        else:
            parts.append(block.text.rstrip("\n").splitlines())
    # A level-2 heading sits right above what it introduces; everything else is spaced.
    out: list[str] = []
    for i, lines in enumerate(parts):
        previous = blocks[i - 1] if i else None
        if i and not (isinstance(previous, Heading) and previous.level > 1):
            out.append("")
        out.extend(lines)
    return "\n".join(out) + "\n" if out else ""


# -- markdown -----------------------------------------------------------------------------

def _md_cell(text: Any) -> str:
    return one_line(text, 200).replace("|", "\\|")


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(_md_cell(h) for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines.extend("| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows)
    return lines


def render_markdown(blocks: Sequence[Block]) -> str:
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            parts.append("#" * min(block.level, 6) + " " + one_line(block.text, 200))
        elif isinstance(block, Table):
            parts.append("\n".join(_md_table(block.headers, block.rows)))
        elif isinstance(block, Fields):
            parts.append("\n".join(f"- **{key}**: {_md_cell(value)}" for key, value in block.pairs))
        elif isinstance(block, Bars):
            if block.items:
                parts.append("\n".join(_md_table((block.title, "count"), [(k, str(v)) for k, v in block.items])))
            else:
                parts.append(f"{block.title}: none")
        else:
            parts.append(block.text.rstrip("\n"))
    return "\n\n".join(parts) + "\n" if parts else ""


def render(fmt: str, data: Any, blocks: Sequence[Block]) -> str:
    """The whole output of a command in one format."""
    if fmt == "quiet":
        return ""
    if fmt == "json":
        return to_json(data)
    if fmt == "yaml":
        return to_yaml(data)
    if fmt == "markdown":
        return render_markdown(blocks)
    return render_text(blocks)
