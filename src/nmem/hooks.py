"""`nmem record` and `nmem hook <event>`: the hot path, run as a fresh process per hook event.

Standard library and nmem's light modules only (a test lists what a run imports). It never
breaks the agent: bad input exits 1 with one line on stderr (and a warning in
`<data dir>/logs/nmem.log`) and stores nothing; internal errors are logged there too; it
never exits 2, which would block the user's prompt in Claude Code.

A database that fails (foreign, corrupt, read-only, disk full) keeps the event in the spool too,
logs an ERROR and exits 4 with one line on stderr, which Claude Code shows without blocking; a
SessionStart still prints what it can read.

With `--remote URL` (or `hooks.remote_url`) the event goes to a team server instead
(`nmem.remote`), spooled under `<data dir>/spool/remote/` while the server cannot take it.
With a server store (`store.url` = postgresql://...), every event goes to the spool and
`nmem drain` stores it (docs/postgres.md): the hook path never imports a database driver.

A database that stays locked is waited for once per run, at most `hooks.busy_budget_ms` in
all (see `Deadline`); past that the event goes to `<data dir>/spool/` and a later run stores
it. Spooled events are stored oldest first, each exactly once, however many hooks drain the
spool at the same time and wherever one of them is killed (see `drain_spool`).
"""

from __future__ import annotations

import os
import sys
import time

from nmem import jsonlite as json
from nmem import sync_trigger
from nmem.capture import agents
from nmem.capture import events as ev
from nmem.capture.claude_code import HOOK_ALIASES
from nmem.capture.privacy import scrub, scrub_payload
from nmem.capture.recorder import RecordOutcome
from nmem.config import Settings, load_settings
from nmem.core import CoreService
from nmem.errors import ConfigError, InvalidArgument, NmemError, StorageError, StoreBusy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO, Any, NoReturn, TypeVar

    T = TypeVar("T")

USAGE = ("usage: nmem record [--agent NAME] [--remote URL]  |  nmem hook <event> [--agent NAME] [--input FILE] "
         "[--output FILE] [--remote URL]  (hook JSON on stdin; --agent: " + ", ".join(agents.AGENTS) + ")")
SPOOL_BATCH = 200
TRY_MS = 100               # the longest single wait for the write lock; a budget is spent in such tries
STALE_CLAIM_SECONDS = 600  # a claim this old belongs to no live hook, whatever its pid says now
WAITING = ".json"          # <spool id>.json: an event waiting to be stored
CLAIMED = ".claim.json"    # <spool id>.<pid>.claim.json: taken by that process
SET_ASIDE = ".bad"         # <spool id>.bad: unreadable or unstorable, kept for a person to look at
LOG_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}
# A SessionEnd waits at most this long for a locked database, whatever `hooks.busy_budget_ms` says,
# so that start-up, the wait and the spooling fit well inside the 1.5 s Claude Code allows it.
SESSION_END_BUDGET_MS = 700


class HookLog:
    """Appends lines to `<data dir>/logs/nmem.log` (the format `nmem doctor` reads).

    The logging package costs more to import than a hook's whole budget allows, and a hook
    writes at most a line or two, so this opens the file only when there is something to say.
    """

    def __init__(self, settings: Settings | None) -> None:
        self.settings = settings

    def write(self, level: str, message: str) -> None:
        settings = self.settings
        if settings is None or LOG_LEVELS[level] < LOG_LEVELS.get(str(settings["log.level"]).lower(), 30):
            return
        now = time.time()
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f",{int(now % 1 * 1000):03d}"
        try:
            settings.ensure_dir(settings.log_dir)
            fd = os.open(os.path.join(settings.log_dir, "nmem.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8", errors="replace") as fh:
                fh.write(f"{stamp} {level.upper()} {scrub(message)}\n")
        except OSError:
            pass  # nowhere to log to; the hook still must not fail

    def warning(self, message: str) -> None:
        self.write("warning", message)

    def error(self, message: str) -> None:
        self.write("error", message)


class Deadline:
    """The one wait budget of a hook run (`hooks.busy_budget_ms`), shared by every write it makes.

    SQLite waits for the write lock inside a statement, up to the connection's busy timeout.
    The store is opened with a short timeout (`try_ms`) and a write is tried again only while
    a whole try still fits before the deadline, so the waits of a run (opening the database,
    each drained event, its own event) add up to at most the budget.
    """

    def __init__(self, budget_ms: int) -> None:
        self.budget_ms = max(0, budget_ms)
        self.try_ms = min(TRY_MS, self.budget_ms // 4)  # at least four tries fit in any budget
        self.ends = time.monotonic() + self.budget_ms / 1000

    def fits(self, tries: int = 1) -> bool:
        """Whether `tries` whole tries still fit before the deadline."""
        left_ms = max(0.0, (self.ends - time.monotonic()) * 1000)
        return left_ms >= tries * self.try_ms

    def run(self, write: Callable[[], T]) -> T:
        """`write()`, tried again while the database is busy and a try fits; then StoreBusy."""
        if not self.fits():
            raise StoreBusy(self.spent())
        while True:
            try:
                return write()
            except StorageError as exc:
                if not _is_busy(exc):
                    raise
                if self.try_ms == 0 or not self.fits():
                    raise StoreBusy(self.spent()) from exc

    def spent(self) -> str:
        return f"database busy past the hook's budget ({self.budget_ms} ms)"


SQLITE_BUSY, SQLITE_LOCKED = 5, 6


def _is_busy(exc: StorageError) -> bool:
    """A busy database, also when the store reports it as a failure to open: a connection's
    first read waits on the lock too, while the last connection to the file folds the WAL back
    and removes it."""
    if isinstance(exc, StoreBusy):
        return True
    code = getattr(exc.__cause__, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in (SQLITE_BUSY, SQLITE_LOCKED)


def _traceback(exc: BaseException) -> str:
    """The exception's frames in Python's traceback layout (without the traceback module)."""
    lines = ["Traceback (most recent call last):"]
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        lines.append(f'  File "{code.co_filename}", line {tb.tb_lineno}, in {code.co_name}')
        tb = tb.tb_next
    lines.append(f"{type(exc).__name__}: {exc}")
    return "\n".join(lines)


def _parse_args(argv: list[str]) -> tuple[str | None, str | None, str | None, str | None, str | None]:
    """(event override, input file, output file, remote server URL, agent) from `record` /
    `hook <event>` arguments."""
    if not argv or argv[0] not in ("record", "hook"):
        raise InvalidArgument(USAGE)
    event: str | None = None
    rest = argv[1:]
    if argv[0] == "hook":
        if not rest or rest[0].startswith("-"):
            raise InvalidArgument(USAGE)
        event = HOOK_ALIASES.get(rest[0], rest[0])
        rest = rest[1:]
    input_file = output_file = remote = agent = None
    while rest:
        flag = rest.pop(0)
        if flag in ("--input", "--output", "--remote", "--agent") and rest:
            if flag == "--agent":
                agent = agents.check(rest.pop(0))
            elif flag == "--input":
                input_file = rest.pop(0)
            elif flag == "--output":
                output_file = rest.pop(0)
            else:
                remote = rest.pop(0)
        elif flag in ("-h", "--help"):
            raise InvalidArgument(USAGE)
        else:
            raise InvalidArgument(f"unexpected argument {flag!r}; {USAGE}")
    return event, input_file, output_file, remote, agent


def _spool(settings: Settings, payload: dict[str, Any]) -> str:
    """Keep an event the database could not take; scrubbed, written atomically, drained later."""
    payload = scrub_payload(payload)
    spool = settings.ensure_dir(settings.spool_dir)
    name = f"{time.time_ns()}-{os.getpid()}{WAITING}"
    tmp = os.path.join(spool, f".{name}.tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(payload))
    final = os.path.join(spool, name)
    os.replace(tmp, final)
    return final


def drain_spool(service: CoreService, log: HookLog, deadline: Deadline, limit: int = SPOOL_BATCH) -> bool:
    """Store spooled events, oldest first; False when more than `limit` were waiting.

    Each file is claimed before it is read: renamed to `<id>.<pid>.claim.json`, which only one
    of several draining hooks can do. The event is stored under its spool id, which makes a
    replay harmless (`CoreService.record_event`), and the claim is unlinked. A claim whose
    process is gone (killed between claim and unlink) is taken over by the next drain. A
    file that cannot be read or stored is set aside as `<id>.bad` and logged. A busy or
    failing database stops the drain with StoreBusy or StorageError, the claim put back.
    """
    spool = service.settings.spool_dir
    try:
        names = os.listdir(spool)
    except OSError:
        return True  # no spool dir: the common case, one failed syscall
    entries = _waiting(spool, names)
    for spool_id, name in entries[:limit]:
        if not deadline.fits(2):  # keep a try for the hook's own event
            raise StoreBusy(f"the hook's budget ({deadline.budget_ms} ms) ran out with older events "
                            "still waiting in the spool")
        claimed = os.path.join(spool, f"{spool_id}.{os.getpid()}{CLAIMED}")
        try:
            os.rename(os.path.join(spool, name), claimed)
        except OSError:
            continue  # another hook took it first
        try:
            _replay(service, log, deadline, spool_id, claimed)
        except StorageError:
            try:
                os.rename(claimed, os.path.join(spool, spool_id + WAITING))
            except OSError:
                pass  # taken over meanwhile; its new owner stores it
            raise
    return len(entries) <= limit


def _waiting(spool: str, names: list[str]) -> list[tuple[str, str]]:
    """(spool id, file name) of the events waiting to be stored, oldest first: unclaimed
    files, and claims whose hook is gone."""
    entries = []
    now = time.time()
    for name in names:
        if name.startswith(".") and name.endswith(".tmp"):
            _drop_if_abandoned(os.path.join(spool, name), now)
            continue
        if not (name[:1].isdigit() and name.endswith(WAITING)):
            continue
        if name.endswith(CLAIMED):
            spool_id, _, pid = name[: -len(CLAIMED)].rpartition(".")
            if not spool_id or not _abandoned(os.path.join(spool, name), pid, now):
                continue
        else:
            spool_id = name[: -len(WAITING)]
            if "." in spool_id:
                continue
        entries.append((spool_id, name))
    entries.sort()
    return entries


def _drop_if_abandoned(path: str, now: float) -> None:
    """Remove a spool file whose writer was killed before renaming it into place (`.<id>.json.tmp`):
    that hook never acknowledged its event, and the file may be cut short."""
    pid = os.path.basename(path)[1:].partition(".")[0].rpartition("-")[2]
    if _abandoned(path, pid, now):
        try:
            os.unlink(path)
        except OSError:
            pass


def _abandoned(path: str, pid_text: str, now: float) -> bool:
    """Whether no live hook works on this claim or half-written file: the process named by
    `pid_text` is gone, or the file is older than any hook lives.

    A file under this process's own pid counts as abandoned too: a drain holds no claim and
    writes no spool file while it looks, so an earlier process with the same pid left it.
    """
    if not pid_text.isdigit() or int(pid_text) == 0 or int(pid_text) == os.getpid():
        return True
    try:
        os.kill(int(pid_text), 0)
    except (ProcessLookupError, OverflowError):
        return True
    except OSError:
        pass  # alive, another user's process
    try:
        return now - os.stat(path).st_ctime > STALE_CLAIM_SECONDS
    except OSError:
        return False


def _replay(service: CoreService, log: HookLog, deadline: Deadline, spool_id: str, path: str) -> None:
    """Store one claimed event, or set it aside; StorageError when the database cannot take it now."""
    try:
        with open(path, "rb") as fh:
            text = fh.read().decode("utf-8", "replace")
        payload = json.loads(text)
        if json.may_hold_surrogates(text):
            payload = json.replace_surrogates(payload)
        stamp = payload.pop("_nmem_received_at", None) if isinstance(payload, dict) else None
        event = agents.parse(payload, now=stamp)
    except (OSError, ValueError, TypeError, OverflowError, RecursionError, InvalidArgument) as exc:
        _set_aside(path, spool_id, log.warning, f"unreadable: {exc}")
        return
    try:
        deadline.run(lambda: service.record_event(event, spool_id=spool_id))
    except StorageError:
        raise
    except Exception as exc:  # one event nmem cannot store must not stop every later hook's drain
        _set_aside(path, spool_id, log.error, f"cannot be stored: {type(exc).__name__}: {exc}")
        return
    try:
        os.unlink(path)
    except OSError:
        pass  # stored and marked: whoever replays it again stores nothing


def _set_aside(path: str, spool_id: str, log: Callable[[str], None], why: str) -> None:
    try:
        os.replace(path, os.path.join(os.path.dirname(path), spool_id + SET_ASIDE))
    except OSError:
        return  # taken over meanwhile
    log(f"set aside spool file {spool_id}{WAITING} ({why})")


def run(argv: list[str], stdin: IO[str], stdout: IO[str], stderr: IO[str],
        env: dict[str, str] | None = None) -> int:
    """Handle one hook event."""
    settings: Settings | None = None
    try:
        settings = load_settings(env)
        event_override, input_file, output_file, remote, agent = _parse_args(argv)
        payload = _read_payload(stdin, input_file)
        if event_override and isinstance(payload, dict):
            payload.setdefault("hook_event_name", event_override)
        event = agents.parse(payload, agent)
        payload = agents.tagged(payload, event.agent)  # a spooled or forwarded event keeps its agent
        if not settings["memory.enabled"]:
            return 0
        remote = remote or str(settings["hooks.remote_url"])
        try:
            if remote:
                output, failure = _record_remote(settings, payload, event, remote)
            else:
                output, failure = _record(settings, payload, event)
        except RecursionError:  # scrubbing and storing walk the input as deep as it goes
            raise InvalidArgument("hook input is nested too deeply to store") from None
        if output:
            if output_file:
                with open(output_file, "w", encoding="utf-8") as fh:
                    fh.write(output)
            else:
                stdout.write(output)
                stdout.flush()
        if failure is not None and not output:
            # Kept in the spool, but the database needs the user (foreign, corrupt, read-only,
            # disk full): one line that says so. Exit 4 does not block Claude Code; only 2 would.
            stderr.write(f"nmem: {_one_line(failure.message)}; the event is kept in the spool\n")
            return 4
        return 0
    except (InvalidArgument, ConfigError) as exc:
        message = _one_line(exc.message)
        stderr.write(f"nmem: {message}\n")
        HookLog(settings).warning(f"hook input rejected: {message}")
        return 1
    except StorageError as exc:  # neither stored nor spooled: say so, and keep it for `nmem doctor`
        message = _one_line(exc.message)
        HookLog(settings).error(f"hook event lost: {message}")
        stderr.write(f"nmem: event not stored: {message}\n")
        return 4
    except Exception as exc:  # the agent must never see a traceback; the log keeps where it happened
        HookLog(settings).error(f"hook failed: {type(exc).__name__}: {exc}\n{_traceback(exc)}")
        stderr.write(f"nmem: internal error ({type(exc).__name__}); see the nmem log\n")
        return 1


def _one_line(text: str) -> str:
    return " ".join(text.split("\n"))


def _read_payload(stdin: IO[str], input_file: str | None) -> Any:
    """The hook's JSON input. Bytes that are not UTF-8 become U+FFFD, and so do lone surrogates
    spelled as JSON escapes (`\\ud800`): neither can be stored, and the rest of the event can."""
    if input_file:
        try:
            with open(input_file, "rb") as fh:
                data: str | bytes = fh.read()
        except OSError as exc:
            raise InvalidArgument(f"cannot read --input {input_file}: {exc.strerror}") from None
    else:
        buffer = getattr(stdin, "buffer", None)
        data = buffer.read() if buffer is not None else stdin.read()
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    try:
        payload = json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(f"hook input is not valid JSON: {exc}") from None
    except RecursionError:
        raise InvalidArgument("hook input is nested too deeply") from None
    if json.may_hold_surrogates(text):
        payload = json.replace_surrogates(payload)
    return payload


def _record(settings: Settings, payload: dict[str, Any],
            event: ev.HookEvent) -> tuple[str, StorageError | None]:
    """Store the event (or spool it, when the database stays busy or fails) and return what to
    print, with the failure that needs the user, if any (a busy database is not one)."""
    log = HookLog(settings)
    if not settings.store_url.startswith("sqlite:"):
        # A server store (PostgreSQL): hooks never load its driver (psycopg and its pool cost
        # more to import than a hook's whole budget), so every event waits in the spool until
        # `nmem drain` stores it; nothing is lost and the agent is not slowed.
        _spool(settings, {**payload, "_nmem_received_at": event.timestamp})
        return "", None
    budget = int(settings["hooks.busy_budget_ms"])
    if event.kind == ev.SESSION_END:  # Claude Code gives SessionEnd hooks 1.5 s in all, then kills them
        budget = min(budget, SESSION_END_BUDGET_MS)
    deadline = Deadline(budget)
    try:
        service = deadline.run(lambda: CoreService.open(settings, busy_timeout_ms=deadline.try_ms))
    except StorageError as exc:
        _keep(settings, log, payload, event, exc)
        return _busy_context(settings, event), _needs_user(exc)
    try:
        # Older events first, so prompts still frame later actions: an event that cannot be
        # stored after all of them (busy, out of time) waits behind them in the spool.
        try:
            if not drain_spool(service, log, deadline):
                raise StoreBusy(f"more than {SPOOL_BATCH} older events waiting in the spool")
            outcome = deadline.run(lambda: service.record_event(event))
        except StorageError as exc:
            _keep(settings, log, payload, event, exc)
            context = _session_context(service, event) if event.kind == ev.SESSION_START else ""
            return context, _needs_user(exc)
        return _output(settings, service, event, outcome), None
    finally:
        # SQLite's own close: the last connection to the file folds the WAL back and deletes
        # it. A process that skipped this (os._exit) would leave the WAL for the next hook to
        # recover, reading all of it, and never reset it: hooks slowed as the WAL grew.
        service.close(checkpoint=False)


def _record_remote(settings: Settings, payload: dict[str, Any], event: ev.HookEvent,
                   url: str) -> tuple[str, StorageError | None]:
    """Send the event to a team server (nmem.remote); a SessionStart prints the block it answers."""
    from nmem import remote  # only remote hooks load http.client

    answer, failure = remote.record(settings, payload, event, url, HookLog(settings))
    context = str((answer or {}).get("context") or "")
    if event.kind == ev.SESSION_START and context:
        return _hook_output(settings, event, context), failure
    return "", failure


def _needs_user(exc: StorageError) -> StorageError | None:
    return None if isinstance(exc, StoreBusy) else exc


def _output(settings: Settings, service: CoreService, event: ev.HookEvent, outcome: RecordOutcome) -> str:
    """What a stored event prints: the SessionStart block, opt-in file memories, remembered notes."""
    if outcome.skipped == "disabled":
        return ""
    if event.kind == ev.SESSION_START:
        sync_trigger.on_session_start(settings)  # detached, only with sync.auto
        return _session_context(service, event, outcome.project)
    if event.kind == ev.STOP:
        sync_trigger.on_stop(settings, service.store)
    if event.kind == ev.TOOL and outcome.file_path and settings["context.file_memories"]:
        from nmem.context import file_memories  # opt-in: a default hook never loads it

        block = file_memories(service, outcome.project, event.session_id, outcome.file_path)
        return _hook_output(settings, event, block)
    if event.kind == ev.PROMPT and outcome.memories:
        note = "; ".join(f"{m.namespace}: {m.summary} ({m.urn})" for m in outcome.memories)
        return _hook_output(settings, event, f"nmem remembered {note}")
    return ""


def _keep(settings: Settings, log: HookLog, payload: dict[str, Any], event: ev.HookEvent,
          exc: StorageError) -> None:
    """Spool an event the database did not take: a busy database is a warning, a failing one an error."""
    try:
        path = _spool(settings, {**payload, "_nmem_received_at": event.timestamp})
    except OSError as spool_exc:
        raise StorageError(f"{exc.message}; the spool failed too: {spool_exc}") from None
    note = f"{_one_line(exc.message)}; spooled {event.hook_event_name} event as {os.path.basename(path)}"
    if isinstance(exc, StoreBusy):
        log.warning(note)
    else:
        log.error(note)


def _session_context(service: CoreService, event: ev.HookEvent, project: str | None = None) -> str:
    """The SessionStart block; readers are never blocked by a writer, so it works while busy too."""
    project = project or service.project_for(event.cwd)
    if not service.settings.project_enabled(project, event.cwd):
        return ""
    from nmem.context import render  # only SessionStart renders; other events never load it

    block = render(service, project, event.source, event.timestamp, session_id=event.session_id or None,
                   cwd=event.cwd or None)
    return _hook_output(service.settings, event, block)


def _busy_context(settings: Settings, event: ev.HookEvent) -> str:
    if event.kind != ev.SESSION_START or not os.path.exists(settings.db_path):
        return ""
    try:
        service = CoreService.open(settings, readonly=True)
    except NmemError:
        return ""
    try:
        return _session_context(service, event)
    finally:
        service.close(checkpoint=False)


def _hook_output(settings: Settings, event: ev.HookEvent, text: str) -> str:
    """Context in the shape the event's agent reads (`capture.agents.output`); for Claude Code,
    plain text unless `context.format` is json."""
    return agents.output(event.agent, event.hook_event_name, text, plain_ok=settings["context.format"] != "json")


def main(argv: list[str] | None = None) -> NoReturn:
    """Process entry for hook runs: handle the event, flush, and leave without interpreter teardown.

    The database is closed by then (see `_record`); os._exit only skips the interpreter's
    own clean-up of modules and objects, which a one-event process does not need.
    """
    code = run(sys.argv[1:] if argv is None else argv, sys.stdin, sys.stdout, sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
