"""REST reads the viewer needs beside the service mirror: the change feed as pages (what
`/stream/changes` pushes, for a client that polls) and activity per day (the status charts)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from nmem.adapters.http.routing import Context, Endpoint, Params
from nmem.adapters.http.schemas import Count

PREFIX = "/api/v1"


class ChangesParams(Params):
    since: str | None = Field(None, description="A cursor from a change or an earlier page (`12.4.7`), `0` for "
                                                "everything; none: only the current cursor is returned.")
    limit: Count | None = Field(None, description="Default 100; capped at 500.")


class ActivityParams(Params):
    days: Count | None = Field(None, description="Days back from today (UTC), default 30, at most 366.")
    project: str | None = Field(None, description="Only this project.")


def changes(ctx: Context, p: ChangesParams, _: None) -> dict[str, Any]:
    found, cursor = ctx.service.changes(p.since, limit=p.limit)
    return {"changes": [c.to_dict() for c in found], "cursor": str(cursor), "count": len(found)}


def activity(ctx: Context, p: ActivityParams, _: None) -> dict[str, Any]:
    return {"days": ctx.service.activity(p.days, project=p.project)}


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", f"{PREFIX}/changes", "What any process wrote since a cursor", changes, ChangesParams,
             tag="streams", description="New observations, prompts and sessions, memories created, updated or "
                                        "forgotten, sessions ended; oldest first, with the cursor to read on from. "
                                        "`/stream/changes` pushes the same changes live."),
    Endpoint("GET", f"{PREFIX}/activity", "Observations and prompts per day", activity, ActivityParams,
             tag="status"),
)
