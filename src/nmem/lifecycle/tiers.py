"""Tiers from recency, use and importance: a pure function over a memory's bookkeeping.

score = weight(namespace) x (recency + USE x log2(1 + access_count)), where recency halves every
`half_life` days since the memory was last written or recalled. A pinned memory is always hot.
An archived memory stays archived until it is read again (`recall --include-archived`, `get`);
one consolidation archived (merged into another, or stale) stays archived until
`consolidate --undo` or an edit of its tier (`nmem update --tier`) brings it back.
"""

from __future__ import annotations

import math

DAY = 86400
HOT, WARM, COLD, ARCHIVED = "hot", "warm", "cold", "archived"
# Scores at or above which a memory is hot, warm, cold; below the last a progress, blocker or
# context note is archived (knowledge stays cold). With the default 30-day half-life an untouched
# learning is hot for ~3 weeks, warm for 2 months, then cold; each recall resets its clock and
# adds to its use.
THRESHOLDS: tuple[tuple[float, str], ...] = ((0.6, HOT), (0.25, WARM), (0.03, COLD))
USE = 0.15
# Knowledge that stays true weighs more than notes about work in flight.
NAMESPACE_WEIGHTS: dict[str, float] = {
    "decisions": 1.5, "security": 1.5, "gotchas": 1.4, "conventions": 1.3, "apis": 1.2, "patterns": 1.2,
    "system-quirks": 1.3, "api-behaviors": 1.2, "naming-conventions": 1.2, "file-patterns": 1.1,
    "progress": 0.6, "context": 0.7, "blockers": 0.8,
}
# Tags consolidation sets on what it archives; tier recomputation leaves those memories archived.
MERGED_TAG = "nmem:merged"
STALE_TAG = "nmem:stale"
STICKY_TAGS = frozenset({MERGED_TAG, STALE_TAG})


def score(namespace: str, updated_at: int, accessed_at: int | None, access_count: int, now: int,
          half_life_days: float) -> float:
    last = max(updated_at, accessed_at or 0)
    age_days = max(0, now - last) / DAY
    recency = 0.5 ** (age_days / half_life_days) if half_life_days > 0 else 1.0
    return NAMESPACE_WEIGHTS.get(namespace, 1.0) * (recency + USE * math.log2(1 + max(0, access_count)))


def tier_of(namespace: str, updated_at: int, accessed_at: int | None, access_count: int, pinned: bool,
            tags: list[str], current: str, now: int, half_life_days: float) -> str:
    if pinned:
        return HOT
    if current == ARCHIVED and (STICKY_TAGS.intersection(tags) or not (accessed_at and accessed_at > updated_at)):
        # Archived (by hand, by consolidation, or by age) stays so until it is read again; what
        # consolidation set aside stays until an edit of its tier or an undo.
        return ARCHIVED
    value = score(namespace, updated_at, accessed_at, access_count, now, half_life_days)
    for low, name in THRESHOLDS:
        if value >= low:
            return name
    # Age alone archives only notes on work in flight; an old decision or learning is still
    # true, and hiding it from recall because nobody asked lately would lose it quietly.
    return ARCHIVED if NAMESPACE_WEIGHTS.get(namespace, 1.0) < 1.0 else COLD
