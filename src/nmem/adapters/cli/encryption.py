"""`nmem encrypt` and `nmem decrypt`: encryption at rest of the SQLite database (docs/encryption.md)."""

from __future__ import annotations

import os

import click

from nmem.adapters.cli.app import State, emit, format_option, note, pass_state
from nmem.adapters.cli.output import Fields
from nmem.config import load_settings, write_setting
from nmem.errors import EncryptionError
from nmem.portable import encryption
from nmem.store.keys import database_key, generate, write_key_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from nmem.portable.encryption import ConversionReport
    from nmem.store.keys import DatabaseKey

DEFAULT_KEY_FILE = "db.key"


def _sqlite_path(state: State) -> str:
    return state.sqlite_file("encryption at rest is for the SQLite database; "
                             "{engine} keeps its data encrypted with its server's own tools")


def _key(state: State, generate_key: bool) -> DatabaseKey:
    key = database_key(state.settings)
    if key is not None:
        if generate_key:
            raise click.UsageError(f"a key is already configured (from {key.source}); --generate-key makes a "
                                   "new one only when none is")
        return key
    if not generate_key:
        raise EncryptionError("no database key is configured: set NMEM_KEY, encryption.key_file or "
                              "encryption.keyring (docs/encryption.md), or pass --generate-key")
    path = write_key_file(os.path.join(state.settings.home, DEFAULT_KEY_FILE), generate())
    write_setting(state.settings, "encryption.key_file", path)
    note(f"wrote a new key to {path} (mode 0600) and set encryption.key_file to it; "
         "keep a copy of it somewhere safe: without it the database cannot be read")
    state._settings = load_settings(state.env)
    found = database_key(state.settings)
    if found is None:  # an environment variable overrides the file just written
        raise EncryptionError("the new key file is not the one in use: NMEM_KEY_FILE or another source wins")
    return found


def _show(state: State, fmt: str | None, report: ConversionReport) -> None:
    rows = ", ".join(f"{report.tables.get(t, 0)} {t}" for t in ("sessions", "prompts", "observations", "memories"))
    emit(state, fmt, report.to_dict(), lambda: [Fields([
        ("database", report.database),
        ("encrypted", "yes" if report.encrypted else "no"),
        ("key", f"from {report.key_source}"),
        ("rows", f"{rows} (every table's count checked)"),
        ("backup", report.backup or "deleted after the check (--keep-backup keeps it)"),
        ("took", f"{report.seconds:.2f} s")])])


@click.command("encrypt")
@click.option("--generate-key", is_flag=True,
              help="No key configured yet: write a new raw key to <data dir>/db.key (mode 0600) and use it.")
@click.option("--keep-backup", is_flag=True,
              help="Keep the plain copy made before the conversion in <data dir>/backups/ (deleted otherwise).")
@format_option
@pass_state
def encrypt(state: State, generate_key: bool, keep_backup: bool, fmt: str | None) -> None:
    """Encrypt the database in place with SQLCipher, using the configured key.

    The key comes from NMEM_KEY, the key file (encryption.key_file) or the OS keyring
    (encryption.keyring); a raw key (64 hex digits) spares every hook the key derivation.
    The database is copied encrypted to a new file, every table's row count and integrity
    checked, and the new file renamed over the old one. Hooks wait or spool their events
    meanwhile; a running `nmem serve` must be stopped first (exit 4 if one keeps the file
    open). Exit 7 when no key is configured or the key cannot be read.
    """
    path = _sqlite_path(state)
    key = _key(state, generate_key)
    backups = os.path.join(state.settings.home, "backups")
    _show(state, fmt, encryption.encrypt(path, key, backups, keep_backup=keep_backup))


@click.command("decrypt")
@click.option("--keep-backup", is_flag=True,
              help="Keep the encrypted copy made before the conversion in <data dir>/backups/.")
@format_option
@pass_state
def decrypt(state: State, keep_backup: bool, fmt: str | None) -> None:
    """Turn the encrypted database back into plain SQLite, in place.

    Needs the key that encrypted it. The same checks as `nmem encrypt`; afterwards remove
    the key from the configuration (with a key set, nmem still opens a plain database, and
    creates a new one encrypted). Exit 7 when the key is missing or wrong.
    """
    path = _sqlite_path(state)
    key = database_key(state.settings)
    if key is None:
        raise EncryptionError("no database key is configured: decrypting needs the key that encrypted "
                              "the database (NMEM_KEY, encryption.key_file or encryption.keyring)")
    backups = os.path.join(state.settings.home, "backups")
    _show(state, fmt, encryption.decrypt(path, key, backups, keep_backup=keep_backup))


COMMANDS: tuple[click.Command, ...] = (encrypt, decrypt)
