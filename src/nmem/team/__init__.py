"""The team server: who may read what (`access`), and its users, tokens and audit trail (`accounts`).

Importing this package loads nothing: the hook path reads `access` alone. `nmem.team.<name>`
for a name of `accounts` (how `store/migrate.py` still reads `team.active`) is looked up there.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("__") or name in ("access", "accounts"):  # submodules: let the import system load them
        raise AttributeError(name)
    from nmem.team import accounts

    return getattr(accounts, name)
