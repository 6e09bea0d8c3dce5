"""The common commands without click: `search`, `recall`, `get`, `status` and `capture`.

A CLI process used to pay for the whole command line before doing anything: click (with
`inspect`, `typing`, `enum`, `uuid`...), every command module, and what each of them imports
(setup, portable formats, sync, the servers' helpers): 106-117 ms a read command, four times
the interpreter's own start-up. `nmem.__main__` hands these five commands here first. The
parser below reads one command line of a shape it knows exactly; anything else (`--help`, an
unknown or malformed option, a value the full CLI would refuse, `-v`) returns None before
anything is read or opened, and the full click CLI (`commands.py`) takes the same arguments,
so its usage errors and help stay the only ones.

What a command does and prints is the click command's, line for line: the same service calls,
the same blocks (`views.py`), the same renderer, the same `nmem: <message>` errors and exit
codes (tests run both paths and compare). `NMEM_CLI_LIGHT=0` turns the light path off.
"""

from __future__ import annotations

import os
import sys

from nmem.adapters.cli.output import FORMATS
from nmem.models import ORDERS, SCOPES, TIERS
from nmem.util.numbers import INT_MAX, INT_MIN, as_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from nmem.adapters.cli.output import Block
    from nmem.config import Settings
    from nmem.service.api import Service

RECALL_MODES = ("bm25", "vector", "hybrid")        # nmem.service.recall's, checked by a test
RECALL_DETAILS = ("minimal", "summary", "full")
LIGHT_ENV = "NMEM_CLI_LIGHT"

# Option kinds: a flag, one value (the last one given wins, as in click), a repeatable value,
# a value from a fixed list, an integer no lower than a bound.
FLAG, VALUE, MULTI = "flag", "value", "multi"


class Choice:
    __slots__ = ("values",)

    def __init__(self, values: Sequence[str]) -> None:
        self.values = tuple(values)


class Int:
    __slots__ = ("low",)

    def __init__(self, low: int = INT_MIN) -> None:
        self.low = low


Kind = str | Choice | Int
FORMAT_OPTION: dict[str, tuple[str, Kind]] = {"--format": ("fmt", Choice(FORMATS))}
MEMORY_OPTIONS: dict[str, tuple[str, Kind]] = {
    "--domain": ("domain", VALUE), "--project": ("project", VALUE), "--tag": ("tags", MULTI),
    "--tags": ("tags", MULTI), "--relates-to": ("relates_to", MULTI), "--tier": ("tier", Choice(TIERS)),
    "--pin": ("pin", FLAG), "--stdin": ("from_stdin", FLAG), **FORMAT_OPTION,
}


class Spec:
    """One command's arguments as its click command declares them: positional names (a trailing
    `...` takes one or more), options, and the defaults of what is not given."""

    __slots__ = ("arguments", "required", "options", "defaults")

    def __init__(self, arguments: tuple[str, ...], required: int, options: dict[str, tuple[str, Kind]],
                 defaults: dict[str, Any]) -> None:
        self.arguments = arguments
        self.required = required
        self.options = options
        self.defaults = defaults


SPECS: dict[str, Spec] = {
    "search": Spec(("query",), 0, {
        "--project": ("project", VALUE), "--type": ("types", MULTI), "--scope": ("scope", Choice(SCOPES)),
        "--namespace": ("namespaces", MULTI), "--tag": ("tags", MULTI), "--file": ("files", MULTI),
        "--session": ("session", VALUE), "--since": ("since", VALUE), "--until": ("until", VALUE),
        "--order": ("order", Choice(ORDERS)), "--limit": ("limit", Int()), "--offset": ("offset", Int(0)),
        "--full": ("full", FLAG), "--strict": ("strict", FLAG), "--raw": ("raw", FLAG), "--ids": ("ids", FLAG),
        **FORMAT_OPTION,
    }, {"scope": "all", "order": "relevance", "limit": None, "offset": 0, "raw": None}),
    "recall": Spec(("query",), 0, {
        "--namespace": ("namespace", VALUE), "-n": ("namespace", VALUE), "--tag": ("tags", MULTI),
        "--tags": ("tags", MULTI), "--spec": ("spec", VALUE), "--domain": ("domain", VALUE),
        "--project": ("project", VALUE), "--limit": ("limit", Int()), "-l": ("limit", Int()),
        "--mode": ("mode", Choice(RECALL_MODES)),
        "--detail": ("detail", Choice(RECALL_DETAILS)), "--include-archived": ("include_archived", FLAG),
        **FORMAT_OPTION,
    }, {"domain": "all", "limit": 10, "detail": "summary"}),
    "get": Spec(("refs...",), 1, dict(FORMAT_OPTION), {}),
    "status": Spec((), 0, {"--domain": ("domain", VALUE), "--verbose": ("detailed", FLAG),
                           "-v": ("detailed", FLAG), "--verify": ("verify", FLAG), **FORMAT_OPTION},
                   {"domain": "all"}),
    "capture": Spec(("namespace", "summary"), 2, {
        "--content": ("content", VALUE), "--spec": ("spec", VALUE), **MEMORY_OPTIONS,
    }, {"tier": "warm"}),
}
GLOBAL_OPTIONS = {"--format": "fmt", "--home": "home", "--config": "config"}


class Defer(Exception):
    """A command line the light path does not read for certain."""


def _value(kind: Kind, text: str) -> Any:
    if isinstance(kind, Choice):
        if text not in kind.values:
            raise Defer
        return text
    if isinstance(kind, Int):
        try:
            return as_int(text, "value", kind.low, INT_MAX)
        except Exception:  # the full CLI words the error (a usage error, or exit 11 out of range)
            raise Defer from None
    return text


def _option(spec: Spec, values: dict[str, Any], token: str, rest: list[str]) -> None:
    name, has_value, inline = token.partition("=")
    if name not in spec.options:
        raise Defer
    dest, kind = spec.options[name]
    if kind == FLAG:
        if has_value:
            raise Defer
        values[dest] = True
        return
    if not has_value:
        if not rest or rest[0].startswith("-"):
            raise Defer
        inline = rest.pop(0)
    value = _value(kind, inline)
    if kind == MULTI:
        values.setdefault(dest, []).append(value)
    else:
        values[dest] = value


def parse_command(spec: Spec, args: list[str]) -> dict[str, Any]:
    """The command's parameters by their click names, or `Defer`."""
    values: dict[str, Any] = {}
    positional: list[str] = []
    rest = list(args)
    while rest:
        token = rest.pop(0)
        if token.startswith("-"):
            if token in ("-", "--", "-h", "--help"):
                raise Defer
            _option(spec, values, token, rest)
        else:
            positional.append(token)
    if len(positional) < spec.required:
        raise Defer
    params = dict(spec.defaults)
    names = spec.arguments
    if names and names[-1].endswith("..."):
        params[names[-1][:-3]] = tuple(positional)
    else:
        if len(positional) > len(names):
            raise Defer
        params.update(dict.fromkeys(names))
        params.update(zip(names, positional, strict=False))
    params.update({dest: tuple(v) if isinstance(v, list) else v for dest, v in values.items()})
    return params


def parse(args: list[str]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(command, global options, its parameters) of a command line the light path runs, or `Defer`."""
    rest = list(args)
    options: dict[str, Any] = {"quiet": False}
    while rest and rest[0].startswith("-"):
        token = rest.pop(0)
        name, has_value, inline = token.partition("=")
        if token in ("-q", "--quiet"):
            options["quiet"] = True
        elif name in GLOBAL_OPTIONS:
            if not has_value:
                if not rest or rest[0].startswith("-"):
                    raise Defer
                inline = rest.pop(0)
            options[GLOBAL_OPTIONS[name]] = inline
        else:
            raise Defer
    if not rest or rest[0] not in SPECS:
        raise Defer
    fmt = options.get("fmt")
    home, config = options.get("home"), options.get("config")
    if (fmt is not None and fmt not in FORMATS) or (home is not None and os.path.isfile(home)) \
            or (config is not None and not os.path.isfile(config)):
        raise Defer  # click's Choice and Path checks, and the CLI's own --config message
    command = rest[0]
    params = parse_command(SPECS[command], rest[1:])
    if command == "capture" and params.get("from_stdin") and params.get("content") is not None:
        raise Defer  # a usage error
    return command, options, params


# -- running ------------------------------------------------------------------------------

def echo(text: str, *, err: bool = False, nl: bool = True) -> None:
    """`click.echo` for text: ANSI escapes dropped when the stream is not a terminal, then flushed."""
    stream = sys.stderr if err else sys.stdout
    if nl:
        text += "\n"
    if "\033" in text and not stream.isatty():
        import re

        text = re.sub(r"\033\[[;?0-9]*[a-zA-Z]", "", text)
    if text:
        stream.write(text)
    stream.flush()


class RunState:
    """What one CLI run keeps between its command line and its command: the environment its
    settings come from, the group's --format, and the settings and service, each made on first
    use. `Run` below and click's `app.State` are this, each opening the service its own way."""

    def __init__(self, env: dict[str, str] | None, fmt: str | None) -> None:
        self.env = env
        self.fmt = fmt
        self._settings: Settings | None = None
        self._service: Service | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            from nmem.config import load_settings

            self._settings = load_settings(self.env)
            self._settings_read(self._settings)
        return self._settings

    def _settings_read(self, settings: Settings) -> None:
        """Once the settings are read (click's -v says where from)."""

    def format(self, override: str | None) -> str:
        """The command's --format, else the group's, else the `cli.format` setting."""
        from nmem.errors import ConfigError

        fmt = override or self.fmt or str(self.settings["cli.format"])
        if fmt not in FORMATS:
            raise ConfigError(f"cli.format: unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
        return fmt

    def close(self) -> None:
        if self._service is not None:
            service, self._service = self._service, None
            service.close()


class Run(RunState):
    """One command's settings, service and output on this path."""

    def __init__(self, command: str, options: dict[str, Any]) -> None:
        from nmem.config import CONFIG_ENV, HOME_ENV

        env = None
        if options.get("home") or options.get("config"):
            env = dict(os.environ)
            if options.get("home"):
                env[HOME_ENV] = os.path.abspath(options["home"])
            if options.get("config"):
                env[CONFIG_ENV] = os.path.abspath(options["config"])
        super().__init__(env, options.get("fmt"))
        self.command = command
        self.quiet: bool = options["quiet"]

    def service(self) -> Service:
        if self._service is None:
            from nmem.service import parts  # the mixins this command calls, not the whole API

            self._service = parts.for_command(self.command).open(self.settings)
        return self._service

    def emit(self, fmt_override: str | None, data: Any, blocks: Callable[[], Sequence[Block]]) -> None:
        from nmem.adapters.cli.output import render

        fmt = self.format(fmt_override)
        output = render(fmt, data, blocks() if fmt in ("text", "markdown") else ())
        if output:
            echo(output, nl=False)

    def note(self, message: str) -> None:
        if not self.quiet:
            echo(f"nmem: {message}", err=True)


def search(run: Run, p: dict[str, Any]) -> None:
    from nmem.adapters.cli.views import count_line, search_blocks, split_values, time_range
    from nmem.service.args import ProjectScope

    service = run.service()
    projects = ProjectScope.parse(p.get("project"), service.project_for())
    since, until = time_range(service, p.get("since"), p.get("until"))
    result = service.search(
        p["query"], scope=p["scope"], project=projects.only, obs_type=split_values(p.get("types")) or None,
        namespace=split_values(p.get("namespaces")) or None, tags=split_values(p.get("tags")) or None,
        files=split_values(p.get("files")) or None, session_id=p.get("session"),
        date_start=since, date_end=until,
        order_by=p["order"], limit=p["limit"], offset=p["offset"], strict=bool(p.get("strict") or p.get("ids")),
        prefer_project=projects.first, cwd=os.getcwd(), raw=p["raw"] or None,
    )
    if p.get("ids"):
        for hit in result.hits:
            echo(hit.record.ref)
    else:
        full = bool(p.get("full"))
        run.emit(p.get("fmt"), result.to_list(full=full), lambda: search_blocks(result, full))
    run.note(count_line(len(result.hits), p["query"]))


def get(run: Run, p: dict[str, Any]) -> None:
    from nmem.adapters.cli.views import record_blocks
    from nmem.errors import NotFound

    found, missing = run.service().get(list(p["refs"]))
    if not found:
        raise NotFound(f"not found: {', '.join(missing)}")
    records = [{"kind": record.kind, **record.to_dict()} for record in found]
    run.emit(p.get("fmt"), records, lambda: record_blocks(records))
    if missing:
        run.note(f"not found: {', '.join(missing)}")


def status(run: Run, p: dict[str, Any]) -> None:
    from nmem.adapters.cli.output import mask_secrets
    from nmem.adapters.cli.views import status_blocks, verify_failure

    verify = bool(p.get("verify"))
    data = run.service().status(domain=p["domain"], verify=verify)
    data["database"] = mask_secrets(data["database"])
    run.emit(p.get("fmt"), data, lambda: status_blocks(data, bool(p.get("detailed"))))
    if verify and not data["verify"]["ok"]:
        raise verify_failure(data)


def recall(run: Run, p: dict[str, Any]) -> None:
    from nmem.adapters.cli.views import recall_blocks, split_values
    from nmem.service.args import ProjectScope

    service = run.service()
    query = p["query"]
    results = service.recall_results(
        query, detail=p["detail"], namespace=p.get("namespace"), tags=split_values(p.get("tags")) or None,
        domain=p["domain"], project=ProjectScope.parse(p.get("project"), service.project_for(), bound=True).only,
        limit=p["limit"], include_archived=bool(p.get("include_archived")), mode=p.get("mode"),
        min_similarity=None, spec=p.get("spec"))
    run.emit(p.get("fmt"), {"query": query, "count": len(results), "results": results},
             lambda: recall_blocks(results))
    run.note(f'{len(results)} memories for "{query}"' if query else f"{len(results)} memories")


def capture(run: Run, p: dict[str, Any]) -> None:
    from nmem.adapters.cli.views import capture_blocks, read_stdin, split_values

    body = read_stdin() if p.get("from_stdin") else p.get("content") or p["summary"]
    data = run.service().capture(
        body, summary=p["summary"], namespace=p["namespace"], spec=p.get("spec"),
        tags=split_values(p.get("tags")), domain=p.get("domain"), project=p.get("project"), source="cli",
        relates_to=split_values(p.get("relates_to")), tier=p["tier"], pinned=bool(p.get("pin")))
    run.emit(p.get("fmt"), data, lambda: capture_blocks(data))


HANDLERS: dict[str, Callable[[Run, dict[str, Any]], None]] = {
    "search": search, "recall": recall, "get": get, "status": status, "capture": capture,
}


def main(args: list[str]) -> int | None:
    """Run one command line on the light path; its exit code, or None for the full CLI to run it."""
    if os.environ.get(LIGHT_ENV, "1") == "0":
        return None
    try:
        command, options, params = parse(args)
    except Defer:
        return None
    return execute(command, options, params)


def execute(command: str, options: dict[str, Any], params: dict[str, Any]) -> int:
    """What `commands.main` does around a command: one line per error, the error's exit code."""
    from nmem.errors import NmemError

    run = Run(command, options)
    try:
        try:
            HANDLERS[command](run, params)
        finally:
            run.close()
    except NmemError as exc:
        echo(f"nmem: {exc.message}", err=True)
        return exc.exit_code
    except (KeyboardInterrupt, EOFError):
        echo("", err=True)
        echo("nmem: aborted", err=True)
        return 130
    except BrokenPipeError:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115  nothing more reaches the closed pipe
        return 1
    except Exception as exc:  # the one edge handler: a bug must still be one readable line
        echo(f"nmem: internal error: {type(exc).__name__}: {exc}", err=True)
        return 1
    return 0
