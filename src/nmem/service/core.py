"""The part of the service a hook loads: recording events.

Hooks run as a fresh process per event, so they use `CaptureService` and never import the
search machinery or curation (`nmem.service.api.Service` adds memories, search, recall,
navigation, the lifecycle and status on top of it). The few events that remember something
(a marked prompt, a compaction's summary) load `Memories.remember` then (`Record._remember`).
"""

from __future__ import annotations

from nmem.service.record import Record


class CaptureService(Record):
    """Recording over one store. One per process (or per request in a server)."""
