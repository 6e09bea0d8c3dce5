"""bench/core.py end to end on a tiny corpus: a full run that keeps its database, then the
latency-only run (`--db`) on a copy of it, as bench/README.md tells the next engineer to do."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import load_bench

load_bench("measure")
load_bench("corpus")
core = load_bench("core")
SERIES = set(core.LABELS)


def test_a_kept_run_then_a_latency_run_on_a_copy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kept = tmp_path / "kept"
    assert core.main(["--sizes", "300", "--queries", "6", "--hook-observations", "40",
                      "--keep", str(kept), "--json"]) == 0
    full = json.loads(capsys.readouterr().out)
    (size,) = full["sizes"]
    assert size["observations"] == 300 and set(size["latency"]) == SERIES
    assert full["ingest_bulk"]["observations"] == 300 and size["bytes_per_observation"] > 0
    assert all(series["errors"] == 0 for series in size["latency"].values())

    copy = tmp_path / "copy.db"
    shutil.copy(kept / "main" / "nmem.db", copy)
    assert core.main(["--db", str(copy), "--queries", "6", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    (timed,) = again["sizes"]
    # the bulk 300, then the 40 recorded one transaction at a time into the largest database
    assert timed["observations"] == 340 and set(timed["latency"]) == SERIES
    assert all(series["errors"] == 0 for series in timed["latency"].values())
    assert timed["latency"]["search_plain"]["mean_results"] > 0 and timed["latency"]["file_history"]["mean_results"] > 0
