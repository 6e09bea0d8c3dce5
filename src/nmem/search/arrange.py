"""Arranging scored trail records into the order a search returns (after `nmem.search.rank`).

BM25 over context windows scores each record on its own; these steps look at the records
together, once the best of them are known:

- replies: a record that asks something ("How long have you been married?", "which library
  should we use?") is often found by the words of the question, while its answer, the next
  record, shares none of them. The reply joins the candidates with a share of the asker's
  score (`reply_score`), so it ranks next to what found it.
- supersession: when two records in different sessions hold the same words of the question
  (a setting stated, then changed; "we use X", later "we moved to Y"), the older one is
  likely outdated: it keeps a share of its score (`superseded`).
- turn evidence: what one request made the agent do answers together (the prompt names the
  subject, a reply mid-turn states the cause, a command's output holds the version), so a
  record is weighed by the evidence its turn holds, as BM25 over whole turns would find it
  (`turn_weighted`; `session_weighted` does the same by session, off by default).
- spread: records of one turn (the prompt, the agent's replies, the tool calls it made) say
  one thing, so each further hit of a turn already shown weighs `turn_spread ** m`. And a
  question whose answer spans sessions ("what has she painted?") would otherwise
  get its first ten hits from the one session that talks most about it. Each further hit
  from a session already shown weighs `spread ** n` (n hits of that session before it), so
  the others' best records come up (`spread_by_session`).

Everything here is pure: the service hands in ids, scores, sessions, times and term counts.
"""

from __future__ import annotations

import heapq
import re

from nmem.models import Record
from nmem.search.rank import label_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Mapping, Sequence

# A record that asks something: a question mark ending a sentence.
_ASKS = re.compile(r"\?(?:\s|$|[\"')\]])")


class Placed(Record):
    """One scored record, as arranging sees it."""

    id: int
    score: float
    session: str | None
    timestamp: int
    counts: tuple[int, ...] = ()     # the question's stems in the record's own text
    turn: tuple[str | None, int] | None = None   # (session, the user prompt that opened its turn)

def asks(text: str) -> bool:
    """Whether the text asks a question (a `?` that ends a sentence, not one inside a URL)."""
    return bool(_ASKS.search(text + " "))


def answers_to(asker: str, reply: str) -> bool:
    """Whether `reply` can answer `asker`: not the same speaker going on (both open with the
    same label, "Bob: …" after "Bob: …?")."""
    mine = label_of(asker)
    return mine is None or mine != label_of(reply)


def reply_score(asker: float, own: float, share: float) -> float:
    """A reply's score: its own, or `share` of the score of the record it answers if higher."""
    return max(own, asker * share)


def superseded(items: Sequence[Placed], idf: Sequence[float], min_share: float, factor: float) -> dict[int, float]:
    """Scores after demoting each record that a newer one in another session restates.

    Record A is restated by B when B is newer, in another session, and holds every stem of the
    question that A holds, those stems carrying at least `min_share` of the question's IDF (so
    a record sharing one common word with the question supersedes nothing). A keeps `factor`
    of its score. Only records with counts take part; the others keep theirs."""
    out = {it.id: it.score for it in items}
    if factor >= 1.0 or not idf:
        return out
    total = sum(idf) or 1.0
    held = {it.id: frozenset(i for i, c in enumerate(it.counts) if c) for it in items}
    for old in items:
        stems = held[old.id]
        if not stems or sum(idf[i] for i in stems) < min_share * total:
            continue
        if any(new.timestamp > old.timestamp and new.session != old.session and stems <= held[new.id]
               for new in items):
            out[old.id] = old.score * factor
    return out


def session_weighted(items: Sequence[Placed], scores: Mapping[int, float], weight: float,
                     top: int = 1) -> dict[int, float]:
    """Scores after weighing each record by its session's evidence: the sum of the session's
    best `top` scores, relative to the best session's; a record keeps
    `score × (1 + weight × that share)`. Records without a session keep theirs."""
    return _group_weighted(items, scores, weight, top, lambda it: it.session)


def turn_weighted(items: Sequence[Placed], scores: Mapping[int, float], weight: float,
                  top: int = 3) -> dict[int, float]:
    """Scores after weighing each record by its turn's evidence, as `session_weighted` does
    by session: the sum of the turn's best `top` scores, relative to the best turn's. What
    one request made the agent do (the prompt naming the subject, a reply stating the cause
    mid-turn, the output holding the version) answers together, as BM25 over whole turns
    finds it; a record that is its own turn (a user prompt nothing followed, a chat line)
    only gains with its own score, which keeps the order. Records without a turn keep theirs."""
    return _group_weighted(items, scores, weight, top, lambda it: it.turn)


def _group_weighted(items: Sequence[Placed], scores: Mapping[int, float], weight: float, top: int,
                    group: Callable[[Placed], Hashable | None]) -> dict[int, float]:
    out = dict(scores)
    if weight <= 0:
        return out
    found: dict[Hashable, list[float]] = {}
    for it in items:
        key = group(it)
        if key is not None:
            found.setdefault(key, []).append(scores[it.id])
    evidence = {key: sum(sorted(held, reverse=True)[:top]) for key, held in found.items()}
    best = max(evidence.values(), default=0.0)
    if best <= 0:
        return out
    for it in items:
        key = group(it)
        if key is not None:
            out[it.id] = scores[it.id] * (1.0 + weight * evidence[key] / best)
    return out


def spread_by_session(items: Sequence[Placed], scores: Mapping[int, float], spread: float, free: int = 0,
                      turn_spread: float = 1.0) -> list[tuple[int, float]]:
    """(id, weighed score) best first, where a record whose session already has n records
    above it counts `spread ** n` of its score (n counted past the session's first `free`),
    and one whose turn already has m records above it `turn_spread ** m` more. The weighed
    scores never rise down the list, so lists arranged apart still merge by score. Both 1
    keep the order of the scores; ties go to the newer id, as everywhere in ranking. Records
    without a session (or turn) stand alone."""
    if spread >= 1.0 and turn_spread >= 1.0:
        return [(it.id, scores[it.id]) for it in sorted(items, key=lambda it: (-scores[it.id], -it.id))]
    shown: dict[str | None, int] = {}
    turns: dict[tuple[str | None, int] | None, int] = {}

    def seen(it: Placed) -> tuple[int, int]:
        return (shown.get(it.session, 0) if it.session is not None else 0,
                turns.get(it.turn, 0) if it.turn is not None else 0)

    # Lazy greedy: a record's weighed score only falls as its session fills, so one popped with
    # a stale weight goes back with the current one; one popped with its current weight is next.
    by_id = {it.id: it for it in items}
    heap = [(-scores[it.id], -it.id, (0, 0)) for it in items]
    heapq.heapify(heap)
    out: list[tuple[int, float]] = []
    while heap:
        neg, neg_id, then = heapq.heappop(heap)
        it = by_id[-neg_id]
        now = seen(it)
        if now != then:
            weight = spread ** max(0, now[0] - free) * turn_spread ** now[1]
            heapq.heappush(heap, (-scores[it.id] * weight, neg_id, now))
            continue
        out.append((it.id, -neg))
        if it.session is not None:
            shown[it.session] = now[0] + 1
        if it.turn is not None:
            turns[it.turn] = now[1] + 1
    return out
