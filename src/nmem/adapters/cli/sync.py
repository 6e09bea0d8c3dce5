"""`nmem sync`: curated memories across machines through a plain git remote (docs/sync.md)."""

from __future__ import annotations

import time

import click

from nmem.adapters.cli.app import State, emit, format_option, pass_state
from nmem.adapters.cli.output import Block, Fields, Heading, Table
from nmem.capture.spool import HookLog
from nmem.errors import NmemError, SyncBusy
from nmem.sync.engine import SyncReport, run_sync


@click.command("sync")
@click.option("--fetch", is_flag=True, help="Only fetch: apply the other devices' writes.")
@click.option("--push", is_flag=True,
              help="Only push this device's writes (the remote's tip is still fetched to build on).")
@click.option("--remote", metavar="URL",
              help="Git remote for this run. Default: the sync.remote setting (`nmem config set sync.remote URL`).")
@click.option("--domain", "domains", multiple=True, metavar="DOMAIN",
              help="Sync only this domain (repeatable): user, org, project (the current one), project:<name>, "
                   "or a glob such as project:*. Default: all, within the sync.domains setting.")
@click.option("--force", is_flag=True,
              help="Read every remote file again and recheck every local write against the remote.")
@click.option("--accept", "accept", multiple=True, metavar="DEVICE",
              help="Apply the quarantined operations of this device (repeatable; `all` for every device): "
                   "those stamped more than sync.max_skew seconds ahead of this machine's clock.")
@click.option("--background", is_flag=True, hidden=True,
              help="How hooks start it: skip if a sync runs, one log line, failures also to nmem.log.")
@format_option
@pass_state
def sync(state: State, fetch: bool, push: bool, remote: str | None, domains: tuple[str, ...], force: bool,
         accept: tuple[str, ...], background: bool, fmt: str | None) -> None:
    """Sync curated memories with other machines through a git remote.

    Each device appends its own writes to its own log files on the remote's `nmem` branch,
    so pushes never conflict; every device applies every log, and per memory the last
    writer wins by a hybrid logical clock (deletes included), so all converge. Without
    --fetch or --push it does both. The trail (sessions, prompts, observations) is not
    synced. Operations stamped beyond sync.max_skew are quarantined until --accept.
    Exit code 5 when the remote cannot be reached or refuses the push.

    \b
        nmem config set sync.remote git@github.com:me/nmem-sync.git
        nmem sync
        nmem sync --fetch --domain user
    """
    both = fetch == push
    service = state.service()
    project = service.project_for()
    service.check_writable(project=project)
    if background:
        _background(state, fetch=both or fetch, push=both or push, domains=domains, project=project)
        return
    report = run_sync(service.store, state.settings, fetch=both or fetch, push=both or push, force=force,
                      remote=remote, domains=domains, project=project, accept=accept)
    emit(state, fmt, report.to_dict(), lambda: report_blocks(report))


def _background(state: State, *, fetch: bool, push: bool, domains: tuple[str, ...], project: str) -> None:
    """A detached sync started by a hook: one line to stdout (logs/sync.log), failures to nmem.log too."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    direction = "both" if fetch and push else ("fetch" if fetch else "push")
    try:
        report = run_sync(state.service().store, state.settings, fetch=fetch, push=push, domains=domains,
                          project=project, wait=0)
    except SyncBusy:
        click.echo(f"{stamp} sync {direction}: skipped, another sync is running")
        return
    except NmemError as exc:
        click.echo(f"{stamp} sync {direction}: failed: {exc.message}")
        HookLog(state.settings).warning(f"background sync ({direction}) failed: {exc.message}")
        raise
    click.echo(f"{stamp} sync {direction}: {summary(report)}")


def summary(report: SyncReport) -> str:
    return (f"pulled {report.pulled}, applied {report.applied}, conflicts resolved {report.conflicts}, "
            f"invalid {report.invalid}, quarantined {report.quarantined}, restored {report.restored}, "
            f"pushed {report.pushed}, waiting {report.pending}")


def report_blocks(report: SyncReport) -> list[Block]:
    blocks: list[Block] = [
        Heading(f"sync with {report.remote} (branch {report.branch})"),
        Fields([
            ("device", report.device),
            ("direction", report.direction + (" (forced)" if report.forced else "")),
            ("pulled", f"{report.pulled} operations from {report.files_read} files"),
            ("applied", str(report.applied)),
            ("conflicts resolved", str(report.conflicts)),
            ("invalid lines", str(report.invalid)),
            ("quarantined", str(report.quarantined) + (f" ({report.accepted} accepted)" if report.accepted else "")),
            ("restored", f"{report.restored} of this device's operations the remote had lost"),
            ("pushed", str(report.pushed) + (f" (commit {report.pushed_commit[:12]})" if report.pushed_commit else "")),
            ("waiting to push", str(report.pending)),
        ]),
    ]
    if report.conflict_list:
        rows = [[c["uid"], c["domain"], str(c["kept_device"]), str(c["dropped_device"])]
                for c in report.conflict_list]
        blocks += [Heading("conflicts (last writer kept; the other version stays in its device's log)", 2),
                   Table(["memory", "domain", "kept from", "dropped from"], rows)]
    if report.invalid_lines:
        blocks += [Heading("invalid lines (skipped)", 2),
                   Table(["file", "reason"], [[i["path"], i["reason"]] for i in report.invalid_lines])]
    if report.quarantine_list:
        rows = [[q["device"], q["uid"], q["op"], q["domain"], str(q["ahead_s"])] for q in report.quarantine_list]
        blocks += [Heading("quarantined (stamped beyond sync.max_skew; apply with --accept DEVICE)", 2),
                   Table(["device", "memory", "op", "domain", "seconds ahead"], rows)]
    for warning in report.warnings:
        blocks.append(Heading(f"warning: {warning}", 2))
    return blocks


COMMANDS: tuple[click.Command, ...] = (sync,)
__all__ = ["COMMANDS", "report_blocks", "summary"]
