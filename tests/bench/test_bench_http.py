"""bench/http_server.py end to end on a tiny corpus: a real `nmem serve`, every series answered
without an error, the figures it reports present and consistent."""

from __future__ import annotations

import json

import pytest

from conftest import load_bench

load_bench("measure")
load_bench("corpus")
load_bench("mcp_server")
bench = load_bench("http_server")


@pytest.mark.slow
def test_a_small_run_reports_every_series(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--observations", "300", "--requests", "30", "--concurrency", "1,3", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["database"]["observations"] == 300
    for series in ("search", "health"):
        assert set(result[series]) == {"1", "3"}
        for figures in result[series].values():
            assert figures["requests"] == 30 and figures["errors"] == 0
            assert 0 < figures["p50_ms"] <= figures["p90_ms"] <= figures["p99_ms"] <= figures["max_ms"]
            assert figures["requests_per_s"] > 0
    assert result["search"]["1"]["mean_results"] > 0
    assert result["in_process"]["requests"] == 30
    assert "| GET /api/v1/search | 1 |" in bench.render(result)
