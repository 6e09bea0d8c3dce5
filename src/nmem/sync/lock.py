"""One sync at a time per data directory: an exclusive `flock` on `<data dir>/sync/lock`.

The kernel drops the lock when its process dies, however it dies, so a killed sync never
leaves a lock behind. Stdlib only: the hooks test it before starting a background sync.
"""

from __future__ import annotations

import fcntl
import os
import time


def sync_dir(home: str) -> str:
    return os.path.join(home, "sync")


LAST_SYNC_FILE = "last-sync"


def mark_synced(home: str, at: float) -> None:
    """Remember when a sync last completed (what `status` shows as its last sync)."""
    directory = sync_dir(home)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, LAST_SYNC_FILE)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(f"{int(at)}\n")
    os.replace(tmp, path)


def last_synced(home: str) -> int | None:
    """When a sync of this data dir last completed (epoch seconds), or None if none has."""
    try:
        with open(os.path.join(sync_dir(home), LAST_SYNC_FILE), encoding="utf-8") as fh:
            text = fh.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


class SyncLock:
    def __init__(self, home: str) -> None:
        self.path = os.path.join(sync_dir(home), "lock")
        self._fd: int | None = None

    def acquire(self, wait: float = 0.0) -> bool:
        """Take the lock, trying for up to `wait` seconds; False if another sync holds it."""
        os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return False
                time.sleep(0.05)
                continue
            self._fd = fd
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return True

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def held_elsewhere(self) -> bool:
        """Whether another process holds the lock right now (taken and given back at once if not)."""
        if not os.path.exists(self.path):
            return False
        if self.acquire():
            self.release()
            return False
        return True
