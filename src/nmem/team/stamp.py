"""A stamp that changes whenever a token is revoked on this machine: how a team server's kept
token checks (`nmem.adapters.http.team.TeamAuth`) learn of a revocation at once.

The stamp is 8 random bytes in `<home>/team.stamp`, rewritten by every revocation made through
the server (any worker) or by `nmem token revoke` with the same home. Each server process maps
the file, so reading it costs no system call and sees a rewrite the moment it is made. A
revocation made elsewhere (another machine, another home) does not touch it: the server sees
that one when its kept check runs out (`http.token_cache_ms`).
"""

from __future__ import annotations

import mmap
import os
import secrets

SIZE = 8
NAME = "team.stamp"


def path(home: str) -> str:
    return os.path.join(home, NAME)


def _open(home: str) -> int:
    os.makedirs(home, mode=0o700, exist_ok=True)
    fd = os.open(path(home), os.O_RDWR | os.O_CREAT, 0o600)
    if os.fstat(fd).st_size < SIZE:
        os.pwrite(fd, secrets.token_bytes(SIZE), 0)
    return fd


def bump(home: str) -> bool:
    """Tokens changed: every server process reading this home's stamp drops what it kept. False
    when the stamp cannot be written (a read-only home): servers then see the change only when
    their kept checks run out."""
    try:
        fd = _open(home)
        try:
            os.pwrite(fd, secrets.token_bytes(SIZE), 0)
        finally:
            os.close(fd)
    except OSError:
        return False
    return True


class Stamp:
    """The stamp of `home`, mapped: `read()` is its current value."""

    def __init__(self, home: str) -> None:
        fd = _open(home)
        try:
            self._map = mmap.mmap(fd, SIZE, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)

    def read(self) -> bytes:
        return self._map[:SIZE]

    def close(self) -> None:
        self._map.close()
