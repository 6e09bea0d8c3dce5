"""REST reads the viewer needs beside the service mirror: the change feed as pages (what
`/stream/changes` pushes, for a client that polls) and activity per day (the status charts)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pydantic import Field

from nmem.adapters.http.routing import Context, Endpoint, Params
from nmem.adapters.http.schemas import Count

PREFIX = "/api/v1"
MAX_WAIT = 120  # seconds a long-poll may hold its request


class ChangesParams(Params):
    since: str | None = Field(None, description="A cursor from a change or an earlier page (`12.4.7`), `0` for "
                                                "everything; none: only the current cursor is returned.")
    limit: Count | None = Field(None, description="Default 100; capped at 500.")
    wait: float | None = Field(None, ge=0, le=MAX_WAIT,
                               description=f"Long-poll: when nothing is new, hold the request up to this many "
                                           f"seconds (at most {MAX_WAIT}) and answer as soon as something is "
                                           f"written; without `since`, wait for the next change.")


class ActivityParams(Params):
    days: Count | None = Field(None, description="Days back from today (UTC), default 30, at most 366.")
    project: str | None = Field(None, description="Only this project.")


async def changes(ctx: Context, p: ChangesParams, _: None) -> dict[str, Any]:
    """A page of the feed; with `wait`, a long-poll: the answer comes when a change does (checked
    every `streaming.poll_ms` by the store's change token, one cheap read) or when the time is up."""
    store = ctx.service.store
    token = store.change_token() if p.wait else None
    found, cursor = ctx.service.changes(p.since, limit=p.limit)
    if p.wait:
        interval = max(10, int(ctx.service.settings["streaming.poll_ms"])) / 1000
        deadline = time.monotonic() + p.wait
        while not found and (left := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(interval, left))
            now = store.change_token()
            if now != token:
                token = now
                found, cursor = ctx.service.changes(cursor, limit=p.limit)
    return {"changes": [c.to_dict() for c in found], "cursor": str(cursor), "count": len(found)}


def activity(ctx: Context, p: ActivityParams, _: None) -> dict[str, Any]:
    return {"days": ctx.service.activity(p.days, project=p.project)}


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", f"{PREFIX}/changes", "What any process wrote since a cursor", changes, ChangesParams,
             tag="streams", description="New observations, prompts and sessions, memories created, updated or "
                                        "forgotten, sessions ended; oldest first, with the cursor to read on from. "
                                        "`/stream/changes` pushes the same changes live; `wait` makes it a long-poll."),
    Endpoint("GET", f"{PREFIX}/activity", "Observations and prompts per day", activity, ActivityParams,
             tag="status"),
)
