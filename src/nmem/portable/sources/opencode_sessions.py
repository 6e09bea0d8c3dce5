"""Backfill from OpenCode's stored sessions, as if nmem's OpenCode plugin had seen them.

Where they are (anomalyco/opencode, formerly sst/opencode: packages/opencode/src/storage/
json-migration.ts, session/message-v2.ts), under OpenCode's data directory
(`$XDG_DATA_HOME/opencode`, by default `~/.local/share/opencode`):
- `opencode.db` (current versions): SQLite tables `session` (`id`, `parent_id`, `directory`,
  `time_created`), `message` and `part` (`id`, `session_id`, `message_id`, `time_created`, and
  `data`: the JSON below without its ids). Read only, never written.
- `storage/` (versions before the database; left in place after the migration): JSON files
  `session/<project id>/<session id>.json` (`id`, `directory`, `parentID`, `time`),
  `message/<session id>/<message id>.json` and `part/<message id>/<part id>.json`.
The database is read when there is one, else the JSON files.

A message is `user` or `assistant` (`time.created`, `time.completed` once the reply is done);
its parts: `text` (`text`, `synthetic` for the ones OpenCode wrote itself, `time.end` once
complete), `reasoning`, `tool` (`tool`, `callID`, `state`: `status` completed with `input`,
`output`, `metadata`, or error with `error`), and others (files, steps, snapshots, patches)
not recorded. A session started by the task tool (`parentID`) is a subagent's: its work is
recorded under the top session, with its own id as `agent_id`.

Tool calls go through OpenCode's hook adapter (`nmem.capture.opencode`), so the same
extractors as the plugin's; a part is recorded once finished.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nmem.capture import agents
from nmem.capture import events as ev
from nmem.capture.opencode import AGENT
from nmem.capture.transcript import REASONING_CHARS, _epoch
from nmem.errors import InvalidArgument
from nmem.portable.limits import InputLimits, Skipped, decode, json_document, json_line, read_file
from nmem.portable.sources.snapshots import SessionRead

DATABASE = "opencode.db"


def default_root() -> Path:
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "opencode"


def find_sources(root: Path) -> list[Path]:
    """What to read under an OpenCode data directory: its database, else its storage directory;
    or the database file or storage directory given."""
    if root.is_file():
        return [root]
    if (root / DATABASE).is_file():
        return [root / DATABASE]
    for storage in (root / "storage", root):
        if (storage / "session").is_dir():
            return [storage]
    return []


class _Stored:
    """Sessions, messages and parts, from either store, as (id, fields) with the JSON parsed."""

    def __init__(self, limits: InputLimits) -> None:
        self.limits = limits
        self.skipped: list[str] = []

    def _json(self, text: str, where: str) -> dict[str, Any] | None:
        try:
            value = json_line(text, self.limits)
        except ValueError:
            self.skipped.append(f"{where}: not JSON; skipped")
            return None
        if isinstance(value, Skipped):
            self.skipped.append(f"{where}: {value.reason}; skipped")
            return None
        if not isinstance(value, dict):
            self.skipped.append(f"{where}: not an object; skipped")
            return None
        return value


class _Files(_Stored):
    def __init__(self, storage: Path, limits: InputLimits) -> None:
        super().__init__(limits)
        self.storage = storage

    def _file(self, path: Path) -> dict[str, Any] | None:
        try:
            text = decode(read_file(str(path), self.limits), str(path))
            value = json_document(text, self.limits)
        except InvalidArgument as exc:
            self.skipped.append(f"{exc.message}; skipped")
            return None
        except ValueError:
            self.skipped.append(f"{path}: not JSON; skipped")
            return None
        if not isinstance(value, dict):
            self.skipped.append(f"{path}: not an object; skipped")
            return None
        return value

    def sessions(self) -> list[dict[str, Any]]:
        found = []
        for path in sorted((self.storage / "session").glob("*/*.json")):
            data = self._file(path)
            if data is not None:
                found.append({**data, "id": path.stem})
        return found

    def messages(self, session_id: str) -> list[dict[str, Any]]:
        found = []
        for path in sorted((self.storage / "message" / session_id).glob("*.json")):
            data = self._file(path)
            if data is not None:
                found.append({**data, "id": path.stem})
        return found

    def parts(self, message_id: str) -> list[dict[str, Any]]:
        found = []
        for path in sorted((self.storage / "part" / message_id).glob("*.json")):
            data = self._file(path)
            if data is not None:
                found.append({**data, "id": path.stem})
        return found


class _Database(_Stored):
    def __init__(self, path: Path, limits: InputLimits) -> None:
        super().__init__(limits)
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise InvalidArgument(f"{path} is not a regular file (a FIFO, device or directory is never read)")
        self.db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        self._parts: dict[str, list[dict[str, Any]]] = {}

    def sessions(self) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT id, parent_id, directory, time_created FROM session "
                               "ORDER BY time_created, id").fetchall()
        return [{"id": r[0], "parentID": r[1], "directory": r[2], "time": {"created": r[3]}} for r in rows]

    def messages(self, session_id: str) -> list[dict[str, Any]]:
        found = []
        for mid, data in self.db.execute("SELECT id, data FROM message WHERE session_id = ? "
                                         "ORDER BY time_created, id", (session_id,)):
            value = self._json(str(data), f"message {mid}")
            if value is not None:
                found.append({**value, "id": mid})
        self._parts = {}
        for pid, mid, data in self.db.execute("SELECT id, message_id, data FROM part WHERE session_id = ? "
                                              "ORDER BY id", (session_id,)):
            value = self._json(str(data), f"part {pid}")
            if value is not None:
                self._parts.setdefault(mid, []).append({**value, "id": pid})
        return found

    def parts(self, message_id: str) -> list[dict[str, Any]]:
        return self._parts.get(message_id, [])

    def close(self) -> None:
        self.db.close()


def _top(session: dict[str, Any], by_id: dict[str, dict[str, Any]]) -> dict[str, Any]:
    seen = set()
    while isinstance(session.get("parentID"), str) and session["parentID"] in by_id and session["id"] not in seen:
        seen.add(session["id"])
        session = by_id[session["parentID"]]
    return session


def stored_sessions(source: Path, limits: InputLimits) -> Iterator[SessionRead]:
    store: _Files | _Database = _Database(source, limits) if source.is_file() else _Files(source, limits)
    try:
        sessions = store.sessions()
        by_id = {s["id"]: s for s in sessions}
        # the top sessions first, so a subagent's work joins a session already recorded
        for session in sorted(sessions, key=lambda s: _top(s, by_id) is not s):
            top = _top(session, by_id)
            cwd = top.get("directory") or session.get("directory")
            store.skipped = []
            if not isinstance(cwd, str) or not cwd:
                yield SessionRead(session_id=session["id"], cwd="", where=f"{source}: session {session['id']}",
                                  skipped=["no directory; not imported"])
                continue
            agent_id = session["id"] if top is not session else None
            read = SessionRead(session_id=top["id"], cwd=cwd, where=f"{source}: session {session['id']}",
                               final=agent_id is None)
            for message in store.messages(session["id"]):
                _message(read, message, store.parts(message["id"]), agent_id)
            read.skipped = list(store.skipped)
            yield read
    except sqlite3.Error as exc:
        raise InvalidArgument(f"not an OpenCode database ({exc})") from None
    finally:
        if isinstance(store, _Database):
            store.close()


def _message(read: SessionRead, message: dict[str, Any], parts: list[dict[str, Any]], agent_id: str | None) -> None:
    times = _dict(message.get("time"))
    ts = _epoch(times.get("created"), 0)
    base: dict[str, Any] = {"session_id": read.session_id, "cwd": read.cwd}
    if message.get("role") == "user":
        typed = "\n".join(str(p["text"]) for p in parts if p.get("type") == "text" and isinstance(p.get("text"), str)
                          and not p.get("synthetic") and not p.get("ignored")).strip()
        if typed:
            said = agents.parse({**base, "hook_event_name": "chat.message", "prompt": typed}, AGENT, now=ts)
            said.agent_id = agent_id
            read.add(str(message["id"]), said)
        return
    if message.get("role") != "assistant":
        return
    completed = times.get("completed") is not None
    for part in parts:
        kind = part.get("type")
        part_times = _dict(part.get("time"))
        done = completed or part_times.get("end") is not None
        at = _epoch(part_times.get("end") or part_times.get("start"), ts)
        event: ev.HookEvent | None = None
        if kind in ("text", "reasoning") and done and not part.get("synthetic"):
            text = str(part.get("text") or "").strip()
            if text:
                event = ev.HookEvent(kind=ev.REPLY if kind == "text" else ev.REASONING, hook_event_name="Transcript",
                                     assistant_message=text if kind == "text" else text[:REASONING_CHARS],
                                     timestamp=at, agent=AGENT, **base)
        elif kind == "tool":
            event = _tool_event(part, base, ts)
        if event is not None:
            event.agent_id = agent_id
            read.add(str(part["id"]), event)


def _tool_event(part: dict[str, Any], base: dict[str, Any], ts: int) -> ev.HookEvent | None:
    state = _dict(part.get("state"))
    if state.get("status") not in ("completed", "error"):
        return None
    times = _dict(state.get("time"))
    failed = state.get("status") == "error"
    event = agents.parse({**base, "hook_event_name": "tool.execute.after", "tool": str(part.get("tool") or ""),
                          "args": state.get("input"), "title": state.get("title"),
                          "output": state.get("error") if failed else state.get("output"),
                          "metadata": state.get("metadata")}, AGENT, now=_epoch(times.get("end"), ts))
    if failed:
        event.kind = ev.TOOL_FAILURE
        event.hook_event_name = "PostToolUseFailure"
        event.error = str(state.get("error") or "failed")
    return event


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def reader(limits: InputLimits) -> Any:
    return lambda source: stored_sessions(Path(source), limits)
