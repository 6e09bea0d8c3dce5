"""Encryption at rest: keys, the encrypted store, `nmem encrypt` / `nmem decrypt` (docs/encryption.md).

Real SQLCipher (the sqlcipher3 package) on real files; every "no plaintext" claim is a scan of
the file's raw bytes.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import hook_payload, record, run_nmem
from nmem.config import load_settings
from nmem.errors import EncryptionError, ForeignDatabase, InvalidArgument, StoreBusy
from nmem.portable import encryption
from nmem.service.api import Service
from nmem.store.keys import DatabaseKey, database_key, normalize, read_key_file
from nmem.store.sqlite import SqliteStore, driver
from nmem.store.sqlite.files import APPLICATION_ID

sqlcipher3 = pytest.importorskip("sqlcipher3")

KEY = "3b" * 32
OTHER_KEY = "c4" * 32
SECRET = "zanzibar-quokka-7781"          # a word nothing else writes: its bytes must not show
MEMORY_SECRET = "ptarmigan-ledger-4410"


def raw_bytes(db: Path) -> bytes:
    data = b""
    for suffix in ("", "-wal", "-shm", "-journal"):
        path = Path(str(db) + suffix)
        if path.exists():
            data += path.read_bytes()
    return data


def key(value: str = KEY) -> DatabaseKey:
    return normalize(value, "test")


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NMEM_")}
    return {**env, "NMEM_HOME": str(home), **extra}


def fill(service: Service, n: int = 3) -> None:
    for i in range(n):
        record(service, "UserPromptSubmit", session_id="enc-1", prompt=f"plan the {SECRET} rollout, step {i}")
    service.remember(f"the {MEMORY_SECRET} lives in vault 3", namespace="decisions")


# -- keys -----------------------------------------------------------------------------------------

def test_key_forms() -> None:
    assert normalize(KEY, "t").value == f"x'{KEY}'"
    assert normalize(f"  x'{KEY.upper()}'\n", "t").value == f"x'{KEY}'"
    assert normalize(f"x'{KEY}'", "t").raw
    phrase = normalize("correct horse battery staple", "t")
    assert not phrase.raw and phrase.value == "correct horse battery staple"
    with pytest.raises(EncryptionError, match="64 hex digits"):
        normalize("x'abcd'", "t")
    with pytest.raises(EncryptionError, match="empty"):
        normalize("   ", "t")
    assert "3b3b" not in repr(normalize(KEY, "t"))


def test_key_file_must_be_private(tmp_path: Path) -> None:
    path = tmp_path / "db.key"
    path.write_text(KEY + "\n")
    path.chmod(0o644)
    with pytest.raises(EncryptionError, match="readable by others"):
        read_key_file(str(path))
    path.chmod(0o600)
    assert read_key_file(str(path)).value == f"x'{KEY}'"
    with pytest.raises(EncryptionError, match="cannot read"):
        read_key_file(str(tmp_path / "missing.key"))


def test_key_sources_in_order(tmp_path: Path) -> None:
    path = tmp_path / "db.key"
    path.write_text(OTHER_KEY)
    path.chmod(0o600)
    home = str(tmp_path / "home")
    assert database_key(load_settings({"NMEM_HOME": home})) is None
    from_file = database_key(load_settings({"NMEM_HOME": home, "NMEM_KEY_FILE": str(path)}))
    assert from_file is not None and from_file.value == f"x'{OTHER_KEY}'" and str(path) in from_file.source
    both = database_key(load_settings({"NMEM_HOME": home, "NMEM_KEY_FILE": str(path), "NMEM_KEY": KEY}))
    assert both is not None and both.value == f"x'{KEY}'" and both.source == "NMEM_KEY"


def test_keyring_source_needs_the_package(tmp_path: Path) -> None:
    try:
        import keyring  # noqa: F401
    except ImportError:
        with pytest.raises(EncryptionError, match="keyring"):
            database_key(load_settings({"NMEM_HOME": str(tmp_path), "NMEM_KEYRING": "true"}))
    else:
        pytest.skip("keyring installed: its backend is the OS's, not testable here")


# -- the encrypted store --------------------------------------------------------------------------

def test_new_database_with_a_key_is_encrypted_and_leaks_no_text(tmp_path: Path) -> None:
    home = tmp_path / "home"
    settings = load_settings({"NMEM_HOME": str(home), "NMEM_KEY": KEY})
    service = Service.open(settings)
    try:
        assert service.store.encrypted  # type: ignore[attr-defined]
        fill(service)
        # while open: the WAL holds the latest pages, encrypted too
        data = raw_bytes(Path(settings.db_path))
        assert Path(settings.db_path + "-wal").exists()
        assert SECRET.encode() not in data and MEMORY_SECRET.encode() not in data
        assert not data.startswith(b"SQLite format 3")
        assert service.recall(MEMORY_SECRET) != []
    finally:
        service.close()
    data = raw_bytes(Path(settings.db_path))
    assert SECRET.encode() not in data and MEMORY_SECRET.encode() not in data
    # reopened with the key: everything there, FTS5 included
    again = Service.open(settings)
    try:
        assert again.store.status().prompts == 3
        assert again.search(SECRET, scope="prompts").hits
    finally:
        again.close()


def test_same_text_is_plain_in_a_plain_database(tmp_path: Path) -> None:
    """The scan above can fail: without a key the same writes show their text."""
    settings = load_settings({"NMEM_HOME": str(tmp_path / "home")})
    service = Service.open(settings)
    try:
        fill(service)
    finally:
        service.close()
    assert SECRET.encode() in raw_bytes(Path(settings.db_path))


def test_missing_and_wrong_keys_are_clear(tmp_path: Path) -> None:
    db = tmp_path / "nmem.db"
    SqliteStore(str(db), key=key()).close()
    with pytest.raises(EncryptionError, match="encrypted database") as missing:
        SqliteStore(str(db))
    assert missing.value.exit_code == 7
    with pytest.raises(EncryptionError, match="key is wrong") as wrong:
        SqliteStore(str(db), key=key(OTHER_KEY))
    assert "file is not a database" not in wrong.value.message


def test_a_foreign_sqlcipher_database_with_the_same_key_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    conn = sqlcipher3.connect(str(db))
    conn.execute(f"PRAGMA key = \"x'{KEY}'\"")
    conn.execute("PRAGMA application_id = 1234")
    conn.execute("CREATE TABLE ledger (x)")
    conn.commit()
    conn.close()
    before = db.read_bytes()
    with pytest.raises(ForeignDatabase, match="another application"):
        SqliteStore(str(db), key=key())
    assert db.read_bytes() == before


def test_a_text_file_is_still_foreign_not_encrypted(tmp_path: Path) -> None:
    db = tmp_path / "notes.db"
    db.write_text("just some notes\n" * 100)
    with pytest.raises(ForeignDatabase, match="not a database"):
        SqliteStore(str(db))


def test_passphrase_keys_work_too(tmp_path: Path) -> None:
    db = tmp_path / "nmem.db"
    phrase = normalize("correct horse battery staple", "t")
    store = SqliteStore(str(db), key=phrase)
    store.close()
    SqliteStore(str(db), key=phrase).close()
    with pytest.raises(EncryptionError):
        SqliteStore(str(db), key=normalize("wrong horse", "t"))


def test_a_plain_database_opens_plain_when_a_key_is_set(tmp_path: Path) -> None:
    """Setting a key before `nmem encrypt` must not lock the user out of the plain database."""
    db = tmp_path / "nmem.db"
    SqliteStore(str(db)).close()
    store = SqliteStore(str(db), key=key())
    try:
        assert not store.encrypted
    finally:
        store.close()


# -- nmem encrypt / nmem decrypt ------------------------------------------------------------------

def counts(db: Path, k: DatabaseKey | None) -> dict[str, int]:
    store = SqliteStore(str(db), key=k)
    try:
        return encryption._counts(store._reader())
    finally:
        store.close()


def test_encrypt_then_decrypt_round_trip(tmp_path: Path) -> None:
    settings = load_settings({"NMEM_HOME": str(tmp_path / "home")})
    service = Service.open(settings)
    fill(service, 20)
    service.close()
    db = Path(settings.db_path)
    before = counts(db, None)
    backups = str(tmp_path / "backups")

    report = encryption.encrypt(str(db), key(), backups)
    assert report.encrypted and report.tables == before and report.backup is None
    assert os.listdir(backups) == []   # the plain copy is gone once the new file checked out
    data = raw_bytes(db)
    assert SECRET.encode() not in data and MEMORY_SECRET.encode() not in data
    assert counts(db, key()) == before
    store = SqliteStore(str(db), key=key())
    assert store.encrypted
    assert store._query("PRAGMA journal_mode")[0][0] == "wal"
    assert store._query("PRAGMA application_id")[0][0] == APPLICATION_ID
    store.close()
    assert (db.stat().st_mode & 0o777) == 0o600

    with pytest.raises(InvalidArgument, match="already encrypted"):
        encryption.encrypt(str(db), key(), backups)

    kept = encryption.decrypt(str(db), key(), backups, keep_backup=True)
    assert not kept.encrypted and kept.backup is not None and os.path.exists(kept.backup)
    assert db.read_bytes().startswith(b"SQLite format 3\x00")
    assert counts(db, None) == before
    with pytest.raises(InvalidArgument, match="not encrypted"):
        encryption.decrypt(str(db), key(), backups)


def test_decrypt_with_the_wrong_key_changes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "nmem.db"
    store = SqliteStore(str(db), key=key())
    store.close()
    before = db.read_bytes()
    with pytest.raises(EncryptionError, match="key is wrong"):
        encryption.decrypt(str(db), key(OTHER_KEY), str(tmp_path / "b"))
    assert db.read_bytes() == before


def test_encrypt_refuses_while_another_process_keeps_the_database_open(tmp_path: Path) -> None:
    settings = load_settings({"NMEM_HOME": str(tmp_path / "home")})
    Service.open(settings).close()
    db = settings.db_path
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3, sys, time\n"
         f"c = sqlite3.connect({db!r}); c.execute('SELECT count(*) FROM sessions').fetchall()\n"
         "print('open', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        before = Path(db).read_bytes()
        with pytest.raises(StoreBusy, match="another process keeps"):
            encryption.encrypt(db, key(), str(tmp_path / "b"), busy_timeout_ms=300)
        assert Path(db).read_bytes() == before
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    conn = sqlite3.connect(db)
    try:   # left in WAL mode, as nmem keeps it
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()
    assert encryption.encrypt(db, key(), str(tmp_path / "b")).encrypted


def test_cli_encrypt_generate_key_and_exit_codes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = env_for(home)
    done = run_nmem(["hook", "UserPromptSubmit"], env=env,
                    stdin=__import__("json").dumps(hook_payload("UserPromptSubmit", prompt=f"about {SECRET}")))
    assert done.returncode == 0, done.stderr
    missing = run_nmem(["encrypt"], env=env)
    assert missing.returncode == 7 and "no database key is configured" in missing.stderr
    done = run_nmem(["encrypt", "--generate-key", "--format", "json"], env=env)
    assert done.returncode == 0, done.stderr
    assert (home / "db.key").stat().st_mode & 0o777 == 0o600
    assert __import__("json").loads(done.stdout)["encrypted"] is True
    assert SECRET.encode() not in raw_bytes(home / "nmem.db")
    # the key file is in the config now: every command opens the database
    found = run_nmem(["search", SECRET, "--format", "json"], env=env)
    assert found.returncode == 0, found.stderr
    again = run_nmem(["encrypt"], env=env)
    assert again.returncode == 2 and "already encrypted" in again.stderr
    (home / "db.key").chmod(0o644)
    loose = run_nmem(["status"], env=env)
    assert loose.returncode == 7 and "chmod 600" in loose.stderr
    (home / "db.key").chmod(0o600)
    no_key = run_nmem(["status"], env={**env, "NMEM_KEY_FILE": ""})
    assert no_key.returncode == 7 and "encrypted database" in no_key.stderr
    wrong = run_nmem(["status"], env={**env, "NMEM_KEY": OTHER_KEY})
    assert wrong.returncode == 7 and "key is wrong" in wrong.stderr
    assert "ERROR CORE" not in wrong.stderr   # SQLCipher's own log stays quiet
    back = run_nmem(["decrypt"], env=env)
    assert back.returncode == 0, back.stderr
    assert SECRET.encode() in raw_bytes(home / "nmem.db")


def test_missing_sqlcipher_names_the_extra(tmp_path: Path) -> None:
    """Without the package (hidden from a child process), an encrypted database says what to install."""
    db = tmp_path / "nmem.db"
    SqliteStore(str(db), key=key()).close()
    code = ("import sys; sys.modules['sqlcipher3'] = None\n"
            "from nmem.store.sqlite import SqliteStore\nfrom nmem.store.keys import normalize\n"
            f"SqliteStore({str(db)!r}, key=normalize({KEY!r}, 't'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert "EncryptionError" in done.stderr and "nmem-memory[encryption]" in done.stderr
    assert driver.available()
