"""Project identity from a working directory: the git top-level's name, else the directory's."""

from __future__ import annotations

import functools
import os
from pathlib import Path


@functools.lru_cache(maxsize=256)
def git_toplevel(cwd: str) -> Path | None:
    """The nearest ancestor holding `.git` (dir or worktree file), found without running git.

    Cached per process: an import or a server records many events from the same directories.
    """
    try:
        path = Path(cwd).resolve()
    except (OSError, RuntimeError):
        return None
    for candidate in (path, *path.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def project_name(cwd: str, override: str = "") -> str:
    if override:
        return override
    top = git_toplevel(cwd)
    name = (top or Path(cwd)).name
    return name or os.path.basename(os.path.normpath(cwd)) or "root"
