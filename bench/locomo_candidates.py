"""LoCoMo: where the evidence lies, and what meaning-based candidates BM25 never sees would add.

    .venv/bin/python bench/locomo_candidates.py --data /work/shared/bench/locomo/locomo-dev.json
    .venv/bin/python bench/locomo_candidates.py --pool 100 --json

Every conversation is ingested as bench/locomo.py does it, and each question asked once through
`Service.search(..., scope="prompts", limit=pool)` with nmem's default ranking. With `wordllama`
installed (`pip install wordllama`: static embeddings whose weights ship in the wheel), every turn
and question is also embedded, and the turns nearest the question that nmem's `pool` hits do not
hold are its *dense-only* candidates: what a meaning signal could add without reordering BM25.

Reported per LoCoMo category: the share of evidence turns among nmem's first 10 hits, among its
hits 11..pool, among the first 5 / 20 / pool dense-only candidates, and in neither list (a
question sharing no word with its evidence, whose meaning the embedder does not catch either).
Then the LoCoMo scores (bench/locomo_scoring.py) of placing dense-only candidates into nmem's
page without moving nmem's own hits relative to each other:

- `tail-m`: the last m of the first 10 places go to the m nearest dense-only candidates;
- `after-confident-t`: one dense-only candidate after the hits scoring at least t of the best
  (nmem's confident hits), before the weaker ones;
- `fill-k-w`: the first k hits stay; below them nmem's hits (score / best) and dense-only
  candidates (w · cosine / best cosine) are merged by those shares.

The data (CC BY-NC 4.0) is read from ../shared/bench/locomo/; never commit it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from locomo import DAY, data_arguments, ingest, read_data
from locomo_scoring import METRICS, Conversation, Tally, iter_turns, question_scores
from measure import loadavg, machine
from nmem.config import load_settings
from nmem.errors import QuerySyntaxError
from nmem.search import embedders
from nmem.service.api import Service

LIMIT = 10
PLACES = ("nmem@10", "nmem@11-pool", "dense-only@5", "dense-only@6-20", "dense-only@21-pool", "neither")


class Asked:
    """One question: its category, conversation, evidence, nmem's hits (turn id, score) and the
    dense-only candidates (turn id, cosine), nearest first."""

    def __init__(self, category: int, conversation: str, evidence: Sequence[str],
                 hits: list[tuple[str, float]], dense_only: list[tuple[str, float]]) -> None:
        self.category, self.conversation, self.evidence = category, conversation, tuple(evidence)
        self.hits, self.dense_only = hits, dense_only


def collect(conversations: list[Conversation], home: Path, pool: int,
            embedder: embedders.Embedder | None) -> tuple[list[Asked], dict[str, float]]:
    service = Service.open(load_settings({"NMEM_HOME": str(home)}))
    cost = {"search_cpu_s": 0.0, "embed_cpu_s": 0.0}
    asked: list[Asked] = []
    try:
        maps = {c.sample_id: ingest(service, home / "projects", c) for c in conversations}
        for conv in conversations:
            service.clock = lambda t=conv.sessions[-1].timestamp + DAY: float(t)
            turns = {t.dia_id: t.content() for _, t in iter_turns(conv)}
            ids = list(turns)
            t0 = time.process_time()
            vectors = embedder.embed([turns[i] for i in ids]) if embedder else []
            questions = embedder.embed([q.text for q in conv.questions]) if embedder else []
            cost["embed_cpu_s"] += time.process_time() - t0
            dia = maps[conv.sample_id]
            for n, q in enumerate(conv.questions):
                t0 = time.process_time()
                try:
                    found = service.search(q.text, scope="prompts", project=conv.sample_id, limit=pool).hits
                except QuerySyntaxError:
                    found = []
                cost["search_cpu_s"] += time.process_time() - t0
                hits = [(dia[int(h.record.id)], h.score) for h in found]
                dense: list[tuple[str, float]] = []
                if embedder:
                    held = {i for i, _ in hits}
                    near = sorted(((embedders.dot(questions[n], v), i) for i, v in zip(ids, vectors, strict=True)),
                                  reverse=True)
                    dense = [(i, s) for s, i in near if i not in held][:pool]
                asked.append(Asked(q.category, conv.sample_id, q.evidence, hits, dense))
    finally:
        service.close()
    return asked, {k: round(v, 2) for k, v in cost.items()}


def places(asked: list[Asked]) -> dict[str, dict[str, float]]:
    """Per category: the share of evidence turns in each place (`PLACES`)."""
    counts: dict[str, dict[str, int]] = {}
    for a in asked:
        ranked = [i for i, _ in a.hits]
        dense = [i for i, _ in a.dense_only]
        row = counts.setdefault(str(a.category), dict.fromkeys(("turns", *PLACES), 0))
        for e in a.evidence:
            row["turns"] += 1
            if e in ranked[:LIMIT]:
                row["nmem@10"] += 1
            elif e in ranked:
                row["nmem@11-pool"] += 1
            elif e in dense[:5]:
                row["dense-only@5"] += 1
            elif e in dense[:20]:
                row["dense-only@6-20"] += 1
            elif e in dense:
                row["dense-only@21-pool"] += 1
            else:
                row["neither"] += 1
    return {cat: {"turns": row["turns"], **{p: round(row[p] / row["turns"], 3) for p in PLACES}}
            for cat, row in sorted(counts.items())}


Placement = Callable[[Asked], list[str]]


def tail(m: int) -> Placement:
    def place(a: Asked) -> list[str]:
        extra = [i for i, _ in a.dense_only[:m]]
        return [i for i, _ in a.hits][:LIMIT - len(extra)] + extra
    return place


def after_confident(share: float) -> Placement:
    def place(a: Asked) -> list[str]:
        if not a.hits:
            return [i for i, _ in a.dense_only]
        best = a.hits[0][1]
        head = [i for i, s in a.hits if s >= share * best]
        return head + [i for i, _ in a.dense_only[:1]] + [i for i, s in a.hits if s < share * best]
    return place


def fill(keep: int, weight: float) -> Placement:
    def place(a: Asked) -> list[str]:
        if not a.hits:
            return [i for i, _ in a.dense_only]
        best = a.hits[0][1] or 1.0
        nearest = a.dense_only[0][1] if a.dense_only and a.dense_only[0][1] > 0 else 1.0
        below = [(s / best, n, i) for n, (i, s) in enumerate(a.hits[keep:])]
        below += [(weight * s / nearest, LIMIT + n, i) for n, (i, s) in enumerate(a.dense_only)]
        return [i for i, _ in a.hits[:keep]] + [i for _, _, i in sorted(below, key=lambda t: (-t[0], t[1]))]
    return place


PLACEMENTS: dict[str, Placement] = {
    "nmem": lambda a: [i for i, _ in a.hits],
    "tail-1": tail(1), "tail-2": tail(2),
    "after-confident-0.6": after_confident(0.6), "after-confident-0.8": after_confident(0.8),
    "fill-3-0.5": fill(3, 0.5), "fill-5-0.5": fill(5, 0.5), "fill-5-0.7": fill(5, 0.7),
}


def score(asked: list[Asked], place: Placement, groups: dict[str, list[str]]) -> dict[str, Any]:
    total = Tally()
    by_group = {name: Tally() for name in groups}
    for a in asked:
        scores = question_scores(a.evidence, place(a)[:LIMIT])
        total.add(a.category, scores)
        for name, members in groups.items():
            if a.conversation in members:
                by_group[name].add(a.category, scores)
    return {"overall": total.overall(), "by_category": total.by_category(),
            "by_group": {name: t.overall() for name, t in by_group.items()}}


def run(conversations: list[Conversation], pool: int, groups: dict[str, list[str]]) -> dict[str, Any]:
    embedder: embedders.Embedder | None
    try:
        embedder = embedders.load_embedder("wordllama", "")
        unavailable = None
    except embedders.EmbeddingsUnavailable as exc:
        embedder, unavailable = None, str(exc)
    with tempfile.TemporaryDirectory(prefix="nmem-locomo-candidates-") as tmp:
        asked, cost = collect(conversations, Path(tmp), pool, embedder)
    out: dict[str, Any] = {"pool": pool, "questions": len(asked), "embedder": embedder.name if embedder else None,
                           "unavailable": unavailable, "cpu": cost, "places": places(asked), "placements": {}}
    for name, place in PLACEMENTS.items():
        if name == "nmem" or embedder is not None:
            out["placements"][name] = score(asked, place, groups)
    return out


def render(report: dict[str, Any]) -> str:
    names = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop"}
    lines = [f"LoCoMo, {report['questions']} questions; nmem's first {report['pool']} hits; "
             f"embedder {report['embedder'] or 'none (' + str(report['unavailable']) + ')'}; "
             f"CPU search {report['cpu']['search_cpu_s']} s, embedding {report['cpu']['embed_cpu_s']} s; "
             f"load {report['machine']['loadavg_start']} -> {report['loadavg_end']}",
             "", "share of evidence turns by where they lie:",
             f"{'category':14} {'turns':>6}" + "".join(f"{p:>19}" for p in PLACES)]
    for cat, row in report["places"].items():
        lines.append(f"{names.get(cat, cat):14} {row['turns']:>6}" + "".join(f"{row[p]:>19.3f}" for p in PLACES))
    cols = [m for m in METRICS if m != "empty"]
    lines += ["", "placements, tf@5/tf@10/sa@5/sa@10:",
              f"{'placement':22} {'overall':>27}" + "".join(f"{names[c]:>28}" for c in names)
              + "".join(f"{g:>28}" for g in next(iter(report["placements"].values()))["by_group"])]
    for name, row in report["placements"].items():
        cells = [row["overall"], *(row["by_category"].get(c, {}) for c in names), *row["by_group"].values()]
        lines.append(f"{name:22}" + "".join(f"{'/'.join(f'{cell.get(m, 0.0):.3f}' for m in cols):>28}"
                                            for cell in cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    data_arguments(parser)
    parser.add_argument("--pool", type=int, default=60, help="nmem hits and dense-only candidates per question")
    args = parser.parse_args(argv)
    if args.pool < LIMIT:
        parser.error(f"--pool must be at least {LIMIT}")
    conversations, groups = read_data(parser, args)
    started = machine()
    report = {**run(conversations, args.pool, groups), "machine": started, "loadavg_end": loadavg()}
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
