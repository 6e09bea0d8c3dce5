"""Recording one harness-neutral event into the trail, inside the caller's write transaction.

Everything stored passes the privacy filter twice: the event as it comes in (`scrub_event`, in
`CaptureService.record_event`), then each record as it is stored (`scrub_record`), since a field
read beside another (`{"password": …}` made into one line) can say more than either alone. A hook process
records one event, so the helpers only some events need (prompt markers, session
summaries) are imported by the handlers of those events. Nothing here reads files: the
caller reads a Stop's transcript before it takes the write lock and hands over what the agent
wrote in the turn.
"""

from __future__ import annotations

from nmem.capture import events as ev
from nmem.capture.extract import extract
from nmem.capture.privacy import scrub, scrub_record
from nmem.models import REPLY, THINKING, USER, Record, subagent_source
from nmem.store import NewObservation

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from nmem.capture.markers import MarkedMemory
    from nmem.config import Settings
    from nmem.models import Memory
    from nmem.store.protocol import Store

    RememberFn = Callable[..., Memory]

PROMPT_CHARS = 8000      # a prompt, typed or written by the agent
THINKING_CHARS = 4000    # a thinking block: the why behind a step, not a log of it
CHECKPOINT_CHARS = 20000
SESSION_START_TYPES = {
    "startup": "session_start", "resume": "session_resume", "fork": "session_resume",
    "compact": "session_compact", "clear": "session_clear",
}

class RecordOutcome(Record):
    """What recording one hook event did."""

    session_id: str
    project: str
    stored: str | None = None           # observation | prompt | session_end | checkpoint | None
    observation_id: int | None = None
    prompt_id: int | None = None
    memories: list[Memory] = []  # noqa: RUF012 - a record copies a container default per instance
    skipped: str | None = None          # disabled | duplicate | ignored | excluded
    file_path: str | None = None        # the file a stored tool call read or changed
    # marked text offered as captures instead of stored (the subcog hook profile)
    suggested: list[MarkedMemory] = []  # noqa: RUF012

    def __repr__(self) -> str:
        return (f"RecordOutcome(session={self.session_id!r}, stored={self.stored!r}, "
                f"observation_id={self.observation_id!r}, prompt_id={self.prompt_id!r}, skipped={self.skipped!r})")


class Recorder:
    def __init__(self, store: Store, settings: Settings, remember: RememberFn,
                 turn: Sequence[tuple[int, bool, str]] = ()) -> None:
        self.store = store
        self.settings = settings
        self.remember = remember
        self.turn = turn  # a Stop's turn from its transcript, read by the caller: (time, is thinking, text)

    def record(self, event: ev.HookEvent, project: str) -> RecordOutcome:
        handler = {
            ev.PROMPT: self._prompt,
            ev.TOOL: self._tool,
            ev.TOOL_FAILURE: self._tool,
            ev.SESSION_START: self._session_start,
            ev.PRE_COMPACT: self._pre_compact,
            ev.REASONING: self._agent_words,
            ev.REPLY: self._agent_words,
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
            if event.agent_type:
                meta["agent_type"] = event.agent_type
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
        prompt_id = self.store.add_prompt(event.session_id, event.timestamp, USER, text[:PROMPT_CHARS])
        marked = find_marked(text, self.settings["capture.markers"])
        if str(self.settings["hooks.profile"]).strip().lower() == "subcog":  # subcog asks the agent to confirm
            return RecordOutcome(event.session_id, project, stored="prompt", prompt_id=prompt_id, suggested=marked)
        memories = [
            self.remember(m.content, namespace=m.namespace, domain=f"project:{project}",
                          source=f"session:{event.session_id}", tags=["prompt-marker"], at=event.timestamp)
            for m in marked
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
        from nmem.text import clip

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
        # subcog's `key_decisions`: each one a decision of its own, beside the checkpoint
        decisions = [self.remember(decision, namespace="decisions", domain=f"project:{project}",
                                   source=f"session:{event.session_id}", tags=["checkpoint", "key-decision"],
                                   at=event.timestamp)
                     for decision in dict.fromkeys(event.decisions)]
        return RecordOutcome(event.session_id, project, stored="checkpoint", memories=[memory, *decisions])

    def _agent_words(self, event: ev.HookEvent, project: str) -> RecordOutcome:
        """A reply or a thought an import read from a transcript: an agent prompt at its own time,
        as `thinking`, a subagent's (`subagent:<type>`) or the agent's reply."""
        thinking = event.kind == ev.REASONING
        text = scrub(event.assistant_message or "").strip()[:THINKING_CHARS if thinking else PROMPT_CHARS]
        if not text:
            return RecordOutcome(event.session_id, project, skipped="ignored")
        source = THINKING if thinking else subagent_source(event.agent_type) if event.agent_id else REPLY
        prompt_id = self.store.add_prompt(event.session_id, event.timestamp, source, text)
        return RecordOutcome(event.session_id, project, stored="prompt", prompt_id=prompt_id)

    def _turn_words(self, event: ev.HookEvent) -> int | None:
        """Store what the agent wrote in the turn that stopped: each text and thinking block its
        transcript holds (at its own time, within the turn), then the hook's last message; the id of
        the last one stored.

        Each is stored once: what the session holds since the turn's prompt (a Stop fired again,
        a SubagentStop's answer already read) is not stored again.
        """
        if not self.turn and not event.assistant_message:
            return None
        sid = event.session_id
        asked = self.store.latest_prompt_id(sid)
        asked_at = self.store.prompt_time(asked) if asked is not None else None
        # Within the turn on the trail's clock: the transcript's may differ (another machine, a container).
        start = min(asked_at, event.timestamp) if asked_at is not None else event.timestamp
        said = subagent_source(event.agent_type) if event.kind == ev.SUBAGENT_STOP else REPLY
        words = [(max(start, min(at, event.timestamp)) if at else event.timestamp,
                  scrub(text).strip()[:THINKING_CHARS if thinking else PROMPT_CHARS], THINKING if thinking else said)
                 for at, thinking, text in self.turn]
        if event.assistant_message:
            words.append((event.timestamp, scrub(event.assistant_message).strip()[:PROMPT_CHARS], said))
        words = [word for word in words if word[1]]
        if not words:
            return None
        # what the agent or a subagent wrote since the turn's prompt, however it was labelled
        held = {p.content for p in self.store.session_prompts(sid, None, start - 1)
                if p.source != USER and (asked is None or p.id > asked)}
        prompt_id = None
        for at, text, source in words:
            if text not in held:
                held.add(text)
                prompt_id = self.store.add_prompt(sid, at, source, text)
        return prompt_id

    def _stop(self, event: ev.HookEvent, project: str) -> RecordOutcome:
        from nmem.capture.summary import signature, summarize

        sid = event.session_id
        prompt_id = self._turn_words(event)
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
