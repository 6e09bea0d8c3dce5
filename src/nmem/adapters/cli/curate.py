"""Curated memories: remember / capture, recall, update, forget, pin, unpin."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from nmem.adapters.cli.app import State, emit, format_option, note, pass_state
from nmem.adapters.cli.output import Body, Fields
from nmem.adapters.cli.params import Integer
from nmem.adapters.cli.views import capture_blocks, read_stdin, recall_blocks, split_values
from nmem.models import TIERS, Memory
from nmem.service.args import RECALL_PROJECT_HELP, ProjectScope
from nmem.service.args import source as read_source
from nmem.service.recall import RECALL_DETAILS, RECALL_MODES

F = TypeVar("F", bound=Callable[..., Any])
DOMAIN_HELP = "Where it belongs: project (the current one), project:<name>, user or org."


def memory_options(func: F) -> F:
    """Options shared by `remember` and `capture`."""
    for option in reversed((
        click.option("--domain", default=None, help=DOMAIN_HELP + " Default: project."),
        click.option("--project", default=None, help="Project for --domain project (default: the current one)."),
        click.option("--tag", "--tags", "tags", multiple=True, help="Tags (repeat or comma-separate)."),
        click.option("--relates-to", "relates_to", multiple=True,
                     help="Ids or URNs of related memories (repeat or comma-separate)."),
        click.option("--tier", type=click.Choice(TIERS), default="warm", show_default=True),
        click.option("--pin", is_flag=True, help="Pin it: never aged out, listed first."),
        click.option("--stdin", "from_stdin", is_flag=True, help="Read the content from standard input."),
        click.option("--source", default=None, metavar="NAME",
                     help="Who it comes from (a rule, a script; srvrmgr's rule_name). Default: cli."),
        format_option,
    )):
        func = option(func)
    return func


def _saved(state: State, fmt: str | None, verb: str, memory: Memory) -> None:
    data = {"success": True, **memory.to_dict()}
    emit(state, fmt, data, lambda: [
        Body(f"{verb} {memory.namespace}/{memory.id}"),
        Fields([("summary", memory.summary), ("domain", memory.domain), ("urn", memory.urn)]),
    ])


def _remember(state: State, fmt: str | None, content: str, *, summary: str | None, namespace: str | None,
              domain: str | None, project: str | None, tags: tuple[str, ...], relates_to: tuple[str, ...],
              tier: str, pin: bool, source: str | None) -> None:
    memory = state.service().remember(
        content, summary=summary, namespace=namespace, tags=split_values(tags), domain=domain,
        project=project, source=read_source(source, "cli"), relates_to=split_values(relates_to), tier=tier, pinned=pin)
    _saved(state, fmt, "Remembered", memory)


@click.command("remember")
@click.argument("content", required=False)
@click.option("--summary", help="One line, at most 100 characters (default: the content's first line).")
@click.option("--namespace", "-n", help="decisions, learnings, gotchas, patterns, blockers... (default: context).")
@memory_options
@pass_state
def remember(state: State, content: str | None, summary: str | None, namespace: str | None, domain: str | None,
             project: str | None, tags: tuple[str, ...], relates_to: tuple[str, ...], tier: str, pin: bool,
             from_stdin: bool, source: str | None, fmt: str | None) -> None:
    """Keep a piece of knowledge: a decision, a learning, a gotcha.

    CONTENT is markdown; with --stdin (or CONTENT "-") it is read from standard input.
    Prints the memory's id and URN.
    """
    if from_stdin or content == "-":
        if content not in (None, "-"):
            raise click.UsageError("give CONTENT or --stdin, not both")
        content = read_stdin()
    if content is None:
        raise click.UsageError("missing CONTENT (or pass --stdin)")
    _remember(state, fmt, content, summary=summary, namespace=namespace, domain=domain, project=project,
              tags=tags, relates_to=relates_to, tier=tier, pin=pin, source=source)


@click.command("capture")
@click.argument("namespace")
@click.argument("summary")
@click.option("--content", help="The memory's body (markdown). Default: the summary itself.")
@click.option("--spec", help="Specification it belongs to (kept as the tag spec:<name>; recall --spec finds it).")
@memory_options
@pass_state
def capture(state: State, namespace: str, summary: str, content: str | None, spec: str | None, domain: str | None,
            project: str | None, tags: tuple[str, ...], relates_to: tuple[str, ...], tier: str, pin: bool,
            from_stdin: bool, source: str | None, fmt: str | None) -> None:
    """Keep a memory given NAMESPACE and SUMMARY (subcog's capture).

    The body comes from --content or --stdin, else the summary is the body. JSON output:
    success, memory_id, uri, indexed (the full-text index holds it), warning (secrets
    redacted, a duplicate kept; null when none), then every field of the memory.

    \b
        echo "We need JSONB" | nmem capture decisions "Use PostgreSQL" --stdin
        nmem capture decisions "API versioning" --spec feature-api --tags api,versioning
    """
    if from_stdin and content is not None:
        raise click.UsageError("give --content or --stdin, not both")
    body = read_stdin() if from_stdin else content or summary
    data = state.service().capture(
        body, summary=summary, namespace=namespace, spec=spec, tags=split_values(tags), domain=domain,
        project=project, source=read_source(source, "cli"), relates_to=split_values(relates_to), tier=tier,
        pinned=pin)
    emit(state, fmt, data, lambda: capture_blocks(data))


@click.command("recall")
@click.argument("query", required=False)
@click.option("--namespace", "-n", help="Only this namespace.")
@click.option("--tag", "--tags", "tags", multiple=True, help="Only memories with these tags (all of them).")
@click.option("--spec", help="Only memories captured with this --spec.")
@click.option("--domain", default="all", show_default=True, help="all, project, project:<name>, user or org.")
@click.option("--project", help=RECALL_PROJECT_HELP)
@click.option("--limit", "-l", type=Integer(), default=10, show_default=True, help="Max results, clamped to 1-100.")
@click.option("--mode", type=click.Choice(RECALL_MODES), default=None,
              help="bm25 (full text), vector (nearest vectors) or hybrid (both). Default: hybrid when "
                   "search.embeddings is on, else bm25. vector and hybrid need embeddings (exit 3 without).")
@click.option("--min-similarity", type=click.FloatRange(0.0, 1.0), default=None,
              help="Only memories at least this similar to QUERY (0.0-1.0, cosine); implies --mode hybrid.")
@click.option("--detail", type=click.Choice(RECALL_DETAILS), default="summary", show_default=True,
              help="minimal: id and summary; summary: metadata and a preview; full: the whole content.")
@click.option("--include-archived", is_flag=True, help="Also search archived memories.")
@click.option("--reason", metavar="QUESTION", default=None,
              help="Answer QUESTION from the memories it recalls, through the optional LLM (llm.provider; "
                   "exit 3 when none is set, 6 when it fails).")
@format_option
@pass_state
def recall(state: State, query: str | None, namespace: str | None, tags: tuple[str, ...], spec: str | None,
           domain: str, project: str | None, limit: int, mode: str | None, min_similarity: float | None,
           detail: str, include_archived: bool, reason: str | None, fmt: str | None) -> None:
    """Search the memories of this project plus the user's and the org's; without QUERY, the newest first.

    Each result carries `number` (the text shows it as `[N]`), the integer id `nmem pin`,
    `update` and `forget` also take. `--reason QUESTION`
    (subcog's Tier 3) has the LLM answer QUESTION from the memories recalled for it.
    """
    service = state.service()
    options: dict[str, Any] = {
        "namespace": namespace, "tags": split_values(tags) or None, "domain": domain,
        "project": ProjectScope.parse(project, service.project_for(), bound=True).only, "limit": limit,
        "include_archived": include_archived, "mode": mode, "min_similarity": min_similarity, "spec": spec}
    if reason is not None:
        if query is not None:
            raise click.UsageError("give QUERY or --reason QUESTION, not both")
        data = service.reason(reason, **options)
        emit(state, fmt, data, lambda: [Body(data["answer"]), *recall_blocks(data["results"])])
        note(f"{data['llm']} answered from {data['count']} memories")
        return
    results = service.recall_results(query, detail=detail, **options)
    emit(state, fmt, {"query": query, "count": len(results), "results": results}, lambda: recall_blocks(results))
    note(f'{len(results)} memories for "{query}"' if query else f"{len(results)} memories")


@click.command("update")
@click.argument("ref", metavar="ID|URN|NUMBER")
@click.option("--content", help="New body (markdown).")
@click.option("--stdin", "from_stdin", is_flag=True, help="Read the new body from standard input.")
@click.option("--summary", help="New one-line summary (at most 100 characters).")
@click.option("--namespace", "-n", help="Move it to another namespace.")
@click.option("--tags", "--tag", "tags", multiple=True, help="Replace the tags (repeat or comma-separate; '' clears).")
@click.option("--relates-to", "relates_to", multiple=True, help="Replace the related ids or URNs.")
@click.option("--tier", type=click.Choice(TIERS), help="Move it to another tier.")
@format_option
@pass_state
def update(state: State, ref: str, content: str | None, from_stdin: bool, summary: str | None,
           namespace: str | None, tags: tuple[str, ...], relates_to: tuple[str, ...], tier: str | None,
           fmt: str | None) -> None:
    """Change a memory (id, URN or the number recall shows): content, summary, namespace, tags, tier."""
    if from_stdin:
        if content is not None:
            raise click.UsageError("give --content or --stdin, not both")
        content = read_stdin()
    memory = state.service().update(
        ref, content=content, summary=summary, namespace=namespace,
        tags=split_values(tags) if tags else None, tier=tier,
        relates_to=split_values(relates_to) if relates_to else None)
    _saved(state, fmt, "Updated", memory)


@click.command("forget")
@click.argument("ref", metavar="ID|URN|NUMBER")
@format_option
@pass_state
def forget(state: State, ref: str, fmt: str | None) -> None:
    """Delete a memory, keeping a tombstone.

    The memory is named by its id, URN, or the integer `number` recall shows. Its text is
    erased; the tombstone lets the delete reach other copies when they sync.
    """
    memory = state.service().forget(ref)
    data = {"success": True, "forgotten": True, "id": memory.id, "urn": memory.urn}
    emit(state, fmt, data, lambda: [Body(f"Forgot {memory.urn}")])


def _pin(state: State, ref: str, pinned: bool, fmt: str | None) -> None:
    data = state.service().pin(ref, pinned)
    what = f"observation {data['id']}" if data["kind"] == "observation" else f"memory {data['urn']}"
    emit(state, fmt, {"success": True, **data},
         lambda: [Body(f"{'Pinned' if pinned else 'Unpinned'} {what}")])


@click.command("pin")
@click.argument("ref", metavar="ID|URN|NUMBER|oN")
@format_option
@pass_state
def pin(state: State, ref: str, fmt: str | None) -> None:
    """Pin a memory (id, URN or the number recall shows) or an observation (o42, #42, URN).

    A bare number is a memory's, as in `update` and `forget`; an observation is written o42
    or #42. Pinned records are kept by purges and retention; pinned memories are listed first.
    """
    _pin(state, ref, True, fmt)


@click.command("unpin")
@click.argument("ref", metavar="ID|URN|NUMBER|oN")
@format_option
@pass_state
def unpin(state: State, ref: str, fmt: str | None) -> None:
    """Remove a pin set with `nmem pin`."""
    _pin(state, ref, False, fmt)


COMMANDS: tuple[click.Command, ...] = (remember, capture, recall, update, forget, pin, unpin)
