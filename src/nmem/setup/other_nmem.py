"""Which program an `nmem` on PATH is, when it is not this nmem.

Three other PyPI packages install a command named `nmem` (PyPI's `nmem`; `neural-memory`, a memory
plugin that also installs `nmem-mcp` and `nmem-hook-*`; and more), so `nmem doctor` names the one
it finds: a pip console script says what it runs (`from neural_memory.cli import main`), and the
distribution that owns that module is looked up when it is installed here.
"""

from __future__ import annotations

import re
from importlib import metadata

HEAD_BYTES = 4096
_IMPORT = re.compile(r"^\s*from\s+([A-Za-z_][\w.]*)\s+import\s+\w+|^\s*import\s+([A-Za-z_][\w.]*)", re.M)
KNOWN = {"neural_memory": "neural-memory", "nmem": "nmem-memory or PyPI's unrelated `nmem`"}


def _module(path: str) -> tuple[str | None, str | None]:
    """(the module a console script imports, its interpreter) or (None, None) for another kind of file."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(HEAD_BYTES)
    except OSError:
        return None, None
    if not head.startswith(b"#!"):
        return None, None
    text = head.decode("utf-8", "replace")
    interpreter = text[2:].split("\n", 1)[0].strip() or None
    for found in _IMPORT.finditer(text):
        name = found.group(1) or found.group(2)
        if name and name.split(".")[0] not in ("re", "sys", "os"):
            return name, interpreter
    return None, interpreter


def describe(path: str) -> str:
    """`which runs neural_memory.cli (the neural-memory package)`, or what can be said of it."""
    module, interpreter = _module(path)
    if module is None:
        return "a program that is not a Python console script" if interpreter is None else (
            f"a script run by {interpreter}")
    top = module.split(".")[0]
    owners = metadata.packages_distributions().get(top, [])
    if owners:
        package = ", ".join(sorted(set(owners)))
    else:
        package = KNOWN.get(top, "not installed in this environment")
    where = f" under {interpreter}" if interpreter else ""
    return f"which runs {module}{where} (package: {package})"
