"""Importing sessions that an agent rewrites in place (OpenCode's stored messages and parts,
Gemini CLI's chat files) rather than appends to, with the care of the transcript importers.

Such a source cannot be resumed from a byte offset: a message is rewritten as it streams, a
tool call gains its result later. So each source reads its whole session into *items*, each
with a stable key (a message, part or tool call id) and recorded only once finished (a reply
whose text is complete, a tool call with its result). The import mark keeps the keys already
recorded: importing again records only new items, an unchanged session adds nothing.

A session the hooks captured live keeps what they recorded (only items newer than its newest
row are added), each session is recorded in one transaction, and every event is the agent's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import cast

from nmem.capture import events as ev
from nmem.portable.sources.codex_sessions import _AsAgent
from nmem.portable.sources.transcripts import Importer, ImportReport, each_source
from nmem.service.api import Service
from nmem.store import ImportMark

# The import mark's source: the keys recorded, never a byte offset a transcript import would resume from.
ITEMS = "items"


@dataclass
class SessionRead:
    """One session as read from its source: its finished items, in order."""

    session_id: str
    cwd: str
    where: str                                   # the file or database it came from, for reports
    items: list[tuple[str, ev.HookEvent]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)   # lines, files or rows left out, and why
    first_ts: int | None = None
    final: bool = True    # False for a subagent's part of a session: no Stop of its own, not counted again

    def add(self, key: str, event: ev.HookEvent) -> None:
        self.items.append((key, event))
        if self.first_ts is None or event.timestamp < self.first_ts:
            self.first_ts = event.timestamp


class SnapshotImporter(Importer):
    def __init__(self, service: Service, agent: str) -> None:
        super().__init__(cast(Service, _AsAgent(service, agent)))

    def import_session(self, read: SessionRead, report: ImportReport) -> None:
        store = self.store
        for reason in read.skipped:
            report.errors.append(f"{read.where}: {reason}")
        known, marks, live_until = self.session_state(read.session_id)
        was_known = known
        mark = marks.get(ITEMS)
        done: set[str] = set(mark.state.get("done", [])) if mark is not None and mark.state else set()
        fresh = [(key, event) for key, event in read.items if key not in done]
        count, newest = 0, mark.last_event_at if mark is not None else None
        with store.transaction():
            for key, event in fresh:
                done.add(key)
                if live_until is not None and event.timestamp <= live_until:
                    continue
                if count == 0 and not known:
                    self.service.record_event(ev.HookEvent(
                        kind=ev.SESSION_START, hook_event_name="SessionStart", source="startup",
                        session_id=read.session_id, cwd=read.cwd,
                        timestamp=min(event.timestamp, read.first_ts or event.timestamp)))
                    count += 1
                    known = True
                self.service.record_event(event)
                count += 1
                newest = event.timestamp if newest is None else max(newest, event.timestamp)
            if count and read.final and newest is not None:
                self.service.record_event(ev.HookEvent(kind=ev.STOP, hook_event_name="Stop",
                                                       session_id=read.session_id, cwd=read.cwd, timestamp=newest))
                count += 1
            if fresh:
                store.save_import_mark(ImportMark(read.session_id, ITEMS, len(done), {"done": sorted(done)}, newest),
                                       int(time.time()))
        report.events += count
        if not read.final and was_known:
            return  # a subagent's part of a session counted already: its events are the session's
        if count == 0:
            report.skipped += 1
        elif was_known:
            report.updated += 1
        else:
            report.imported += 1


def import_sessions(service: Service, agent: str, sources: list[str],
                    read: Callable[[str], Iterable[SessionRead]],
                    progress: Callable[[str], None] | None = None) -> ImportReport:
    """Read each source (a file, or a database) into sessions and import each in its own
    transaction: a source that fails is reported and the others are imported."""
    importer = SnapshotImporter(service, agent)

    def one(source: str, report: ImportReport) -> None:
        for session in read(source):
            importer.import_session(session, report)

    return each_source(service, sources, one, progress)
