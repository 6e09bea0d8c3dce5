"""Reading Claude Code transcripts (`~/.claude/projects/<dir>/<session>.jsonl`).

The format is not documented and changes between versions, so every reader here is
tolerant: unreadable files, partial last lines, unknown line types and missing fields
are skipped, never raised.
"""

from __future__ import annotations

import os
import stat

from nmem import jsonlite
from nmem.capture import events as ev

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Generator, Iterator
    from typing import Any

TAIL_BYTES = 256 * 1024
# A Stop reads back this far at most for the start of its turn (a long turn's tool output is most of it).
TURN_MAX_BYTES = 4 * 1024 * 1024
TURN_WORDS = 200          # the agent's messages a Stop stores at most, the newest
REASONING_CHARS = 4000    # a thinking block is kept bounded: the why behind a step, not a log of it
REPLY_CHARS = 8000        # an assistant text message (the bound of every stored prompt)
CUT_MARGIN = 512          # kept past a bound until scrubbed, so a secret straddling it is still recognised
INTERRUPTED = "[Request interrupted by user"
# Longer lines are skipped, never held whole: a transcript line holds one message (a large tool result
# is a few MB at most); a file without newlines must not be read into memory whole.
MAX_LINE_BYTES = 16 * 1024 * 1024
_READ_CHUNK = 1024 * 1024


def open_regular(path: str) -> int | None:
    """A read-only descriptor of `path` when it is a regular file, else None.

    A transcript path comes from the hook's input: a FIFO would block the read (and the hook)
    forever, a device such as /dev/zero never ends. Anything but a regular file is refused
    before it is opened; the open itself cannot block (O_NONBLOCK) and the descriptor is
    checked again, for a path swapped in between.
    """
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def read_tail(path: str, max_bytes: int) -> bytes:
    """At most the last `max_bytes` of a regular file, starting at a line; b"" for anything else."""
    return _read_tail(path, max_bytes)[0]


def _read_tail(path: str, max_bytes: int) -> tuple[bytes, bool]:
    """`read_tail`, and whether what it read is the whole file."""
    fd = open_regular(path)
    if fd is None:
        return b"", True
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - max_bytes)
        chunks: list[bytes] = []
        want = size - start
        while want > 0:
            chunk = os.pread(fd, want, start)
            if not chunk:
                break
            chunks.append(chunk)
            start += len(chunk)
            want -= len(chunk)
    except OSError:
        return b"", True
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if size > max_bytes:
        cut = data.find(b"\n")
        data = data[cut + 1:] if cut >= 0 else b""  # the first line is partial
    return data, size <= max_bytes


def _objects(lines: Iterator[bytes]) -> Iterator[dict[str, Any]]:
    for raw in lines:
        try:
            obj = jsonlite.loads(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            yield obj


def _whole_lines(fd: int) -> Iterator[bytes]:
    """The lines of an open regular file, skipping any longer than MAX_LINE_BYTES."""
    with open(fd, "rb") as fh:
        while True:
            raw = fh.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            if len(raw) > MAX_LINE_BYTES:
                while raw and not raw.endswith(b"\n"):
                    raw = fh.readline(_READ_CHUNK)
                continue
            yield raw


def iter_lines(path: str, tail_bytes: int | None = None) -> Iterator[dict[str, Any]]:
    """JSON objects of a JSONL file (or of its last `tail_bytes`), skipping anything unreadable.

    Only regular files are read (see `open_regular`); anything else yields nothing.
    """
    if tail_bytes is not None:
        yield from _objects(iter(read_tail(path, tail_bytes).splitlines()))
        return
    fd = open_regular(path)
    if fd is None:
        return
    try:
        yield from _objects(_whole_lines(fd))
    except OSError:
        return


def _blocks(line: dict[str, Any]) -> list[dict[str, Any]]:
    message = line.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _is_user_prompt(line: dict[str, Any]) -> bool:
    if line.get("type") != "user" or line.get("isMeta") or line.get("isCompactSummary"):
        return False
    blocks = _blocks(line)
    return bool(blocks) and all(b.get("type") == "text" for b in blocks)


def _may_hold_words(raw: bytes) -> bool:
    """Whether a line can hold a typed prompt or the agent's text or thinking. Tool results, and
    tool calls without text, are most of a long turn's bytes and are skipped unparsed."""
    if b'"tool_result"' in raw:
        return False
    return b'"tool_use"' not in raw or b'"text"' in raw or b'"thinking"' in raw


def _turn_in(data: bytes, subagent: bool = False) -> tuple[list[tuple[int, bool, str]], bool]:
    """The agent's words after the last typed prompt in `data` (and before it, when that prompt
    followed an interruption), and whether such a prompt was found. For a subagent, its text
    messages only: of its own file (every line a sidechain one, the task its prompt), or of the
    sidechain lines of the parent's file that holds it inline (older Claude Code)."""
    words: list[tuple[int, bool, str]] = []
    started = interrupted = False
    for raw in data.splitlines():
        if not _may_hold_words(raw):
            continue
        try:
            line = jsonlite.loads(raw)
        except (ValueError, RecursionError):
            continue
        if not isinstance(line, dict):
            continue
        sidechain = line.get("isSidechain")
        if (sidechain and not subagent) or (subagent and sidechain is False):
            continue  # a Stop reads the main agent's lines; a SubagentStop the subagent's (inline ones too)
        if _is_user_prompt(line):
            text = _text_of(_blocks(line))
            if text.startswith(INTERRUPTED):
                interrupted = True  # that turn got no Stop: its words are kept with this one
            elif text and not text.startswith(NOT_TYPED):
                if not interrupted:
                    words = []
                started, interrupted = True, False
        elif line.get("type") == "assistant":
            at = _epoch(line.get("timestamp"), 0)
            for block in _blocks(line):
                said = _words(block)
                if said is not None and not (subagent and said[0]):
                    words.append((at, *said))
    return words, started


def _words(block: dict[str, Any]) -> tuple[bool, str] | None:
    """(is thinking, text) of an assistant text or thinking block, bounded; None for anything else."""
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        text = block["text"].strip()
        return (False, text[:REPLY_CHARS + CUT_MARGIN]) if text else None
    if kind == "thinking" and isinstance(block.get("thinking"), str):
        text = block["thinking"].strip()
        return (True, text[:REASONING_CHARS + CUT_MARGIN]) if text else None
    return None


def turn_words(path: str | None, *, subagent: bool = False) -> list[tuple[int, bool, str]]:
    """What the agent wrote in the last turn, oldest first: (time, is thinking, text) of each text
    and thinking block of the main agent since the last prompt the user typed (a turn the user
    interrupted just before it, which got no Stop, counts too); with `subagent`, each text
    message of a subagent's own file since its task. The tail is read, widened up to
    TURN_MAX_BYTES while the turn began further back. Time is 0 when a line has none."""
    if not path:
        return []
    size = TAIL_BYTES
    while True:
        data, whole = _read_tail(path, size)
        words, started = _turn_in(data, subagent)
        if started or whole or size >= TURN_MAX_BYTES:
            return words[-TURN_WORDS:]
        size = min(size * 4, TURN_MAX_BYTES)


def _epoch(value: Any, fallback: int) -> int:
    if isinstance(value, str):
        fast = _utc_epoch(value)
        if fast is not None:
            return fast
        from datetime import datetime  # other ISO forms; Claude Code writes the one above

        try:
            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp())
        except ValueError:
            return fallback
    if isinstance(value, (int, float)):
        return int(value / 1000 if value > 1e11 else value)
    return fallback


def _utc_epoch(text: str) -> int | None:
    """Seconds of `2026-11-20T09:00:04.123Z` (the form Claude Code writes) without the datetime module."""
    if not (len(text) >= 20 and text.endswith("Z") and text[4] == "-" and text[7] == "-" and text[10] == "T"
            and text[13] == ":" and text[16] == ":" and text[19] in ".Z"):
        return None
    try:
        year, month, day = int(text[0:4]), int(text[5:7]), int(text[8:10])
        hour, minute, second = int(text[11:13]), int(text[14:16]), int(text[17:19])
    except ValueError:
        return None
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    year -= month <= 2  # days since 1970-01-01 in the proleptic Gregorian calendar
    era = year // 400
    of_era = year - era * 400
    of_year = (153 * ((month + 9) % 12) + 2) // 5 + day - 1
    days = era * 146097 + of_era * 365 + of_era // 4 - of_era // 100 + of_year - 719468
    return days * 86400 + hour * 3600 + minute * 60 + second


# -- replaying a whole transcript (imports; never on the hook path) ------------------------------------

COMPACT_PREAMBLE = "This session is being continued from a previous conversation"
# User lines Claude Code writes that nobody typed: command output, reminders, notices, interruptions.
NOT_TYPED = ("<local-command-", "<system-reminder", "<task-notification", "<bash-input", "<bash-stdout",
             "<bash-stderr", "<user-memory-input", "<teammate-message", "[Request interrupted by user",
             "Caveat: The messages below were generated by the user")
PENDING_CALLS = 64  # tool calls a cursor carries over while their results are not written yet


class TranscriptCursor:
    """Where a replay of one transcript file stopped: the bytes of complete lines it has taken
    in, and the tool calls read there whose results were not written yet. A later replay from
    it yields only what the file gained since."""

    __slots__ = ("offset", "pending")

    def __init__(self, offset: int = 0, pending: dict[str, tuple[str, dict[str, Any]]] | None = None) -> None:
        self.offset = offset
        self.pending: dict[str, tuple[str, dict[str, Any]]] = {} if pending is None else pending

    def state(self) -> dict[str, Any]:
        """What to keep beside the offset (JSON): the newest calls still waiting for a result."""
        calls = list(self.pending.items())[-PENDING_CALLS:]
        return {"pending": [[call_id, name, tool_input] for call_id, (name, tool_input) in calls]}

    @classmethod
    def restore(cls, offset: int, state: Any) -> TranscriptCursor:
        pending: dict[str, tuple[str, dict[str, Any]]] = {}
        for item in state.get("pending", []) if isinstance(state, dict) else []:
            if (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)
                    and isinstance(item[1], str) and isinstance(item[2], dict)):
                pending[item[0]] = (item[1], item[2])
        return cls(offset, pending)


# What `complete_lines` gives for a line it skipped: longer than its cap, or nested past the parser's depth.
SKIPPED_LINE = object()


def complete_lines(path: str, offset: int = 0, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[int, Any]]:
    """(end offset, parsed JSON or None) of each newline-terminated line from `offset`; a last
    line still being written is left for a later read. Only regular files are read; a line
    longer than `max_line_bytes` is never held whole, and comes as SKIPPED_LINE (as does one
    nested too deeply to parse)."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return
    with open(fd, "rb") as fh:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return
            fh.seek(offset)
            pos = offset
            while raw := fh.readline(max_line_bytes + 1):
                if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                    while raw and not raw.endswith(b"\n"):
                        pos += len(raw)
                        raw = fh.readline(_READ_CHUNK)
                    if not raw:
                        return  # still being written: read again later, from its start
                    yield pos + len(raw), SKIPPED_LINE
                    pos += len(raw)
                    continue
                if not raw.endswith(b"\n"):
                    return
                pos += len(raw)
                try:
                    obj = jsonlite.loads(raw)
                except ValueError:
                    obj = None
                except RecursionError:
                    obj = SKIPPED_LINE
                yield pos, obj
        except OSError:
            return


def _text_of(blocks: list[dict[str, Any]]) -> str:
    return "\n".join(str(b.get("text") or "") for b in blocks if b.get("type") == "text").strip()


def _tag(text: str, name: str) -> str | None:
    start = text.find(f"<{name}>")
    end = text.find(f"</{name}>")
    if start < 0 or end < start:
        return None
    return text[start + len(name) + 2:end].strip()


def slash_command(text: str) -> str | None:
    """`/review src/api.py` for a slash command's user line, else None."""
    if "<command-name>" not in text or not text.lstrip().startswith("<command-"):
        return None
    name = _tag(text, "command-name")
    if not name:
        return None
    if not name.startswith("/"):
        name = "/" + name
    args = _tag(text, "command-args") or ""
    return f"{name} {args}".strip()


def compaction_summary(text: str) -> str:
    """The summary of a compaction's summary line, without the preamble Claude Code puts before it."""
    text = text.strip()
    if text.startswith(COMPACT_PREAMBLE):
        text = text.partition("\n")[2].strip()
    return text


class TranscriptReplay:
    """The hook events one transcript file stands for, read from a cursor onwards.

    Prompts the user typed (slash commands with their arguments, kept when the model answers
    them), every text message and thinking block of the agent, tool calls paired with their results, compactions (a
    PreCompact carrying the compaction's summary, then SessionStart `compact`) and subagent
    work: sidechain lines, or a whole subagent file when `agent_id` is given, become tool
    calls and replies with `agent_id` set, and the parent's Task result a SubagentStop. What nobody typed
    (command output, reminders, task notices, interruptions, meta lines) is not an intent.
    In a session's own file, lines of another session (history a resumed session copied in)
    are skipped. `cursor` is advanced as events are taken; it never passes a line whose
    meaning depends on lines not written yet (a command not answered yet, a compaction without
    its summary).
    """

    def __init__(self, path: str, *, session_id: str | None = None, cursor: TranscriptCursor | None = None,
                 agent_id: str | None = None, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.path = path
        self.max_line_bytes = max_line_bytes
        self.skipped_lines = 0   # too long, or nested too deeply to parse
        self.session_id = session_id
        self.agent_id = agent_id
        self.cursor = cursor or TranscriptCursor()
        self.cwd: str | None = None
        self.last_text = ""              # the main chain's last assistant text (Stop's message)
        self.first_ts: int | None = None  # the time of the first message line read
        self.last_ts = 0
        self._held: tuple[str, dict[str, Any], Any] | None = None   # kind, event fields, payload
        self._held_at: TranscriptCursor | None = None
        self.agent_type = _agent_type_beside(path) if agent_id is not None else None

    def events(self) -> Iterator[ev.HookEvent]:
        cursor = self.cursor
        for end, line in complete_lines(self.path, cursor.offset, self.max_line_bytes):
            if line is SKIPPED_LINE:
                self.skipped_lines += 1
            elif isinstance(line, dict):
                yield from self._line(line)
            if self._held is None:
                cursor.offset = end
        if self._held_at is not None:  # resume at the held line, with the calls pending before it
            self.cursor.offset, self.cursor.pending = self._held_at.offset, self._held_at.pending

    def _hold(self, kind: str, base: dict[str, Any], payload: Any) -> None:
        self._held = (kind, base, payload)
        self._held_at = TranscriptCursor(self.cursor.offset, dict(self.cursor.pending))

    def _release(self) -> None:
        self._held = self._held_at = None

    def _line(self, line: dict[str, Any]) -> Iterator[ev.HookEvent]:
        sid = line.get("sessionId")
        if isinstance(sid, str) and self.agent_id is None:  # a subagent's file belongs where it lies
            if self.session_id is None:
                self.session_id = sid
            elif sid != self.session_id:
                return
        if isinstance(line.get("cwd"), str) and line["cwd"]:
            self.cwd = line["cwd"]
        kind = line.get("type")
        if kind not in ("user", "assistant", "system") or self.session_id is None or self.cwd is None:
            return
        self.last_ts = _epoch(line.get("timestamp"), self.last_ts)
        if self.first_ts is None:
            self.first_ts = self.last_ts
        base: dict[str, Any] = {"session_id": self.session_id, "cwd": self.cwd, "timestamp": self.last_ts,
                                "transcript_path": self.path}
        sidechain = self.agent_id is not None or bool(line.get("isSidechain"))
        if self._held is not None:
            held = yield from self._settle(line, kind, sidechain)
            if held:
                return
        if sidechain:
            yield from self._sidechain(line, kind, base)
        elif kind == "system":
            if line.get("subtype") == "compact_boundary":
                meta = line.get("compactMetadata")
                trigger = meta.get("trigger") if isinstance(meta, dict) else None
                self._hold("compact", {**base, "source": trigger if isinstance(trigger, str) else "auto"}, None)
        elif kind == "assistant":
            for block in _blocks(line):
                btype = block.get("type")
                if btype == "tool_use":
                    self._call(block)
                elif (said := _words(block)) is not None:
                    thinking, text = said
                    if not thinking:
                        self.last_text = text
                    yield ev.HookEvent(kind=ev.REASONING if thinking else ev.REPLY, hook_event_name="Transcript",
                                       assistant_message=text, **base)
        elif not (line.get("isMeta") or line.get("isCompactSummary")):
            yield from self._user(line, base)

    def _settle(self, line: dict[str, Any], kind: str, sidechain: bool) -> Generator[ev.HookEvent, None, bool]:
        """Resolve what is held, given the next line; True when that line was the held item's own."""
        assert self._held is not None
        held, base, payload = self._held
        if held == "compact":
            is_summary = kind == "user" and bool(line.get("isCompactSummary")) and not sidechain
            summary = compaction_summary(_text_of(_blocks(line))) if is_summary else ""
            self._release()
            yield ev.HookEvent(kind=ev.PRE_COMPACT, hook_event_name="PreCompact", assistant_message=summary or None,
                               **base)
            yield ev.HookEvent(kind=ev.SESSION_START, hook_event_name="SessionStart",
                               **{**base, "source": "compact"})
            return is_summary
        if kind == "user" and line.get("isMeta") and not sidechain:
            return True   # the command's expanded prompt: the answer is still to come
        self._release()
        if kind == "assistant":   # the model took the command up: it was a prompt
            yield ev.HookEvent(kind=ev.PROMPT, hook_event_name="UserPromptSubmit", prompt=payload, **base)
        return False      # local output, another prompt, a boundary: the command prompted nobody

    def _call(self, block: dict[str, Any]) -> None:
        if isinstance(block.get("id"), str):
            tool_input = block.get("input")
            self.cursor.pending[block["id"]] = (str(block.get("name") or ""),
                                                tool_input if isinstance(tool_input, dict) else {})

    def _results(self, line: dict[str, Any], base: dict[str, Any], agent_id: str | None) -> Iterator[ev.HookEvent]:
        for block in _blocks(line):
            if block.get("type") != "tool_result":
                continue
            call = self.cursor.pending.pop(str(block.get("tool_use_id")), None)
            if call is None or not call[0]:
                continue
            result = line.get("toolUseResult")
            if agent_id is None and isinstance(result, dict) and isinstance(result.get("agentId"), str):
                # the parent's Task result: its subagent stopped just before
                answer = _result_text(result.get("content")) or _result_text(block.get("content"))
                # the subagent's messages are replayed from its own lines: nothing is read again
                kind = call[1].get("subagent_type")
                yield ev.HookEvent(kind=ev.SUBAGENT_STOP, hook_event_name="SubagentStop",
                                   assistant_message=answer.strip() or None, agent_id=result["agentId"],
                                   agent_type=kind if isinstance(kind, str) else None,
                                   **{**base, "transcript_path": None})
            failed = block.get("is_error") is True
            error = None
            if failed:
                error = result if isinstance(result, str) else _result_text(block.get("content"))
            yield ev.HookEvent(
                kind=ev.TOOL_FAILURE if failed else ev.TOOL,
                hook_event_name="PostToolUseFailure" if failed else "PostToolUse",
                tool_name=call[0], tool_input=call[1],
                tool_response=result if isinstance(result, dict) else _result_text(block.get("content")),
                error=error, agent_id=agent_id, agent_type=self._running_subagent() if agent_id else None, **base,
            )

    def _sidechain(self, line: dict[str, Any], kind: str, base: dict[str, Any]) -> Iterator[ev.HookEvent]:
        """A subagent's line: its tool calls and its text count (with its id); its prompt and its
        thinking do not."""
        agent_id = self.agent_id or str(line.get("agentId") or "sidechain")
        if kind == "assistant":
            for block in _blocks(line):
                if block.get("type") == "tool_use":
                    self._call(block)
                elif (said := _words(block)) is not None and not said[0]:
                    yield ev.HookEvent(kind=ev.REPLY, hook_event_name="Transcript", assistant_message=said[1],
                                       agent_id=agent_id, agent_type=self._running_subagent(), **base)
        elif kind == "user":
            yield from self._results(line, base, agent_id)

    def _running_subagent(self) -> str | None:
        """The type of the subagent a sidechain line belongs to: its file's (`agent-<id>.meta.json`
        beside it), else that of the parent's one pending Task call (several running at once, or
        none read: unknown)."""
        if self.agent_type:
            return self.agent_type
        kinds = {str(args.get("subagent_type")) for name, args in self.cursor.pending.values()
                 if name in ("Task", "Agent") and isinstance(args.get("subagent_type"), str)}
        return kinds.pop() if len(kinds) == 1 else None

    def _user(self, line: dict[str, Any], base: dict[str, Any]) -> Iterator[ev.HookEvent]:
        blocks = _blocks(line)
        if any(b.get("type") == "tool_result" for b in blocks):
            yield from self._results(line, base, None)
            return
        origin = line.get("origin")
        if isinstance(origin, dict) and origin.get("kind") == "task-notification":
            return
        text = _text_of(blocks)
        if not text:
            return
        command = slash_command(text)
        if command is not None:
            self._hold("command", base, command)
        elif not text.startswith(NOT_TYPED):
            yield ev.HookEvent(kind=ev.PROMPT, hook_event_name="UserPromptSubmit", prompt=text, **base)


def _agent_type_beside(path: str) -> str | None:
    """A subagent file's type from the `agent-<id>.meta.json` Claude Code writes beside it."""
    meta = path[:-len(".jsonl")] + ".meta.json" if path.endswith(".jsonl") else None
    try:
        with open(meta or "", encoding="utf-8") as handle:
            data = jsonlite.loads(handle.read(4096))
    except (OSError, ValueError):
        return None
    kind = data.get("agentType") if isinstance(data, dict) else None
    return kind if isinstance(kind, str) and kind.strip() else None


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text") or "") for b in content if isinstance(b, dict))
    return ""


def session_id_of(path: str) -> str | None:
    """The session a transcript belongs to (first line that names one)."""
    for line in iter_lines(path):
        if isinstance(line.get("sessionId"), str):
            return str(line["sessionId"])
    return None
