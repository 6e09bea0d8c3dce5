"""The part of the service a hook loads: recording events and curating memories.

Hooks run as a fresh process per event, so they use `CaptureService` and never import the
search machinery (`nmem.service.api.Service` adds search, recall, navigation, the lifecycle
and status on top of it).
"""

from __future__ import annotations

from nmem.service.memories import Memories
from nmem.service.record import Record


class CaptureService(Record, Memories):
    """Recording and curation over one store. One per process (or per request in a server)."""
