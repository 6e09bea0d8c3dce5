"""bench/consolidate.py: its corpus holds what it claims, and the merges it scores stay precise."""

from __future__ import annotations

import itertools
from pathlib import Path

from conftest import load_bench


def test_corpus_plants_duplicates_and_hard_negatives_deterministically() -> None:
    bench = load_bench("consolidate")
    memories, truth = bench.build(60, 3)
    assert (memories, truth) == bench.build(60, 3)
    assert len(set(truth)) >= 60 and len(memories) > len(set(truth))       # some facts stated twice or more
    texts = [t for _, t in memories]
    assert len(set(texts)) == len(texts)                                     # restatements differ in words
    negated = [t for t in texts if t.startswith("Never use ")]
    assert all(truth[texts.index(t)] != truth[texts.index(t.replace("Never use ", "Use ", 1))]
               for t in negated if t.replace("Never use ", "Use ", 1) in texts)


def test_service_merges_are_scored_against_the_truth(nmem_home: Path) -> None:
    bench = load_bench("consolidate")
    memories, truth = bench.build(120, 5)
    actual = bench.true_pairs(truth)
    predicted, _seconds, threshold = bench.through_service(memories)
    score = bench.score(predicted, actual)
    assert threshold == 0.92
    assert score["precision"] >= 0.9 and score["recall"] >= 0.7, score
    assert bench.score(set(itertools.islice(iter(actual), 5)), actual)["precision"] == 1.0
