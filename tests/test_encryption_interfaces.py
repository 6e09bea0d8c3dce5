"""Every interface on an encrypted database: hooks (and hooks racing `nmem encrypt`), the CLI,
MCP over stdio with the SDK's client, backup/restore, export and sync."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from fixtures.harness import event, hook, hook_env, hook_ok
from mcp_support import CWD, structured
from nmem.config import load_settings
from nmem.portable import encryption
from nmem.service.api import Service
from nmem.store.sqlite import SqliteStore
from nmem.sync.engine import run_sync
from sync_support import bare_remote, remote_files
from test_encryption import KEY, OTHER_KEY, SECRET, key, raw_bytes
from test_hook_imports import check_hook_imports, importtime

pytest.importorskip("sqlcipher3")


def prompt(session: str, text: str) -> dict[str, object]:
    return event("UserPromptSubmit", session, "/home/dev/code/enc-demo", prompt=text)


def stored_prompts(home: Path) -> list[str]:
    store = SqliteStore(str(home / "nmem.db"), key=key())
    try:
        return [str(r[0]) for r in store._query("SELECT content FROM prompts")]
    finally:
        store.close()


def test_hooks_store_and_spool_on_an_encrypted_database(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hook_ok(home, prompt("h1", f"first {SECRET}"), NMEM_KEY=KEY)
    assert SECRET.encode() not in raw_bytes(home / "nmem.db")
    # no key: the event waits in the spool (exit 4, one line), nothing is lost
    done = hook(home, prompt("h1", "second while the key is missing"))
    assert done.returncode == 4 and "kept in the spool" in done.stderr and "encrypted" in done.stderr
    assert len(list((home / "spool").glob("*.json"))) == 1
    # a wrong key: the same
    done = hook(home, prompt("h1", "third with a wrong key"), NMEM_KEY=OTHER_KEY)
    assert done.returncode == 4 and "key is wrong" in done.stderr
    hook_ok(home, prompt("h1", "fourth, key back"), NMEM_KEY=KEY)   # drains the spool first
    assert sorted(stored_prompts(home)) == sorted([f"first {SECRET}", "second while the key is missing",
                                                   "third with a wrong key", "fourth, key back"])
    assert list((home / "spool").glob("*")) == []


def test_encrypted_hook_path_imports_sqlcipher_and_nothing_heavy(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hook_ok(home, prompt("i1", "seed"), NMEM_KEY=KEY)
    _, startup = importtime(["-c", "pass"], "", hook_env(tmp_path / "bare"))
    payload = event("PostToolUse", "i1", "/home/dev/code/enc-demo", tool_name="Bash",
                    tool_input={"command": "pytest -q"}, tool_response={"stdout": "1 passed"})
    done, modules = importtime(["-m", "nmem", "record"], json.dumps(payload), hook_env(home, NMEM_KEY=KEY))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "sqlcipher3._sqlite3" in modules
    check_hook_imports([m for m in modules if not m.startswith("sqlcipher3")], set(startup))
    # a plain database never loads SQLCipher
    plain = tmp_path / "plain"
    hook_ok(plain, prompt("i2", "seed"))
    done, modules = importtime(["-m", "nmem", "record"], json.dumps(payload), hook_env(plain))
    assert done.returncode == 0 and "nmem.adapters.hooks.run" in modules
    assert not [m for m in modules if m.startswith("sqlcipher3")]


def test_hooks_racing_encrypt_lose_no_event(tmp_path: Path) -> None:
    """Hooks keep firing while `nmem encrypt` converts the database: each event is stored
    exactly once, before the conversion, in the spool and then after, or after."""
    home = tmp_path / "home"
    settings = load_settings({"NMEM_HOME": str(home)})
    service = Service.open(settings)   # some bulk, so the conversion takes a while
    for i in range(1500):
        service.record_event(__import__("nmem.capture.claude_code", fromlist=["parse"]).parse(
            event("PostToolUse", "bulk", "/home/dev/code/enc-demo", tool_name="Bash",
                  tool_input={"command": f"make step-{i}"}, tool_response={"stdout": "ok " * 40})))
    service.close()
    env = {"NMEM_KEY": KEY, "NMEM_BUSY_BUDGET_MS": "300"}
    sent: list[str] = []
    codes: list[tuple[int, str]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def fire(worker: int) -> None:
        n = 0
        while not stop.is_set() or n < 3:
            text = f"race w{worker} n{n}"
            done = hook(home, prompt(f"race-{worker}", text), **env)
            with lock:
                sent.append(text)
                codes.append((done.returncode, done.stderr))
            n += 1

    workers = [threading.Thread(target=fire, args=(w,)) for w in range(3)]
    for t in workers:
        t.start()
    converted = subprocess.run([sys.executable, "-m", "nmem", "encrypt", "--format", "json"],
                               capture_output=True, text=True, env=hook_env(home, **env), timeout=120, check=False)
    stop.set()
    for t in workers:
        t.join()
    assert converted.returncode == 0, converted.stderr
    assert json.loads(converted.stdout)["encrypted"] is True
    for code, err in codes:
        assert code == 0 or (code == 4 and "kept in the spool" in err), err
    # Later hooks store whatever waits in the spool (a drain stops at its time budget, so a
    # loaded machine may take more than one).
    drains = []
    for n in range(10):
        hook_ok(home, prompt("race-final", f"drain {n}"), NMEM_KEY=KEY)
        drains.append(f"drain {n}")
        if not list((home / "spool").glob("*")):
            break
    assert list((home / "spool").glob("*")) == []
    stored = stored_prompts(home)
    assert sorted(stored) == sorted([*sent, *drains])   # each exactly once
    assert b"race w0 n0" not in raw_bytes(home / "nmem.db")


class PausedEncrypt:
    """`nmem encrypt` of the database at `db`, run in a thread and paused right after its backup,
    just before the rename (where a loaded machine may preempt it), until `resume()`. Only the
    pause is added (around `_save_previous`); the conversion itself runs as it does for the CLI."""

    def __init__(self, db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reached, self.resumed = threading.Event(), threading.Event()
        self.outcome: dict[str, object] = {}
        backup = encryption._save_previous

        def backup_then_pause(*args: object) -> str:
            path = backup(*args)  # type: ignore[arg-type]
            self.reached.set()
            self.resumed.wait(60)
            return path

        monkeypatch.setattr(encryption, "_save_previous", backup_then_pause)
        self.thread = threading.Thread(target=self._convert, args=(db,))
        self.thread.start()
        assert self.reached.wait(60), self.outcome

    def _convert(self, db: Path) -> None:
        try:
            self.outcome["report"] = encryption.encrypt(str(db), key(), str(db.parent / "backups"))
        except BaseException as exc:  # reported by resume()
            self.outcome["error"] = exc
            self.reached.set()

    def resume(self) -> None:
        self.resumed.set()
        self.thread.join(60)
        assert "error" not in self.outcome, self.outcome


def test_a_hook_while_encrypt_swaps_the_file_writes_nothing_to_the_old_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`nmem encrypt` holds its exclusive lock from the export until the old file is stale:
    a hook run between the backup and the rename must wait for the lock and spool its event,
    and leave an older spooled event in the spool. It stored both in the file about to be
    replaced instead (both lost): the backup was read through a descriptor opened and closed
    under the lock, and closing any descriptor of a file drops every POSIX lock the process
    holds on it (SQLite's exclusive lock included)."""
    home = tmp_path / "home"
    db = home / "nmem.db"
    hook_ok(home, prompt("swap", "before"))   # a plain database
    locked = sqlite3.connect(db, isolation_level=None)   # a busy database: the next event is spooled
    try:
        locked.execute("BEGIN EXCLUSIVE")
        spooled = hook(home, prompt("swap", "spooled before"), NMEM_KEY=KEY, NMEM_BUSY_BUDGET_MS="200")
        locked.execute("ROLLBACK")
    finally:
        locked.close()
    assert spooled.returncode == 0, spooled.stderr
    assert len(list((home / "spool").glob("*.json"))) == 1
    paused = PausedEncrypt(db, monkeypatch)
    try:
        during = hook(home, prompt("swap", "during"), NMEM_KEY=KEY, NMEM_BUSY_BUDGET_MS="300")
    finally:
        paused.resume()
    assert during.returncode == 0, during.stderr   # busy past its budget: spooled
    hook_ok(home, prompt("swap", "after"), NMEM_KEY=KEY)   # drains the spool first
    assert list((home / "spool").glob("*")) == []
    assert sorted(stored_prompts(home)) == sorted(["before", "spooled before", "during", "after"])


def _waits_on(pid: int, inode: int) -> bool:
    """Whether process `pid` sleeps (SQLite's busy handler waiting for a lock) while it has the
    file with this inode open (Linux's /proc)."""
    try:
        if "nanosleep" not in Path(f"/proc/{pid}/wchan").read_text():
            return False
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for name in names:
        try:
            if os.stat(f"/proc/{pid}/fd/{name}").st_ino == inode:
                return True
        except OSError:
            continue
    return False


@pytest.mark.skipif(not os.path.exists("/proc/self/wchan"), reason="sees the hook wait in /proc")
def test_a_hook_waiting_on_the_replaced_file_spools_its_event(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hook that opened the database before the rename and waits for the lock: when the
    conversion lets go, it finds the old file stale and spools its event (or, between two
    tries, opens the new file and stores it there), never writes to the old file."""
    home = tmp_path / "home"
    db = home / "nmem.db"
    hook_ok(home, prompt("wait", "before"))   # a plain database
    old = os.stat(db).st_ino
    payload = tmp_path / "waiting.json"
    payload.write_text(json.dumps(prompt("wait", "waiting")))
    paused = PausedEncrypt(db, monkeypatch)
    try:
        with payload.open() as stdin:
            waiter = subprocess.Popen([sys.executable, "-m", "nmem", "record"], stdin=stdin,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=hook_env(home, NMEM_KEY=KEY, NMEM_BUSY_BUDGET_MS="30000"))
        while waiter.poll() is None and not _waits_on(waiter.pid, old):
            time.sleep(0.005)
    finally:
        paused.resume()
    _, err = waiter.communicate(timeout=60)
    assert waiter.returncode == 0 or (waiter.returncode == 4 and "kept in the spool" in err), err
    hook_ok(home, prompt("wait", "after"), NMEM_KEY=KEY)   # drains the spool first
    assert list((home / "spool").glob("*")) == []
    assert sorted(stored_prompts(home)) == sorted(["before", "waiting", "after"])


async def _mcp_round_trip(home: Path, environment: dict[str, str]) -> dict[str, object]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "nmem", "serve"],
                                   env=hook_env(home, CLAUDE_PROJECT_DIR=CWD, **environment), cwd=str(home.parent))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        kept = structured(await session.call_tool("remember", {"content": f"mcp keeps {SECRET}",
                                                               "namespace": "testing"}))
        found = structured(await session.call_tool("recall", {"query": SECRET}))
        return {"kept": kept, "found": found}


@pytest.mark.anyio
@pytest.mark.slow
async def test_mcp_server_on_an_encrypted_database(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hook_ok(home, prompt("m1", "seed"), NMEM_KEY=KEY)
    result = await _mcp_round_trip(home, {"NMEM_KEY": KEY})
    assert str(result["kept"]["urn"]).startswith("nmem://")  # type: ignore[index]
    assert SECRET in json.dumps(result["found"])
    assert SECRET.encode() not in raw_bytes(home / "nmem.db")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_backup_restore_and_export_of_an_encrypted_database(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {"NMEM_KEY": KEY}
    hook_ok(home, prompt("b1", f"before the backup {SECRET}"), **env)
    backup = tmp_path / "copy.db"
    done = subprocess.run([sys.executable, "-m", "nmem", "backup", str(backup)], capture_output=True, text=True,
                          env=hook_env(home, **env), check=False)
    assert done.returncode == 0, done.stderr
    assert SECRET.encode() not in backup.read_bytes() and not backup.read_bytes().startswith(b"SQLite")
    hook_ok(home, prompt("b1", "after the backup"), **env)
    wrong = subprocess.run([sys.executable, "-m", "nmem", "restore", str(backup)], capture_output=True, text=True,
                           env=hook_env(home, NMEM_KEY=OTHER_KEY), check=False)
    assert wrong.returncode == 7 and "key is wrong" in wrong.stderr
    done = subprocess.run([sys.executable, "-m", "nmem", "restore", str(backup)], capture_output=True, text=True,
                          env=hook_env(home, **env), check=False)
    assert done.returncode == 0, done.stderr
    assert stored_prompts(home) == [f"before the backup {SECRET}"]
    # the safety copy of the database before the restore is encrypted too
    for saved in (home / "backups").iterdir():
        assert b"after the backup" not in saved.read_bytes()
    out = tmp_path / "export.jsonl"
    done = subprocess.run([sys.executable, "-m", "nmem", "remember", f"export me {SECRET}"], capture_output=True,
                          text=True, env=hook_env(home, **env), check=False)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([sys.executable, "-m", "nmem", "export", "-o", str(out)], capture_output=True,
                          text=True, env=hook_env(home, **env), check=False)
    assert done.returncode == 0, done.stderr
    assert f"export me {SECRET}" in out.read_text()


def test_a_plain_backup_is_not_restored_into_an_encrypted_database(tmp_path: Path) -> None:
    plain_home, home = tmp_path / "plain", tmp_path / "home"
    hook_ok(plain_home, prompt("p1", "plain"))
    backup = tmp_path / "plain-copy.db"
    done = subprocess.run([sys.executable, "-m", "nmem", "backup", str(backup)], capture_output=True, text=True,
                          env=hook_env(plain_home), check=False)
    assert done.returncode == 0, done.stderr
    hook_ok(home, prompt("e1", "encrypted"), NMEM_KEY=KEY)
    before = (home / "nmem.db").read_bytes()
    done = subprocess.run([sys.executable, "-m", "nmem", "restore", str(backup)], capture_output=True, text=True,
                          env=hook_env(home, NMEM_KEY=KEY), check=False)
    assert done.returncode == 2 and "nmem decrypt" in done.stderr
    assert stored_prompts(home) == ["encrypted"] and (home / "nmem.db").read_bytes()[:100] == before[:100]


def test_an_encrypted_replica_seals_its_lines_and_still_reads_a_plain_one(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path / "remote.git")
    enc = load_settings({"NMEM_HOME": str(tmp_path / "a"), "NMEM_SYNC_REMOTE": str(remote), "NMEM_KEY": KEY})
    plain = load_settings({"NMEM_HOME": str(tmp_path / "b"), "NMEM_SYNC_REMOTE": str(remote)})
    a, b = Service.open(enc), Service.open(plain)
    try:
        a.remember(f"synced {SECRET}", domain="user")
        run_sync(a.store, enc, project="demo")
        assert not any(SECRET in text for text in remote_files(remote).values())  # sealed (docs/sync.md)
        report = run_sync(b.store, plain, project="demo")  # without the key: reported, never applied
        assert report.invalid == 1 and b.recall(SECRET) == []
        b.remember("from the plain side", domain="user")
        run_sync(b.store, plain, project="demo")
        run_sync(a.store, enc, project="demo")
        assert [h.record.content for h in a.recall("plain side")] == ["from the plain side"]
    finally:
        a.close()
        b.close()
    assert SECRET.encode() not in raw_bytes(Path(enc.db_path))
