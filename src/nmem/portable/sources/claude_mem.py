"""Import from a claude-mem database (`~/.claude-mem/claude-mem.db`, SQLite).

claude-mem keeps, per Claude Code session (`sdk_sessions`), the user's prompts
(`user_prompts`), observations an LLM wrote about the work (`observations`: a type, title,
subtitle, narrative, facts, concepts, files read and modified) and session summaries
(`session_summaries`: request, investigated, learned, completed, next steps, notes).

What they become in nmem:
- each observation is a curated memory of the session's project (`project:<name>`), since
  it is already a written-up fact, not a raw event: `decision` → decisions, `bugfix` →
  gotchas (what broke and why), `discovery` → learnings, `feature`, `refactor` and `change`
  → progress, any other type → context. Its title is the summary; subtitle, narrative, facts
  and files make the content; `claude-mem`, the type and the concepts are its tags; its
  source is the session. Its uid is derived from the observation, so importing again finds
  the memory it made the first time.
- each session becomes a trail session under its Claude Code session id (the id nmem's own
  hooks use), with its user prompts as prompts and its latest summary as the session
  summary. A session nmem already holds keeps its own times and summary; prompts it
  captured itself are recognised by their text.

Column names changed across claude-mem versions (`sdk_session_id` became
`memory_session_id`, `claude_session_id` became `content_session_id`; titles arrived in
its eighth migration); both spellings are read. Times are JavaScript milliseconds.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nmem.capture.privacy import scrub
from nmem.capture.recorder import PROMPT_CHARS
from nmem.errors import InvalidArgument, NmemError, StorageError
from nmem.models import Memory, Session, preview
from nmem.portable.records import Batch, TrailPrompt, TrailSession, derived_uid

NAMESPACE_BY_TYPE = {"decision": "decisions", "bugfix": "gotchas", "discovery": "learnings",
                     "feature": "progress", "refactor": "progress", "change": "progress"}
OTHER_NAMESPACE = "context"
SUMMARY_FIELDS = (("request", "Request"), ("investigated", "Investigated"), ("learned", "Learned"),
                  ("completed", "Completed"), ("next_steps", "Next steps"), ("notes", "Notes"))


def default_path() -> Path:
    return Path(os.environ.get("CLAUDE_MEM_DATA_DIR") or Path.home() / ".claude-mem").expanduser() / "claude-mem.db"


def _seconds(value: Any) -> int | None:
    if value is None:
        return None
    number = int(value)
    return number // 1000 if number > 100_000_000_000 else number


def _millis(value: Any) -> int:
    number = int(value or 0)
    return number if number > 100_000_000_000 else number * 1000


def _list(value: Any) -> list[str]:
    """claude-mem stores lists as JSON arrays in text columns (older rows: comma-separated)."""
    if not value:
        return []
    try:
        parsed = json.loads(value)
    except (TypeError, ValueError):
        parsed = str(value).split(",")
    except RecursionError:  # a list nested past the parser's depth: nothing of it is a plain item
        return []
    if isinstance(parsed, str):
        parsed = [parsed]
    if not isinstance(parsed, list):
        return []
    items = (str(item) for item in parsed if not isinstance(item, (list, dict)))  # a nested one is no item
    return [" ".join(item.split()) for item in items if item.strip()]


class ClaudeMemDb:
    """A claude-mem database, opened read-only."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            what = "is not a regular file" if path.exists() else "does not exist"
            raise InvalidArgument(f"no claude-mem database at {path}: it {what}")
        escaped = str(path.resolve()).replace("%", "%25").replace("?", "%3f").replace("#", "%23")
        try:
            self.conn = sqlite3.connect(f"file:{escaped}?mode=ro", uri=True)
            self.conn.row_factory = sqlite3.Row
            tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            raise InvalidArgument(f"{path} is not a claude-mem database: {exc}") from None
        if not {"sdk_sessions", "observations"} <= tables:
            raise InvalidArgument(f"{path} is not a claude-mem database (no sdk_sessions and observations tables)")
        self.path = path
        self.tables = tables
        self.columns = {t: {r[1] for r in self.conn.execute(f"PRAGMA table_info({t})")} for t in tables
                        if t in ("sdk_sessions", "observations", "session_summaries", "user_prompts")}

    def close(self) -> None:
        self.conn.close()

    def _col(self, table: str, *names: str) -> str:
        """The first of `names` the table has (an older spelling after the newer), else NULL."""
        return next((n for n in names if n in self.columns.get(table, ())), "NULL")

    def rows(self, table: str, wanted: dict[str, tuple[str, ...]], order: str) -> list[sqlite3.Row]:
        if table not in self.tables:
            return []
        select = ", ".join(f"{self._col(table, *names)} AS {alias}" for alias, names in wanted.items())
        try:
            return self.conn.execute(f"SELECT {select} FROM {table} ORDER BY {order}").fetchall()
        except sqlite3.DatabaseError as exc:
            raise StorageError(f"cannot read {table} from {self.path}: {exc}") from None


def read(path: Path, check_memory: Callable[[Memory], Memory]) -> tuple[Batch, list[str]]:
    """Everything worth keeping in a claude-mem database, and a note per record left out."""
    db = ClaudeMemDb(path)
    try:
        return _read(db, check_memory)
    finally:
        db.close()


def _read(db: ClaudeMemDb, check_memory: Callable[[Memory], Memory]) -> tuple[Batch, list[str]]:
    batch, skipped = Batch(), []
    sessions = db.rows("sdk_sessions", {
        "content_id": ("content_session_id", "claude_session_id"),
        "memory_id": ("memory_session_id", "sdk_session_id"),
        "project": ("project",), "started": ("started_at_epoch",), "completed": ("completed_at_epoch",),
    }, "id")
    # Observations and summaries name the SDK (memory) session; prompts the Claude Code one.
    content_id = {str(r["memory_id"]): str(r["content_id"]) for r in sessions if r["memory_id"]}
    summaries: dict[str, sqlite3.Row] = {}
    for row in db.rows("session_summaries", {
            "memory_id": ("memory_session_id", "sdk_session_id"), "created": ("created_at_epoch",),
            "files_edited": ("files_edited",), **{name: (name,) for name, _ in SUMMARY_FIELDS}},
            "created_at_epoch, id"):
        summaries[str(row["memory_id"])] = row  # the latest wins
    prompts: dict[str, list[sqlite3.Row]] = {}
    for row in db.rows("user_prompts", {
            "content_id": ("content_session_id", "claude_session_id"), "number": ("prompt_number",),
            "text": ("prompt_text",), "created": ("created_at_epoch",)}, "created_at_epoch, id"):
        prompts.setdefault(str(row["content_id"]), []).append(row)

    for row in db.rows("observations", {
            "id": ("id",), "memory_id": ("memory_session_id", "sdk_session_id"), "project": ("project",),
            "type": ("type",), "title": ("title",), "subtitle": ("subtitle",), "narrative": ("narrative",),
            "text": ("text",), "facts": ("facts",), "concepts": ("concepts",), "files_read": ("files_read",),
            "files_modified": ("files_modified",), "created": ("created_at_epoch",)}, "created_at_epoch, id"):
        memory = _memory(row, content_id.get(str(row["memory_id"]), str(row["memory_id"])))
        if memory is None:
            skipped.append(f"observation {row['id']}: no text")
            continue
        try:
            batch.memories.append(check_memory(memory))
        except NmemError as exc:
            skipped.append(f"observation {row['id']}: {exc.message}")

    for row in sessions:
        if not row["content_id"] or row["started"] is None:
            continue
        sid = str(row["content_id"])
        summary = summaries.get(str(row["memory_id"]))
        ended = _seconds(row["completed"]) or (_seconds(summary["created"]) if summary is not None else None)
        trail = TrailSession(Session(sid, str(row["project"]), _seconds(row["started"]) or 0, ended, None,
                                     _summary(summary) if summary is not None else None), fill_only=True)
        for seq, prompt in enumerate(prompts.get(sid, []), start=1):
            text = scrub(str(prompt["text"] or "")).strip()[:PROMPT_CHARS]
            if text:
                trail.prompts.append(TrailPrompt(seq, _seconds(prompt["created"]) or 0, "user", text))
        batch.sessions.append(trail)
    return batch, skipped


def _memory(row: sqlite3.Row, session_id: str) -> Memory | None:
    kind = str(row["type"] or "").strip().lower()
    narrative = str(row["narrative"] or row["text"] or "").strip()
    title = " ".join(str(row["title"] or "").split()) or (narrative.splitlines()[0] if narrative else "")
    facts = _list(row["facts"])
    parts = [p for p in (str(row["subtitle"] or "").strip(), narrative) if p]
    if facts:
        parts.append("Facts:\n" + "\n".join(f"- {fact}" for fact in facts))
    files = [(label, _list(row[column])) for label, column in (("Files read", "files_read"),
                                                                ("Files modified", "files_modified"))]
    parts.extend(f"{label}: {', '.join(paths)}" for label, paths in files if paths)
    content = "\n\n".join(parts)
    if not title and not content:
        return None
    created_ms = _millis(row["created"])
    seed = "\x00".join(("claude-mem", str(row["memory_id"]), kind, title, narrative, str(created_ms)))
    concepts = _list(row["concepts"])
    return Memory(
        id=derived_uid(seed, created_ms), domain=f"project:{row['project']}",
        namespace=NAMESPACE_BY_TYPE.get(kind, OTHER_NAMESPACE), summary=preview(title, 100),
        content=content or title, tags=list(dict.fromkeys(["claude-mem", *([kind] if kind else []), *concepts])),
        source=f"session:{session_id}", created_at=created_ms // 1000, updated_at=created_ms // 1000,
    )


def _summary(row: sqlite3.Row) -> dict[str, Any]:
    """A claude-mem session summary in the shape of nmem's own (docs/json.md, Records)."""
    request = " ".join(str(row["request"] or "").split())
    lines = [f"{label}: {' '.join(str(row[name]).split())}" for name, label in SUMMARY_FIELDS if row[name]]
    return {"intent": request, "intents": [request] if request else [], "files_changed": _list(row["files_edited"]),
            "commands": [], "errors": [], "commits": [], "text": "\n".join(lines)}
