"""Housekeeping: purge, config, and the hook entry points listed here so `--help` shows them."""

from __future__ import annotations

import sys
from typing import Any

import click

from nmem.adapters.cli.app import State, emit, format_option, note, pass_state
from nmem.adapters.cli.output import Block, Body, Fields, Heading, Table, mask_secrets, one_line, scalar, when
from nmem.adapters.cli.params import Integer
from nmem.adapters.hooks import run as hooks
from nmem.config import SETTINGS, SETTINGS_BY_NAME, Settings, write_setting
from nmem.errors import ConfigError, InvalidArgument
from nmem.models import OBS_TYPES
from nmem.util.timeutil import parse_age

# -- purge --------------------------------------------------------------------------------

PURGE_SHOWN = 20  # rows a purge without --confirm lists


@click.command("purge")
@click.option("--id", "ids", multiple=True, type=Integer(), help="Observation id to delete (repeatable).")
@click.option("--query", "-q", help="Delete observations holding every word of this search (as `search --strict`).")
@click.option("--type", "types", multiple=True, type=click.Choice(OBS_TYPES), metavar="TYPE",
              help="Delete observations of this type (repeatable), e.g. file_read.")
@click.option("--older-than", help="Delete observations older than this age: 90m, 12h, 30d, 2w, 1y.")
@click.option("--project", help="With --query/--type/--older-than: only this project.")
@click.option("--confirm", is_flag=True, help="Required: purge deletes data and cannot be undone.")
@format_option
@pass_state
def purge(state: State, ids: tuple[int, ...], query: str | None, types: tuple[str, ...], older_than: str | None,
          project: str | None, confirm: bool, fmt: str | None) -> None:
    """Delete observations by id, or by query, type and/or age. Pinned rows are kept
    unless named by id.

    --query matches strictly: every word of it, as FTS5 does (or FTS5 syntax as typed),
    never the looser ranking `search` uses for questions; --type, --older-than and
    --project narrow it further. Without --confirm nothing is deleted: the count and the
    first rows that would go are shown, and the exit code is 2. The count deleted goes
    to stderr.

    \b
        nmem purge --query "stale fixture"             # what would go
        nmem purge --query "stale fixture" --confirm   # delete it
    """
    if project and ids:
        raise click.UsageError("--project narrows --query/--type/--older-than, not --id")
    service = state.service()
    age = parse_age(older_than, name="--older-than") if older_than else None
    selectors: dict[str, Any] = {"ids": ids, "obs_type": list(types) or None, "older_than": age,
                                 "project": project, "query": query}
    fmt_name = state.format(fmt)
    if not confirm:
        selected = service.purge_selection(**selectors)
        shown = [o.index_entry() for o in service.get_observations(selected[:PURGE_SHOWN])] if selected else []
        emit(state, fmt, {"deleted": 0, "matched": len(selected), "observations": shown},
             lambda: _purge_preview(shown, len(selected)))
        if not selected:
            raise InvalidArgument("nothing deleted: no observation matches")
        noun = f"observation{'' if len(selected) == 1 else 's'}"
        raise InvalidArgument(f"nothing deleted: {len(selected)} {noun} would go; add --confirm to delete "
                              f"{'it' if len(selected) == 1 else 'them'}")
    deleted = service.purge(**selectors, confirm=True)
    if fmt_name in ("json", "yaml"):
        emit(state, fmt, {"deleted": deleted}, list)
    note(f"purged {deleted} observation{'' if deleted == 1 else 's'}")


def _purge_preview(rows: list[dict[str, Any]], total: int) -> list[Block]:
    if not rows:
        return [Body("Nothing would be deleted.")]
    blocks: list[Block] = [Table(("id", "when", "type", "project", "content"),
                                 [[str(r["id"]), when(r["timestamp"]), r["obs_type"], r["project"],
                                   one_line(r["content_preview"], 60)] for r in rows])]
    if total > len(rows):
        blocks.append(Body(f"… and {total - len(rows)} more"))
    return blocks


# -- config -------------------------------------------------------------------------------

def setting_text(value: Any) -> str:
    """A setting's value as typed in the TOML file, without quotes: true, 20, a, b."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return scalar(value)


def _source(settings: Settings, name: str) -> str:
    origin = settings.sources[name]
    env = SETTINGS_BY_NAME[name].env
    if origin == "env":
        return f"env ${env}"
    return origin  # "file" (the config file named above the table) or "default"


@click.group("config")
def config() -> None:
    """Show and change settings.

    Settings live in a TOML file; environment variables win over it.
    """


@config.command("show")
@format_option
@pass_state
def config_show(state: State, fmt: str | None) -> None:
    """Every setting's effective value and where it came from."""
    settings = state.settings
    rows = [{"name": s.name, "value": mask_secrets(s.shown(settings[s.name])), "source": settings.sources[s.name],
             "env": s.env} for s in SETTINGS]
    data = {"config_file": str(settings.config_file), "home": str(settings.home), "settings": rows,
            "projects": settings.projects, "project_dirs": settings.project_dirs}
    if settings.unknown_keys:
        note(f"unknown keys in {settings.config_file}: {', '.join(settings.unknown_keys)}")

    def blocks() -> list[Block]:
        out: list[Block] = [
            Heading("nmem configuration"),
            Fields([("config file", str(settings.config_file)), ("data dir", str(settings.home))]),
            Table(("setting", "value", "source"),
                  [[r["name"], one_line(setting_text(r["value"]), 40), _source(settings, r["name"])]
                   for r in rows]),
        ]
        if settings.projects:
            out.append(Heading("Per-project overrides", 2))
            out.append(Table(("project", "overrides"),
                             [[name, scalar(table)] for name, table in sorted(settings.projects.items())]))
        if settings.project_dirs:
            out.append(Heading("Projects named by directory", 2))
            out.append(Table(("directory", "project"), [[path, name] for path, name in
                                                         sorted(settings.project_dirs.items())]))
        return out
    emit(state, fmt, data, blocks)


def _setting(name: str) -> None:
    if name not in SETTINGS_BY_NAME:
        raise ConfigError(f"unknown setting: {name} (see `nmem config show`)")


@config.command("get")
@click.argument("name")
@format_option
@pass_state
def config_get(state: State, name: str, fmt: str | None) -> None:
    """Print one setting's effective value."""
    _setting(name)
    value = mask_secrets(SETTINGS_BY_NAME[name].shown(state.settings[name]))
    data = {"name": name, "value": value, "source": state.settings.sources[name]}
    emit(state, fmt, data, lambda: [Body(setting_text(value))])


@config.command("set")
@click.argument("name")
@click.argument("value")
@format_option
@pass_state
def config_set(state: State, name: str, value: str, fmt: str | None) -> None:
    """Write one setting to the config file, keeping every other key."""
    _setting(name)
    settings = state.settings
    stored = SETTINGS_BY_NAME[name].shown(write_setting(settings, name, value))
    data = {"name": name, "value": mask_secrets(stored), "config_file": str(settings.config_file)}
    emit(state, fmt, data, lambda: [Body(f"{name} = {setting_text(mask_secrets(stored))}  ({settings.config_file})")])
    env = SETTINGS_BY_NAME[name].env
    if settings.sources[name] == "env":
        note(f"${env} is set and overrides the file while it stays set")


@config.command("path")
@format_option
@pass_state
def config_path(state: State, fmt: str | None) -> None:
    """Print the config file's path (it may not exist yet)."""
    settings = state.settings
    data = {"config_file": str(settings.config_file), "home": str(settings.home),
            "database": mask_secrets(settings.store_url)}
    emit(state, fmt, data, lambda: [Body(str(settings.config_file))])


# -- hook entry points ----------------------------------------------------------------------

_HOOK_IO = (
    click.option("--input", "input_file", type=click.Path(dir_okay=False), help="Read the event from FILE."),
    click.option("--output", "output_file", type=click.Path(dir_okay=False), help="Write context to FILE."),
)


def _run_hook(ctx: click.Context, argv: list[str], input_file: str | None, output_file: str | None) -> None:
    state = ctx.find_object(State)
    if input_file:
        argv += ["--input", input_file]
    if output_file:
        argv += ["--output", output_file]
    ctx.exit(hooks.run(argv, sys.stdin, sys.stdout, sys.stderr, env=state.env if state else None))


@click.command("record")
@_HOOK_IO[0]
@_HOOK_IO[1]
@click.pass_context
def record(ctx: click.Context, input_file: str | None, output_file: str | None) -> None:
    """Record one hook event read from stdin (JSON).

    The JSON object is what a harness pipes to its hook command; Claude Code's hooks
    run this on every event. SessionStart also prints the context block. Bad input
    exits 1 with one line on stderr; it never blocks the agent.
    """
    _run_hook(ctx, ["record"], input_file, output_file)


@click.command("hook")
@click.argument("event")
@_HOOK_IO[0]
@_HOOK_IO[1]
@click.pass_context
def hook(ctx: click.Context, event: str, input_file: str | None, output_file: str | None) -> None:
    """Record a hook event named on the command line.

    EVENT is a Claude Code name (PostToolUse) or a kebab-case alias (post-tool-use); the
    JSON on stdin may omit hook_event_name. Unknown events are accepted and ignored.
    """
    _run_hook(ctx, ["hook", event], input_file, output_file)


COMMANDS: tuple[click.Command, ...] = (purge, config, record, hook)
