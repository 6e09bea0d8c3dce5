"""bench/coding_sessions.py at tiny scale: seeded transcripts in Claude Code's shapes, imported with the
real importer, every question answerable by plain BM25 over its turn, and nmem finding what the agent said."""

from __future__ import annotations

from pathlib import Path

from conftest import load_bench

load_bench("measure"), load_bench("cc_transcripts")   # what the script imports by name
coding = load_bench("coding_sessions")


def test_generation_is_seeded_and_varied(tmp_path: Path) -> None:
    first = coding.Script(tmp_path / "a", seed=5).write(6)
    again = coding.Script(tmp_path / "b", seed=5).write(6)
    other = coding.Script(tmp_path / "c", seed=6).write(6)
    assert [q.text for q in first.questions] == [q.text for q in again.questions]
    assert [q.text for q in first.questions] != [q.text for q in other.questions]
    assert len({q.kind for q in first.questions}) >= 3
    docs = coding.turn_documents(first)
    for q in first.questions:
        assert (q.session, q.turn) in docs, q
        assert q.answer.lower() in docs[(q.session, q.turn)].lower(), "the evidence turn holds the answer"


def test_tiny_run_reports_recall_beside_bm25() -> None:
    result = coding.run(seed=3, sessions=6)
    everything = result["by_kind"]["all"]
    assert everything["n"] == result["questions"] > 0
    for key in ("nmem@5", "nmem@10", "bm25@5", "bm25@10"):
        assert 0.0 <= everything[key] <= 1.0
    assert everything["nmem@5"] <= everything["nmem@10"] and everything["bm25@5"] <= everything["bm25@10"]
    assert everything["nmem_answer@10"] > 0.5, "replies and command output are stored, so their words are found"
