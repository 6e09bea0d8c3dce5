"""Regular expressions compiled on first use, for modules on the hook path.

`import re` costs about 8 ms on a small VM (it brings `enum` along), a quarter of a hook's
budget, and most hook events need no regex at all: the modules a hook loads keep their
patterns as `LazyRegex` and test a cheap substring before asking for the compiled form.
Flags go inline in the pattern (`(?is)…`), since `re.IGNORECASE` would need `re` itself.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re


class LazyRegex:
    __slots__ = ("_compiled", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self._compiled: re.Pattern[str] | None = None

    def get(self) -> re.Pattern[str]:
        if self._compiled is None:
            import re

            self._compiled = re.compile(self.source)
        return self._compiled
