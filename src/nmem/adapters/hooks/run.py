"""`nmem record` and `nmem hook <event>`: the hot path, run as a fresh process per hook event.

Standard library and nmem's light modules only (a test lists what a run imports). It never
breaks the agent: bad input exits 1 with one line on stderr (and a warning in
`<data dir>/logs/nmem.log`) and stores nothing; internal errors are logged there too; it
never exits 2, which would block the user's prompt in Claude Code.

A database that fails (foreign, corrupt, read-only, disk full) keeps the event in the spool too,
logs an ERROR and exits 4 with one line on stderr, which Claude Code shows without blocking; a
SessionStart still prints what it can read.

With `--remote URL` (or `hooks.remote_url`) the event goes to a team server instead
(`nmem.adapters.hooks.remote`), spooled under `<data dir>/spool/remote/` while the server cannot take it.
With a server store (`store.url` = postgresql://...), every event goes to the spool and
`nmem drain` stores it (docs/postgres.md): the hook path never imports a database driver.

A database that stays locked is waited for once per run, at most `hooks.busy_budget_ms` in
all (see `nmem.capture.spool.Deadline`); past that the event goes to `<data dir>/spool/` and a later run stores
it. Spooled events are stored oldest first, each exactly once, however many hooks drain the
spool at the same time and wherever one of them is killed (see `nmem.capture.spool.drain`).
"""

from __future__ import annotations

import os
import sys

from nmem import jsonlite as json
from nmem.capture import agents, spool
from nmem.capture import events as ev
from nmem.capture.claude_code import HOOK_ALIASES, with_working_dir
from nmem.capture.project import git_branch
from nmem.capture.recorder import RecordOutcome
from nmem.config import Settings, load_settings
from nmem.errors import ConfigError, InvalidArgument, NmemError, StorageError, StoreBusy
from nmem.service.core import CaptureService

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any, NoReturn, TypeVar

    T = TypeVar("T")

USAGE = ("usage: nmem record [--agent NAME] [--remote URL]  |  nmem hook <event> [--agent NAME] [--input FILE] "
         "[--output FILE] [--remote URL]  (hook JSON on stdin; --agent: " + ", ".join(agents.AGENTS) + ")")
# A SessionEnd waits at most this long for a locked database, whatever `hooks.busy_budget_ms` says,
# so that start-up, the wait and the spooling fit well inside the 1.5 s Claude Code allows it.
SESSION_END_BUDGET_MS = 700


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


def run(argv: list[str], stdin: IO[str], stdout: IO[str], stderr: IO[str],
        env: dict[str, str] | None = None) -> int:
    """Handle one hook event."""
    settings: Settings | None = None
    try:
        settings = load_settings(env)
        _subcog(settings)  # an unknown hooks.profile is refused before anything is stored
        event_override, input_file, output_file, remote, agent = _parse_args(argv)
        payload = _read_payload(stdin, input_file)
        if event_override and isinstance(payload, dict):
            payload.setdefault("hook_event_name", event_override)
        if (agent or ev.CLAUDE_CODE) == ev.CLAUDE_CODE:
            payload = with_working_dir(payload, _working_dir())
        event = agents.parse(payload, agent)
        payload = agents.tagged(payload, event.agent)  # a spooled or forwarded event keeps its agent
        if not settings["memory.enabled"]:
            return _write(_subcog_empty(settings, event), output_file, stdout)
        remote = remote or str(settings["hooks.remote_url"])
        try:
            if remote:
                output, failure = _record_remote(settings, payload, event, remote)
            else:
                output, failure = _record(settings, payload, event)
        except RecursionError:  # scrubbing and storing walk the input as deep as it goes
            raise InvalidArgument("hook input is nested too deeply to store") from None
        output = output or _subcog_empty(settings, event)
        _write(output, output_file, stdout)
        if failure is not None and not output:
            # Kept in the spool, but the database needs the user (foreign, corrupt, read-only,
            # disk full): one line that says so. Exit 4 does not block Claude Code; only 2 would.
            stderr.write(f"nmem: {_one_line(failure.message)}; the event is kept in the spool\n")
            return 4
        return 0
    except (InvalidArgument, ConfigError) as exc:
        message = _one_line(exc.message)
        stderr.write(f"nmem: {message}\n")
        spool.HookLog(settings).warning(f"hook input rejected: {message}")
        return 1
    except StorageError as exc:  # neither stored nor spooled: say so, and keep it for `nmem doctor`
        message = _one_line(exc.message)
        spool.HookLog(settings).error(f"hook event lost: {message}")
        stderr.write(f"nmem: event not stored: {message}\n")
        return 4
    except Exception as exc:  # the agent must never see a traceback; the log keeps where it happened
        spool.HookLog(settings).error(f"hook failed: {type(exc).__name__}: {exc}\n{_traceback(exc)}")
        stderr.write(f"nmem: internal error ({type(exc).__name__}); see the nmem log\n")
        return 1


def _working_dir() -> str | None:
    """The directory the harness ran the hook in; None when it no longer exists."""
    try:
        return os.getcwd()
    except OSError:
        return None


def _write(output: str, output_file: str | None, stdout: IO[str]) -> int:
    if output:
        if output_file:
            with open(output_file, "w", encoding="utf-8") as fh:
                fh.write(output)
        else:
            stdout.write(output)
            stdout.flush()
    return 0


def _subcog(settings: Settings) -> Any:
    """The subcog output module when `hooks.profile` asks for it (nmem's default never loads it)."""
    if settings["hooks.profile"] == "nmem":
        return None
    from nmem.adapters.hooks import subcog

    return subcog if subcog.wanted(settings) else None


def _subcog_empty(settings: Settings, event: ev.HookEvent) -> str:
    """subcog's hooks always print their JSON, with empty context when there is nothing to say."""
    subcog = _subcog(settings)
    return subcog.empty(event.hook_event_name) if subcog else ""


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
    log = spool.HookLog(settings)
    if not settings.store_url.startswith("sqlite:"):
        # A server store (PostgreSQL): hooks never load its driver (psycopg and its pool cost
        # more to import than a hook's whole budget), so every event waits in the spool until a
        # running `nmem serve` or `nmem drain` stores it; nothing is lost and the agent is not
        # slowed. A SessionStart is handed to a local server first, for its context block.
        if event.kind == ev.SESSION_START:
            from nmem.adapters.hooks import local_server  # http.client: only this event loads it

            context = local_server.session_start(settings, payload, event)
            if context is not None:
                return (_hook_output(settings, event, context) if context else ""), None
        spool.spool(settings, {**payload, "_nmem_received_at": event.timestamp})
        return "", None
    budget = int(settings["hooks.busy_budget_ms"])
    if event.kind == ev.SESSION_END:  # Claude Code gives SessionEnd hooks 1.5 s in all, then kills them
        budget = min(budget, SESSION_END_BUDGET_MS)
    deadline = spool.Deadline(budget)
    try:
        service = deadline.run(lambda: CaptureService.open(settings, busy_timeout_ms=deadline.try_ms))
    except StorageError as exc:
        _keep(settings, log, payload, event, exc)
        return _busy_context(settings, event), _needs_user(exc)
    try:
        # Older events first, so prompts still frame later actions: an event that cannot be
        # stored after all of them (busy, out of time) waits behind them in the spool.
        try:
            if not spool.drain(service, log, deadline):
                raise StoreBusy(f"more than {spool.SPOOL_BATCH} older events waiting in the spool")
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
    """Send the event to a team server (nmem.adapters.hooks.remote); a SessionStart prints the block it answers."""
    from nmem.adapters.hooks import remote  # only remote hooks load http.client

    answer, failure = remote.record(settings, payload, event, url, spool.HookLog(settings))
    context = str((answer or {}).get("context") or "")
    if event.kind == ev.SESSION_START and context:
        return _hook_output(settings, event, context), failure
    return "", failure


def _needs_user(exc: StorageError) -> StorageError | None:
    return None if isinstance(exc, StoreBusy) else exc


def _output(settings: Settings, service: CaptureService, event: ev.HookEvent, outcome: RecordOutcome) -> str:
    """What a stored event prints: the SessionStart block, opt-in file memories, remembered notes."""
    if outcome.skipped == "disabled":
        return ""
    if event.kind == ev.SESSION_START:
        from nmem.sync import trigger as sync_trigger  # once a session or a turn: tool calls never load it

        sync_trigger.on_session_start(settings)  # detached, only with sync.auto
        return _session_context(service, event, outcome.project)
    if event.kind == ev.STOP:
        from nmem.sync import trigger as sync_trigger

        sync_trigger.on_stop(settings, service.store)
    subcog = _subcog(settings)
    if subcog:
        return str(subcog.for_event(service, event, outcome))
    if event.kind == ev.TOOL and outcome.file_path and settings["context.file_memories"]:
        from nmem.context.block import file_memories  # opt-in: a default hook never loads it

        block = file_memories(service, outcome.project, event.session_id, outcome.file_path)
        return _hook_output(settings, event, block)
    if event.kind == ev.PROMPT and outcome.memories:
        note = "; ".join(f"{m.namespace}: {m.summary} ({m.urn})" for m in outcome.memories)
        return _hook_output(settings, event, f"nmem remembered {note}")
    return ""


def _keep(settings: Settings, log: spool.HookLog, payload: dict[str, Any], event: ev.HookEvent,
          exc: StorageError) -> None:
    """Spool an event the database did not take: a busy database is a warning, a failing one an error."""
    try:
        path = spool.spool(settings, {**payload, "_nmem_received_at": event.timestamp})
    except OSError as spool_exc:
        raise StorageError(f"{exc.message}; the spool failed too: {spool_exc}") from None
    note = f"{_one_line(exc.message)}; spooled {event.hook_event_name} event as {os.path.basename(path)}"
    if isinstance(exc, StoreBusy):
        log.warning(note)
    else:
        log.error(note)


def _session_context(service: CaptureService, event: ev.HookEvent, project: str | None = None) -> str:
    """The SessionStart block; readers are never blocked by a writer, so it works while busy too."""
    project = project or service.project_for(event.cwd)
    if not service.settings.project_enabled(project, event.cwd):
        return ""
    from nmem.context.block import render  # only SessionStart renders; other events never load it

    block = render(service, project, event.source, event.timestamp, session_id=event.session_id or None,
                   cwd=event.cwd or None)
    subcog = _subcog(service.settings)
    if subcog:
        return str(subcog.session_start(service, project, event.branch or git_branch(event.cwd), block))
    return _hook_output(service.settings, event, block)


def _busy_context(settings: Settings, event: ev.HookEvent) -> str:
    if event.kind != ev.SESSION_START or not os.path.exists(settings.db_path):
        return ""
    try:
        service = CaptureService.open(settings, readonly=True)
    except NmemError:
        return ""
    try:
        return _session_context(service, event)
    finally:
        service.close(checkpoint=False)


def _hook_output(settings: Settings, event: ev.HookEvent, text: str) -> str:
    """Context in the shape the event's agent reads (`capture.agents.output`); for Claude Code,
    plain text unless `context.format` is json; subcog's JSON with `hooks.profile = "subcog"`."""
    subcog = _subcog(settings)
    if subcog and text:
        return str(subcog.dumps(text))
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
