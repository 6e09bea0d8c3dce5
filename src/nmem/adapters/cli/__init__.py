"""The `nmem` command line.

`commands.py` assembles every click command (`cli`, and `main` to run one command line);
`light.py` runs the common read and capture commands without click (`nmem.__main__` tries it
first). Importing this package loads neither: `nmem.adapters.cli.cli` and `.main` load the
whole command line on first use.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from nmem.adapters.cli.commands import cli, main

__all__ = ["cli", "main"]


def __getattr__(name: str) -> object:
    if name in __all__:
        from nmem.adapters.cli import commands

        return getattr(commands, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
