"""The whole `nmem` command line: every click command over `nmem.service.api.Service`.

`main(args)` is what `python -m nmem` calls for everything but the hook fast path and the
light path (`light.py`). It never shows a traceback: nmem's errors print `nmem: <message>`
and exit with their code, usage errors exit 2.
"""

from __future__ import annotations

import click

from nmem.adapters.cli import (
    admin,
    curate,
    encryption,
    engines,
    index,
    lifecycle,
    portable,
    query,
    serve,
    setup,
    sync,
    team,
)
from nmem.adapters.cli.app import cli
from nmem.errors import NmemError

for _command in (*query.COMMANDS, *curate.COMMANDS, *admin.COMMANDS, *setup.COMMANDS, *serve.COMMANDS,
                 *index.COMMANDS, *sync.COMMANDS, *portable.COMMANDS, *lifecycle.COMMANDS, *encryption.COMMANDS,
                 *team.COMMANDS, *engines.COMMANDS):
    cli.add_command(_command)

__all__ = ["cli", "main"]


def main(args: list[str]) -> int:
    """Run one command line; returns the exit code instead of exiting."""
    try:
        result = cli.main(args=list(args), prog_name="nmem", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.Abort:
        click.echo("nmem: aborted", err=True)
        return 130
    except NmemError as exc:  # raised outside a command, e.g. while closing the store
        click.echo(f"nmem: {exc.message}", err=True)
        return exc.exit_code
    except SystemExit as exc:  # click exits by itself when the reader of stdout goes away (EPIPE)
        return exc.code if isinstance(exc.code, int) else 1
    except Exception as exc:  # the one edge handler: a bug must still be one readable line
        click.echo(f"nmem: internal error: {type(exc).__name__}: {exc}", err=True)
        return 1
    return result if isinstance(result, int) else 0
