"""Recording one harness-neutral event into the trail, inside the caller's write transaction.

Everything stored passes the privacy filter twice: the event as it comes in (`scrub_event`, in
`CoreService.record_event`), then each record as it is stored (`scrub_record`), since a field
read beside another (`{"password": …}` made into one line) can say more than either alone. A hook process
records one event, so the helpers only some events need (prompt markers, session
summaries) are imported by the handlers of those events. Nothing here reads files: the
caller reads a Stop's transcript before it takes the write lock and hands over the thoughts.
"""

from __future__ import annotations

from nmem.capture import events as ev
from nmem.capture.extract import extract
from nmem.capture.privacy import scrub, scrub_record
from nmem.store import NewObservation

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from nmem.config import Settings
    from nmem.models import Memory
    from nmem.store.protocol import Store

    RememberFn = Callable[..., Memory]

PROMPT_CHARS = 8000
CHECKPOINT_CHARS = 20000
SESSION_START_TYPES = {
    "startup": "session_start", "resume": "session_resume", "fork": "session_resume",
    "compact": "session_compact", "clear": "session_clear",
}

class RecordOutcome:
    """What recording one hook event did."""

    __slots__ = ("file_path", "memories", "observation_id", "project", "prompt_id", "session_id", "skipped",
                 "stored")

    def __init__(self, session_id: str, project: str, stored: str | None = None,
                 observation_id: int | None = None, prompt_id: int | None = None,
                 memories: list[Memory] | None = None, skipped: str | None = None,
                 file_path: str | None = None) -> None:
        self.session_id = session_id
        self.project = project
        self.stored = stored                  # observation | prompt | session_end | checkpoint | None
        self.observation_id = observation_id
        self.prompt_id = prompt_id
        self.memories: list[Memory] = [] if memories is None else memories
        self.skipped = skipped                # disabled | duplicate | ignored | excluded
        self.file_path = file_path            # the file a stored tool call read or changed

    def __repr__(self) -> str:
        return (f"RecordOutcome(session={self.session_id!r}, stored={self.stored!r}, "
                f"observation_id={self.observation_id!r}, prompt_id={self.prompt_id!r}, skipped={self.skipped!r})")


class Recorder:
    def __init__(self, store: Store, settings: Settings, remember: RememberFn,
                 reasoning: Sequence[str] = ()) -> None:
        self.store = store
        self.settings = settings
        self.remember = remember
        self.reasoning = reasoning  # a Stop's thinking from its transcript, read by the caller

    def record(self, event: ev.HookEvent, project: str) -> RecordOutcome:
        handler = {
            ev.PROMPT: self._prompt,
            ev.TOOL: self._tool,
            ev.TOOL_FAILURE: self._tool,
            ev.SESSION_START: self._session_start,
            ev.PRE_COMPACT: self._pre_compact,
            ev.REASONING: self._reasoning,
            ev.STOP: self._stop,
            ev.SUBAGENT_STOP: self._stop,
            ev.SESSION_END: self._stop,
        }.get(event.kind)
        if handler is None:
            return RecordOutcome(event.session_id, project, skipped="ignored")
        return handler(event, project)

    def _observation(self, event: ev.HookEvent, project: str, obs_type: str, content: str,
                     file_path: str | None = None, metadata: dict[str, Any] | None = None,
                     prompt_id: int | None = None) -> int:
        meta = metadata or None
        if event.agent_id:
            meta = {**(meta or {}), "agent_id": event.agent_id}
        return self.store.add_observation(scrub_record(NewObservation(
            session_id=event.session_id, project=project, timestamp=event.timestamp, obs_type=obs_type,
            source_event=event.hook_event_name, content=content, tool_name=event.tool_name,
            file_path=file_path or None, metadata=meta, prompt_id=prompt_id,
        )))

    def _prompt(self, event: ev.HookEvent, project: str) -> RecordOutcome:
        from nmem.capture.markers import find_marked

        raw = event.prompt or ""
        text = scrub(raw).strip()
        if not text:
            return RecordOutcome(event.session_id, project, skipped="ignored")
        prompt_id = self.store.add_prompt(event.session_id, event.timestamp, "user", text[:PROMPT_CHARS])
        memories = [
            self.remember(marked.content, namespace=marked.namespace, domain=f"project:{project}",
                          source=f"session:{event.session_id}", tags=["prompt-marker"], at=event.timestamp)
            for marked in find_marked(text, self.settings["capture.markers"])
        ]
        return RecordOutcome(event.session_id, project, stored="prompt", prompt_id=prompt_id, memories=memories)

    def _tool(self, event: ev.HookEvent, project: str) -> RecordOutcome:
        extracted = extract(event)
        if extracted is None:
            return RecordOutcome(event.session_id, project, skipped="ignored")
        content = scrub(extracted.content)
        if extracted.obs_type in ("file_read", "search"):
            since = event.timestamp - int(self.settings["capture.dedup_window"])
            dup = self.store.recent_duplicate(event.session_id, extracted.obs_type, extracted.file_path,
                                              content, since)
            if dup is not None:
                return RecordOutcome(event.session_id, project, skipped="duplicate", observation_id=dup)
        obs_id = self._observation(event, project, extracted.obs_type, content, extracted.file_path,
                                   extracted.metadata, self.store.latest_prompt_id(event.session_id))
        touched = extracted.file_path if extracted.obs_type != "file_error" else None  # a failed call touched nothing
        return RecordOutcome(event.session_id, project, stored="observation", observation_id=obs_id,
                             file_path=touched)

    def _session_start(self, event: ev.HookEvent, project: str) -> RecordOutcome:
        source = event.source or "startup"
        obs_type = SESSION_START_TYPES.get(source, "session_start")
        obs_id = self._observation(event, project, obs_type, f"{obs_type} ({source})", metadata={"source": source})
        return RecordOutcome(event.session_id, project, stored="observation", observation_id=obs_id)

    def _pre_compact(self, event: ev.HookEvent, project: str) -> RecordOutcome:
        if not self.settings["capture.checkpoint_on_compact"]:
            return RecordOutcome(event.session_id, project, skipped="ignored")
        from nmem.capture.summary import summarize
        from nmem.gist import clip

        summary = summarize(*self.store.session_outline(event.session_id))
        # An import replays the compaction's own summary (from the transcript) with the event.
        text = (event.assistant_message or "").strip()[:CHECKPOINT_CHARS] or summary["text"]
        if not text:
            return RecordOutcome(event.session_id, project, skipped="ignored")
        # Named after what was under way when the context filled up, not how the session began.
        title = f"Checkpoint before compaction: {summary['last_intent'] or 'session ' + event.session_id[:8]}"
        memory = self.remember(text, summary=clip(title, 100), namespace="progress",
                               domain=f"project:{project}", source=f"session:{event.session_id}",
                               tags=["checkpoint", f"compact-{event.source or 'auto'}"], at=event.timestamp)
        return RecordOutcome(event.session_id, project, stored="checkpoint", memories=[memory])

    def _agent_prompt(self, event: ev.HookEvent, text: str, once: bool = False) -> int | None:
        """Store agent reasoning; with `once`, not if the session holds it already (Stop can
        fire again for the same turn)."""
        clean = scrub(text).strip()[:PROMPT_CHARS]
        if not clean or (once and self.store.has_prompt(event.session_id, "agent", clean)):
            return None
        return self.store.add_prompt(event.session_id, event.timestamp, "agent", clean)

    def _reasoning(self, event: ev.HookEvent, project: str) -> RecordOutcome:
        prompt_id = self._agent_prompt(event, event.assistant_message or "")
        if prompt_id is None:
            return RecordOutcome(event.session_id, project, skipped="ignored")
        return RecordOutcome(event.session_id, project, stored="prompt", prompt_id=prompt_id)

    def _stop(self, event: ev.HookEvent, project: str) -> RecordOutcome:
        from nmem.capture.summary import signature, summarize

        sid = event.session_id
        for thought in self.reasoning:
            self._agent_prompt(event, thought, once=True)
        prompt_id = self._agent_prompt(event, event.assistant_message or "", once=True)
        obs_id = None
        if event.kind == ev.SESSION_END:
            reason = event.source or "other"
            obs_id = self._observation(event, project, "session_end", f"session_end ({reason})",
                                       metadata={"reason": reason})
        if event.kind != ev.SUBAGENT_STOP:
            observations, prompts = self.store.session_outline(sid)
            self.store.close_session(sid, event.timestamp, signature(observations, prompts),
                                     summarize(observations, prompts))
        return RecordOutcome(sid, project, stored="session_end", prompt_id=prompt_id, observation_id=obs_id)
