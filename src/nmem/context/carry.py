"""Open work carried forward: what earlier sessions left failing or said was still to do, and
that no later session has resolved yet.

The lead of the context block shows where the last session left off. When that session was
short (a question, a look around), what the one before it left open must not vanish: an
unresolved failure or to-do is carried from session to session until

- a later session resolves it: a failure by a passing run of the same command (or the same
  kind of success on the same file, as `handoff.failures` reads it); a to-do naming a file by an
  edit or write of that file, and any to-do by a later closing message that reports it done;
- or it ages out: older than `CARRY_SECONDS`, or left behind by `TODO_SESSIONS` later sessions
  that changed files (a to-do), `FAILURE_SESSIONS` such sessions (a failure).

A session that changed nothing (a question, a look around) never resolves nor ages anything.
Read by the SessionStart hook: the stdlib only, no `re`.
"""

from __future__ import annotations

from nmem.context.handoff import Failure, closing_reply, courtesy_shaped, failures, pending_lines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from nmem.models import Observation, Session
    from nmem.store.protocol import Store

CARRY_SECONDS = 14 * 86400       # older open work has been dealt with elsewhere, or abandoned
EARLIER_SESSIONS = 8             # sessions before the lead looked at
EARLIER_TAIL = 400               # newest observations read of each of them
TODO_SESSIONS = 3                # later working sessions after which an untouched to-do is dropped
FAILURE_SESSIONS = 5
CHANGES = ("file_edit", "file_write")
# The rows of an earlier session that can fail, fix a failure or make it a working session: all
# `handoff.failures` and `_Later` read (the rest of its tail is read by neither, so it is not read).
TELLING = ("command", "command_error", "file_error", "file_read", *CHANGES, "git_commit")
_DONE_WORDS = ("done", "fixed", "added", "removed", "resolved", "passes", "passing", "implemented", "finished",
               "completed", "in place")


class Carried:
    """One open item of an earlier session: a failure, or a to-do from its closing message."""

    __slots__ = ("failure", "session", "text")

    def __init__(self, session: Session, text: str = "", failure: Failure | None = None) -> None:
        self.session = session
        self.text = text              # the to-do, as the closing message said it
        self.failure = failure


class CarriedWork:
    """What earlier sessions left open, and their failures the lead session itself fixed."""

    __slots__ = ("fixed", "open")

    def __init__(self, still_open: list[Carried], fixed: list[Failure]) -> None:
        self.open = still_open
        self.fixed = fixed


def _named_files(text: str) -> list[str]:
    """The file names a to-do mentions: words with a dot or a slash that look like paths."""
    found = []
    for raw in text.replace("`", " ").replace("'", " ").replace('"', " ").split():
        word = raw.strip("()[]{},;:!?*").rstrip(".")
        if ("/" in word or "." in word) and not word.startswith(("http:", "https:")) and any(c.isalpha() for c in word):
            stem, dot, ext = word.rpartition(".")
            if "/" in word or (dot and stem and 1 <= len(ext) <= 5 and ext.isalnum()):
                found.append(word.lstrip("./") or word)
    return found


def _touches(path: str, name: str) -> bool:
    return path == name or path.endswith("/" + name)


def _words(text: str) -> set[str]:
    return {w.strip(".,;:!?`'\"()").lower() for w in text.split() if len(w.strip(".,;:!?`'\"()")) > 3}


def _reported_done(todo: str, message: str) -> bool:
    """Whether a later closing message says the to-do is done: one of its sentences shares
    most of the to-do's words and says done, fixed, added…"""
    wanted = _words(todo)
    if not wanted:
        return False
    for sentence in message.replace("\n", ". ").split(". "):
        low = sentence.lower()
        if any(word in low for word in _DONE_WORDS) and len(wanted & _words(sentence)) * 3 >= len(wanted) * 2:
            return True
    return False


class _Later:
    """What the sessions after an item did: files changed, closing messages, working sessions."""

    __slots__ = ("changed", "messages", "working")

    def __init__(self) -> None:
        self.changed: list[str] = []
        self.messages: list[str] = []
        self.working = 0

    def add(self, acts: Sequence[Observation], closing: str) -> None:
        changed = [o.file_path for o in acts if o.obs_type in CHANGES and o.file_path]
        self.changed += changed
        if closing:
            self.messages.append(closing)
        if changed or any(o.obs_type == "git_commit" for o in acts):
            self.working += 1

    def resolves(self, todo: str) -> bool:
        if any(_touches(path, name) for name in _named_files(todo) for path in self.changed):
            return True
        return any(_reported_done(todo, message) for message in self.messages)


def carried_work(store: Store, earlier: Sequence[Session], lead: Session, lead_acts: Sequence[Observation],
                 now: int, seen_todos: Sequence[str] = (), lead_closing: str | None = None) -> CarriedWork:
    """The open work of `earlier` sessions (newest first, all before `lead`) that `lead` and the
    sessions between did not resolve, newest first; and their failures the lead fixed.
    `lead_closing` is the lead's closing message when the caller has read it ("" for none)."""
    chosen = [s for s in earlier[:EARLIER_SESSIONS] if now - (s.ended_at or s.started_at) <= CARRY_SECONDS]
    if not chosen:
        return CarriedWork([], [])
    ids = [s.id for s in chosen]
    tails = store.session_tails(ids, EARLIER_TAIL, TELLING)
    last = store.last_prompts(ids, "agent")
    acts = {sid: [o for o in tails.get(sid, ()) if not o.obs_type.startswith("session_")] for sid in ids}
    closings = {sid: _closing(store, sid, last[sid].content) if sid in last else "" for sid in ids}
    ordered = list(reversed(chosen))                      # oldest first
    timeline = [o for s in ordered for o in acts[s.id]] + list(lead_acts)
    by_session = {s.id: s for s in chosen}
    still_open: list[Carried] = []
    fixed: list[Failure] = []
    if lead_closing is None:
        last_reply = store.last_prompt(lead.id, "agent")
        lead_closing = _closing(store, lead.id, last_reply.content) if last_reply else ""
    working_after = _working_after(ordered, acts, lead_acts)
    for failure in failures(timeline):
        origin = by_session.get(failure.last.session_id)
        if origin is None:
            continue                                      # the lead's own: it shows it itself
        if failure.open and working_after[origin.id] < FAILURE_SESSIONS:
            still_open.append(Carried(origin, failure=failure))
        elif failure.fixed_by is not None and failure.fixed_by.session_id == lead.id:
            fixed.append(failure)
    seen = set(seen_todos)
    for index, session in enumerate(ordered):
        later = _Later()
        for after in ordered[index + 1:]:
            later.add(acts[after.id], closings[after.id])
        later.add(lead_acts, lead_closing)
        if later.working >= TODO_SESSIONS:
            continue
        for todo in pending_lines(closings[session.id]):
            if todo not in seen and not later.resolves(todo):
                seen.add(todo)
                still_open.append(Carried(session, text=todo))
    # the newest session's first; in each, its failures in the order they failed, then its to-dos
    still_open.sort(key=lambda c: (-c.session.started_at, c.failure is None, c.failure.last.id if c.failure else 0))
    return CarriedWork(still_open, fixed)


def _closing(store: Store, session_id: str, last_reply: str) -> str:
    """A session's closing message: its last reply, or when that may be a courtesy ("You're
    welcome."), the last substantive one (`closing_reply`, which reads the session's prompts)."""
    if not courtesy_shaped(last_reply):
        return last_reply
    closing, _ = closing_reply(store.session_prompts(session_id, None, None))
    return closing.content if closing else last_reply


def _working_after(ordered: Sequence[Session], acts: dict[str, list[Observation]],
                   lead_acts: Sequence[Observation]) -> dict[str, int]:
    """For each session, how many later ones (the lead included) changed files or committed."""
    def working(rows: Sequence[Observation]) -> bool:
        return any(o.obs_type in (*CHANGES, "git_commit") for o in rows)

    count = int(working(lead_acts))
    out: dict[str, int] = {}
    for session in reversed(ordered):
        out[session.id] = count
        count += int(working(acts[session.id]))
    return out
