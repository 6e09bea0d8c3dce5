"""`nmem sync`: fetch the other devices' logs and apply them, push this device's outbox.

docs/sync.md is the design. In short: every device appends the operations of its memory
writes to its own files under `devices/<device>/` on the remote's sync branch; a replica
applies every operation whose version beats the memory's current one, so its state is a
fold of the logs that does not depend on the order they arrive in. Progress goes to an
optional callback as streaming-API events (`start`, `progress`, `result`, `complete`,
`error`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote, unquote

from nmem import jsonlite
from nmem.capture.privacy import scrub_value
from nmem.config import Settings, matches_any
from nmem.errors import ConfigError, InvalidArgument, NmemError, SyncBusy
from nmem.models import Record
from nmem.store import FileMark, OutboxOp, oplog
from nmem.store.keys import database_key
from nmem.store.protocol import Store
from nmem.sync.git import GitRepo
from nmem.sync.lock import SyncLock, mark_synced, sync_dir
from nmem.sync.seal import Sealer, SealError

Progress = Callable[[dict[str, Any]], None]

LOG_ROOT = "devices"
SEGMENT_DIR = "log"
SEGMENT_DIGITS = 8
SEALED = "sealed"
FORMAT_FILE = "nmem-sync.json"
QUARANTINE_FILE = "quarantine.jsonl"
PUSH_ATTEMPTS = 5
LISTED = 50           # conflicts and invalid lines listed in a report (all are counted)


# -- where a domain's operations live --------------------------------------------------------------

def domain_path(domain: str) -> str:
    """`user`, `org`, or `project/<name>` with the name %-encoded to one safe path segment."""
    if domain in ("user", "org"):
        return domain
    name = domain.removeprefix("project:")
    encoded = quote(name, safe="-_")
    if encoded.startswith("."):
        encoded = "%2E" + encoded[1:]  # never `.` or `..` as a path segment
    return f"project/{encoded}"


def segment_path(device: str, domain: str | None, number: int) -> str:
    """Segment `number` of a device's log for `domain` (None: the sealed log of an encrypted store).
    One hex digit a directory level keeps every tree a push rewrites at 16 entries or fewer."""
    digits = f"{number:0{SEGMENT_DIGITS}x}"
    where = SEALED if domain is None else domain_path(domain)
    return f"{LOG_ROOT}/{device}/{where}/{SEGMENT_DIR}/{'/'.join(digits[:-1])}/{digits[-1]}.jsonl"


def segment_number(path: str) -> int | None:
    parts = path.split("/")
    tail = parts[-SEGMENT_DIGITS - 1:]
    if len(parts) < SEGMENT_DIGITS + 3 or tail[0] != SEGMENT_DIR or not tail[-1].endswith(".jsonl"):
        return None
    digits = [*tail[1:-1], tail[-1].removesuffix(".jsonl")]
    if not all(len(d) == 1 and d in "0123456789abcdef" for d in digits):
        return None
    return int("".join(digits), 16)


def parse_log_path(path: str) -> tuple[str, str | None] | None:
    """(device, domain) of a log file: `devices/<device>/<domain…>/<yyyy-mm>.jsonl` (the first
    layout, still read) or `…/log/<hex path>.jsonl` (a segment); domain None for the sealed log
    of an encrypted store, `devices/<device>/sealed/log/…`. None for any other file."""
    parts = path.split("/")
    if len(parts) < 4 or parts[0] != LOG_ROOT or not parts[-1].endswith(".jsonl"):
        return None
    device = parts[1]
    if not oplog.valid_device(device):
        return None
    domain: str | None
    if parts[2] in ("user", "org"):
        domain, rest = parts[2], parts[3:]
    elif parts[2] == SEALED:
        domain, rest = None, parts[3:]
    elif parts[2] == "project" and len(parts) >= 5 and parts[3]:
        name = unquote(parts[3])
        if not (name and domain_path(f"project:{name}") == f"project/{parts[3]}"):
            return None
        domain, rest = f"project:{name}", parts[4:]
    else:
        return None
    legacy = len(rest) == 1 and domain is not None
    if legacy or (len(rest) == SEGMENT_DIGITS + 1 and segment_number(path) is not None):
        return device, domain
    return None


def domain_patterns(values: Sequence[str], project: str | None) -> list[str]:
    """`--domain` values as globs: all, user, org, project (the current one), project:<name>, project:*."""
    patterns: list[str] = []
    for value in values:
        text = value.strip()
        if text in ("", "all", "*"):
            return []
        if text in ("user", "org") or (text.startswith("project:") and len(text) > len("project:")):
            patterns.append(text)
        elif text == "project":
            if not project:
                raise InvalidArgument("--domain project needs a current project; name it: project:<name>")
            patterns.append(f"project:{project}")
        else:
            raise InvalidArgument(f"invalid domain {value!r}: use all, user, org, project or project:<name> "
                                  "(globs allowed, e.g. project:*)")
    return patterns


# A pulled memory's text fields (what `oplog._check_put` checked to be strings or lists of them).
PULLED_TEXT = ("content", "summary", "tags", "source", "relates_to")


# -- the report ----------------------------------------------------------------------------------------

class SyncReport(Record):
    """What one sync did; `to_dict()` is the JSON the CLI and the MCP tool return."""

    remote: str
    branch: str
    device: str
    direction: str
    forced: bool
    remote_commit: str | None = None
    logged: int = 0            # memories written before sync existed, given their operation now
    files_read: int = 0
    pulled: int = 0            # operation lines read from the remote
    applied: int = 0           # of which changed this replica
    invalid: int = 0
    invalid_lines: list[dict[str, Any]] = []  # noqa: RUF012 - a record copies a container default per instance
    conflicts: int = 0
    conflict_list: list[dict[str, Any]] = []  # noqa: RUF012
    quarantined: int = 0       # operations stamped beyond sync.max_skew, kept aside (not applied)
    quarantine_list: list[dict[str, Any]] = []  # noqa: RUF012
    accepted: int = 0          # quarantined operations applied by --accept (or as the clock caught up)
    restored: int = 0          # this device's pushed operations the remote had lost, pushed again
    pushed: int = 0
    pushed_commit: str | None = None
    push_attempts: int = 0
    pending: int = 0           # this device's operations still waiting to be pushed
    warnings: list[str] = []  # noqa: RUF012

    def to_dict(self) -> dict[str, Any]:
        return self.fields()


# -- the sync --------------------------------------------------------------------------------------------

class Syncer:
    """One sync of one store with one remote, under the data dir's sync lock."""

    def __init__(self, store: Store, settings: Settings, *, remote: str | None = None,
                 domains: Sequence[str] = (), project: str | None = None, progress: Progress | None = None,
                 clock: Callable[[], float] = time.time, accept: Sequence[str] = ()) -> None:
        url = (remote or str(settings["sync.remote"])).strip()
        if not url:
            raise ConfigError("no sync remote: pass --remote URL, or set it once with "
                              "`nmem config set sync.remote URL`")
        self.store = store
        self.settings = settings
        self.clock = clock
        self.progress = progress
        self.run_patterns = domain_patterns(domains, project)
        self.device = store.sync_device()
        self.accept = {a.strip() for a in accept if a.strip()}
        for device in self.accept - {"all"}:
            if not oplog.valid_device(device):
                raise InvalidArgument(f"invalid device id {device!r} for --accept: use a device id from the "
                                      "report's quarantine list, or all")
        key = database_key(settings)
        self.sealer = Sealer(key) if key is not None else None
        self.repo = GitRepo(os.path.join(sync_dir(settings.home), "repo.git"), url, str(settings["sync.branch"]),
                            float(settings["sync.timeout"]), self.device)
        self.quarantine_path = os.path.join(sync_dir(settings.home), QUARANTINE_FILE)
        self._skewed: set[str] = set()

    def wanted(self, domain: str) -> bool:
        if not matches_any(domain, self.settings["sync.domains"]):
            return False
        return not self.run_patterns or matches_any(domain, self.run_patterns)

    def _emit(self, event: str, **data: Any) -> None:
        if self.progress is not None:
            self.progress({"event": event, "data": data})

    def run(self, *, fetch: bool = True, push: bool = True, force: bool = False,
            wait: float | None = None) -> SyncReport:
        """Sync under the data dir's lock, waiting up to `wait` seconds (default `sync.timeout`) for it."""
        direction = "both" if fetch and push else ("fetch" if fetch else "push")
        report = SyncReport(self.repo.shown_url, self.repo.branch, self.device, direction, force)
        self._emit("start", operation="sync", params={"direction": direction, "force": force,
                                                      "domains": self.run_patterns or ["all"],
                                                      "remote": report.remote})
        lock = SyncLock(self.settings.home)
        if not lock.acquire(wait=float(self.settings["sync.timeout"]) if wait is None else wait):
            error = SyncBusy(f"another nmem sync is running (lock: {lock.path}); try again when it ends")
            self._emit("error", code=error.kind, message=error.message)
            raise error
        try:
            self._sync(report, fetch, push, force)
            mark_synced(self.settings.home, self.clock())
        except NmemError as exc:
            self._emit("error", code=exc.kind, message=exc.message)
            raise
        finally:
            lock.release()
        self._emit("complete", success=True, summary=report.to_dict())
        return report

    def _sync(self, report: SyncReport, fetch: bool, push: bool, force: bool) -> None:
        self.repo.ensure()
        report.logged = self.store.sync_log_unlogged(int(self.clock()))
        if force:
            self.store.sync_reset()
        self._emit("progress", phase="fetch", current=0, total=1, message=f"fetching {report.remote}")
        tip = self.repo.fetch()
        report.remote_commit = tip
        self._read(report, tip, foreign=fetch, force=force)
        if fetch:
            self._release_quarantine(report)
        if push:
            self._push(report, tip, fetch, force)
        report.pending = len(self.store.sync_outbox())

    @property
    def limit_ms(self) -> int:
        """The latest clock this machine trusts: its own clock plus `sync.max_skew`."""
        return int(self.clock() * 1000) + int(self.settings["sync.max_skew"]) * 1000

    # -- fetch and apply ----------------------------------------------------------------------------

    def _read(self, report: SyncReport, tip: str | None, *, foreign: bool, force: bool) -> None:
        """Apply the new lines of every wanted log file at `tip` (only this device's own files
        when `foreign` is false: they tell which of its operations the remote already has)."""
        files = self.repo.list_files(tip) if tip is not None else {}
        marks = self.store.sync_files()
        if not force and self._lost_own_lines(files, marks):
            waiting = len(self.store.sync_outbox())
            self.store.sync_reset()  # every local operation is pushed again unless its line is still there
            self._read(report, tip, foreign=foreign, force=True)
            report.restored += len(self.store.sync_outbox()) - waiting
            if report.restored:
                report.warnings.append(
                    f"the remote lost {report.restored} operation{'s' * (report.restored != 1)} this device had "
                    "pushed (a force-push or a rewritten history): they are pushed again")
            return
        if tip is None:
            return
        self._check_format(files)
        todo: list[tuple[str, str, str, str | None]] = []
        for path, blob in sorted(files.items()):
            parsed = parse_log_path(path)
            if parsed is None:
                continue
            device, domain = parsed
            if (domain is not None and not self.wanted(domain)) or (not foreign and device != self.device):
                continue
            if marks.get(path, ("", 0))[0] != blob:
                todo.append((path, blob, device, domain))
        contents = self.repo.read_blobs(sorted({blob for _, blob, _, _ in todo}))
        ops: list[oplog.Op] = []
        new_marks: list[FileMark] = []
        held: list[dict[str, str]] = []
        limit = self.limit_ms
        for number, (path, blob, device, domain) in enumerate(todo, 1):
            self._emit("progress", phase="read", current=number, total=len(todo), message=path)
            data = contents[blob]
            offset = marks.get(path, ("", 0))[1]
            if offset > len(data) or (offset and data[offset - 1:offset] != b"\n"):
                offset = 0  # the file was rewritten on the remote: read it again (applying is idempotent)
            end = data.rfind(b"\n") + 1  # a last line without its newline waits for a later fetch
            for raw in data[offset:end].split(b"\n")[:-1] if end > offset else ():
                report.pulled += 1
                op = self._decode(report, path, raw, device, domain)
                if op is None:
                    continue
                if op.device != self.device and op.wall_ms > limit and not self._accepted(op.device):
                    held.append({"path": path, "line": raw.decode("utf-8")})
                    continue
                ops.append(op)
            new_marks.append(FileMark(path, blob, max(end, offset)))
            report.files_read += 1
        if held:
            self._hold(held)
        self._apply(report, ops, new_marks, force)

    def _decode(self, report: SyncReport, path: str, raw: bytes, device: str, domain: str | None) -> oplog.Op | None:
        """One line as a checked operation, or None (counted and listed as invalid)."""
        try:
            line = raw.decode("utf-8")
            if domain is None:  # a sealed log; plain files (written before encryption was on) stay readable
                if self.sealer is None:
                    raise SealError("a sealed line: this store has no encryption key to open it")
                line = self.sealer.open(line, device)
            op = oplog.decode(line, device, domain)
        except (UnicodeDecodeError, oplog.InvalidLine, SealError) as exc:
            report.invalid += 1
            if len(report.invalid_lines) < LISTED:
                report.invalid_lines.append({"path": path, "reason": str(exc) or "not UTF-8"})
            return None
        if domain is None and not self.wanted(op.memory["domain"]):
            return None  # a sealed log holds every domain; a narrowed sync skips the others
        return op

    def _apply(self, report: SyncReport, ops: list[oplog.Op], marks: list[FileMark], force: bool) -> None:
        ops.sort(key=lambda op: op.version)  # causal order: a chain of edits applies oldest first
        for op in ops:
            if op.op == oplog.PUT:  # untrusted text passes the privacy filter again, every field of it
                for name in PULLED_TEXT:
                    if op.memory.get(name) is not None:
                        op.memory[name] = scrub_value(op.memory[name])
        self._emit("progress", phase="apply", current=0, total=len(ops), message=f"applying {len(ops)} operations")
        outcomes = self.store.sync_apply(ops, marks, self.limit_ms)
        for op, (outcome, met) in zip(ops, outcomes, strict=True):
            if outcome == "applied":
                report.applied += 1
            if op.device != self.device and not force and met is not None:
                if outcome == "applied" and op.prev != met:
                    self._conflict(report, op, kept=op.version, dropped=met)
                elif outcome == "stale":
                    self._conflict(report, op, kept=met, dropped=op.version)
        self._emit("result", phase="fetch", pulled=report.pulled, applied=report.applied,
                   conflicts=report.conflicts, invalid=report.invalid)

    def _lost_own_lines(self, files: dict[str, str], marks: dict[str, tuple[str, int]]) -> bool:
        """Whether a file of this device that the remote had is gone or changed: this nmem never
        rewrites a file (segments are new files; month files of the first layout are no longer
        written), so that means a force-push or a rewritten history may have lost pushed lines."""
        for path, (blob, _offset) in marks.items():
            parsed = parse_log_path(path)
            if parsed is None or parsed[0] != self.device:
                continue
            if parsed[1] is not None and not self.wanted(parsed[1]):
                continue
            if files.get(path) != blob:
                return True
        return False

    # -- quarantine: operations stamped beyond the skew bound ------------------------------------------

    def _accepted(self, device: str) -> bool:
        return "all" in self.accept or device in self.accept

    def _hold(self, entries: list[dict[str, str]]) -> None:
        known = {(e["path"], e["line"]) for e in self._held()}
        with open(self.quarantine_path, "a", encoding="utf-8") as out:
            for entry in entries:
                if (entry["path"], entry["line"]) not in known:
                    out.write(jsonlite.dumps(entry) + "\n")
                    known.add((entry["path"], entry["line"]))
            out.flush()
            os.fsync(out.fileno())

    def _held(self) -> list[dict[str, str]]:
        try:
            with open(self.quarantine_path, encoding="utf-8") as held:
                lines = held.read().splitlines()
        except FileNotFoundError:
            return []
        entries = []
        for line in lines:
            try:
                entry = jsonlite.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(entry, dict) and isinstance(entry.get("path"), str) and isinstance(entry.get("line"), str):
                entries.append(entry)
        return entries

    def _release_quarantine(self, report: SyncReport) -> None:
        """Apply the quarantined operations now accepted (or no longer ahead); report the rest."""
        entries = self._held()
        if not entries:
            return
        limit = self.limit_ms
        ready: list[oplog.Op] = []
        kept: list[dict[str, str]] = []
        scratch = SyncReport("", "", "", "", False)
        for entry in entries:
            parsed = parse_log_path(entry["path"])
            op = self._decode(scratch, entry["path"], entry["line"].encode("utf-8"), *parsed) if parsed else None
            if op is None:
                continue
            if op.wall_ms <= limit or self._accepted(op.device):
                ready.append(op)
                continue
            kept.append(entry)
            report.quarantined += 1
            if len(report.quarantine_list) < LISTED:
                report.quarantine_list.append({
                    "device": op.device, "uid": op.uid, "op": op.op, "domain": op.memory["domain"],
                    "ahead_s": round((op.wall_ms - self.clock() * 1000) / 1000), "path": entry["path"]})
        if ready:
            self._apply(report, ready, [], force=False)
            report.accepted += len(ready)
        tmp = self.quarantine_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as out:
            out.writelines(jsonlite.dumps(entry) + "\n" for entry in kept)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.quarantine_path)
        if report.quarantined:
            devices = sorted({q["device"] for q in report.quarantine_list})
            report.warnings.append(
                f"{report.quarantined} operation{'s' * (report.quarantined != 1)} from device"
                f"{'s' * (len(devices) != 1)} {', '.join(devices)} "
                f"{'are' if report.quarantined != 1 else 'is'} stamped more than sync.max_skew "
                f"({int(self.settings['sync.max_skew'])} s) ahead of this machine's clock: kept aside, not applied; "
                "apply them with `nmem sync --accept DEVICE` if that device is trusted")

    def _check_format(self, files: dict[str, str]) -> None:
        blob = files.get(FORMAT_FILE)
        if blob is None:
            return
        declared = self._declared_layout(blob)
        if not isinstance(declared, int) or declared > oplog.LAYOUT:
            raise ConfigError(f"the sync branch {self.repo.branch!r} of {self.repo.shown_url} uses sync format "
                              f"{declared!r}; this nmem writes format {oplog.LAYOUT}: upgrade nmem")

    def _declared_layout(self, blob: str) -> object:
        try:
            declared = jsonlite.loads(self.repo.read_blobs([blob])[blob])
        except (ValueError, RecursionError):
            return None
        return declared.get("format") if isinstance(declared, dict) else None

    def _conflict(self, report: SyncReport, op: oplog.Op, *, kept: str, dropped: str) -> None:
        report.conflicts += 1
        if len(report.conflict_list) < LISTED:
            report.conflict_list.append({"uid": op.uid, "domain": op.memory["domain"], "kept": kept,
                                         "dropped": dropped, "kept_device": _device_of(kept),
                                         "dropped_device": _device_of(dropped)})

    # -- push ------------------------------------------------------------------------------------------

    def _push(self, report: SyncReport, tip: str | None, fetch: bool, force: bool) -> None:
        for attempt in range(1, PUSH_ATTEMPTS + 1):
            outbox = [op for op in self.store.sync_outbox() if self.wanted(op.domain)]
            if not outbox:
                return
            report.push_attempts = attempt
            self._emit("progress", phase="push", current=attempt, total=PUSH_ATTEMPTS,
                       message=f"pushing {len(outbox)} operations")
            commit, marks = self._commit(tip, outbox)
            if self.repo.push(commit):
                self.store.sync_pushed([op.seq for op in outbox], marks)
                report.pushed += len(outbox)
                report.pushed_commit = commit
                report.remote_commit = commit
                self._emit("result", phase="push", pushed=report.pushed, commit=commit)
                return
            # Another device pushed first: build again on its tip (the files are disjoint).
            tip = self.repo.fetch()
            report.remote_commit = tip
            self._read(report, tip, foreign=fetch, force=force)
        raise NmemError(f"the remote moved on during each of {PUSH_ATTEMPTS} pushes; nothing is lost, "
                        "run `nmem sync` again")

    def _commit(self, tip: str | None, outbox: list[OutboxOp]) -> tuple[str, list[FileMark]]:
        """A commit on `tip` adding one new segment per domain with the outbox's lines: a push
        adds only its own lines (and the few small trees above them), never rewrites a file."""
        existing = self.repo.list_files(tip) if tip else {}
        lines: dict[str | None, list[str]] = {}
        for op in outbox:
            if self.sealer is not None:
                lines.setdefault(None, []).append(self.sealer.seal(op.line, self.device))
            else:
                lines.setdefault(op.domain, []).append(op.line)
        files: dict[str, bytes] = {}
        for domain, domain_lines in lines.items():
            path = segment_path(self.device, domain, self._next_segment(existing, domain))
            files[path] = "".join(line + "\n" for line in domain_lines).encode("utf-8")
        if FORMAT_FILE not in existing or self._declared_layout(existing[FORMAT_FILE]) != oplog.LAYOUT:
            files[FORMAT_FILE] = (jsonlite.dumps({
                "format": oplog.LAYOUT,
                "layout": "devices/<device>/<domain>/log/<8 hex digits, one a directory>.jsonl (append-only "
                          "segments; devices/<device>/<domain>/<yyyy-mm>.jsonl from format 1 is still read), "
                          "one JSON operation a line; see nmem's docs/sync.md"}) + "\n").encode()
        message = f"nmem sync: device {self.device} appends {len(outbox)} operation{'s' * (len(outbox) != 1)}"
        commit, blobs = self.repo.commit_files(tip, files, message)
        marks = [FileMark(path, blobs[path], len(data)) for path, data in files.items() if path != FORMAT_FILE]
        return commit, marks

    def _next_segment(self, existing: dict[str, str], domain: str | None) -> int:
        prefix = segment_path(self.device, domain, 0).rsplit(f"/{SEGMENT_DIR}/", 1)[0] + f"/{SEGMENT_DIR}/"
        numbers = [segment_number(path) for path in existing if path.startswith(prefix)]
        return max((n for n in numbers if n is not None), default=-1) + 1


def _device_of(version: str) -> str | None:
    parsed = oplog.parse_hlc(version.partition("#")[0])
    return parsed[2] if parsed else None


def run_sync(store: Store, settings: Settings, *, fetch: bool = True, push: bool = True, force: bool = False,
             remote: str | None = None, domains: Sequence[str] = (), project: str | None = None,
             progress: Progress | None = None, clock: Callable[[], float] = time.time,
             wait: float | None = None, accept: Sequence[str] = ()) -> SyncReport:
    """Sync curated memories with the remote (both ways unless `fetch` or `push` is false).
    `accept`: device ids (or `all`) whose operations beyond `sync.max_skew` are applied anyway."""
    if not fetch and not push:
        raise InvalidArgument("nothing to do: fetch and push are both off")
    syncer = Syncer(store, settings, remote=remote, domains=domains, project=project, progress=progress,
                    clock=clock, accept=accept)
    return syncer.run(fetch=fetch, push=push, force=force, wait=wait)


__all__ = ["SyncReport", "Syncer", "domain_path", "parse_log_path", "run_sync", "segment_path"]
