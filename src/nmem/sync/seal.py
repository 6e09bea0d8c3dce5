"""Sealed operation lines: what an encrypted store pushes instead of plain JSON (docs/sync.md).

With encryption on, every line leaves the machine as `{"v": 1, "sealed": "<base64>"}`: AES-256-GCM
over the plain line, with a 96-bit random nonce and the writing device's id as associated data (a
line copied into another device's file does not open). The key is derived from the database key
with HKDF-SHA256, so every machine holding the store key reads every machine's lines, and the
remote, its operator and the local git repository see only ciphertext.
"""

from __future__ import annotations

import base64
import os

from nmem import jsonlite
from nmem.errors import ConfigError
from nmem.store.keys import DatabaseKey

NONCE_BYTES = 12
INFO = b"nmem sync op log v1"


class SealError(ValueError):
    """A sealed line that does not open with this store's key."""


class Sealer:
    """Seals and opens operation lines with the key derived from the store's key."""

    def __init__(self, key: DatabaseKey) -> None:
        try:
            from cryptography.hazmat.primitives import hashes
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
            from cryptography.hazmat.primitives.kdf.hkdf import HKDF
        except ImportError:
            raise ConfigError("syncing an encrypted store needs the `cryptography` package: "
                              "pip install 'nmem[encryption]'") from None
        secret = bytes.fromhex(key.value[2:-1]) if key.raw else key.value.encode("utf-8")
        derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=INFO).derive(secret)
        self._aead = AESGCM(derived)

    def seal(self, line: str, device: str) -> str:
        nonce = os.urandom(NONCE_BYTES)
        sealed = nonce + self._aead.encrypt(nonce, line.encode("utf-8"), device.encode())
        return jsonlite.dumps({"v": 1, "sealed": base64.b64encode(sealed).decode("ascii")})

    def open(self, line: str, device: str) -> str:
        from cryptography.exceptions import InvalidTag

        try:
            data = jsonlite.loads(line)
        except (ValueError, RecursionError):
            raise SealError("not JSON") from None
        text = data.get("sealed") if isinstance(data, dict) else None
        if not isinstance(text, str):
            raise SealError("a plain line in an encrypted log")
        try:
            raw = base64.b64decode(text, validate=True)
            return self._aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], device.encode()).decode("utf-8")
        except (ValueError, InvalidTag, UnicodeDecodeError):
            raise SealError("does not open with this store's key") from None
