"""Backfill from existing Claude Code transcripts, as if the hooks had seen them.

A session is its transcript file (`<session id>.jsonl`) plus its subagents' files
(`<session id>/subagents/agent-*.jsonl`, or `agent-*.jsonl` beside the session files in
older versions): their events are merged in time order and recorded under the session,
subagent tool calls with their `agent_id`. What the agent wrote is kept: every text message
of every turn, the subagents' included, and every thinking block (each bounded, see
`capture.transcript`), as agent prompts after the user prompt of their turn. Each import
remembers where it stopped in each file (`import_marks`), so running it again records only
what the files gained since: a transcript that grew is appended to its session, an
unchanged one adds nothing.

A session the hooks captured live keeps what they recorded: only transcript events newer
than its newest recorded row (with a little slack for the two clocks) are added. Each
session is imported in one transaction, so a killed import leaves no half-imported session.
"""

from __future__ import annotations

import heapq
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from nmem.capture import events as ev
from nmem.capture.transcript import MAX_LINE_BYTES, TranscriptCursor, TranscriptReplay, session_id_of
from nmem.errors import NmemError
from nmem.service.api import Service
from nmem.store import ImportMark

MAIN = "main"
S = TypeVar("S")
# A hook stamps an event when it runs; the transcript when the line is written. Transcript
# events within this many seconds of a live session's newest row are taken as already seen.
LIVE_SLACK_S = 2


@dataclass
class ImportReport:
    files: int = 0
    imported: int = 0        # sessions new to the database
    updated: int = 0         # sessions known before (imported or captured live) that gained events
    skipped: int = 0         # transcripts with nothing new
    events: int = 0
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"files": self.files, "imported_sessions": self.imported, "updated_sessions": self.updated,
                "skipped_sessions": self.skipped, "events": self.events, "errors": self.errors}

    def tally(self, count: int, known: bool) -> None:
        """One session read: `count` events recorded into a session `known` before, or new."""
        if not count:
            self.skipped += 1
            return
        self.events += count
        if known:
            self.updated += 1
        else:
            self.imported += 1


def default_root() -> Path:
    return Path.home() / ".claude" / "projects"


def _is_agent_file(path: Path) -> bool:
    return path.name.startswith("agent-") or "subagents" in path.parts


def find_transcripts(root: Path) -> list[Path]:
    """Session transcripts under a projects dir, a project dir, or a single file.

    Subagent files (`agent-*.jsonl`, anything under `subagents/`) are read with their session."""
    if root.is_file():
        return [root]
    if not root.is_dir():
        return []
    return sorted(p for p in root.rglob("*.jsonl") if not _is_agent_file(p.relative_to(root)))


def _looks_like_uuid(name: str) -> bool:
    parts = name.split("-")
    return len(name) == 36 and [len(p) for p in parts] == [8, 4, 4, 4, 12]


def session_of(path: Path) -> str | None:
    """The session a transcript file records: its name when Claude Code named it (a resumed
    session's file also holds lines it copied from the earlier one), else the first it names."""
    return path.stem if _looks_like_uuid(path.stem) else session_id_of(str(path))


class Importer:
    def __init__(self, service: Service, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.service = service
        self.store = service.store
        self.max_line_bytes = max_line_bytes
        self._legacy: dict[Path, dict[str, list[Path]]] = {}   # project dir -> session -> agent files

    def subagent_files(self, transcript: Path, session_id: str) -> list[Path]:
        """The session's subagent transcripts, both layouts."""
        nested = transcript.with_suffix("") / "subagents"
        files = sorted(nested.glob("agent-*.jsonl")) if nested.is_dir() else []
        directory = transcript.parent
        if directory not in self._legacy:
            by_session: dict[str, list[Path]] = {}
            for path in sorted(directory.glob("agent-*.jsonl")):
                owner = session_id_of(str(path))
                if owner:
                    by_session.setdefault(owner, []).append(path)
            self._legacy[directory] = by_session
        return files + self._legacy[directory].get(session_id, [])

    def import_one(self, transcript: Path, report: ImportReport) -> None:
        session_id = session_of(transcript)
        if session_id is None:
            report.skipped += 1
            return
        known, marks, live_until = self.session_state(session_id)
        sources: list[tuple[str, Path, str | None]] = [(MAIN, transcript, None)]
        for path in self.subagent_files(transcript, session_id):
            sources.append((f"agent:{path.name}", path, path.stem.removeprefix("agent-")))
        replays: list[tuple[str, TranscriptReplay]] = []
        for key, path, agent_id in sources:
            cursor = resume(path, marks.get(key), report)
            if cursor is None:
                continue
            replays.append((key, TranscriptReplay(str(path), session_id=session_id, cursor=cursor,
                                                  agent_id=agent_id, max_line_bytes=self.max_line_bytes)))
        if not replays or replays[0][0] != MAIN:
            report.skipped += 1
            return
        count = self._record(replays, known, live_until)
        for _key, replay in replays:
            if replay.skipped_lines:
                report.errors.append(f"{replay.path}: skipped {replay.skipped_lines} line(s) longer than "
                                     f"import.max_line_bytes or nested too deeply to read; imported the rest")
        report.tally(count, known)

    def session_state(self, session_id: str) -> tuple[bool, dict[str, ImportMark], int | None]:
        """Whether the session is stored already, where the last import stopped in each of its
        files, and up to when the hooks captured it live (`_live_until`)."""
        if self.store.get_session(session_id) is None:
            return False, {}, None
        marks = self.store.import_marks(session_id)
        return True, marks, self._live_until(session_id, marks)

    def _live_until(self, session_id: str, marks: dict[str, ImportMark]) -> int | None:
        """The time up to which the session's rows stand for what happened: its newest row, when
        something other than an import recorded it (the hooks, live)."""
        newest = self.store.session_last_activity(session_id)
        imported = max((m.last_event_at for m in marks.values() if m.last_event_at is not None), default=None)
        if newest is None or (imported is not None and newest <= imported):
            return None
        return newest + LIVE_SLACK_S

    def _record(self, replays: list[tuple[str, TranscriptReplay]], known: bool,
                live_until: int | None) -> int:
        """Record what the files gained, then where each was read to; returns the events recorded."""
        main = replays[0][1]
        merged: Iterator[ev.HookEvent] = heapq.merge(*(r.events() for _, r in replays),
                                                     key=lambda e: e.timestamp)
        service, store = self.service, self.store
        count, newest = 0, None
        with store.transaction():
            for event in merged:
                if live_until is not None and event.timestamp <= live_until:
                    continue
                if count == 0 and not known:
                    count += 1
                    service.record_event(ev.HookEvent(
                        kind=ev.SESSION_START, hook_event_name="SessionStart", source="startup",
                        session_id=event.session_id, cwd=event.cwd, transcript_path=main.path,
                        timestamp=min(event.timestamp, main.first_ts or event.timestamp)))
                service.record_event(event)
                count += 1
                newest = event.timestamp if newest is None else max(newest, event.timestamp)
            if count and main.session_id and main.cwd:
                # Every reply and thought was replayed above, so the Stop reads no transcript
                # (transcript_path None) and carries no message of its own.
                stop_at = max(newest or 0, main.last_ts)
                service.record_event(ev.HookEvent(
                    kind=ev.STOP, hook_event_name="Stop", session_id=main.session_id, cwd=main.cwd,
                    timestamp=stop_at))
                newest = stop_at
                count += 1
            if count or known:
                now = int(time.time())
                for key, replay in replays:
                    if replay.session_id is None:
                        continue
                    state = replay.cursor.state()
                    store.save_import_mark(ImportMark(replay.session_id, key, replay.cursor.offset,
                                                      state if state["pending"] else None, newest), now)
        return count


def resume(path: Path, mark: ImportMark | None, report: ImportReport) -> TranscriptCursor | None:
    """Where to go on reading a file from: the last import's mark, the start without one, or None
    (reported) when the file no longer continues what was read before."""
    if mark is None:
        return TranscriptCursor()
    if not _resumable(path, mark.offset):
        report.errors.append(f"{path}: changed since it was imported (it no longer continues the "
                             f"{mark.offset} bytes read before); left as it was")
        return None
    return TranscriptCursor.restore(mark.offset, mark.state)


def _resumable(path: Path, offset: int) -> bool:
    """Whether the file still continues the bytes read before: as long, a line ending at `offset`."""
    if offset == 0:
        return True
    try:
        with path.open("rb") as fh:
            if os.fstat(fh.fileno()).st_size < offset:
                return False
            fh.seek(offset - 1)
            return fh.read(1) == b"\n"
    except OSError:
        return False


def import_transcripts(service: Service, paths: list[Path], progress: Callable[[Path], None] | None = None,
                       max_line_bytes: int = MAX_LINE_BYTES) -> ImportReport:
    """Import each transcript in its own transaction: one that fails (unreadable, or a line no
    check foresaw) is reported and rolled back, and the others are imported."""
    return each_source(service, paths, Importer(service, max_line_bytes).import_one, progress)


def each_source(service: Service, sources: Sequence[S], one: Callable[[S, ImportReport], None],
                progress: Callable[[S], None] | None = None) -> ImportReport:
    """The loop of every session import: `one` reads each source (a file or a database) into the
    report; a source that fails is reported (its transaction rolled back) and the others are
    read; memory turned off or a failing database stops the whole import."""
    service.check_enabled()  # else every event is skipped and marked imported: lost for a later import
    report = ImportReport(files=len(sources))
    for source in sources:
        try:
            one(source, report)
        except OSError as exc:
            report.errors.append(f"{source}: {exc}")
        except RecursionError:
            report.errors.append(f"{source}: nested too deeply to read; not imported (the other files are)")
        except NmemError as exc:
            if exc.exit_code in (3, 4, 7):  # memory off, or the database failed: every other file would too
                raise
            report.errors.append(f"{source}: {exc.message}")
        if progress is not None:
            progress(source)
    return report
