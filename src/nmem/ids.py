"""Stable global ids for curated memories: ULIDs (time-ordered, 26 Crockford base32 chars)."""

from __future__ import annotations

import os

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_uid(now: float) -> str:
    """48 bits of milliseconds then 80 random bits, so ids sort by creation time."""
    value = (int(now * 1000) & ((1 << 48) - 1)) << 80 | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))
