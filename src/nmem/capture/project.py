"""Project identity from a working directory, found without running git (this runs in every hook).

In order: a directory override from the config file (`[projects]` `"/path" = "name"`, the
longest matching path wins), the git repository's name (every worktree of a repository is
one project, named after its main worktree's directory), else the directory's own name.
"""

from __future__ import annotations

import os
from functools import lru_cache  # loaded already: `_sqlite3` imports it, even under `python -S`

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

GITDIR_PREFIX = "gitdir:"


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


def _read_small(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(4096).strip()
    except OSError:
        return None


@lru_cache(maxsize=256)
def repository_name(top: str) -> str:
    """The name of the repository whose worktree `top` is: the main worktree's directory name.

    A linked worktree's `.git` is a file `gitdir: <common dir>/worktrees/<name>`, and that
    directory's `commondir` file points back at the common dir (`<main>/.git`, or a bare
    `<name>.git`). A submodule's `.git` file has no `commondir` behind it: it is its own project.
    """
    dotgit = os.path.join(top, ".git")
    if os.path.isfile(dotgit):
        text = _read_small(dotgit) or ""
        if text.startswith(GITDIR_PREFIX):
            gitdir = os.path.join(top, text[len(GITDIR_PREFIX):].strip().splitlines()[0].strip())
            common = _read_small(os.path.join(gitdir, "commondir"))
            if common:
                common_dir = os.path.normpath(os.path.join(gitdir, common))
                if os.path.basename(common_dir) == ".git":
                    return os.path.basename(os.path.dirname(common_dir)) or os.path.basename(top)
                name = os.path.basename(common_dir)
                return name.removesuffix(".git") or name
    return os.path.basename(top)


def git_branch(cwd: str) -> str | None:
    """The branch checked out at `cwd` (HEAD's `ref: refs/heads/<name>`), read without running git;
    None when detached or not in a repository."""
    top = git_toplevel(cwd)
    if top is None:
        return None
    gitdir = os.path.join(top, ".git")
    if os.path.isfile(gitdir):  # a linked worktree or a submodule: `gitdir: <path>`
        text = _read_small(gitdir) or ""
        if not text.startswith(GITDIR_PREFIX):
            return None
        gitdir = os.path.join(top, text[len(GITDIR_PREFIX):].strip().splitlines()[0].strip())
    head = _read_small(os.path.join(gitdir, "HEAD")) or ""
    return head.removeprefix("ref: refs/heads/") if head.startswith("ref: refs/heads/") else None


def directory_project(cwd: str, directories: Mapping[str, str]) -> str | None:
    """The project the config file assigns to `cwd` or its nearest listed ancestor."""
    if not directories:
        return None
    best = ""
    name = None
    for candidate in {os.path.normpath(os.path.abspath(cwd)), os.path.realpath(cwd)}:
        for path, project in directories.items():
            if (candidate == path or candidate.startswith(path.rstrip(os.sep) + os.sep)) and len(path) > len(best):
                best, name = path, project
    return name


def project_name(cwd: str, override: str = "", directories: Mapping[str, str] | None = None) -> str:
    if override:
        return override
    if directories:
        named = directory_project(cwd, directories)
        if named:
            return named
    top = git_toplevel(cwd)
    name = repository_name(top) if top else ""
    return name or os.path.basename(os.path.normpath(cwd)) or "root"


def project_root(cwd: str) -> str:
    """The directory a session's paths are relative to: the git top-level, else `cwd` itself
    (whose name `project_name` took)."""
    return git_toplevel(cwd) or os.path.normpath(cwd)
