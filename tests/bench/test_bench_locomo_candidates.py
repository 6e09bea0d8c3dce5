"""bench/locomo_candidates.py's placements: dense-only candidates enter nmem's page without
moving nmem's own hits relative to each other, and only where each placement says."""

from __future__ import annotations

from conftest import load_bench

load_bench("measure"), load_bench("locomo_scoring"), load_bench("locomo")   # imported by name
candidates = load_bench("locomo_candidates")

HITS = [(f"D1:{n}", 10.0 - n) for n in range(12)]          # scores 10, 9, … 0 (-1)
DENSE = [("D9:1", 0.9), ("D9:2", 0.8), ("D9:3", 0.1)]


def asked() -> object:
    return candidates.Asked(1, "conv", ["D9:1"], list(HITS), list(DENSE))


def nmem_order_kept(page: list[str]) -> bool:
    own = [i for i in page if i.startswith("D1:")]
    return own == [i for i, _ in HITS][:len(own)]


def test_tail_gives_the_last_places_to_the_nearest() -> None:
    page = candidates.tail(2)(asked())
    assert page[:8] == [i for i, _ in HITS[:8]] and page[8:] == ["D9:1", "D9:2"]
    assert nmem_order_kept(page)


def test_one_candidate_after_the_confident_hits() -> None:
    page = candidates.after_confident(0.8)(asked())   # scores 10, 9, 8 are at least 0.8 of 10
    assert page[:4] == ["D1:0", "D1:1", "D1:2", "D9:1"]
    assert nmem_order_kept(page) and "D9:2" not in page


def test_fill_keeps_the_head_and_merges_below_by_share() -> None:
    page = candidates.fill(3, 0.5)(asked())
    assert page[:3] == ["D1:0", "D1:1", "D1:2"]
    # D9:1 weighs 0.5 of the best: after the hits scoring 0.6 and above, before 0.5 (ties: nmem's first)
    assert page.index("D9:1") == page.index("D1:5") + 1
    assert nmem_order_kept(page)


def test_evidence_places_are_shares_of_evidence_turns() -> None:
    one = asked()
    one.evidence = ("D1:0", "D1:11", "D9:1", "D7:7")
    row = candidates.places([one])["1"]
    assert row["turns"] == 4
    assert (row["nmem@10"], row["nmem@11-pool"], row["dense-only@5"], row["neither"]) == (0.25, 0.25, 0.25, 0.25)
