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
from nmem.capture.transcript import TranscriptReplay
from nmem.portable.sources.transcripts import MAIN, Importer, ImportReport, each_source, resume
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
        known, marks, live_until = self.session_state(session_id)
        cursor = resume(transcript, marks.get(MAIN), report)
        if cursor is None:
            report.skipped += 1
            return
        replay = RolloutReplay(str(transcript), cursor=cursor, session_id=session_id, cwd=cwd)
        report.tally(self._record([(MAIN, cast(TranscriptReplay, replay))], known, live_until), known)


def import_rollouts(service: Service, paths: list[Path],
                    progress: Callable[[Path], None] | None = None) -> ImportReport:
    return each_source(service, paths, RolloutImporter(service).import_one, progress)
