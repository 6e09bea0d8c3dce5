"""Backfill from Codex session files (`~/.codex/sessions/**/rollout-*.jsonl`), as if the hooks had
seen them, with the care of the Claude Code import (`nmem.portable.sources.transcripts`): each file
is read from where the last import stopped (`import_marks`, with the tool calls still waiting
for their output), a session the hooks captured live gains only what is newer than its newest
row, and each session is recorded in one transaction. Every session is recorded as Codex's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from nmem.capture import events as ev
from nmem.capture.codex import AGENT, codex_home
from nmem.capture.codex_rollout import RolloutReplay, session_meta
from nmem.capture.transcript import TranscriptCursor, TranscriptReplay
from nmem.portable.sources.transcripts import MAIN, Importer, ImportReport, _resumable
from nmem.service.api import Service


def default_root(home: Path | None = None) -> Path:
    return codex_home(home) / "sessions"


def find_rollouts(root: Path) -> list[Path]:
    """Session files under the sessions directory (or one of its date folders), or a single file."""
    if root.is_file():
        return [root]
    if not root.is_dir():
        return []
    return sorted(root.rglob("*.jsonl"))


class _AsAgent:
    """The service, recording every event (the import's own SessionStart and Stop too) as the agent's."""

    def __init__(self, service: Service, agent: str) -> None:
        self._service = service
        self.store = service.store
        self.agent = agent

    def record_event(self, event: ev.HookEvent, **kwargs: Any) -> Any:
        event.agent = self.agent
        return self._service.record_event(event, **kwargs)


class RolloutImporter(Importer):
    def __init__(self, service: Service) -> None:
        super().__init__(cast(Service, _AsAgent(service, AGENT)))

    def import_one(self, transcript: Path, report: ImportReport) -> None:
        session_id, cwd = session_meta(str(transcript))
        if session_id is None or cwd is None:
            report.skipped += 1
            return
        store = self.store
        known = store.get_session(session_id) is not None
        marks = store.import_marks(session_id) if known else {}
        live_until = self._live_until(session_id, marks) if known else None
        mark = marks.get(MAIN)
        if mark is not None and not _resumable(transcript, mark.offset):
            report.errors.append(f"{transcript}: changed since it was imported (it no longer continues the "
                                 f"{mark.offset} bytes read before); left as it was")
            report.skipped += 1
            return
        cursor = TranscriptCursor.restore(mark.offset, mark.state) if mark else TranscriptCursor()
        replay = RolloutReplay(str(transcript), cursor=cursor, session_id=session_id, cwd=cwd)
        count = self._record([(MAIN, cast(TranscriptReplay, replay))], known, live_until)
        if count:
            report.events += count
            if known:
                report.updated += 1
            else:
                report.imported += 1
        else:
            report.skipped += 1


def import_rollouts(service: Service, paths: list[Path],
                    progress: Callable[[Path], None] | None = None) -> ImportReport:
    service.check_enabled()
    report = ImportReport(files=len(paths))
    importer = RolloutImporter(service)
    for path in paths:
        try:
            importer.import_one(path, report)
        except OSError as exc:
            report.errors.append(f"{path}: {exc}")
        if progress is not None:
            progress(path)
    return report
