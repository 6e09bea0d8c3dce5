"""The sync area of `make attack` (bench/attack.py): a hostile or broken git remote.

Every scenario runs real `nmem` processes, one data dir a machine, against a real bare git
remote, and an attacker who writes to that remote with plain git: a poisoned clock, a deeply
nested line, a force-push, a truncated log, far-future deletes from a new device file, two
machines pushing at once (one of them losing the race at the ref update), tiers in the ops,
and an encrypted store whose remote must hold only ciphertext. `tried` counts acknowledged
writes (or ops), `lost` those missing on another machine afterwards, `leaked` plaintext words
found in a sync repository of an encrypted store, `errors` crashes, tracebacks and exit codes
other than the expected ones. The remote-growth row measures what one push adds to the
remote, with this layout (append-only segments) and with the month file the first layout
rewrote on every push, replayed with the same lines through git plumbing.

    .venv/bin/python bench/attack.py --area sync [--quick]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BRANCH = "nmem"
EVIL = "e1111111111111ee"
FAR_MS = 7_258_118_400_000  # 2200-01-01


def git(*args: str, cwd: Path | None = None, check: bool = True) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=120)
    if check and done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


class Machine:
    """One machine: its own data dir, the real `nmem` command, errors counted."""

    def __init__(self, work: Path, name: str, remote: Path, **env: str) -> None:
        self.home = work / name
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("NMEM_")}
        self.env.update(NMEM_HOME=str(self.home), NMEM_SYNC_REMOTE=str(remote), **env)
        self.errors = 0
        self.invalid = 0
        self.warnings: list[str] = []

    def run(self, *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "nmem", *args], capture_output=True, text=True,
                              env=self.env, timeout=600, check=False, cwd=self.home.parent)
        if done.returncode not in ok or "Traceback" in done.stderr:
            self.errors += 1
            print(f"  unexpected: nmem {' '.join(args)[:60]} -> {done.returncode}: {done.stderr.strip()[-300:]}",
                  file=sys.stderr)
        return done

    def remember(self, text: str) -> str | None:
        done = self.run("remember", "--domain", "user", "--format", "json", text)
        return str(json.loads(done.stdout)["id"]) if done.returncode == 0 else None

    def sync(self, *args: str) -> dict[str, Any]:
        done = self.run("sync", "--format", "json", *args)
        try:
            report: dict[str, Any] = json.loads(done.stdout)
        except ValueError:
            return {}
        self.warnings += report.get("warnings", [])
        self.invalid += int(report.get("invalid", 0))
        return report

    def alive(self) -> set[str]:
        done = self.run("export", "--format", "jsonl")
        return {r["uid"] for r in map(json.loads, done.stdout.splitlines())
                if r.get("kind") == "memory" and r.get("deleted_at") is None}


def attacker_push(remote: Path, work: Path, files: dict[str, str], *, reset_to: str | None = None) -> None:
    """What anyone with push access can do with plain git, force included."""
    if work.exists():
        git("fetch", "--quiet", "origin", cwd=work)
        git("reset", "--quiet", "--hard", f"origin/{BRANCH}", cwd=work)
    else:
        git("clone", "--quiet", "--branch", BRANCH, str(remote), str(work))
    if reset_to:
        git("reset", "--quiet", "--hard", reset_to, cwd=work)
    for path, text in files.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(text)
        git("add", path, cwd=work)
    git("-c", "user.name=x", "-c", "user.email=x@x", "commit", "--quiet", "--allow-empty", "-m", "x", cwd=work)
    git("push", "--quiet", "--force", "origin", BRANCH, cwd=work)


def evil_line(wall: int, op: str, uid: str, memory: dict[str, Any], counter: int = 0) -> str:
    from nmem.store import oplog

    return oplog.line_for(oplog.hlc(wall, counter, EVIL), op, uid, None, memory)


def new_remote(work: Path, name: str) -> Path:
    remote = work / f"{name}.git"
    git("init", "--quiet", "--bare", str(remote))
    return remote


def remote_files(remote: Path) -> dict[str, str]:
    names = git("--git-dir", str(remote), "ls-tree", "-r", "--name-only", BRANCH).split()
    return {n: git("--git-dir", str(remote), "show", f"{BRANCH}:{n}") for n in names}


def errors(*machines: Machine) -> int:
    return sum(m.errors for m in machines)


# -- the scenarios ----------------------------------------------------------------------------------------

def clock_poisoning(work: Path, quick: bool) -> tuple[int, int, int, str]:
    remote = new_remote(work, "poison")
    a, b = Machine(work, "pa", remote), Machine(work, "pb", remote)
    a.remember("before the poison")
    a.sync()
    now = int(time.time())
    poison = evil_line(10 ** 13 - 1, "put", "01JH0000000000000000000000", {
        "domain": "user", "namespace": "general", "summary": "p", "content": "poison", "tags": [], "source": None,
        "relates_to": [], "is_pinned": False, "created_at": now, "updated_at": now}, counter=99_999)
    attacker_push(remote, work / "poison-x", {f"devices/{EVIL}/user/2026-01.jsonl": poison + "\n"})
    b.sync()
    written: list[str] = []
    pushed = 0
    for i in range(6 if quick else 16):
        uid = b.remember(f"acknowledged write {i}")
        if uid:
            written.append(uid)
        pushed += int(b.sync().get("pushed", 0))
    a.sync()
    lost = len(set(written) - a.alive())
    quarantined = b.sync().get("quarantined")
    return len(written), lost, errors(a, b), f"pushed {pushed}; poison quarantined on the writer ({quarantined})"


def nested_line(work: Path, quick: bool) -> tuple[int, int, int, str]:
    remote = new_remote(work, "nested")
    a, b = Machine(work, "na", remote), Machine(work, "nb", remote)
    written = [a.remember("before the nested line")]
    a.sync()
    attacker_push(remote, work / "nested-x", {f"devices/{EVIL}/user/2026-01.jsonl": "[" * 200_000 + "\n"})
    syncs = 0
    for i in range(2 if quick else 5):
        written.append(a.remember(f"after the nested line {i}"))
        for machine in (a, b):
            machine.sync()
            syncs += 1
    lost = len({u for u in written if u} - b.alive())
    return (len(written), lost, errors(a, b),
            f"{syncs} syncs exited 0; the line reported as invalid on each machine ({a.invalid}, {b.invalid})")


def force_push(work: Path, quick: bool, truncate: bool) -> tuple[int, int, int, str]:
    name = "trunc" if truncate else "force"
    remote = new_remote(work, name)
    a, b = Machine(work, f"{name}a", remote), Machine(work, f"{name}b", remote)
    written = {a.remember("the first one")}
    a.sync()
    first = git("--git-dir", str(remote), "rev-parse", BRANCH).strip()
    rounds, per = (2, 2) if quick else (4, 8)
    for r in range(rounds):
        for machine in (a, b):
            written |= {machine.remember(f"{machine.home.name} round {r} write {i}") for i in range(per)}
            machine.sync()
    written.discard(None)  # type: ignore[arg-type]
    if truncate:
        files = remote_files(remote)
        target = max((p for p in files if p.startswith("devices/")), key=lambda p: files[p].count("\n"))
        attacker_push(remote, work / f"{name}-x", {target: files[target].splitlines()[0] + "\n"})
    else:
        attacker_push(remote, work / f"{name}-x", {}, reset_to=first)
    restored = sum(int(m.sync().get("restored", 0)) for m in (a, b))
    fresh = Machine(work, f"{name}fresh", remote)
    fresh.sync()
    lost = len(written - fresh.alive())
    warned = sum("lost" in w for w in a.warnings + b.warnings)
    return len(written), lost, errors(a, b, fresh), f"{restored} ops pushed again, {warned} warning(s)"


def far_future_deletes(work: Path, quick: bool) -> tuple[int, int, int, str]:
    remote = new_remote(work, "deletes")
    a, b = Machine(work, "da", remote), Machine(work, "db", remote)
    written = [u for u in (a.remember(f"memory {i} to keep") for i in range(10 if quick else 65)) if u]
    a.sync()
    now = int(time.time())
    lines = [evil_line(FAR_MS + i, "delete", uid, {"domain": "user", "namespace": "context", "created_at": now,
                                                   "deleted_at": now}) for i, uid in enumerate(written)]
    attacker_push(remote, work / "deletes-x", {f"devices/{EVIL}/user/log/0/0/0/0/0/0/0/0.jsonl":
                                               "\n".join(lines) + "\n"})
    report = b.sync()
    a.sync()
    fresh = Machine(work, "dfresh", remote)
    fresh.sync()
    lost = sum(len(set(written) - m.alive()) for m in (a, b, fresh))
    return (len(written), lost, errors(a, b, fresh),
            f"{report.get('quarantined')} deletes quarantined until `nmem sync --accept {EVIL}`")


RACE_HOOK = """#!/bin/sh
[ -e "$GIT_DIR/raced" ] && exit 0
touch "$GIT_DIR/raced"
unset GIT_QUARANTINE_PATH GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES
c=$(git commit-tree "$2^{tree}" -p "$2" -m race)
git update-ref "$1" "$c" "$2"
"""


def concurrent_pushes(work: Path, quick: bool) -> tuple[int, int, int, str]:
    remote = new_remote(work, "race")
    machines = [Machine(work, f"r{i}", remote) for i in range(3)]
    machines[0].remember("seed")
    machines[0].sync()
    hook = remote / "hooks" / "update"
    hook.write_text(RACE_HOOK)
    hook.chmod(0o755)
    written: set[str] = set()
    retried = 0
    for r in range(2 if quick else 5):
        (remote / "raced").unlink(missing_ok=True)  # one push of each round loses the race at the ref update
        written |= {u for m in machines if (u := m.remember(f"{m.home.name} concurrent {r}"))}
        procs = [subprocess.Popen([sys.executable, "-m", "nmem", "sync", "--format", "json"], env=m.env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for m in machines]
        for m, proc in zip(machines, procs, strict=True):
            out, err = proc.communicate(timeout=600)
            if proc.returncode != 0 or "Traceback" in err:
                m.errors += 1
                print(f"  unexpected: concurrent sync -> {proc.returncode}: {err.strip()[-300:]}", file=sys.stderr)
            else:
                retried += int(json.loads(out).get("push_attempts", 0)) > 1
    fresh = Machine(work, "rfresh", remote)
    fresh.sync()
    return (len(written), len(written - fresh.alive()), errors(*machines, fresh),
            f"{retried} syncs pushed again after losing a race")


def tier_in_ops(work: Path, quick: bool) -> tuple[int, int, int, str]:
    remote = new_remote(work, "tier")
    a = Machine(work, "ta", remote)
    a.run("remember", "--domain", "user", "--tier", "hot", "a hot one")
    a.run("remember", "--domain", "user", "--tier", "cold", "a cold one")
    a.sync()
    lines = [json.loads(line) for p, text in remote_files(remote).items() if p.startswith("devices/")
             for line in text.splitlines()]
    with_tier = sum("tier" in line["memory"] for line in lines)
    return len(lines), 0, errors(a) + with_tier, f"{with_tier} ops carry a tier"


def encrypted_store(work: Path, quick: bool) -> tuple[int, int, int, int, str]:
    remote = new_remote(work, "sealed")
    key = os.urandom(32).hex()
    a, b = Machine(work, "ea", remote, NMEM_KEY=key), Machine(work, "eb", remote, NMEM_KEY=key)
    words = [f"SECRETWORD{i}X" for i in range(3 if quick else 10)]
    written = [a.remember(f"the vault holds {w}") for w in words]
    private = a.remember("visible part <private>PRIVATEBLOCKWORD</private>")
    a.sync()
    gone = a.remember("FORGOTTENWORD must vanish")
    a.sync()
    if gone:
        a.run("forget", gone)
    a.sync()
    b.sync()
    leaked = 0
    for repo in (remote, a.home / "sync" / "repo.git", b.home / "sync" / "repo.git"):
        blob = subprocess.run(["git", "--git-dir", str(repo), "cat-file", "--batch-all-objects", "--batch"],
                              capture_output=True, check=False).stdout
        leaked += sum(w.encode() in blob for w in [*words, "PRIVATEBLOCKWORD", "FORGOTTENWORD", "vault"])
    kept = {u for u in [*written, private] if u}
    return len(kept), len(kept - b.alive()), leaked, errors(a, b), "remote, and both local repos, scanned"


# -- remote growth ---------------------------------------------------------------------------------------

def repo_bytes(repo: Path) -> int:
    return sum(f.stat().st_size for f in (repo / "objects").rglob("*") if f.is_file())


def quiet_remote(work: Path, name: str) -> Path:
    """A remote that never packs by itself, so each push's growth is seen as it lands."""
    remote = new_remote(work, name)
    git("--git-dir", str(remote), "config", "gc.auto", "0")
    git("--git-dir", str(remote), "config", "receive.autogc", "false")
    return remote


def packed_bytes(repo: Path) -> int:
    git("--git-dir", str(repo), "gc", "--quiet")
    return repo_bytes(repo)


def growth(work: Path, quick: bool, count: int | None = None) -> str:
    """Bytes one push adds to the remote, pushing `count` memories one by one: the segment layout
    (real nmem sync, in process), and the first layout's month file rewritten on every push."""
    from nmem.config import load_settings
    from nmem.service.api import Service
    from nmem.sync.engine import run_sync

    count = count or (10 if quick else 1000)
    remote = quiet_remote(work, "growth")
    settings = load_settings({"NMEM_HOME": str(work / "growth-home"), "NMEM_SYNC_REMOTE": str(remote)})
    service = Service.open(settings)
    lines: list[str] = []
    try:
        for i in range(count):
            service.remember(f"memory {i}: " + "a typical curated memory of a few hundred bytes " * 6, domain="user")
            lines.append(service.store.sync_outbox()[-1].line)
            before = repo_bytes(remote)
            run_sync(service.store, settings)
            last_new = repo_bytes(remote) - before
    finally:
        service.close()
    new_total = repo_bytes(remote)
    new_packed = packed_bytes(remote)
    old = quiet_remote(work, "growth-old")
    scratch = new_remote(work, "growth-scratch")
    env = {**os.environ, "GIT_DIR": str(scratch), "GIT_AUTHOR_NAME": "n", "GIT_AUTHOR_EMAIL": "n@n",
           "GIT_COMMITTER_NAME": "n", "GIT_COMMITTER_EMAIL": "n@n"}
    parent: list[str] = []
    for i in range(count):
        content = "".join(line + "\n" for line in lines[:i + 1]).encode()
        blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], input=content, capture_output=True, env=env,
                              check=True).stdout.decode().strip()
        index = {**env, "GIT_INDEX_FILE": str(work / "growth-index")}
        subprocess.run(["git", "update-index", "--add", "--cacheinfo", f"100644,{blob},devices/d/user/2026-11.jsonl"],
                       env=index, check=True, capture_output=True)
        tree = subprocess.run(["git", "write-tree"], env=index, capture_output=True, check=True).stdout.decode().strip()
        commit = subprocess.run(["git", "commit-tree", tree, *parent, "-m", "push"], env=env, capture_output=True,
                                check=True).stdout.decode().strip()
        parent = ["-p", commit]
        before = repo_bytes(old)
        subprocess.run(["git", "push", "--quiet", str(old), f"{commit}:refs/heads/{BRANCH}"], env=env, check=True,
                       capture_output=True)
        old_last = repo_bytes(old) - before
    old_total = repo_bytes(old)
    old_packed = packed_bytes(old)
    return (f"{count} memories pushed one by one: the remote grows {new_total / 1e6:.2f} MB with segments "
            f"({new_packed / 1e6:.2f} MB after git gc; last push +{last_new / 1e3:.1f} KB) vs "
            f"{old_total / 1e6:.2f} MB with the month file rewritten ({old_packed / 1e6:.2f} MB after git gc; "
            f"last push +{old_last / 1e3:.1f} KB)")


def scenarios(work: Path, quick: bool) -> Iterator[Any]:
    from attack import Row

    def row(name: str, result: tuple[Any, ...]) -> Any:
        if len(result) == 5:
            tried, lost, leaked, errs, note = result
        else:
            (tried, lost, errs, note), leaked = result, 0
        return Row("sync", name, tried, lost=lost, leaked=leaked, errors=errs, note=note)

    yield row("clock poisoning (op at 9999999999999-99999)", clock_poisoning(work, quick))
    yield row("deeply nested JSON line", nested_line(work, quick))
    yield row("force-pushed remote", force_push(work, quick, truncate=False))
    yield row("truncated log file", force_push(work, quick, truncate=True))
    yield row("far-future deletes from a new device", far_future_deletes(work, quick))
    yield row("three machines pushing at once, one ref race", concurrent_pushes(work, quick))
    yield row("tier in ops", tier_in_ops(work, quick))
    yield row("encrypted store: remote holds ciphertext only", encrypted_store(work, quick))
    note = growth(work, quick)
    print(f"sync remote growth: {note}", file=sys.stderr)
    yield Row("sync", "remote growth per push", 10 if quick else 1000, note=note)
