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
