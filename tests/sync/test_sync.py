"""Memory sync between three replicas through a real bare git remote (docs/sync.md).

Each replica is its own data dir, database and device id, with a clock the test sets; the
remote is `git init --bare`, and every fetch and push goes through the git command line.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from nmem.errors import ConfigError, InvalidArgument, NetworkError, SyncBusy
from nmem.store.sqlite import SqliteStore
from nmem.sync.engine import FORMAT_FILE, domain_path, parse_log_path
from nmem.sync.lock import SyncLock
from store_engines import both_engines
from sync_support import T0, Replica, bare_remote, git, remote_files, remote_lines

__all__ = ["both_engines"]  # every test here runs on SQLite and PostgreSQL


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return bare_remote(tmp_path / "remote.git")


@pytest.fixture
def replicas(tmp_path: Path, remote: Path) -> Iterator[tuple[Replica, Replica, Replica]]:
    trio = (Replica(tmp_path / "a", remote), Replica(tmp_path / "b", remote), Replica(tmp_path / "c", remote))
    yield trio
    for replica in trio:
        replica.close()


def sync_all(*replicas: Replica) -> None:
    """Two rounds: after them every replica has read every other one's pushes."""
    for _ in range(2):
        for replica in replicas:
            replica.sync()


def test_three_devices_have_three_ids_and_each_pushes_only_its_own_files(replicas: tuple[Replica, ...],
                                                                         remote: Path) -> None:
    a, b, c = replicas
    assert len({a.device, b.device, c.device}) == 3
    a.remember("deploys go through the staging branch first", namespace="decisions")
    b.remember("sqlite WAL readers never block the writer", namespace="learnings", domain="project:shop")
    sync_all(a, b, c)
    logs = [name for name in remote_files(remote) if name.startswith("devices/")]
    assert sorted(logs) == sorted([f"devices/{a.device}/user/log/0/0/0/0/0/0/0/0.jsonl",
                                   f"devices/{b.device}/project/shop/log/0/0/0/0/0/0/0/0.jsonl"])
    assert a.state() == b.state() == c.state() and len(a.state()) == 2


def test_create_update_pin_and_forget_reach_every_replica(replicas: tuple[Replica, ...]) -> None:
    a, b, c = replicas
    uid = a.remember("run migrations before the deploy", namespace="gotchas", tags="deploy")
    sync_all(a, b, c)
    assert c.content(uid) == "run migrations before the deploy"
    b.clock.advance(10)
    b.service.update(uid, content="run migrations before the deploy, never after")
    b.service.pin(uid)
    sync_all(b, a, c)
    memory = c.service.get_memory(uid)
    assert (memory.content, memory.is_pinned, memory.tags) == ("run migrations before the deploy, never after",
                                                               True, ["deploy"])
    c.clock.advance(20)
    c.service.forget(uid)
    sync_all(c, a, b)
    assert a.content(uid) is None and b.content(uid) is None
    assert a.state() == b.state() == c.state()


def test_a_sync_with_nothing_new_applies_nothing_and_force_rereads_without_changing_anything(
        replicas: tuple[Replica, ...]) -> None:
    a, b, _ = replicas
    for n in range(3):
        a.remember(f"fact number {n}")
    a.sync()
    first = b.sync()
    assert (first.pulled, first.applied) == (3, 3)
    again = b.sync()
    assert (again.files_read, again.pulled, again.applied, again.pushed) == (0, 0, 0, 0)
    before = b.state()
    forced = b.sync(force=True)
    assert (forced.pulled, forced.applied, forced.pushed, forced.conflicts) == (3, 0, 0, 0)
    assert b.state() == before


def test_concurrent_edits_of_one_memory_converge_on_the_later_clock_and_the_loser_stays_in_the_log(
        replicas: tuple[Replica, ...], remote: Path) -> None:
    a, b, c = replicas
    uid = a.remember("cache TTL is 60 s")
    sync_all(a, b, c)
    a.clock.advance(5)
    a.service.update(uid, content="cache TTL is 30 s")       # neither has seen the other's edit
    b.clock.advance(9)
    b.service.update(uid, content="cache TTL is 120 s")      # later by the clock: wins
    report_a = a.sync()
    report_b = b.sync()
    assert report_b.conflicts == 1
    conflict = report_b.conflict_list[0]
    assert (conflict["uid"], conflict["kept_device"], conflict["dropped_device"]) == (uid, b.device, a.device)
    sync_all(a, b, c)
    assert {r.content(uid) for r in replicas} == {"cache TTL is 120 s"}
    assert a.state() == b.state() == c.state()
    contents = [line["memory"].get("content") for line in remote_lines(remote)]
    assert "cache TTL is 30 s" in contents  # the losing write is kept in its device's log
    assert report_a.pushed == 1


def test_concurrent_deletes_of_one_memory_leave_one_tombstone_everywhere(replicas: tuple[Replica, ...]) -> None:
    a, b, c = replicas
    uid = a.remember("the old build server is build-01")
    sync_all(a, b, c)
    a.clock.advance(3)
    a.service.forget(uid)
    b.clock.advance(4)
    b.service.forget(uid)
    sync_all(a, b, c)
    assert {r.content(uid) for r in replicas} == {None}
    assert a.state() == b.state() == c.state()


def test_a_delete_after_an_edit_wins_and_an_edit_after_a_delete_brings_the_memory_back(
        replicas: tuple[Replica, ...]) -> None:
    a, b, c = replicas
    first = a.remember("feature flags live in flags.yaml")
    second = a.remember("the API rate limit is 100/min")
    sync_all(a, b, c)
    # first: edited on a, deleted later on b -> deleted
    a.clock.advance(5)
    a.service.update(first, content="feature flags live in config/flags.yaml")
    b.clock.advance(8)
    b.service.forget(first)
    # second: deleted on a, edited later on b (which had not seen the delete) -> the edit survives
    a.service.forget(second)
    b.service.update(second, content="the API rate limit is 500/min")
    sync_all(a, b, c)
    assert {r.content(first) for r in replicas} == {None}
    assert {r.content(second) for r in replicas} == {"the API rate limit is 500/min"}
    assert a.state() == b.state() == c.state()


def test_an_edit_made_offline_waits_in_the_outbox_and_goes_out_with_the_next_sync(
        tmp_path: Path, replicas: tuple[Replica, ...]) -> None:
    a, b, _ = replicas
    uid = a.remember("integration tests need docker")
    a.sync()
    b.sync()
    a.clock.advance(60)
    a.service.update(uid, content="integration tests need docker and 4 GB of RAM")
    offline = tmp_path / "unplugged-drive" / "remote.git"
    with pytest.raises(NetworkError) as err:
        a.sync(remote=str(offline))
    assert err.value.exit_code == 5
    assert str(offline) in err.value.message
    assert a.service.store.sync_pending()
    report = a.sync()
    assert (report.pushed, report.pending) == (1, 0)
    b.sync()
    assert b.content(uid) == "integration tests need docker and 4 GB of RAM"


def test_a_push_the_remote_refuses_loses_nothing_and_the_retry_pushes_each_write_once(
        replicas: tuple[Replica, ...], remote: Path) -> None:
    a, b, _ = replicas
    a.remember("first write")
    a.sync()
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'pushes are frozen today' >&2\nexit 1\n")
    hook.chmod(hook.stat().st_mode | stat.S_IEXEC)
    uid = a.remember("second write, made while the remote refuses pushes")
    with pytest.raises(NetworkError, match="pushes are frozen today"):
        a.sync()
    assert a.service.store.sync_pending()
    hook.unlink()
    assert a.sync().pushed == 1
    uids = [line["uid"] for line in remote_lines(remote)]
    assert len(uids) == len(set(uids)) == 2 and uid in uids
    assert a.sync().pushed == 0
    b.sync()
    assert b.content(uid) == "second write, made while the remote refuses pushes"


def test_a_push_that_landed_but_whose_answer_was_lost_is_not_pushed_twice(replicas: tuple[Replica, ...],
                                                                          remote: Path) -> None:
    """The remote updates its branch, then the connection dies before git push hears back."""
    a, b, _ = replicas
    hook = remote / "hooks" / "reference-transaction"
    hook.write_text('#!/bin/sh\n[ "$1" = committed ] && kill -9 $PPID\nexit 0\n')
    hook.chmod(hook.stat().st_mode | stat.S_IEXEC)
    uid = a.remember("written just before the connection dropped")
    with pytest.raises(NetworkError):
        a.sync()
    assert [line["uid"] for line in remote_lines(remote)] == [uid]  # it did land
    hook.unlink()
    report = a.sync()
    assert (report.pushed, report.pending) == (0, 0)  # seen on the remote, so marked pushed
    assert [line["uid"] for line in remote_lines(remote)] == [uid]
    b.sync()
    assert b.content(uid) == "written just before the connection dropped"


def test_a_push_overtaken_by_another_device_is_rebuilt_on_the_new_tip(replicas: tuple[Replica, ...],
                                                                       remote: Path) -> None:
    a, b, c = replicas
    mine = a.remember("a's write")
    theirs = b.remember("b's write")
    overtaken = []

    def b_pushes_first(event: dict[str, object]) -> None:
        data = event["data"]
        if event["event"] == "progress" and isinstance(data, dict) and data["phase"] == "push" and not overtaken:
            overtaken.append(b.sync())

    report = a.sync(progress=b_pushes_first)
    assert overtaken and overtaken[0].pushed == 1
    assert (report.push_attempts, report.pushed, report.applied) == (2, 1, 1)
    assert sorted(line["uid"] for line in remote_lines(remote)) == sorted([mine, theirs])
    c.sync()
    assert c.content(mine) == "a's write" and c.content(theirs) == "b's write"


def test_clock_skew_never_reorders_an_edit_after_one_it_has_seen(tmp_path: Path, remote: Path) -> None:
    ahead = Replica(tmp_path / "ahead", remote, now=T0 + 3600)     # an hour fast
    behind = Replica(tmp_path / "behind", remote, now=T0 - 3600)   # an hour slow
    try:
        uid = ahead.remember("the staging DB is db-stage-1")
        ahead.sync()
        report = behind.sync()  # two hours apart, beyond sync.max_skew: kept aside until accepted
        assert report.quarantined == 1 and report.warnings and ahead.device in report.warnings[0]
        assert uid not in behind.state()
        report = behind.sync(accept=[ahead.device])
        assert report.accepted == 1 and report.quarantined == 0 and uid in behind.state()
        assert behind.service.store.sync_outbox() == []  # accepting did not drag this clock ahead
        behind.clock.advance(60)  # still far behind the other's stamp
        behind.service.update(uid, content="the staging DB is db-stage-2")
        behind.sync()
        ahead.sync()
        assert ahead.content(uid) == behind.content(uid) == "the staging DB is db-stage-2"
        assert ahead.state() == behind.state()
    finally:
        ahead.close()
        behind.close()


def test_the_outbox_is_written_in_the_same_transaction_as_the_memory(replicas: tuple[Replica, ...]) -> None:
    a = replicas[0]
    store = a.service.store
    with pytest.raises(RuntimeError), store.transaction():
        a.remember("rolled back with its transaction")
        raise RuntimeError("abort")
    assert a.state() == {} and a.outbox() == []
    uid = a.remember("kept")
    a.service.update(uid, content="kept and edited")

    def ops() -> list[tuple[str, int, int]]:
        return [(row["uid"], row["line"].count('"op": "put"'), row["line"].count('"op": "delete"'))
                for row in a.outbox()]

    assert ops() == [(uid, 1, 0), (uid, 1, 0)]
    versions = [row["version"] for row in a.outbox()]
    a.service.forget(uid)
    assert ops() == [(uid, 0, 1)]  # the tombstone supersedes the puts, which held the text
    last = a.outbox()[0]["version"]
    assert versions == sorted(versions) and last > versions[-1]
    assert a.service.store.get_memory(uid) is not None
    assert a.state()[uid][-1] == last


def test_memories_from_before_sync_existed_are_logged_by_the_first_sync(tmp_path: Path, remote: Path) -> None:
    home = tmp_path / "old"
    home.mkdir()
    old = SqliteStore(str(home / "nmem.db"))
    old.migrate_to(8)
    old.close()
    with sqlite3.connect(home / "nmem.db") as raw:
        raw.execute("INSERT INTO memories (uid, domain, namespace, summary, content, created_at, updated_at) "
                    "VALUES ('01JQ0000000000000000000000', 'user', 'learnings', 'old', 'an old learning', 1, 1)")
    a = Replica(home, remote)
    b = Replica(tmp_path / "b", remote)
    try:
        report = a.sync()
        assert (report.logged, report.pushed) == (1, 1)
        b.sync()
        assert b.content("01JQ0000000000000000000000") == "an old learning"
    finally:
        a.close()
        b.close()


def test_invalid_and_half_written_lines_are_skipped_and_a_completed_line_is_applied_later(
        tmp_path: Path, replicas: tuple[Replica, ...], remote: Path) -> None:
    a, b, _ = replicas
    uid = a.remember("a valid write")
    a.sync()
    log = next(name for name in remote_files(remote) if name.startswith("devices/"))
    valid = remote_files(remote)[log]
    forged = valid.replace(uid, "01JQ0000000000000000000001").rstrip("\n")
    work = tmp_path / "hand-edit"
    git("clone", "--quiet", "--branch", "nmem", str(remote), str(work))
    (work / log).write_text(valid + "{not json}\n" + forged[:40], encoding="utf-8")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-am", "torn", cwd=work)
    git("push", "--quiet", "origin", "nmem", cwd=work)
    report = b.sync()
    assert (report.applied, report.invalid) == (1, 1)
    assert report.invalid_lines[0]["reason"] == "not JSON"
    (work / log).write_text(valid + "{not json}\n" + forged + "\n", encoding="utf-8")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-am", "completed", cwd=work)
    git("push", "--quiet", "origin", "nmem", cwd=work)
    report = b.sync()
    assert (report.pulled, report.applied, report.invalid) == (1, 1, 0)
    assert b.content("01JQ0000000000000000000001") == "a valid write"


def test_a_line_in_another_devices_file_or_domain_is_refused(tmp_path: Path, replicas: tuple[Replica, ...],
                                                             remote: Path) -> None:
    a, b, _ = replicas
    a.remember("a user memory")
    a.sync()
    log = next(name for name in remote_files(remote) if name.startswith("devices/"))
    work = tmp_path / "forger"
    git("clone", "--quiet", "--branch", "nmem", str(remote), str(work))
    impostor = work / "devices" / "feedfacefeedface" / "user" / "2026-09.jsonl"
    impostor.parent.mkdir(parents=True)
    impostor.write_text(remote_files(remote)[log], encoding="utf-8")          # a's clock in another file
    other_domain = work / "devices" / a.device / "org" / "2026-09.jsonl"
    other_domain.parent.mkdir(parents=True)
    other_domain.write_text(remote_files(remote)[log], encoding="utf-8")     # a user memory in org's file
    git("add", ".", cwd=work)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "forged", cwd=work)
    git("push", "--quiet", "origin", "nmem", cwd=work)
    report = b.sync()
    assert (report.applied, report.invalid) == (1, 2)
    assert sorted(i["reason"].split(" ")[0] for i in report.invalid_lines) == ["clock", "domain"]


def test_domains_narrow_what_a_sync_pushes_and_fetches(replicas: tuple[Replica, ...]) -> None:
    a, b, _ = replicas
    user = a.remember("prefers tabs", domain="user")
    shop = a.remember("shop uses postgres 16", domain="project:shop")
    report = a.sync(domains=["user"])
    assert (report.pushed, report.pending) == (1, 1)
    assert a.sync(domains=["project:*"]).pushed == 1
    only_shop = b.sync(fetch=True, push=False, domains=["project:shop"])
    assert only_shop.applied == 1
    assert b.service.store.get_memory(user) is None and b.content(shop) == "shop uses postgres 16"
    assert b.sync().applied == 1
    assert b.content(user) == "prefers tabs"
    with pytest.raises(InvalidArgument):
        b.sync(domains=["everything"])


def test_the_sync_domains_setting_keeps_a_domain_local(tmp_path: Path, remote: Path) -> None:
    a = Replica(tmp_path / "a", remote, NMEM_SYNC_DOMAINS="user")
    try:
        a.remember("personal", domain="user")
        a.remember("work only", domain="org")
        assert (a.sync().pushed, a.sync().pending) == (1, 1)
        assert all(line["memory"]["domain"] == "user" for line in remote_lines(remote))
    finally:
        a.close()


def test_push_only_does_not_apply_other_devices_writes(replicas: tuple[Replica, ...]) -> None:
    a, b, _ = replicas
    theirs = a.remember("a's memory")
    a.sync()
    b.remember("b's memory")
    report = b.sync(fetch=False, push=True)
    assert (report.pushed, report.applied) == (1, 0)
    assert b.service.store.get_memory(theirs) is None


def test_a_remote_in_a_newer_sync_format_is_refused(tmp_path: Path, replicas: tuple[Replica, ...],
                                                    remote: Path) -> None:
    a = replicas[0]
    a.remember("x")
    a.sync()
    work = tmp_path / "future"
    git("clone", "--quiet", "--branch", "nmem", str(remote), str(work))
    (work / FORMAT_FILE).write_text('{"format": 3}\n')
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-am", "v3", cwd=work)
    git("push", "--quiet", "origin", "nmem", cwd=work)
    with pytest.raises(ConfigError, match="format 3"):
        a.sync()


def test_no_remote_is_a_configuration_error(tmp_path: Path) -> None:
    lonely = Replica(tmp_path / "lonely", "")
    try:
        with pytest.raises(ConfigError, match="no sync remote") as err:
            lonely.sync()
        assert err.value.exit_code == 3
    finally:
        lonely.close()


def test_only_one_sync_runs_at_a_time(replicas: tuple[Replica, ...]) -> None:
    a = replicas[0]
    a.remember("waits for the running sync")
    held = SyncLock(a.settings.home)
    assert held.acquire()
    try:
        with pytest.raises(SyncBusy):
            a.sync(wait=0)
        assert a.service.store.sync_pending()
    finally:
        held.release()
    assert a.sync().pushed == 1


def test_stale_git_lock_files_from_a_killed_sync_are_cleared(replicas: tuple[Replica, ...]) -> None:
    a = replicas[0]
    a.remember("before the crash")
    a.sync()
    repo = Path(a.settings.home) / "sync" / "repo.git"
    (repo / "refs" / "remotes" / "sync").mkdir(parents=True, exist_ok=True)
    stale = repo / "refs" / "remotes" / "sync" / "nmem.lock"
    stale.write_text("")
    (repo / "index.lock").write_text("")
    a.remember("after the crash")
    assert a.sync().pushed == 1
    assert not stale.exists()


def test_the_private_repository_and_lock_are_private(replicas: tuple[Replica, ...]) -> None:
    a = replicas[0]
    a.sync()
    sync_dir = Path(a.settings.home) / "sync"
    assert stat.S_IMODE(os.stat(sync_dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(sync_dir / "lock").st_mode) == 0o600


@pytest.mark.parametrize(("domain", "path"), [("user", "user"), ("org", "org"), ("project:shop", "project/shop"),
                                              ("project:../../etc", "project/%2E.%2F..%2Fetc"),
                                              ("project:..", "project/%2E."),
                                              ("project:a b", "project/a%20b")])
def test_domain_paths_are_one_safe_segment_and_read_back(domain: str, path: str) -> None:
    assert domain_path(domain) == path
    assert parse_log_path(f"devices/0123abcd/{path}/2026-09.jsonl") == ("0123abcd", domain)
    assert parse_log_path(f"devices/0123abcd/{path}/notes.txt") is None
    assert parse_log_path(f"devices/NOT-A-DEVICE/{path}/2026-09.jsonl") is None


def test_a_forgotten_memory_leaves_no_text_in_any_replicas_file(replicas: tuple[Replica, ...]) -> None:
    """Forgetting means gone, with sync too: the outbox lines that held the text go with it, on the
    device that forgot and on the devices the tombstone reaches (the remote's history keeps what was
    pushed before; docs/sync.md says so)."""
    a, b, _ = replicas
    word = "quokkabrine"

    def raw(replica: Replica) -> bytes:
        db = Path(replica.settings.db_path)
        wal = db.with_name(db.name + "-wal")
        return db.read_bytes() + (wal.read_bytes() if wal.exists() else b"")

    uid = a.remember(f"the staging vault hint is {word}")
    sync_all(a, b)
    assert word.encode() in raw(a) and word.encode() in raw(b)
    a.clock.advance(10)
    a.service.forget(uid)
    sync_all(a, b)
    for replica in (a, b):
        assert [row["line"] for row in replica.outbox() if word in row["line"]] == []
        assert word.encode() not in raw(replica), replica.device
    assert a.state() == b.state()
