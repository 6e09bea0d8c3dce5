"""The whole service API: what CLI, MCP, HTTP and the claude-mem routes call.

Each public method is defined once, in one mixin (a test checks it): capture
(`core.CaptureService`: `record`), curation (`memories`), `search`, `recall`, `navigate`, `purge`, the
`lifecycle`, `status` and the change `feed`. Every method validates its input (raising
`nmem.errors` types), calls the store and returns models or plain JSON-ready dicts.
"""

from __future__ import annotations

from nmem.service.core import CaptureService
from nmem.service.feed import Feed
from nmem.service.hybrid import Hybrid
from nmem.service.lifecycle import Lifecycle
from nmem.service.memories import Memories
from nmem.service.navigate import Navigate
from nmem.service.purge import Purge
from nmem.service.recall import Recall
from nmem.service.search import Search, SearchResult
from nmem.service.status import Status

__all__ = ["SearchResult", "Service"]


class Service(CaptureService, Memories, Search, Hybrid, Recall, Navigate, Purge, Lifecycle, Status, Feed):
    """nmem's API over one store: everything the adapters call."""

