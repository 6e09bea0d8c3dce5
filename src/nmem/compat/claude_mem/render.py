"""claude-mem's answers as the markdown its tools return, and its worker's response bodies.

claude-mem's MCP tools answer with one text block: a count line, then a table per day (ID,
time, type, title). The ids are nmem's (`#42` an observation, `s1a2b3c4` a session, `p7` a
prompt, a ULID a memory) so every row can be opened with `get_observations` or `nmem get`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from nmem.compat.claude_mem.operations import OPERATIONS

HEADER = "| ID | Time | T | Title |\n|----|------|---|-------|"


def _ref(row: dict[str, Any]) -> str:
    kind = row.get("kind")
    if kind == "session":
        return f"s{str(row['id'])[:8]}"
    if kind == "prompt":
        return f"p{row['id']}"
    if kind == "memory":
        return str(row["id"])
    return f"#{row['id']}"


def _cell(text: Any) -> str:
    return " ".join(str(text or "").split()).replace("|", "\\|")


def _title(row: dict[str, Any]) -> str:
    kind = row.get("kind")
    if kind == "session":
        return row.get("request") or f"Session {str(row['id'])[:8]}"
    if kind == "prompt":
        return row.get("prompt_text") or ""
    return row.get("title") or "Untitled"


def _icon(row: dict[str, Any]) -> str:
    """The T column: an observation's claude-mem type, `session`, `prompt` for what the user
    typed, and what the agent wrote by its label (`reply`, `thinking`, `↳ Explore`)."""
    if row.get("kind") == "prompt":
        return "prompt" if row.get("role", "user") == "user" else str(row.get("label") or "reply")
    return "session" if row.get("kind") == "session" else str(row.get("type") or "")


def _when(row: dict[str, Any]) -> datetime:
    return datetime.fromtimestamp(int(row["created_at_epoch"]) // 1000, UTC)


def _line(row: dict[str, Any], mark: str = "") -> str:
    return f"| {mark}{_ref(row)} | {_when(row):%H:%M} | {_icon(row)} | {_cell(_title(row))} |"


def _table(items: list[dict[str, Any]], anchor: Any = None) -> list[str]:
    lines: list[str] = []
    day = None
    for row in items:
        this = f"{_when(row):%b %d, %Y}"
        if this != day:
            if day is not None:
                lines.append("")
            lines += [f"### {this}", "", HEADER]
            day = this
        lines.append(_line(row, "→ " if anchor is not None and row is anchor else ""))
    return lines


def _full(items: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for row in items:
        what = row.get("type") or row.get("kind")
        lines += [f"## {_ref(row)} {_cell(_title(row))}",
                  f"*{what} · {row.get('project', '')} · {_when(row):%Y-%m-%d %H:%M} UTC*",
                  "", str(row.get("text") or row.get("prompt_text") or row.get("notes") or _title(row)), ""]
    return lines


def results_text(answer: dict[str, Any]) -> str:
    items = [*answer.get("observations", []), *answer.get("sessions", []), *answer.get("prompts", [])]
    query = answer.get("query") or ""
    if not items:
        missing = answer.get("missing")
        if missing:
            return "Not found: " + ", ".join(missing)
        return f'No results found matching "{query}"' if query else "No results found"
    counts = (f"{len(answer.get('observations', []))} obs, {len(answer.get('sessions', []))} sessions, "
              f"{len(answer.get('prompts', []))} prompts")
    head = f'Found {len(items)} result(s) matching "{query}" ({counts})' if query else \
        f"Found {len(items)} result(s) ({counts})"
    body = _full(items) if answer.get("format", "full") != "index" else _table(items)
    return "\n".join([head, "", *body]).rstrip() + "\n"


def timeline_text(answer: dict[str, Any]) -> str:
    if answer.get("mode") == "interactive":
        return results_text(answer)
    anchor = answer.get("anchor")
    if anchor is None:
        query = answer.get("query") or ""
        return f'No observation matches "{query}"\n'
    head = f"# Timeline around {_ref(anchor)}: {_cell(_title(anchor))}"
    items = answer["observations"]
    body = _full(items) if answer.get("format") != "index" else _table(items, anchor)
    return "\n".join([head, "", *body]).rstrip() + "\n"


def recent_text(answer: dict[str, Any]) -> str:
    project = answer.get("project") or "all projects"
    sessions = answer.get("sessions", [])
    items = answer.get("observations", [])
    if not items:
        return f'# Recent Session Context\n\nNo recent activity found for project "{project}".\n'
    lines = ["# Recent Session Context", "",
             f"Showing the last {len(items)} item(s), from {len(sessions)} session(s), for **{project}**:", ""]
    for row in sessions:
        lines += [f"## {_ref(row)} ({row.get('status')}) {_when(row):%Y-%m-%d %H:%M} UTC",
                  f"**Request:** {_cell(row.get('request') or '-')}"]
        if row.get("completed"):
            lines.append(f"**Completed:** {_cell(row['completed'])}")
        if row.get("files_edited"):
            lines.append("**Files edited:** " + ", ".join(row["files_edited"]))
        if row.get("observations"):
            lines += ["", HEADER, *(_line(o) for o in row["observations"])]
        lines.append("")
    memories = [i for i in items if i.get("kind") == "memory"]
    if memories:
        lines += ["## Memories", "", HEADER, *(_line(m) for m in memories), ""]
    return "\n".join(lines).rstrip() + "\n"


RENDERERS = {"results": results_text, "timeline": timeline_text, "recent": recent_text}


def text(name: str, answer: dict[str, Any]) -> str:
    """The markdown claude-mem's tool `name` would show for `answer`."""
    return RENDERERS[OPERATIONS[name].render](answer)


def worker_body(name: str, answer: dict[str, Any]) -> dict[str, Any]:
    """claude-mem's worker response: the JSON answer for `format=json`, else its MCP-shaped
    `{"content": [{"type": "text", "text": …}]}`."""
    if answer.get("format") == "json" or name == "get_observations":
        return answer
    return {"content": [{"type": "text", "text": text(name, answer)}]}
