"""`nmem record` and `nmem hook <event>`: the hot path, run as a fresh process per hook event.

Standard library and nmem's light modules only (a test lists what a run imports). It never
breaks the agent: bad input exits 1 with one line on stderr and stores nothing; internal
errors are logged to `<data dir>/logs/nmem.log`; it never exits 2, which would block the
user's prompt in Claude Code. A database locked past the budget spools the event to
`<data dir>/spool/`, and the next run ingests it.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import traceback
from pathlib import Path
from typing import IO, Any

from nmem.capture import events as ev
from nmem.capture.claude_code import HOOK_ALIASES, parse
from nmem.capture.privacy import scrub_value
from nmem.config import Settings, load_settings
from nmem.context import render as render_context
from nmem.errors import ConfigError, InvalidArgument, NmemError, StoreBusy
from nmem.memory import Service

USAGE = "usage: nmem record  |  nmem hook <event> [--input FILE] [--output FILE]  (hook JSON on stdin)"
SPOOL_BATCH = 200


def _logger(settings: Settings | None) -> logging.Logger:
    log = logging.getLogger("nmem.hooks")
    if log.handlers or settings is None:
        return log
    try:
        settings.log_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        handler = logging.FileHandler(settings.log_dir / "nmem.log", encoding="utf-8")
    except OSError:
        return log
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(str(settings["log.level"]).upper())
    log.propagate = False
    return log


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


def _spool(settings: Settings, payload: dict[str, Any]) -> Path:
    """Keep an event the database could not take; scrubbed, written atomically, drained later."""
    payload = scrub_value(payload)
    settings.spool_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = f"{time.time_ns()}-{os.getpid()}.json"
    tmp = settings.spool_dir / f".{name}.tmp"
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(payload, fh)
    final = settings.spool_dir / name
    os.replace(tmp, final)
    return final


def drain_spool(service: Service, log: logging.Logger, limit: int = SPOOL_BATCH) -> int:
    """Record spooled events, oldest first; each file is removed only once stored."""
    spool = service.settings.spool_dir
    if not spool.is_dir():
        return 0
    done = 0
    for path in sorted(spool.glob("[0-9]*.json"))[:limit]:
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
            stamp = payload.pop("_nmem_received_at", None)
            service.record_event(parse(payload, now=stamp))
        except StoreBusy:
            break
        except (OSError, ValueError, NmemError) as exc:
            log.warning("dropping unreadable spool file %s: %s", path.name, exc)
            path.rename(path.with_suffix(".bad"))
            continue
        path.unlink(missing_ok=True)
        done += 1
    return done


def run(argv: list[str], stdin: IO[str], stdout: IO[str], stderr: IO[str],
        env: dict[str, str] | None = None) -> int:
    settings: Settings | None = None
    try:
        event_override, input_file, output_file = _parse_args(argv)
        settings = load_settings(env)
        raw = Path(input_file).read_text(encoding="utf-8") if input_file else stdin.read()
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
                Path(output_file).write_text(output, encoding="utf-8")
            else:
                stdout.write(output)
                stdout.flush()
        return 0
    except (InvalidArgument, ConfigError) as exc:
        stderr.write(f"nmem: {exc.message}\n")
        return 1
    except Exception as exc:  # the agent must never see a traceback; the log keeps it
        _logger(settings).error("hook failed: %s\n%s", exc, traceback.format_exc())
        stderr.write(f"nmem: internal error ({type(exc).__name__}); see the nmem log\n")
        return 1


def _record(settings: Settings, payload: dict[str, Any], event: ev.HookEvent) -> str:
    """Store the event (spooling it if the database stays busy) and return what to print."""
    log = _logger(settings)
    budget = int(settings["hooks.busy_budget_ms"])
    try:
        service = Service.open(settings, busy_timeout_ms=budget)
    except StoreBusy:
        _spool(settings, {**payload, "_nmem_received_at": event.timestamp})
        log.warning("database busy at open; spooled %s event", event.hook_event_name)
        return _busy_context(settings, event)
    try:
        drain_spool(service, log)  # older events first, so prompts still frame later actions
        try:
            outcome = service.record_event(event)
        except StoreBusy:
            _spool(settings, {**payload, "_nmem_received_at": event.timestamp})
            log.warning("database busy; spooled %s event", event.hook_event_name)
            return _session_context(service, event) if event.kind == ev.SESSION_START else ""
        if outcome.skipped == "disabled":
            return ""
        if event.kind == ev.SESSION_START:
            return _session_context(service, event, outcome.project)
        if event.kind == ev.PROMPT and outcome.memories:
            note = "; ".join(f"{m.namespace}: {m.summary} ({m.urn})" for m in outcome.memories)
            return _hook_output(settings, event.hook_event_name, f"nmem remembered {note}")
        return ""
    finally:
        service.close(checkpoint=False)


def _session_context(service: Service, event: ev.HookEvent, project: str | None = None) -> str:
    """The SessionStart block; readers are never blocked by a writer, so it works while busy too."""
    project = project or service.project_for(event.cwd)
    if not service.settings.project_enabled(project, event.cwd):
        return ""
    block = render_context(service, project, event.source, event.timestamp)
    return _hook_output(service.settings, event.hook_event_name, block)


def _busy_context(settings: Settings, event: ev.HookEvent) -> str:
    if event.kind != ev.SESSION_START or not settings.db_path.exists():
        return ""
    try:
        service = Service.open(settings, readonly=True)
    except NmemError:
        return ""
    try:
        return _session_context(service, event)
    finally:
        service.close(checkpoint=False)


def _hook_output(settings: Settings, event_name: str, text: str) -> str:
    """Context for Claude Code: plain text, or `hookSpecificOutput` JSON when configured."""
    if not text:
        return ""
    if settings["context.format"] == "json":
        return json.dumps({"hookSpecificOutput": {"hookEventName": event_name, "additionalContext": text}}) + "\n"
    return text + "\n"


def main(argv: list[str] | None = None) -> int:
    return run(sys.argv[1:] if argv is None else argv, sys.stdin, sys.stdout, sys.stderr)
