"""Moving memory between databases, machines and tools: export, import and backup.

- `records`: the export's record shapes (docs/json.md, "nmem export") and their validation;
- `export` reads them from a database, `importer` writes them into one, idempotently;
- `jsonl`, `document` (JSON and YAML) and `markdown` write and read the four file formats;
- `claude_mem` and `mcp_memory` read other tools' memories into the same records;
- `backup` copies the SQLite file through SQLite's online backup API, and restores one.
"""

from __future__ import annotations

from pathlib import PurePath

from nmem.errors import InvalidArgument

FORMATS: tuple[str, ...] = ("jsonl", "json", "yaml", "markdown")
EXTENSIONS: dict[str, str] = {
    ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".yaml": "yaml", ".yml": "yaml",
    ".md": "markdown", ".markdown": "markdown",
}


def format_for(path: str | None, given: str | None, *, default: str | None = None) -> str:
    """The file format: the one given, else the one the file's extension names, else `default`."""
    if given:
        return given
    if path and path != "-":
        found = EXTENSIONS.get(PurePath(path).suffix.lower())
        if found:
            return found
    if default:
        return default
    where = f"{path!r}" if path and path != "-" else "standard input"
    raise InvalidArgument(f"cannot tell the format of {where}: pass --format ({', '.join(FORMATS)})")
