"""The database key for encryption at rest: from `NMEM_KEY`, a key file, or the OS keyring.

A key is either raw, 64 hex digits (256 bits, also written `x'<hex>'`), which SQLCipher uses
as it is, or any other text, a passphrase SQLCipher stretches with PBKDF2 (256,000 rounds,
tens of milliseconds) on every open. Hooks open the database on every event, so the raw form
is the one to use (`nmem encrypt --generate-key` writes one).

On the hook path: `os` only; the `keyring` package is imported only when that source is on.
"""

from __future__ import annotations

import os

from nmem.errors import EncryptionError, InvalidArgument

TYPE_CHECKING = False
if TYPE_CHECKING:
    from nmem.config import Settings

KEYRING_SERVICE = "nmem"
KEYRING_USER = "database"
HEX = "0123456789abcdefABCDEF"


class DatabaseKey:
    """A key and where it came from (named in errors; the key itself is never shown)."""

    __slots__ = ("source", "value")

    def __init__(self, value: str, source: str) -> None:
        self.value = value      # `x'<64 hex>'` or a passphrase, as `PRAGMA key` takes it
        self.source = source    # "NMEM_KEY", "key file /path", "the OS keyring"

    @property
    def raw(self) -> bool:
        return self.value.startswith("x'")

    def __repr__(self) -> str:
        return f"DatabaseKey(<hidden>, source={self.source!r})"


def normalize(text: str, source: str) -> DatabaseKey:
    """A key as typed: surrounding whitespace dropped, 64 hex digits (or `x'...'`) made raw."""
    text = text.strip()
    if not text:
        raise EncryptionError(f"the database key from {source} is empty")
    body = text[2:-1] if text[:2] in ("x'", "X'") and text.endswith("'") else text
    if len(body) == 64 and all(c in HEX for c in body):
        return DatabaseKey(f"x'{body.lower()}'", source)
    if body is not text:
        raise EncryptionError(f"the raw database key from {source} must be x'<64 hex digits>' (256 bits)")
    return DatabaseKey(text, source)


def read_key_file(path: str) -> DatabaseKey:
    """The key in `path`, which only its owner may read or write (mode 0600 or 0400)."""
    path = os.path.expanduser(path)
    source = f"key file {path}"
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise EncryptionError(f"cannot read the {source}: {exc.strerror}") from exc
    try:
        mode = os.fstat(fd).st_mode & 0o777
        if mode & 0o077:
            raise EncryptionError(f"the {source} is readable by others (mode {mode:04o}): "
                              f"`chmod 600 {path}` so only you can read it")
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    try:
        return normalize(data.decode("utf-8"), source)
    except UnicodeDecodeError:
        raise EncryptionError(f"the {source} is not text: write the key as 64 hex digits") from None


def from_keyring() -> DatabaseKey | None:
    try:
        import keyring  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        raise EncryptionError("encryption.keyring is on but the `keyring` package is not installed "
                          "(pip install keyring)") from None
    try:
        value = keyring.get_password(KEYRING_SERVICE, KEYRING_USER)
    except Exception as exc:  # keyring's backends raise their own types
        raise EncryptionError(f"the OS keyring failed: {exc}") from exc
    if value is None:
        raise EncryptionError(f"encryption.keyring is on but the OS keyring has no password for service "
                          f"{KEYRING_SERVICE!r}, user {KEYRING_USER!r}")
    return normalize(value, "the OS keyring")


def database_key(settings: Settings) -> DatabaseKey | None:
    """The configured key, or None when none is configured (the database is plain)."""
    env = settings["encryption.key"]
    if env:
        return normalize(env, "NMEM_KEY" if settings.sources.get("encryption.key") == "env" else "encryption.key")
    if settings["encryption.key_file"]:
        return read_key_file(settings["encryption.key_file"])
    if settings["encryption.keyring"]:
        return from_keyring()
    return None


def generate() -> str:
    """A new raw key: 64 hex digits from the OS's random source."""
    return os.urandom(32).hex()


def write_key_file(path: str, hex_key: str) -> str:
    """Write a new key file (mode 0600; refuses to replace one)."""
    path = os.path.expanduser(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise InvalidArgument(f"{path} exists: nmem never replaces a key file") from None
    except OSError as exc:
        raise InvalidArgument(f"cannot write the key file {path}: {exc.strerror}") from exc
    try:
        os.write(fd, (hex_key + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return path
