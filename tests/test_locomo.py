"""The LoCoMo retrieval benchmark: data loading, evidence normalisation, the scorer's
arithmetic, and the whole runner on a tiny invented conversation (tests/fixtures/locomo-tiny.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import load_bench

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "locomo-tiny.json"


load_bench("measure")  # imported by name by the bench scripts, as locomo_scoring is
scoring = load_bench("locomo_scoring")
locomo = load_bench("locomo")


@pytest.fixture(scope="module")
def raw() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return data


# -- data and evidence --------------------------------------------------------------------------

TURNS = {"D1:1", "D1:4", "D2:2", "D11:26", "D30:5", "D9:1", "D4:4", "D4:6"}


@pytest.mark.parametrize(("entries", "expected"), [
    (["D1:1"], ("D1:1",)),
    (["D1:1; D1:4"], ("D1:1", "D1:4")),                 # several ids in one entry
    (["D9:1 D4:4 D4:6"], ("D9:1", "D4:4", "D4:6")),
    (["D:11:26"], ("D11:26",)),                          # a stray colon
    (["D30:05", "D2:02"], ("D30:5", "D2:2")),            # leading zeros
    (["D1:1", "D1:01", "D1:1"], ("D1:1",)),              # the same turn once
    (["D7:1", "D", ""], ()),                             # no such turn, not an id
    (["D4:4", "D8:6; D4:6"], ("D4:4", "D4:6")),          # unknown ids dropped, the rest kept
])
def test_evidence_is_split_read_and_filtered(entries: list[str], expected: tuple[str, ...]) -> None:
    assert scoring.normalise_evidence(entries, TURNS) == expected


def test_session_dates_are_read_as_utc() -> None:
    assert scoring.parse_session_date("1:56 pm on 8 May, 2023") == 1683554160
    assert scoring.parse_session_date("12:09 am on 13 September, 2023") == 1694563740


def test_loading_keeps_sessions_with_turns_and_answerable_questions(raw: list[dict[str, Any]]) -> None:
    conv = scoring.load_conversation(raw[0])
    assert conv.sample_id == "tiny-1"
    assert [s.number for s in conv.sessions] == [1, 2]             # session 3 has a date but no turns
    assert [len(s.turns) for s in conv.sessions] == [4, 3]
    assert conv.sessions[0].timestamp == scoring.parse_session_date("9:05 am on 4 March, 2024")
    assert [(q.category, q.evidence) for q in conv.questions] == [
        (4, ("D1:1",)), (4, ("D1:3",)), (2, ("D2:1",)), (1, ("D1:1", "D1:4", "D2:2")), (3, ("D1:4",))]
    assert conv.skipped == 1                                        # only an unknown turn as evidence
    assert scoring.load_conversation(raw[1]).skipped == 1           # empty evidence; category 5 never counts


def test_a_turn_is_stored_with_its_speaker_and_image_caption(raw: list[dict[str, Any]]) -> None:
    turns = scoring.load_conversation(raw[0]).sessions[0].turns
    assert turns[0].content() == "Ada: Morning Bo! I finally repotted the lemon tree on the balcony."
    assert turns[2].content() == ("Ada: Mostly. I trimmed a few and added gravel for drainage. "
                                  "[shares a photo: a photo of a terracotta pot on a balcony]")


# -- the arithmetic -------------------------------------------------------------------------------

RANKED = ["D3:1", "D1:2", "D3:2", "D2:5", "D4:1", "D5:1", "D1:7", "D6:1", "D7:1", "D8:1"]


def test_turn_frac_is_the_share_of_evidence_in_the_top_k() -> None:
    assert scoring.turn_frac(["D1:2"], RANKED, 5) == 1.0
    assert scoring.turn_frac(["D1:2", "D1:7"], RANKED, 5) == 0.5          # D1:7 is 7th
    assert scoring.turn_frac(["D1:2", "D1:7"], RANKED, 10) == 1.0
    assert scoring.turn_frac(["D1:2", "D1:7", "D9:9"], RANKED, 10) == pytest.approx(2 / 3)
    assert scoring.turn_frac(["D9:9"], [], 10) == 0.0


def test_session_all_counts_distinct_sessions_in_rank_order() -> None:
    assert scoring.distinct_sessions(RANKED) == ["D3", "D1", "D2", "D4", "D5", "D6", "D7", "D8"]
    # the first five distinct sessions are D3 D1 D2 D4 D5, reached at the 6th turn
    assert scoring.session_all(["D5:9"], RANKED, 5) == 1.0
    assert scoring.session_all(["D1:1", "D2:9"], RANKED, 5) == 1.0       # any turn of the session will do
    assert scoring.session_all(["D1:1", "D6:1"], RANKED, 5) == 0.0       # D6 is the sixth session
    assert scoring.session_all(["D1:1", "D6:1"], RANKED, 10) == 1.0
    assert scoring.session_all(["D1:1"], [], 5) == 0.0


def test_question_scores_and_their_averages_by_category() -> None:
    tally = scoring.Tally()
    tally.add(4, scoring.question_scores(["D1:2"], RANKED))             # all 1
    tally.add(4, scoring.question_scores(["D1:7", "D9:1"], RANKED))     # tf5 0, tf10 0.5, sessions 0
    tally.add(1, scoring.question_scores(["D6:1"], []))                 # nothing came back
    by_cat = tally.by_category()
    assert by_cat["4"] == {"questions": 2, "turn_frac@5": 0.5, "turn_frac@10": 0.75,
                           "session_all@5": 0.5, "session_all@10": 0.5, "empty": 0.0}
    assert by_cat["1"]["empty"] == 1.0 and by_cat["1"]["turn_frac@10"] == 0.0
    overall = tally.overall()
    assert overall["questions"] == 3
    assert overall["turn_frac@10"] == pytest.approx((1 + 0.5 + 0) / 3, abs=1e-4)
    assert overall["empty"] == pytest.approx(1 / 3, abs=1e-4)
    assert set(by_cat) == {"1", "4"}


# -- the runner --------------------------------------------------------------------------------------

def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert locomo.main(["--data", str(FIXTURE), "--json", *args]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


def test_runner_ingests_through_nmem_and_scores_every_question(capsys: pytest.CaptureFixture[str]) -> None:
    report = run_json(capsys, "--group", "first=tiny-1")
    assert report["mode"] == "default" and report["conversations"] == ["tiny-1", "tiny-2"]
    assert report["turns"] == 9 and report["query_errors"] == 0
    overall = report["overall"]
    assert overall["questions"] == 6 and overall["empty"] == 0.0
    # every invented question shares its words with its evidence, in a conversation of under ten turns
    assert overall["turn_frac@10"] == 1.0 and overall["session_all@10"] == 1.0
    assert set(report["by_category"]) == {"1", "2", "3", "4"}
    assert report["by_category"]["4"]["questions"] == 3
    assert report["by_conversation"]["tiny-1"]["skipped"] == 1
    assert report["by_group"]["first"]["overall"]["questions"] == 5
    for key in ("ingest_s", "ingest_turns_per_s", "query_p50_ms", "query_p95_ms"):
        assert report[key] > 0
    assert {"cpu", "cores", "python", "sqlite"} <= set(report["machine"])


def test_runner_selects_conversations_and_rankings(capsys: pytest.CaptureFixture[str]) -> None:
    report = run_json(capsys, "--conversations", "tiny-2", "--mode", "tiers", "--set", "window=1")
    assert report["conversations"] == ["tiny-2"] and report["overall"]["questions"] == 1
    assert report["ranking"]["candidates"] == 0 and report["ranking"]["window"] == 1
    assert report["by_conversation"]["tiny-2"]["turn_frac@5"] == 1.0


def test_runner_prints_a_table_without_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert locomo.main(["--data", str(FIXTURE)]) == 0
    out = capsys.readouterr().out
    assert "turn_frac@10" in out and "category 4" in out and "tiny-1" in out and "query p50" in out


def test_runner_refuses_unknown_conversations(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="unknown conversation"):
        locomo.main(["--data", str(FIXTURE), "--conversations", "conv-99"])
