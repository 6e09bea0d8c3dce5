"""LoCoMo data handling and retrieval scoring, free of nmem so tests can check the arithmetic.

Definitions follow ../shared/bench/locomo/README.md:
- `turn_frac@k`: |evidence ∩ top-k turns| / |evidence|, averaged over questions;
- `session_all@k`: 1 when every evidence session is among the first k distinct sessions of
  the ranked turns, else 0;
- evidence entries are split (`"D8:6; D9:17"`, `"D9:1 D4:4"`), read leniently (`"D:11:26"`
  is D11:26, `"D30:05"` is D30:5), ids that name no turn are dropped, and questions left
  without evidence are skipped.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

CATEGORIES = (1, 2, 3, 4)          # 5 (adversarial) has no answer to retrieve
KS = (5, 10)
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")
_SESSION_KEY = re.compile(r"^session_(\d+)$")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    caption: str | None = None

    def content(self) -> str:
        """How the turn is stored: `Speaker: text`, plus the caption of a shared image."""
        body = f"{self.speaker}: {self.text}"
        return f"{body} [shares a photo: {self.caption}]" if self.caption else body


@dataclass(frozen=True)
class Session:
    number: int
    timestamp: int                 # epoch seconds (UTC) of the session's date
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]      # normalised dia ids, in the order given


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]
    skipped: int = 0               # category 1-4 questions left without evidence

    def turn_ids(self) -> set[str]:
        return {t.dia_id for s in self.sessions for t in s.turns}


def parse_session_date(text: str) -> int:
    """`"1:56 pm on 8 May, 2023"` → epoch seconds, read as UTC."""
    moment = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    return int(moment.timestamp())


def session_of(dia_id: str) -> str:
    """`"D12:3"` → `"D12"`."""
    return dia_id.split(":", 1)[0]


def normalise_evidence(entries: Iterable[Any], turn_ids: set[str]) -> tuple[str, ...]:
    """Split, canonicalise and filter evidence ids; duplicates are kept once."""
    found: dict[str, None] = {}
    for entry in entries:
        for session, turn in _DIA_ID.findall(str(entry)):
            dia_id = f"D{int(session)}:{int(turn)}"
            if dia_id in turn_ids:
                found.setdefault(dia_id, None)
    return tuple(found)


def load_conversation(raw: Mapping[str, Any]) -> Conversation:
    conv = raw["conversation"]
    sessions: list[Session] = []
    for key, turns in conv.items():
        number = _SESSION_KEY.match(key)
        if not number or not isinstance(turns, list) or not turns:
            continue  # date keys of sessions without turns, speaker names
        n = int(number.group(1))
        sessions.append(Session(n, parse_session_date(conv[f"session_{n}_date_time"]), tuple(
            Turn(str(t["dia_id"]), str(t["speaker"]), str(t["text"]), t.get("blip_caption") or None)
            for t in turns)))
    sessions.sort(key=lambda s: s.number)
    ids = {t.dia_id for s in sessions for t in s.turns}
    questions: list[Question] = []
    skipped = 0
    for qa in raw.get("qa", []):
        if qa.get("category") not in CATEGORIES:
            continue
        evidence = normalise_evidence(qa.get("evidence") or [], ids)
        if not evidence:
            skipped += 1
            continue
        questions.append(Question(str(qa["question"]), int(qa["category"]), evidence))
    return Conversation(str(raw["sample_id"]), tuple(sessions), tuple(questions), skipped)


def turn_frac(evidence: Sequence[str], ranked: Sequence[str], k: int) -> float:
    wanted = set(evidence)
    return len(wanted & set(ranked[:k])) / len(wanted)


def distinct_sessions(ranked: Sequence[str]) -> list[str]:
    seen: dict[str, None] = {}
    for dia_id in ranked:
        seen.setdefault(session_of(dia_id), None)
    return list(seen)


def session_all(evidence: Sequence[str], ranked: Sequence[str], k: int) -> float:
    top = set(distinct_sessions(ranked)[:k])
    return 1.0 if {session_of(e) for e in evidence} <= top else 0.0


def question_scores(evidence: Sequence[str], ranked: Sequence[str]) -> dict[str, float]:
    scores: dict[str, float] = {}
    for k in KS:
        scores[f"turn_frac@{k}"] = turn_frac(evidence, ranked, k)
        scores[f"session_all@{k}"] = session_all(evidence, ranked, k)
    scores["empty"] = 0.0 if ranked else 1.0
    return scores


METRICS = (*(f"{m}@{k}" for m in ("turn_frac", "session_all") for k in KS), "empty")


@dataclass
class Tally:
    """Per-question scores, averaged overall and by category."""

    rows: list[tuple[int, dict[str, float]]] = field(default_factory=list)

    def add(self, category: int, scores: dict[str, float]) -> None:
        self.rows.append((category, scores))

    def extend(self, other: Tally) -> None:
        self.rows.extend(other.rows)

    @staticmethod
    def _mean(rows: list[dict[str, float]]) -> dict[str, float]:
        out: dict[str, float] = {"questions": len(rows)}
        for metric in METRICS:
            out[metric] = round(statistics.fmean(r[metric] for r in rows), 4) if rows else 0.0
        return out

    def overall(self) -> dict[str, float]:
        return self._mean([s for _, s in self.rows])

    def by_category(self) -> dict[str, dict[str, float]]:
        return {str(c): self._mean([s for cat, s in self.rows if cat == c])
                for c in CATEGORIES if any(cat == c for cat, _ in self.rows)}


def iter_turns(conversation: Conversation) -> Iterator[tuple[Session, Turn]]:
    for session in conversation.sessions:
        for turn in session.turns:
            yield session, turn
