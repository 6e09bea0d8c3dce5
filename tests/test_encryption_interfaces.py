"""Every interface on an encrypted database: hooks (and hooks racing `nmem encrypt`), the CLI,
MCP over stdio with the SDK's client, backup/restore, export and sync."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from fixtures.harness import event, hook, hook_env, hook_ok
from mcp_support import CWD, structured
from nmem.config import load_settings
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
