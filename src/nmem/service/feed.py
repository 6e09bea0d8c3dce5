"""What changed and when: the change feed's cursor and batches, recent observations by score,
and activity per day (what the viewer and the live streams read)."""

from __future__ import annotations

import time

from nmem import changes as changefeed
from nmem.service.args import MAX_LIMIT
from nmem.service.base import Base
from nmem.service.relpaths import Roots
from nmem.util.numbers import clamp

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class Feed(Base):
    def recent_context(self, project: str | None = None, limit: int | None = 30) -> list[dict[str, Any]]:
        """Recent observations by composite score (recency, type weight, project boost).

        A project with no observations of its own gives `[]` (ADR-006's error table): other
        projects' rows rank below the project's own, beside them, never in their place."""
        lim = clamp(limit, 1, MAX_LIMIT, 30, "limit")
        if project and not self.store.recent_observations(project, 1):
            return []
        scored = self.store.recent_scored(project or None, lim, self.now())
        return [{**obs.to_dict(), "score": round(score, 4)} for obs, score in scored]

    def change_cursor(self) -> changefeed.Cursor:
        """The change feed's "now": reading from it returns only what is written next."""
        return changefeed.head(self.store)

    def changes(self, since: str | changefeed.Cursor | None = None, limit: int | None = 100
                ) -> tuple[list[changefeed.Change], changefeed.Cursor]:
        """What was written since `since` (a cursor from a change or from `change_cursor`; `0`
        for everything), by any process: new observations, prompts and sessions, memories
        created, updated or forgotten, sessions ended. Oldest first, with the cursor to go on from."""
        lim = clamp(limit, 1, changefeed.MAX_BATCH, 100, "limit")
        if since is None:
            return [], self.change_cursor()
        cursor = since if isinstance(since, changefeed.Cursor) else changefeed.Cursor.parse(since)
        found, after = changefeed.read_changes(self.store, cursor, lim)
        seen = [c for c in found if changefeed.may_see(self.store, c)]
        actions = [c.record for c in seen if c.kind == "observation"]
        if actions:   # paths as every other listing shows them: relative to the project root
            roots = Roots(self.store, [str(r.get("session_id") or "") for r in actions])
            for row in actions:
                roots.apply(row)
        return seen, after

    def activity(self, days: int | None = 30, project: str | None = None) -> list[dict[str, Any]]:
        """Observations and prompts per UTC day over the last `days` days (1 to 366), every day
        listed, oldest first: what the viewer's activity chart draws."""
        span = clamp(days, 1, 366, 30, "days")
        today = self.now() // 86400
        first = today - span + 1
        counts = {day: (o, p) for day, o, p in self.store.activity_by_day(first * 86400, project or None)}
        rows = []
        for number in range(first, today + 1):
            day = time.strftime("%Y-%m-%d", time.gmtime(number * 86400))
            obs, prompts = counts.get(day, (0, 0))
            rows.append({"day": day, "observations": obs, "prompts": prompts})
        return rows
