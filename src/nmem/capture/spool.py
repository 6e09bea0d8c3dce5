"""The hook spool: events a hook could not store yet, kept on disk and stored later, each once.

A hook spools an event when the database is busy past its budget (`Deadline`), failing, or a
server (PostgreSQL, whose driver the hook never loads); the next hook, `nmem drain`, or
`nmem record --remote`'s own drain stores it. Files are claimed by rename before they are
read, so many hooks can drain one spool at once; a claim whose process is gone is taken over.

  <spool id>.json                an event waiting to be stored
  <spool id>.<pid>.claim.json    taken by that process
  <spool id>.bad                 unreadable or unstorable, kept for a person to look at

Standard library and nmem's light modules only: it runs on the hook path. `HookLog` is the
hook's log (`<data dir>/logs/nmem.log`) without the logging package.
"""

from __future__ import annotations

import os
import time

from nmem import jsonlite as json
from nmem.capture import agents
from nmem.capture.privacy import scrub, scrub_payload
from nmem.errors import InvalidArgument, StorageError, StoreBusy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    from nmem.config import Settings
    from nmem.service.core import CaptureService

    T = TypeVar("T")

SPOOL_BATCH = 200
TRY_MS = 100               # the longest single wait for the write lock; a budget is spent in such tries
STALE_CLAIM_SECONDS = 600  # a claim this old belongs to no live hook, whatever its pid says now
WAITING = ".json"          # <spool id>.json: an event waiting to be stored
CLAIMED = ".claim.json"    # <spool id>.<pid>.claim.json: taken by that process
SET_ASIDE = ".bad"         # <spool id>.bad: unreadable or unstorable, kept for a person to look at
LOG_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}
LOG_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}


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
                if not is_busy(exc):
                    raise
                if self.try_ms == 0 or not self.fits():
                    raise StoreBusy(self.spent()) from exc

    def spent(self) -> str:
        return f"database busy past the hook's budget ({self.budget_ms} ms)"


SQLITE_BUSY, SQLITE_LOCKED = 5, 6


def is_busy(exc: StorageError) -> bool:
    """A busy database, also when the store reports it as a failure to open: a connection's
    first read waits on the lock too, while the last connection to the file folds the WAL back
    and removes it."""
    if isinstance(exc, StoreBusy):
        return True
    code = getattr(exc.__cause__, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in (SQLITE_BUSY, SQLITE_LOCKED)


def spool(settings: Settings, payload: dict[str, Any]) -> str:
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


def drain(service: CaptureService, log: HookLog, deadline: Deadline, limit: int = SPOOL_BATCH) -> bool:
    """Store spooled events, oldest first; False when more than `limit` were waiting.

    Each file is claimed before it is read: renamed to `<id>.<pid>.claim.json`, which only one
    of several draining hooks can do. The event is stored under its spool id, which makes a
    replay harmless (`CaptureService.record_event`), and the claim is unlinked. A claim whose
    process is gone (killed between claim and unlink) is taken over by the next drain. A
    file that cannot be read or stored is set aside as `<id>.bad` and logged. A busy or
    failing database stops the drain with StoreBusy or StorageError, the claim put back.
    """
    spool = service.settings.spool_dir
    try:
        names = os.listdir(spool)
    except OSError:
        return True  # no spool dir: the common case, one failed syscall
    entries = waiting(spool, names)
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


def waiting(spool: str, names: list[str]) -> list[tuple[str, str]]:
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


def _replay(service: CaptureService, log: HookLog, deadline: Deadline, spool_id: str, path: str) -> None:
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
