"""`nmem migrate --to URL`: move the whole store to another engine (SQLite <-> PostgreSQL)."""

from __future__ import annotations

import click

from nmem.adapters.cli.app import State, format_option, note, pass_state
from nmem.adapters.cli.output import Heading, Table, mask_secrets


@click.command("migrate")
@click.option("--to", "target", required=True, metavar="URL",
              help="The store to copy into: postgresql://user@host/db or sqlite:///path.")
@click.option("--force", is_flag=True, help="Replace everything a non-empty target holds.")
@format_option
@pass_state
def migrate(state: State, target: str, force: bool, fmt: str | None) -> None:
    """Copy every row of this store (the store.url setting, else the SQLite file) into another
    engine, then verify each table's row count and checksum on both sides.

    Ids are kept, so `o42` still opens the same observation. A target that already holds data
    is refused unless --force. Point store.url at the target afterwards to use it.

    \b
        nmem migrate --to postgresql://nmem@db.internal/nmem
        NMEM_STORE_URL=postgresql://nmem@db.internal/nmem nmem migrate --to sqlite:///$HOME/nmem.db
    """
    from nmem.adapters.cli.app import emit
    from nmem.store.migrate import migrate as copy_store

    source = state.settings.store_url
    checks = copy_store(source, target, force=force)
    shown_source, shown_target = mask_secrets(source), mask_secrets(target)  # no password on screen
    note(f"copied {sum(c.rows for c in checks)} rows from {shown_source} to {shown_target}, every table verified")
    emit(state, fmt, {"source": shown_source, "target": shown_target, "tables": [c.to_dict() for c in checks]},
         lambda: [Heading("verified: rows and checksums match"),
                  Table(("table", "rows", "checksum"), [(c.table, str(c.rows), c.checksum[:16]) for c in checks])])


@click.command("drain")
@format_option
@pass_state
def drain(state: State, fmt: str | None) -> None:
    """Store the events hooks left in the spool, oldest first, each exactly once.

    Hooks spool every event when store.url names a server (PostgreSQL): they never load its
    driver. Run this after sessions, from cron, or as a systemd timer. Events a failing or busy
    SQLite store could not take are stored too (the next hook would do it anyway).
    """
    import os

    from nmem.adapters.cli.app import emit
    from nmem.capture.spool import WAITING, Deadline, HookLog, drain

    settings = state.settings
    service = state.service()

    def waiting() -> int:
        try:
            return sum(1 for n in os.listdir(settings.spool_dir) if n.endswith(WAITING))
        except FileNotFoundError:
            return 0

    before = waiting()
    log = HookLog(settings)
    while not drain(service, log, Deadline(DRAIN_BUDGET_MS)):
        pass  # a batch at a time; drain_spool says when the spool was emptied
    left = waiting()
    emit(state, fmt, {"stored": before - left, "waiting": left},
         lambda: [Heading(f"stored {before - left} spooled events; {left} waiting")])


DRAIN_BUDGET_MS = 60_000

COMMANDS: tuple[click.Command, ...] = (migrate, drain)
