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
        assert (q.session, q.turn) in q.evidence, "the turn asked about is evidence"
        for turn, answer in q.evidence.items():
            assert answer.lower() in docs[turn].lower(), "every turn stating the fact holds its own answer"


def test_a_fact_stated_in_several_turns_counts_each_as_evidence(tmp_path: Path) -> None:
    corpus = coding.Script(tmp_path / "a", seed=1).write(30)
    repeated = [q for q in corpus.questions if len(q.evidence) > 1]
    assert repeated, "thirty sessions draw more facts than the templates hold"
    assert all(q.kind != "update" for q in repeated), "only the newer statement of an update answers"
    q = repeated[0]
    other = next(turn for turn in q.evidence if turn != (q.session, q.turn))
    assert coding.in_turn([other], coding.wanted(q), 1)
    assert not coding.in_turn([other], coding.wanted(q, strict=True), 1)


def test_tiny_run_reports_recall_beside_bm25() -> None:
    result = coding.run(seed=3, sessions=6)
    everything = result["by_kind"]["all"]
    assert everything["n"] == result["questions"] > 0
    for key in ("nmem@5", "nmem@10", "bm25@5", "bm25@10"):
        assert 0.0 <= everything[key] <= 1.0
    assert everything["nmem@5"] <= everything["nmem@10"] and everything["bm25@5"] <= everything["bm25@10"]
    assert everything["nmem_answer@10"] > 0.5, "replies and command output are stored, so their words are found"
