"""`nmem sweep` and `nmem consolidate`: retention and consolidation (docs/lifecycle.md)."""

from __future__ import annotations

from typing import Any

import click

from nmem.adapters.cli.app import State, emit, format_option, note, pass_state
from nmem.adapters.cli.output import Bars, Block, Body, Fields, Heading, Table, human_size, one_line, when
from nmem.adapters.cli.params import Integer
from nmem.adapters.cli.progress import shown


@click.command("sweep")
@click.option("--dry-run", is_flag=True, help="Count what would be deleted, per type; change nothing.")
@format_option
@pass_state
def sweep(state: State, dry_run: bool, fmt: str | None) -> None:
    """Apply the trail's retention limits and recompute memory tiers.

    Observations older than their type's limit in the `retention.ttl` setting are deleted
    the way `purge` deletes (search index rewritten, content zeroed), pinned ones kept; the
    space goes back to the disk. With no limit set (the default) nothing is deleted and only
    tiers are recomputed. Curated memories are never deleted by a sweep.

    \b
        nmem config set retention.ttl "file_read=30d,search=30d,*=1y"
        nmem sweep --dry-run      # what would go, per type
        nmem sweep
    """
    report = state.service().sweep(dry_run=dry_run)
    emit(state, fmt, report, lambda: _sweep_blocks(report))
    if not report["policy"]:
        note("no retention limit set (retention.ttl): nothing deleted")


def _sweep_blocks(report: dict[str, Any]) -> list[Block]:
    dry = report["dry_run"]
    total = report["would_delete"] if dry else report["deleted"]
    blocks: list[Block] = [
        Heading("nmem sweep (dry run)" if dry else "nmem sweep"),
        Fields([
            ("policy", ", ".join(f"{t}={age}" for t, age in report["policy"].items()) or "none (retention.ttl)"),
            ("would delete" if dry else "deleted", f"{total} observation{'' if total == 1 else 's'}"),
            *([] if dry else [("reclaimed", human_size(int(report["reclaimed_bytes"]))),
                              ("database", human_size(int(report["bytes_after"])))]),
        ]),
        Bars("By type", list(report["by_type"].items())),
    ]
    if report["tiers"]:
        blocks.append(Bars("Tier moves", list(report["tiers"].items())))
    return blocks


@click.command("consolidate")
@click.option("--dry-run", is_flag=True,
              help="Show the merges, stale notes and roll-ups it would make; change nothing.")
@click.option("--domain", help="Only this domain: project (the current one), project:<name>, user, org.")
@click.option("--undo", "undo", type=Integer(), metavar="RUN_ID", help="Restore what run RUN_ID changed.")
@click.option("--runs", is_flag=True, help="List the recent runs (their ids are what --undo takes).")
@format_option
@pass_state
def consolidate(state: State, dry_run: bool, domain: str | None, undo: int | None, runs: bool,
                fmt: str | None) -> None:
    """Merge near-duplicate memories, archive stale notes, roll sessions up per project.

    Near-duplicates (the same fact restated, in one domain) merge into the one kept: it gains
    the sentences only the others had and `relates_to` pointing at them; the others are
    archived (tag `nmem:merged`, `relates_to` pointing at the one kept), never deleted.
    Unpinned progress, blockers and context notes untouched for `lifecycle.stale_days` are
    archived (tag `nmem:stale`). Each project's recent session summaries become one memory
    (tag `nmem:rollup`). Summaries are extractive unless `llm.provider` is set (exit code 6
    when the provider fails; nothing is changed then). Every change is a memory edit that
    syncs, and `--undo RUN_ID` puts it back. `recall --include-archived` finds what was archived.

    \b
        nmem consolidate --dry-run
        nmem consolidate
        nmem consolidate --undo 3
    """
    service = state.service()
    if runs:
        rows = service.consolidation_runs()
        emit(state, fmt, {"runs": rows}, lambda: _runs_blocks(rows))
        return
    if undo is not None:
        if dry_run or domain:
            raise click.UsageError("--undo takes no --dry-run or --domain")
        result = service.undo_consolidation(undo)
        emit(state, fmt, result, lambda: _undo_blocks(result))
        return
    progress = (lambda message: note(f"consolidate: {message}")) if shown() else None
    report = service.consolidate(dry_run=dry_run, domain=domain, progress=progress)
    emit(state, fmt, report, lambda: _consolidate_blocks(report))


def _consolidate_blocks(report: dict[str, Any]) -> list[Block]:
    dry = report["dry_run"]
    merged = sum(len(m["merged"]) for m in report["merges"])
    blocks: list[Block] = [
        Heading("nmem consolidate (dry run)" if dry else f"nmem consolidate: run {report['run_id']}"),
        Fields([
            ("compared", f"{report['compared']} memories"),
            ("merges", f"{len(report['merges'])} groups, {merged} archived into the one kept"),
            ("stale", f"{len(report['stale'])} archived"),
            ("roll-ups", f"{len(report['rollups'])} projects"),
            ("summaries", str(report["summarizer"])),
            *([] if dry else [("undo", f"nmem consolidate --undo {report['run_id']}")]),
        ]),
    ]
    rows = [[m["survivor"], one_line(m["summary"], 50), x["id"], one_line(x["summary"], 50), f"{x['similarity']:.2f}"]
            for m in report["merges"] for x in m["merged"]]
    if rows:
        blocks += [Heading("Merges", 2), Table(("kept", "summary", "merged", "summary", "sim"), rows)]
    if report["stale"]:
        blocks += [Heading("Stale", 2), Table(("id", "namespace", "summary"),
                                              [[s["id"], s["namespace"], one_line(s["summary"], 60)]
                                               for s in report["stale"]])]
    if report["rollups"]:
        blocks += [Heading("Roll-ups", 2), Table(("project", "sessions", "memory"),
                                                 [[r["project"], str(r["sessions"]), r.get("action", "would write")]
                                                  for r in report["rollups"]])]
    if report["tiers"]:
        blocks.append(Bars("Tier moves", list(report["tiers"].items())))
    if not (rows or report["stale"] or report["rollups"]):
        blocks.append(Body("Nothing to consolidate."))
    return blocks


def _undo_blocks(result: dict[str, Any]) -> list[Block]:
    blocks: list[Block] = [Heading(f"nmem consolidate --undo {result['run_id']}"),
                           Fields([("restored", str(len(result["restored"]))),
                                   ("left as they are", str(len(result["conflicts"])))])]
    if result["conflicts"]:
        blocks.append(Table(("id", "why"), [[c["id"], c["reason"]] for c in result["conflicts"]]))
    return blocks


def _runs_blocks(rows: list[dict[str, Any]]) -> list[Block]:
    if not rows:
        return [Body("No consolidation run yet.")]
    return [Table(("run", "when", "merged", "stale", "roll-ups", "undone"),
                  [[str(r["id"]), when(r["started_at"]),
                    str(sum(len(m["merged"]) for m in r["report"].get("merges", []))),
                    str(len(r["report"].get("stale", []))), str(len(r["report"].get("rollups", []))),
                    when(r["undone_at"]) if r["undone_at"] else ""] for r in rows])]


COMMANDS: tuple[click.Command, ...] = (sweep, consolidate)
