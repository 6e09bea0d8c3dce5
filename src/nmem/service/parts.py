"""A service made of only the mixins one command calls, for short processes (the CLI's light path).

`api.Service` is every mixin, and importing it loads what each of them imports: recording
(the hook's event parsers and extractors), the lifecycle (with `re`), the change feed, sync's
lock, the search ranking. A `nmem get` uses two mixins of them. `for_command(name)` composes
a class of just the mixins `COMMANDS` lists for that command, as `core.CaptureService` does
for a hook; the methods are the same ones `Service` has, so what a command returns is the
same. A mixin that calls into another (`self.api`) needs that one listed too:
`tests/service/test_service_parts.py` runs each command on its composition.
"""

from __future__ import annotations

from nmem.service.base import Base

TYPE_CHECKING = False
if TYPE_CHECKING:
    from nmem.service.api import Service

MIXINS = {  # name: (module, class)
    "memories": ("nmem.service.memories", "Memories"),
    "navigate": ("nmem.service.navigate", "Navigate"),
    "search": ("nmem.service.search", "Search"),
    "hybrid": ("nmem.service.hybrid", "Hybrid"),
    "recall": ("nmem.service.recall", "Recall"),
    "lifecycle": ("nmem.service.lifecycle", "Lifecycle"),
    "status": ("nmem.service.status", "Status"),
}
# What each command calls, and what those methods call through `self.api`:
# search → resolve_file, session (navigate), _hybrid_search (hybrid); recall → refresh_tiers
# (lifecycle), _search, _hybrid_search; get → get_memory (memories).
COMMANDS = {
    "search": ("search", "hybrid", "navigate"),
    "recall": ("recall", "search", "hybrid", "lifecycle"),
    "get": ("navigate", "memories"),
    "status": ("status",),
    "capture": ("memories",),
}


def for_command(command: str) -> type[Service]:
    """The service class `command` runs on: `Base` plus its mixins, in `Service`'s order."""
    bases = []
    for name in COMMANDS[command]:
        module, cls = MIXINS[name]
        bases.append(getattr(__import__(module, fromlist=[cls]), cls))
    # typed as the whole API: the methods `command` calls are there
    return type(f"{command.title()}Service", tuple(bases) or (Base,), {"__doc__": __doc__})
