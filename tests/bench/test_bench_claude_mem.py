"""bench/claude_mem_ops.py end to end on a tiny corpus: every series runs without an error
and the claude-mem operations find something."""

from __future__ import annotations

import json

import pytest

from conftest import load_bench

load_bench("measure")
load_bench("corpus")
load_bench("core")
bench = load_bench("claude_mem_ops")


def test_every_operation_runs_on_a_small_corpus(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--sizes", "600", "--queries", "12", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    (size,) = result["sizes"]
    assert size["observations"] == 600 and size["memories"] >= 3  # the corpus adds compaction checkpoints
    latency = size["latency"]
    assert len(latency) == 12 and all(s["errors"] == 0 and s["n"] == 12 for s in latency.values())
    for name in ("search(q) all kinds", "changes(project)", "find_by_type(bugfix,change)", "find_by_file(path)",
                 "get_context_timeline(anchor)"):
        assert latency[name]["mean_results"] > 0, name
