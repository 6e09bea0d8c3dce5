"""The `nmem` entry point.

Hook events (`nmem record`, `nmem hook <event>`) run on every tool call, so they go
straight to the stdlib-only hook handler; `search`, `recall`, `get`, `status` and `capture`
take the light path (`nmem.adapters.cli.light`: no click, only the command's own code);
everything else, and any command line the light path does not read for certain, loads the
click CLI.
"""

from __future__ import annotations

import sys

HOOK_COMMANDS = ("record", "hook")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in HOOK_COMMANDS and "--help" not in args:
        from nmem.adapters.hooks import run as hooks

        return hooks.main(args)
    from nmem.adapters.cli import light

    code = light.main(args)
    if code is not None:
        return code
    from nmem.adapters.cli import commands  # click and every command stay off the hook and light paths

    return int(commands.main(args))


if __name__ == "__main__":
    sys.exit(main())
