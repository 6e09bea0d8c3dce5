"""Project identity from a working directory: the git top-level's name, else the directory's."""

from __future__ import annotations

import os
from functools import lru_cache  # loaded already: `_sqlite3` imports it, even under `python -S`


@lru_cache(maxsize=256)  # per process: imports and servers repeat cwds
def git_toplevel(cwd: str) -> str | None:
    """The nearest ancestor holding `.git` (dir or worktree file), found without running git."""
    try:
        path = os.path.realpath(cwd)
    except (OSError, ValueError):
        path = None
    found = None
    while path:
        if os.path.exists(os.path.join(path, ".git")):
            found = path
            break
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return found


def project_name(cwd: str, override: str = "") -> str:
    if override:
        return override
    top = git_toplevel(cwd)
    name = os.path.basename(top) if top else ""
    return name or os.path.basename(os.path.normpath(cwd)) or "root"


def project_root(cwd: str) -> str:
    """The directory a session's paths are relative to: the git top-level, else `cwd` itself
    (whose name `project_name` took)."""
    return git_toplevel(cwd) or os.path.normpath(cwd)
