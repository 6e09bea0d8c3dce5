"""The `nmem` entry point.

Hook events (`nmem record`, `nmem hook <event>`) run on every tool call, so they go
straight to the stdlib-only hook handler; everything else loads the click CLI.
"""

from __future__ import annotations

import importlib
import sys

from nmem.adapters.hooks import run as hooks

HOOK_COMMANDS = ("record", "hook")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in HOOK_COMMANDS and "--help" not in args:
        return hooks.main(args)
    cli = importlib.import_module("nmem.adapters.cli")  # click and the formatters stay off the hook path
    return int(cli.main(args))


if __name__ == "__main__":
    sys.exit(main())
