"""Sync against a hostile or broken remote (issue 20): whoever can push to it, a bad clock or a
force-push must not lose or erase data. Real bare git remotes, real replicas on both engines."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nmem.store import oplog
from nmem.sync.engine import FORMAT_FILE, segment_path
from store_engines import both_engines, pg_unavailable, schema_url, sql_rows
from sync_support import BRANCH, T0, Replica, bare_remote, git, remote_files

__all__ = ["both_engines"]

EVIL = "e1111111111111ee"
FAR = 7_258_118_400_000  # 2200-01-01 in milliseconds


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return bare_remote(tmp_path / "remote.git")


@pytest.fixture
def make(tmp_path: Path, remote: Path, engine: str) -> Iterator[Callable[..., Replica]]:
    """Replicas on the test's engine: on PostgreSQL each gets a schema of its own."""
    made: list[Replica] = []
    schemas: list[str] = []

    def replica(name: str, **settings: str) -> Replica:
        if engine == "postgres":
            reason = pg_unavailable()
            if reason:
                pytest.skip(reason)
            import psycopg

            schema = f"nmem_sync_{name}_{os.urandom(6).hex()}"
            with psycopg.connect(os.environ["NMEM_TEST_PG"], autocommit=True) as conn:
                conn.execute(f"CREATE SCHEMA {schema}")
            schemas.append(schema)
            settings["NMEM_STORE_URL"] = schema_url(os.environ["NMEM_TEST_PG"], schema)
        r = Replica(tmp_path / name, remote, **settings)
        made.append(r)
        return r

    yield replica
    for r in made:
        r.close()
    if schemas:
        import psycopg

        with psycopg.connect(os.environ["NMEM_TEST_PG"], autocommit=True) as conn:
            for schema in schemas:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def alive(r: Replica) -> dict[str, str]:
    """uid → content of every memory not forgotten, on either engine."""
    return {str(uid): str(content) for uid, content in
            sql_rows(r.service.store, "SELECT uid, content FROM memories WHERE deleted_at IS NULL")}


def push_as_attacker(remote: Path, work: Path, files: dict[str, str], *, reset_to: str | None = None,
                     remove: tuple[str, ...] = ()) -> None:
    """Write files on the sync branch with plain git, as anyone with push access could;
    `reset_to` rewinds the branch first (a force-push)."""
    if not work.exists():
        git("clone", "--quiet", "--branch", BRANCH, str(remote), str(work))
    else:
        git("fetch", "--quiet", "origin", cwd=work)
        git("reset", "--quiet", "--hard", f"origin/{BRANCH}", cwd=work)
    if reset_to:
        git("reset", "--quiet", "--hard", reset_to, cwd=work)
    for path in remove:
        git("rm", "--quiet", "-r", path, cwd=work)
    for path, text in files.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(text)
        git("add", path, cwd=work)
    git("-c", "user.name=x", "-c", "user.email=x@x", "commit", "--quiet", "--allow-empty", "-m", "attack", cwd=work)
    git("push", "--quiet", "--force", "origin", BRANCH, cwd=work)


def evil_line(wall: int, op: str, uid: str, memory: dict[str, object], counter: int = 0) -> str:
    return oplog.line_for(oplog.hlc(wall, counter, EVIL), op, uid, None, memory)


def test_far_future_ops_are_quarantined_and_never_poison_the_clock(make: Callable[..., Replica],
                                                                    remote: Path, tmp_path: Path) -> None:
    a, b = make("a"), make("b")
    uids = [a.remember(f"fact number {i} about the deploy") for i in range(5)]
    a.sync()
    created = int(T0)
    deletes = [evil_line(FAR + i, oplog.DELETE, uid, {"domain": "user", "namespace": "general",
                                                      "created_at": created, "deleted_at": created})
               for i, uid in enumerate(uids)]
    poison = evil_line(10 ** 13 - 1, oplog.PUT, "01JH0000000000000000000000", {
        "domain": "user", "namespace": "general", "summary": "x", "content": "poison", "tags": [],
        "source": None, "relates_to": [], "is_pinned": False, "created_at": created, "updated_at": created},
        counter=oplog.COUNTER_MAX)
    push_as_attacker(remote, tmp_path / "evil", {f"devices/{EVIL}/user/2026-09.jsonl":
                                                 "\n".join([*deletes, poison]) + "\n"})
    report = b.sync()
    assert report.quarantined == 6 and report.applied == 5 and EVIL in report.warnings[-1]
    assert set(alive(b)) == set(uids)
    written = [b.remember(f"written after the poison {i}") for i in range(16)]
    assert b.sync().pushed == 16 and b.sync().quarantined == 6  # still kept aside, reported each time
    a.sync()
    assert set(alive(a)) == set(uids) | set(written)  # all 16 reached the other machine
    wall = sql_rows(b.service.store, "SELECT wall FROM sync_state")[0][0]
    assert int(str(wall)) <= (T0 + 300) * 1000
    accepted = b.sync(accept=[EVIL])
    assert accepted.accepted == 6 and accepted.quarantined == 0
    assert set(alive(b)) == set(written) | {"01JH0000000000000000000000"}


def test_a_deeply_nested_line_is_skipped_and_reported(make: Callable[..., Replica], remote: Path,
                                                       tmp_path: Path) -> None:
    a, b = make("a"), make("b")
    kept = a.remember("the nested line must not stop this one")
    a.sync()
    push_as_attacker(remote, tmp_path / "evil", {f"devices/{EVIL}/user/2026-09.jsonl": "[" * 200_000 + "\n",
                                                 f"devices/{EVIL}/user/log/0/0/0/0/0/0/0/0.jsonl":
                                                 '{"v": 1, "hlc": ' + "[" * 100_000 + "\n"})
    report = b.sync()
    assert report.invalid == 2 and {i["reason"] for i in report.invalid_lines} >= {"nested too deeply"}
    assert kept in alive(b)
    a.remember("later")
    assert a.sync().pushed == 1 and len(alive(b)) == 1 and b.sync().applied == 1


def test_a_force_push_or_a_truncation_is_detected_and_repaired(make: Callable[..., Replica], remote: Path,
                                                              tmp_path: Path) -> None:
    a, b = make("a"), make("b")
    first = a.remember("first memory")
    a.sync()
    start = git("--git-dir", str(remote), "rev-parse", BRANCH).strip()
    written = {first}
    for round_ in range(3):
        written |= {a.remember(f"a writes {round_}-{i}") for i in range(3)}
        written |= {b.remember(f"b writes {round_}-{i}") for i in range(3)}
        a.sync()
        b.sync()
    push_as_attacker(remote, tmp_path / "evil", {}, reset_to=start)  # a force-push to an old commit
    report = a.sync()
    assert report.restored == 9 and "lost 9" in report.warnings[0] and report.pushed == 9
    assert b.sync().restored == 9
    assert set(alive(synced(make("fresh1")))) == written
    # a truncation: one of a's segments cut down to its first line
    files = remote_files(remote)
    own = sorted(p for p in files if p.startswith(f"devices/{a.device}/") and files[p].count("\n") > 1)
    push_as_attacker(remote, tmp_path / "evil", {own[0]: files[own[0]].splitlines()[0] + "\n"})
    report = a.sync()
    assert report.restored == files[own[0]].count("\n") - 1 and report.warnings
    assert set(alive(synced(make("fresh3")))) == written


def synced(r: Replica) -> Replica:
    r.sync()
    return r


def test_a_push_that_races_another_at_the_ref_update_is_retried(make: Callable[..., Replica],
                                                                remote: Path) -> None:
    a, b = make("a"), make("b")
    a.remember("the first push")
    a.sync()
    hook = remote / "hooks" / "update"
    # Another push lands between the remote's checks and its ref update, once: git then answers
    # "cannot lock ref ...: is at X but expected Y".
    hook.write_text("#!/bin/sh\n"
                    '[ -e "$GIT_DIR/raced" ] && exit 0\n'
                    'touch "$GIT_DIR/raced"\n'
                    "unset GIT_QUARANTINE_PATH GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES\n"
                    'c=$(git commit-tree "$2^{tree}" -p "$2" -m race)\n'
                    'git update-ref "$1" "$c" "$2"\n')
    hook.chmod(0o755)
    b.remember("the racing push")
    report = b.sync()
    assert report.pushed == 1 and report.push_attempts == 2
    assert (remote / "raced").exists()
    assert len(alive(synced(make("fresh")))) == 2


def test_operations_carry_no_tier(make: Callable[..., Replica], remote: Path) -> None:
    a = make("a")
    a.remember("tiers are a local matter")
    a.sync()
    lines = [json.loads(line) for path, text in remote_files(remote).items() if path.startswith("devices/")
             for line in text.splitlines()]
    assert lines and all("tier" not in line["memory"] for line in lines)


def test_the_first_layout_is_still_read_and_writing_moves_forward(make: Callable[..., Replica], remote: Path,
                                                                  tmp_path: Path) -> None:
    created = int(T0)
    old = evil_line(int(T0 * 1000), oplog.PUT, "01JH0000000000000000000001", {
        "domain": "project:shop", "namespace": "decisions", "summary": "s", "content": "from the old layout",
        "tags": [], "source": None, "relates_to": [], "tier": "hot", "is_pinned": False, "created_at": created,
        "updated_at": created})
    git("init", "--quiet", "-b", BRANCH, str(tmp_path / "old"))
    push_old = tmp_path / "old"
    (push_old / FORMAT_FILE).write_text('{"format": 1}\n')
    (push_old / "devices" / EVIL / "project" / "shop").mkdir(parents=True)
    (push_old / "devices" / EVIL / "project" / "shop" / "2026-09.jsonl").write_text(old + "\n")
    git("add", "-A", cwd=push_old)
    git("-c", "user.name=x", "-c", "user.email=x@x", "commit", "--quiet", "-m", "v1", cwd=push_old)
    git("push", "--quiet", str(remote), BRANCH, cwd=push_old)
    a = make("a")
    assert a.sync().applied == 1 and alive(a) == {"01JH0000000000000000000001": "from the old layout"}
    a.remember("new")
    a.sync()
    files = remote_files(remote)
    assert json.loads(files[FORMAT_FILE])["format"] == oplog.LAYOUT
    assert files[f"devices/{EVIL}/project/shop/2026-09.jsonl"] == old + "\n"
    assert segment_path(a.device, "user", 0) in files


def test_two_edits_within_one_second_order_by_time(make: Callable[..., Replica]) -> None:
    a = make("a")
    a.service.clock = time.time
    uid = a.remember("first")
    time.sleep(0.27)
    a.service.update(uid, content="second")
    walls = [int(op.version[:13]) for op in a.service.store.sync_outbox()]
    assert len(walls) == 2 and walls[1] - walls[0] >= 200  # not the same second, told apart by device id


def test_a_write_clocked_after_its_second_stays_last_in_that_second() -> None:
    """Under load the clock can pass the write's second between stamping and clocking: the write
    then takes that second's last millisecond, so it still orders after an earlier write of it."""
    second = int(time.time()) - 1
    assert oplog.now_ms(second) == second * 1000 + 999
    assert oplog.now_ms(second + 60) == (second + 60) * 1000   # a stamp ahead of the clock: its start


def test_an_encrypted_store_pushes_only_ciphertext(tmp_path: Path, remote: Path, engine: str) -> None:
    if engine != "sqlite":
        pytest.skip("encryption at rest is SQLCipher's: SQLite only")
    key = os.urandom(32).hex()
    a = Replica(tmp_path / "a", remote, NMEM_KEY=key)
    b = Replica(tmp_path / "b", remote, NMEM_KEY=key)
    stranger = Replica(tmp_path / "c", remote)
    try:
        uid = a.remember("the vault word is PLUMAGE", domain="project:secretproj")
        gone = a.remember("forgotten text TANGERINE")
        a.sync()
        a.service.forget(gone)
        a.sync()
        assert b.sync().applied == 3 and b.content(uid) == "the vault word is PLUMAGE"
        for repo in (remote, tmp_path / "a" / "sync" / "repo.git", tmp_path / "b" / "sync" / "repo.git"):
            objects = subprocess.run(["git", "--git-dir", str(repo), "cat-file", "--batch-all-objects", "--batch"],
                                     capture_output=True, check=True).stdout
            for plain in (b"PLUMAGE", b"TANGERINE", b"secretproj", uid.encode(), b'"op"'):
                assert plain not in objects, (repo, plain)
        report = stranger.sync()  # no key: every line is reported, none applied
        assert report.applied == 0 and report.invalid == 3
    finally:
        for r in (a, b, stranger):
            r.close()


def test_every_text_field_of_a_pulled_memory_passes_the_privacy_filter(make: Callable[..., Replica],
                                                                      remote: Path, tmp_path: Path) -> None:
    """A line from another device (an older nmem, a hand-edited log, anyone who can push) is
    untrusted: a secret in its tags, source or links is redacted before it is stored, as in its
    content and summary."""
    token = "ghp_R4nd0mT0k3nV4lu3Abcdefghijklmnop1234"
    key = "AKIAQYLPMN5HHHFPZAM2"
    a, b = make("a"), make("b")
    a.remember("the remote's first line")
    a.sync()
    created = int(T0)
    line = evil_line(created * 1000, oplog.PUT, "01JH0000000000000000000001", {
        "domain": "user", "namespace": "general", "summary": f"deploy with {token}",
        "content": f"the deploy token is {token}", "tags": [f"token:{token}", key],
        "source": f"https://x:{token}@git.example.com/repo", "relates_to": [f"nmem://user/general/{key}"],
        "is_pinned": False, "created_at": created, "updated_at": created})
    push_as_attacker(remote, tmp_path / "evil", {f"devices/{EVIL}/user/log/0/0/0/0/0/0/0/0.jsonl": line + "\n"})
    report = b.sync()
    assert report.applied == 2 and report.invalid == 0
    memory = b.service.store.get_memory("01JH0000000000000000000001")
    assert memory is not None
    fields = json.dumps([memory.content, memory.summary, memory.tags, memory.source, memory.relates_to])
    assert "[REDACTED:" in fields and token not in fields and key not in fields, fields
    stored = b"".join(p.read_bytes() for p in b.home.iterdir() if p.name.startswith("nmem.db"))
    if stored:  # the SQLite file and its WAL (PostgreSQL keeps its rows elsewhere)
        assert token.encode() not in stored and key.encode() not in stored
