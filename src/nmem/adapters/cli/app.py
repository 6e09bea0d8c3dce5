"""The `nmem` click group: global options, the per-run state, and the one error handler.

Every command parses its arguments, calls `nmem.service.api.Service`, and hands the result to
`emit`. Errors raised as `NmemError` become a one-line `nmem: <message>` on stderr and the
error type's exit code (subcog's table), whether the CLI runs standalone or under a runner.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import IO, Any, TypeVar

import click

from nmem import __version__
from nmem.adapters.cli.light import RunState
from nmem.adapters.cli.output import FORMATS, Block, render
from nmem.config import CONFIG_ENV, HOME_ENV, Settings
from nmem.errors import ConfigError, NmemError
from nmem.service.api import Service

F = TypeVar("F", bound=Callable[..., Any])
CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class CliError(click.ClickException):
    """An `NmemError` on its way out: one line on stderr, the error's own exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click reads the code off the instance

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"nmem: {self.format_message()}", err=True)


class NmemGroup(click.Group):
    """The root group; turns service errors into `CliError` for every subcommand."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except NmemError as exc:
            raise CliError(exc.message, exc.exit_code) from exc


class State(RunState):
    """What one CLI run shares between the group and its command: settings, service, format."""

    def __init__(self, env: dict[str, str] | None, fmt: str | None, verbosity: int = 0) -> None:
        super().__init__(env, fmt)
        self.verbosity = verbosity  # -1 with -q (no notes, no progress), 1+ with -v, -vv...

    def _settings_read(self, settings: Settings) -> None:
        config = settings.config_file
        debug(1, f"settings from {config}" + ("" if os.path.isfile(config) else " (absent: defaults)"))
        debug(2, "non-default settings: " + (", ".join(
            f"{name} ({source})" for name, source in sorted(settings.sources.items())
            if source != "default") or "none"))

    def use_store(self, url: str) -> None:
        """Serve another store than the settings name (`nmem serve --store URL`)."""
        self.env = {**(os.environ if self.env is None else self.env), "NMEM_STORE_URL": url}
        self._settings = None

    def sqlite_file(self, refusal: str) -> str:
        """The SQLite database file the settings name; another engine is refused in the words of
        `refusal`, where `{engine}` stands for the store URL's scheme."""
        url = self.settings.store_url
        if not url.startswith("sqlite:///"):
            raise ConfigError(refusal.format(engine=url.split(":", 1)[0]))
        return os.path.expanduser(url.removeprefix("sqlite:///"))

    def service(self) -> Service:
        """The service, opened on first use and closed when the run ends."""
        if self._service is None:
            self._service = Service.open(self.settings)
            debug(1, f"database {self.settings.store_url}")
            click.get_current_context().find_root().call_on_close(self.close)
        return self._service


pass_state = click.make_pass_decorator(State)


def format_option(func: F) -> F:
    """`--format` on each command, so it may follow the arguments (`nmem search x --format json`)."""
    option = click.option(
        "--format", "fmt", type=click.Choice(FORMATS), default=None,
        help="Output format. Default: the global --format, else the cli.format setting (text).")
    return option(func)


def emit(state: State, fmt_override: str | None, data: Any, blocks: Callable[[], Sequence[Block]]) -> None:
    """Print `data` as JSON/YAML, or the blocks as text/markdown."""
    fmt = state.format(fmt_override)
    shown = blocks() if fmt in ("text", "markdown") else ()
    output = render(fmt, data, shown)
    if output:
        click.echo(output, nl=False)


def _verbosity() -> int:
    ctx = click.get_current_context(silent=True)
    state = ctx.find_root().obj if ctx is not None else None
    return state.verbosity if isinstance(state, State) else 0


def note(message: str) -> None:
    """A line for the person at the terminal, kept out of stdout so pipes stay clean (and
    left out under -q)."""
    if _verbosity() >= 0:
        click.echo(f"nmem: {message}", err=True)


def debug(level: int, message: str) -> None:
    """A line shown on stderr only with at least `level` -v flags."""
    if _verbosity() >= level:
        click.echo(f"nmem: [v{level}] {message}", err=True)


def quiet() -> bool:
    """Whether -q asked for nothing but the result (no notes, no progress bars)."""
    return _verbosity() < 0


@click.group(cls=NmemGroup, context_settings=CONTEXT_SETTINGS)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="Output format of every command (default: the cli.format setting, text); quiet prints "
                   "nothing, the exit code tells.")
@click.option("--home", type=click.Path(file_okay=False), default=None,
              help=f"Data directory for this run (default: ${HOME_ENV}, else ~/.nmem).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help=f"Settings file for this run (default: ${CONFIG_ENV}, else <data dir>/config.toml).")
@click.option("-v", "--verbose", count=True,
              help="Say more on stderr: -v the settings file and database used, -vv every non-default setting.")
@click.option("-q", "--quiet", "quiet_flag", is_flag=True,
              help="Only the result: no notes or progress bars on stderr (errors still print).")
@click.version_option(__version__, "--version", prog_name="nmem")
@click.pass_context
def cli(ctx: click.Context, fmt: str | None, home: str | None, config_file: str | None, verbose: int,
        quiet_flag: bool) -> None:
    """nmem: local-first memory for AI coding agents.

    Hooks record what agents do (`nmem record`); these commands search it, curate
    memories worth keeping, and look after the database. Exit codes: 0 ok, 1 error,
    2 invalid arguments, 3 configuration (or memory disabled), 4 storage, 5 network (sync
    remote), 6 LLM provider (consolidate), 7 encryption (no key, or a wrong one), 10 not found,
    11 validation, 12 blocked by the security filter.
    """
    if verbose and quiet_flag:
        raise click.UsageError("give -v or -q, not both")
    env: dict[str, str] | None = None
    if home or config_file:
        env = dict(os.environ)
        if home:
            env[HOME_ENV] = os.path.abspath(home)
        if config_file:
            if not os.path.isfile(config_file):
                raise CliError(f"--config {config_file}: no such file", ConfigError.exit_code)
            env[CONFIG_ENV] = os.path.abspath(config_file)
    ctx.obj = State(env, fmt, -1 if quiet_flag else verbose)
