"""`nmem record` and `nmem hook <event>`: the hot path, run as a fresh process per hook event.

Standard library and nmem's light modules only (a test lists what a run imports). It never
breaks the agent: bad input exits 1 with one line on stderr and stores nothing; internal
errors are logged to `<data dir>/logs/nmem.log`; it never exits 2, which would block the
user's prompt in Claude Code. A database locked past the budget spools the event to
`<data dir>/spool/`, and the next run ingests it.
"""

from __future__ import annotations

import os
import sys
import time

from nmem import jsonlite as json
from nmem import sync_trigger
from nmem.capture import events as ev
from nmem.capture.claude_code import HOOK_ALIASES, parse
from nmem.capture.privacy import scrub_value
from nmem.config import Settings, load_settings
from nmem.core import CoreService
from nmem.errors import ConfigError, InvalidArgument, NmemError, StorageError, StoreBusy, StoreUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any, NoReturn

USAGE = "usage: nmem record  |  nmem hook <event> [--input FILE] [--output FILE]  (hook JSON on stdin)"
SPOOL_BATCH = 200
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
            with os.fdopen(fd, "a", encoding="utf-8") as fh:
                fh.write(f"{stamp} {level.upper()} {message}\n")
        except OSError:
            pass  # nowhere to log to; the hook still must not fail

    def warning(self, message: str) -> None:
        self.write("warning", message)

    def error(self, message: str) -> None:
        self.write("error", message)


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


def _parse_args(argv: list[str]) -> tuple[str | None, str | None, str | None]:
    """(event override, input file, output file) from `record` / `hook <event>` arguments."""
    if not argv or argv[0] not in ("record", "hook"):
        raise InvalidArgument(USAGE)
    event: str | None = None
    rest = argv[1:]
    if argv[0] == "hook":
        if not rest or rest[0].startswith("-"):
            raise InvalidArgument(USAGE)
        event = HOOK_ALIASES.get(rest[0], rest[0])
        rest = rest[1:]
    input_file = output_file = None
    while rest:
        flag = rest.pop(0)
        if flag in ("--input", "--output") and rest:
            if flag == "--input":
                input_file = rest.pop(0)
            else:
                output_file = rest.pop(0)
        elif flag in ("-h", "--help"):
            raise InvalidArgument(USAGE)
        else:
            raise InvalidArgument(f"unexpected argument {flag!r}; {USAGE}")
    return event, input_file, output_file


def _spool(settings: Settings, payload: dict[str, Any]) -> str:
    """Keep an event the database could not take; scrubbed, written atomically, drained later."""
    payload = scrub_value(payload)
    spool = settings.ensure_dir(settings.spool_dir)
    name = f"{time.time_ns()}-{os.getpid()}.json"
    tmp = os.path.join(spool, f".{name}.tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(payload))
    final = os.path.join(spool, name)
    os.replace(tmp, final)
    return final


def drain_spool(service: CoreService, log: HookLog, limit: int = SPOOL_BATCH) -> int:
    """Record spooled events, oldest first; each file is removed only once stored."""
    spool = service.settings.spool_dir
    try:
        names = sorted(n for n in os.listdir(spool) if n[:1].isdigit() and n.endswith(".json"))[:limit]
    except OSError:
        return 0  # no spool dir: the common case, one failed syscall
    done = 0
    for name in names:
        path = os.path.join(spool, name)
        try:
            with open(path, encoding="utf-8") as fh:
                payload = json.loads(fh.read())
            stamp = payload.pop("_nmem_received_at", None)
            service.record_event(parse(payload, now=stamp))
        except (StoreBusy, StoreUnavailable):
            break  # the database's state, not the file's fault: it stays for a later run
        except (OSError, ValueError, NmemError) as exc:
            log.warning(f"dropping unreadable spool file {name}: {exc}")
            os.replace(path, path[: -len(".json")] + ".bad")
            continue
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        done += 1
    return done


def run(argv: list[str], stdin: IO[str], stdout: IO[str], stderr: IO[str],
        env: dict[str, str] | None = None) -> int:
    """Handle one hook event."""
    settings: Settings | None = None
    try:
        event_override, input_file, output_file = _parse_args(argv)
        settings = load_settings(env)
        if input_file:
            with open(input_file, encoding="utf-8") as fh:
                raw = fh.read()
        else:
            raw = stdin.read()
        try:
            payload = json.loads(raw)
        except ValueError as exc:
            raise InvalidArgument(f"hook input is not valid JSON: {exc}") from None
        if event_override and isinstance(payload, dict):
            payload.setdefault("hook_event_name", event_override)
        event = parse(payload)
        if not settings["memory.enabled"]:
            return 0
        output = _record(settings, payload, event)
        if output:
            if output_file:
                with open(output_file, "w", encoding="utf-8") as fh:
                    fh.write(output)
            else:
                stdout.write(output)
                stdout.flush()
        return 0
    except (InvalidArgument, ConfigError) as exc:
        stderr.write(f"nmem: {exc.message}\n")
        return 1
    except StorageError as exc:  # the database failed (read-only, full, corrupt...): say what happened
        HookLog(settings).error(f"hook failed: {exc.message}\n{_traceback(exc)}")
        stderr.write(f"nmem: {exc.message}\n")
        return exc.exit_code
    except Exception as exc:  # the agent must never see a traceback; the log keeps where it happened
        HookLog(settings).error(f"hook failed: {type(exc).__name__}: {exc}\n{_traceback(exc)}")
        stderr.write(f"nmem: internal error ({type(exc).__name__}); see the nmem log\n")
        return 1


def _record(settings: Settings, payload: dict[str, Any], event: ev.HookEvent) -> str:
    """Store the event (spooling it if the database stays busy) and return what to print."""
    log = HookLog(settings)
    budget = int(settings["hooks.busy_budget_ms"])
    try:
        service = CoreService.open(settings, busy_timeout_ms=budget)
    except StoreBusy:
        _spool(settings, {**payload, "_nmem_received_at": event.timestamp})
        log.warning(f"database busy at open; spooled {event.hook_event_name} event")
        return _busy_context(settings, event)
    except StoreUnavailable:
        _keep(settings, payload, event, log)
        raise
    try:
        drain_spool(service, log)  # older events first, so prompts still frame later actions
        try:
            outcome = service.record_event(event)
        except StoreBusy:
            _spool(settings, {**payload, "_nmem_received_at": event.timestamp})
            log.warning(f"database busy; spooled {event.hook_event_name} event")
            return _session_context(service, event) if event.kind == ev.SESSION_START else ""
        except StoreUnavailable:
            _keep(settings, payload, event, log)
            raise
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
            return _hook_output(settings, event.hook_event_name, block)
        if event.kind == ev.PROMPT and outcome.memories:
            note = "; ".join(f"{m.namespace}: {m.summary} ({m.urn})" for m in outcome.memories)
            return _hook_output(settings, event.hook_event_name, f"nmem remembered {note}")
        return ""
    finally:
        # SQLite's own close: the last connection to the file folds the WAL back and deletes
        # it. A process that skipped this (os._exit) would leave the WAL for the next hook to
        # recover, reading all of it, and never reset it: hooks slowed as the WAL grew.
        service.close(checkpoint=False)


def _keep(settings: Settings, payload: dict[str, Any], event: ev.HookEvent, log: HookLog) -> None:
    """Spool an event the database cannot take as it is (read-only, full, corrupt...), so it is
    stored once the database is usable again; on a full disk the spool may fail too."""
    try:
        _spool(settings, {**payload, "_nmem_received_at": event.timestamp})
    except OSError as exc:
        log.error(f"could not spool the {event.hook_event_name} event either: {exc}")
    else:
        log.warning(f"database unavailable; spooled {event.hook_event_name} event")


def _session_context(service: CoreService, event: ev.HookEvent, project: str | None = None) -> str:
    """The SessionStart block; readers are never blocked by a writer, so it works while busy too."""
    project = project or service.project_for(event.cwd)
    if not service.settings.project_enabled(project, event.cwd):
        return ""
    from nmem.context import render  # only SessionStart renders; other events never load it

    block = render(service, project, event.source, event.timestamp)
    return _hook_output(service.settings, event.hook_event_name, block)


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


def _hook_output(settings: Settings, event_name: str, text: str) -> str:
    """Context for Claude Code: plain text, or `hookSpecificOutput` JSON when configured (and
    always for PostToolUse, whose plain output Claude Code does not pass to the model)."""
    if not text:
        return ""
    if event_name == "PostToolUse" or settings["context.format"] == "json":
        return json.dumps({"hookSpecificOutput": {"hookEventName": event_name, "additionalContext": text}}) + "\n"
    return text + "\n"


def main(argv: list[str] | None = None) -> NoReturn:
    """Process entry for hook runs: handle the event, flush, and leave without interpreter teardown.

    The database is closed by then (see `_record`); os._exit only skips the interpreter's
    own clean-up of modules and objects, which a one-event process does not need.
    """
    code = run(sys.argv[1:] if argv is None else argv, sys.stdin, sys.stdout, sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
