"""Replicas for the sync tests: each a data dir with its own database, device id and clock,
syncing with a real bare git repository through the real git command line."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

from conftest import Clock
from nmem.config import load_settings
from nmem.service.api import Service
from nmem.sync.engine import SyncReport, run_sync

T0 = 1_790_000_000.0
BRANCH = "nmem"
# What replicas must agree on for every memory: what its operations carry, plus its version.
SYNCED = ("uid", "domain", "namespace", "summary", "content", "tags", "source", "relates_to", "tier",
          "is_pinned", "created_at", "updated_at", "deleted_at", "sync_version")
TOMBSTONE = ("uid", "domain", "namespace", "created_at", "updated_at", "deleted_at", "sync_version")


def git(*args: str, cwd: Path | None = None, check: bool = True) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=60)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {done.stderr}")
    return done.stdout


def bare_remote(path: Path) -> Path:
    git("init", "--quiet", "--bare", str(path))
    return path


def remote_files(remote: Path) -> dict[str, str]:
    """path → content of every file on the remote's sync branch ({} before the first push)."""
    if not git("--git-dir", str(remote), "branch", "--list", BRANCH).strip():
        return {}
    names = git("--git-dir", str(remote), "ls-tree", "-r", "--name-only", BRANCH).split()
    return {n: git("--git-dir", str(remote), "show", f"{BRANCH}:{n}") for n in names}


def remote_lines(remote: Path) -> list[dict[str, Any]]:
    """Every operation line on the remote, parsed."""
    return [json.loads(line) for name, text in sorted(remote_files(remote).items()) if name.startswith("devices/")
            for line in text.splitlines()]


class Replica:
    """One machine: a data dir, a service with a settable clock, and `sync()`."""

    def __init__(self, home: Path, remote: Path | str, now: float = T0, **settings: str) -> None:
        self.home = home
        self.clock = Clock(now)
        env = {"NMEM_HOME": str(home), "NMEM_SYNC_REMOTE": str(remote), **settings}
        self.settings = load_settings(env)
        self.service = Service.open(self.settings)
        self.service.clock = self.clock
        self.device = self.service.store.sync_device()

    def sync(self, **kwargs: Any) -> SyncReport:
        return run_sync(self.service.store, self.settings, clock=self.clock, project="demo", **kwargs)

    def remember(self, content: str, **kwargs: Any) -> str:
        kwargs.setdefault("domain", "user")
        return self.service.remember(content, **kwargs).id

    def state(self) -> dict[str, tuple[Any, ...]]:
        """uid → what sync must make equal on every replica (a tombstone: only what it keeps)."""
        with sqlite3.connect(self.settings.db_path) as conn:
            conn.row_factory = sqlite3.Row
            rows = conn.execute(f"SELECT {', '.join(SYNCED)} FROM memories").fetchall()
        return {r["uid"]: tuple(r[c] for c in (TOMBSTONE if r["deleted_at"] is not None else SYNCED)) for r in rows}

    def outbox(self) -> list[sqlite3.Row]:
        with sqlite3.connect(self.settings.db_path) as conn:
            conn.row_factory = sqlite3.Row
            return conn.execute("SELECT * FROM sync_ops ORDER BY seq").fetchall()

    def content(self, uid: str) -> str | None:
        memory = self.service.store.get_memory(uid)
        assert memory is not None
        return None if memory.deleted_at is not None else memory.content

    def close(self) -> None:
        self.service.close()
