"""Recording hook events: the session row on first sight, then what each event adds."""

from __future__ import annotations

from nmem.capture import events as ev
from nmem.capture.privacy import scrub_event
from nmem.capture.project import project_root
from nmem.capture.recorder import Recorder, RecordOutcome
from nmem.models import observation_urn, prompt_urn
from nmem.service.base import Base, team_access

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from nmem.models import Memory

# The events that start recording a session: what an agent did. Any other event (Stop, SessionEnd,
# PreCompact, Notification, PreToolUse...) of a session never seen creates nothing.
SESSION_OPENERS = frozenset((ev.SESSION_START, ev.PROMPT, ev.TOOL, ev.TOOL_FAILURE))


class Record(Base):
    def record_event(self, event: ev.HookEvent, *, spool_id: str | None = None) -> RecordOutcome:
        """Store one hook event: the session row on first sight, then what the event adds.

        `spool_id` names an event replayed from the hook spool: it is stored at most once,
        however often a replay is repeated (a drain killed between commit and unlink).
        Every field passes the privacy filter first, before anything reads, cuts or keeps it.
        """
        event = scrub_event(event)
        project = self.project_for(event.cwd)
        if not self.settings.project_enabled(project, event.cwd):
            return RecordOutcome(event.session_id, project, skipped="disabled")
        if event.kind in (ev.TOOL, ev.TOOL_FAILURE) and self._tool_excluded(event.tool_name or ""):
            return RecordOutcome(event.session_id, project, skipped="excluded")
        turn = self._transcript_turn(event)  # before the write lock: a file never holds it
        known = self._session_projects.get(event.session_id)
        with self.store.transaction():
            if spool_id is not None and not self._first_replay(spool_id):
                return RecordOutcome(event.session_id, project, skipped="duplicate")
            if known is None:
                # Subagent and resumed events keep the project their session started in.
                session = self.store.get_session(event.session_id)
                if session is None and event.kind not in SESSION_OPENERS:
                    # `claude mcp list`, Notification, PreToolUse, a Stop of a session never seen:
                    # no session worth a row
                    return RecordOutcome(event.session_id, project, skipped="no_session")
                if session is None:
                    session = self.store.ensure_session(event.session_id, project, event.timestamp,
                                                        project_root(event.cwd), event.agent)
                known = session.project
            if known != project and not self.settings.project_enabled(known):
                # a session of an opted-out project, resumed from elsewhere: still that project's
                return RecordOutcome(event.session_id, project, skipped="disabled")
            outcome = Recorder(self.store, self.settings, self._remember, turn).record(event, known)
            self._attribute_event(outcome)
        self._session_projects[event.session_id] = known  # only once committed
        return outcome

    def _attribute_event(self, outcome: RecordOutcome) -> None:
        """On a team server: the event's writer and its audit rows, in the event's transaction."""
        access = team_access()
        viewer = access.current() if access is not None else None
        if viewer is None:
            return
        writes: list[tuple[str, str]] = []
        if outcome.observation_id is not None:
            writes.append(("record", observation_urn(outcome.project, outcome.observation_id)))
        if outcome.prompt_id is not None:
            writes.append(("record", prompt_urn(outcome.project, outcome.prompt_id)))
        writes.extend(("remember", m.urn) for m in outcome.memories)
        if writes:
            self.store.record_writes(  # type: ignore[attr-defined]
                viewer.name, self.now(), writes, memories=[m.id for m in outcome.memories],
                observations=[outcome.observation_id] if outcome.observation_id is not None else [])

    def _transcript_turn(self, event: ev.HookEvent) -> list[tuple[int, bool, str]]:
        """What the agent wrote in the turn a Stop ends, read from the transcript the event names:
        never for a signed-in user of a team server, whose event names a file on their own machine,
        not one for the server to open on its disk (another user's transcript, the operator's)."""
        if event.kind not in (ev.STOP, ev.SUBAGENT_STOP) or not self.settings["capture.read_transcript"]:
            return []
        access = team_access()
        if access is not None and access.current() is not None:
            return []
        from nmem.capture.transcript import turn_words

        return turn_words(event.transcript_path, subagent=event.kind == ev.SUBAGENT_STOP)

    def _remember(self, content: str, **options: Any) -> Memory:
        """`Memories.remember`, for the events that remember (a marked prompt, a compaction's
        summary): curation loads with them, never with a tool call, whose `CaptureService` lacks it."""
        from nmem.service.memories import Memories

        return Memories.remember(self, content, **options)  # type: ignore[arg-type]  # it needs only Base

    def _first_replay(self, spool_id: str) -> bool:
        return self.store.mark_spooled(spool_id, self.now())
