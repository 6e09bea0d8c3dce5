"""Backfill from existing Claude Code transcripts, as if the hooks had seen them.

A transcript whose session is already in the database (captured live, or imported
before) is skipped, so re-running an import changes nothing. Each transcript is
imported in one transaction: a killed import leaves no half-imported session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nmem.capture.transcript import session_id_of, transcript_events
from nmem.memory import Service


@dataclass
class ImportReport:
    files: int = 0
    imported: int = 0
    skipped: int = 0
    events: int = 0
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"files": self.files, "imported_sessions": self.imported, "skipped_sessions": self.skipped,
                "events": self.events, "errors": self.errors}


def default_root() -> Path:
    return Path.home() / ".claude" / "projects"


def find_transcripts(root: Path) -> list[Path]:
    """`*.jsonl` transcripts under a projects dir, a project dir, or a single file."""
    if root.is_file():
        return [root]
    if not root.is_dir():
        return []
    # Subagent transcripts live in <session>/subagents/ and belong to their parent session.
    return sorted(p for p in root.rglob("*.jsonl") if "subagents" not in p.parts)


def import_transcripts(service: Service, paths: list[Path],
                       progress: Callable[[Path], None] | None = None) -> ImportReport:
    report = ImportReport(files=len(paths))
    for path in paths:
        try:
            _import_one(service, path, report)
        except OSError as exc:
            report.errors.append(f"{path}: {exc}")
        if progress is not None:
            progress(path)
    return report


def _import_one(service: Service, path: Path, report: ImportReport) -> None:
    session_id = session_id_of(str(path))
    if session_id is None:
        report.skipped += 1
        return
    if service.store.get_session(session_id) is not None:
        report.skipped += 1
        return
    events: Iterator[Any] = transcript_events(str(path))
    count = 0
    with service.store.transaction():
        for event in events:
            service.record_event(event)
            count += 1
    if count:
        report.imported += 1
        report.events += count
    else:
        report.skipped += 1
