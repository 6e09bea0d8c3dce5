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
from nmem.capture.privacy import scrub
from nmem.config import Settings, matches_any
from nmem.errors import ConfigError, InvalidArgument, NmemError, SyncBusy
from nmem.store import FileMark, OutboxOp, oplog
from nmem.store.protocol import Store
from nmem.sync.git import GitRepo
from nmem.sync.lock import SyncLock, sync_dir

Progress = Callable[[dict[str, Any]], None]

LOG_ROOT = "devices"
FORMAT_FILE = "nmem-sync.json"
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


def parse_log_path(path: str) -> tuple[str, str] | None:
    """(device, domain) of `devices/<device>/<domain…>/<yyyy-mm>.jsonl`; None for any other file."""
    parts = path.split("/")
    if len(parts) not in (4, 5) or parts[0] != LOG_ROOT or not parts[-1].endswith(".jsonl"):
        return None
    device = parts[1]
    if not oplog.valid_device(device):
        return None
    if len(parts) == 4 and parts[2] in ("user", "org"):
        return device, parts[2]
    if len(parts) == 5 and parts[2] == "project" and parts[3]:
        name = unquote(parts[3])
        if name and domain_path(f"project:{name}") == f"project/{parts[3]}":
            return device, f"project:{name}"
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


# -- the report ----------------------------------------------------------------------------------------

class SyncReport:
    """What one sync did; `to_dict()` is the JSON the CLI and the MCP tool return."""

    def __init__(self, remote: str, branch: str, device: str, direction: str, forced: bool) -> None:
        self.remote = remote
        self.branch = branch
        self.device = device
        self.direction = direction
        self.forced = forced
        self.remote_commit: str | None = None
        self.logged = 0            # memories written before sync existed, given their operation now
        self.files_read = 0
        self.pulled = 0            # operation lines read from the remote
        self.applied = 0           # of which changed this replica
        self.invalid = 0
        self.invalid_lines: list[dict[str, Any]] = []
        self.conflicts = 0
        self.conflict_list: list[dict[str, Any]] = []
        self.pushed = 0
        self.pushed_commit: str | None = None
        self.push_attempts = 0
        self.pending = 0           # this device's operations still waiting to be pushed
        self.warnings: list[str] = []

    def to_dict(self) -> dict[str, Any]:
        return {
            "remote": self.remote, "branch": self.branch, "device": self.device, "direction": self.direction,
            "forced": self.forced, "remote_commit": self.remote_commit, "logged": self.logged,
            "files_read": self.files_read, "pulled": self.pulled, "applied": self.applied,
            "invalid": self.invalid, "invalid_lines": self.invalid_lines, "conflicts": self.conflicts,
            "conflict_list": self.conflict_list, "pushed": self.pushed, "pushed_commit": self.pushed_commit,
            "push_attempts": self.push_attempts, "pending": self.pending, "warnings": self.warnings,
        }


# -- the sync --------------------------------------------------------------------------------------------

class Syncer:
    """One sync of one store with one remote, under the data dir's sync lock."""

    def __init__(self, store: Store, settings: Settings, *, remote: str | None = None,
                 domains: Sequence[str] = (), project: str | None = None, progress: Progress | None = None,
                 clock: Callable[[], float] = time.time) -> None:
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
        self.repo = GitRepo(os.path.join(sync_dir(settings.home), "repo.git"), url, str(settings["sync.branch"]),
                            float(settings["sync.timeout"]), self.device)
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
        if push:
            self._push(report, tip, fetch, force)
        report.pending = len(self.store.sync_outbox())

    # -- fetch and apply ----------------------------------------------------------------------------

    def _read(self, report: SyncReport, tip: str | None, *, foreign: bool, force: bool) -> None:
        """Apply the new lines of every wanted log file at `tip` (only this device's own files
        when `foreign` is false: they tell which of its operations the remote already has)."""
        if tip is None:
            return
        files = self.repo.list_files(tip)
        self._check_format(files)
        marks = self.store.sync_files()
        todo: list[tuple[str, str, str, str]] = []
        for path, blob in sorted(files.items()):
            parsed = parse_log_path(path)
            if parsed is None:
                continue
            device, domain = parsed
            if not self.wanted(domain) or (not foreign and device != self.device):
                continue
            if marks.get(path, ("", 0))[0] != blob:
                todo.append((path, blob, device, domain))
        contents = self.repo.read_blobs(sorted({blob for _, blob, _, _ in todo}))
        ops: list[oplog.Op] = []
        new_marks: list[FileMark] = []
        for number, (path, blob, device, domain) in enumerate(todo, 1):
            self._emit("progress", phase="read", current=number, total=len(todo), message=path)
            data = contents[blob]
            offset = marks.get(path, ("", 0))[1]
            if offset > len(data) or (offset and data[offset - 1:offset] != b"\n"):
                offset = 0  # the file was rewritten on the remote: read it again (applying is idempotent)
            end = data.rfind(b"\n") + 1  # a last line without its newline waits for a later fetch
            for raw in data[offset:end].split(b"\n")[:-1] if end > offset else ():
                report.pulled += 1
                try:
                    ops.append(oplog.decode(raw.decode("utf-8"), device, domain))
                except (UnicodeDecodeError, oplog.InvalidLine) as exc:
                    report.invalid += 1
                    if len(report.invalid_lines) < LISTED:
                        report.invalid_lines.append({"path": path, "reason": str(exc)})
            new_marks.append(FileMark(path, blob, max(end, offset)))
            report.files_read += 1
        ops.sort(key=lambda op: op.version)  # causal order: a chain of edits applies oldest first
        for op in ops:
            if op.op == oplog.PUT:  # untrusted text passes the privacy filter again
                op.memory["content"] = scrub(op.memory["content"])
                op.memory["summary"] = scrub(op.memory["summary"])
        self._emit("progress", phase="apply", current=0, total=len(ops), message=f"applying {len(ops)} operations")
        outcomes = self.store.sync_apply(ops, new_marks)
        for op, (outcome, met) in zip(ops, outcomes, strict=True):
            if outcome == "applied":
                report.applied += 1
            if op.device != self.device and not force and met is not None:
                if outcome == "applied" and op.prev != met:
                    self._conflict(report, op, kept=op.version, dropped=met)
                elif outcome == "stale":
                    self._conflict(report, op, kept=met, dropped=op.version)
            self._check_skew(report, op)
        self._emit("result", phase="fetch", pulled=report.pulled, applied=report.applied,
                   conflicts=report.conflicts, invalid=report.invalid)

    def _check_format(self, files: dict[str, str]) -> None:
        blob = files.get(FORMAT_FILE)
        if blob is None:
            return
        try:
            declared = jsonlite.loads(self.repo.read_blobs([blob])[blob]).get("format")
        except (ValueError, AttributeError):
            declared = None
        if not isinstance(declared, int) or declared > oplog.FORMAT:
            raise ConfigError(f"the sync branch {self.repo.branch!r} of {self.repo.shown_url} uses sync format "
                              f"{declared!r}; this nmem writes format {oplog.FORMAT}: upgrade nmem")

    def _conflict(self, report: SyncReport, op: oplog.Op, *, kept: str, dropped: str) -> None:
        report.conflicts += 1
        if len(report.conflict_list) < LISTED:
            report.conflict_list.append({"uid": op.uid, "domain": op.memory["domain"], "kept": kept,
                                         "dropped": dropped, "kept_device": _device_of(kept),
                                         "dropped_device": _device_of(dropped)})

    def _check_skew(self, report: SyncReport, op: oplog.Op) -> None:
        if op.device == self.device:
            return
        ahead = (op.wall_ms - self.clock() * 1000) / 1000
        if ahead > int(self.settings["sync.max_skew"]) and op.device not in self._skewed:
            self._skewed.add(op.device)
            report.warnings.append(f"device {op.device} stamps writes {ahead:.0f} s ahead of this machine's clock; "
                                   "its concurrent edits win until the clocks agree")

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
        """A commit on `tip` appending the outbox's lines to this month's files of this device."""
        month = time.strftime("%Y-%m", time.gmtime(self.clock()))
        appended: dict[str, list[str]] = {}
        for op in outbox:
            path = f"{LOG_ROOT}/{self.device}/{domain_path(op.domain)}/{month}.jsonl"
            appended.setdefault(path, []).append(op.line)
        existing = self.repo.list_files(tip) if tip else {}
        old = self.repo.read_blobs(sorted({existing[p] for p in appended if p in existing}))
        marks = self.store.sync_files()
        files: dict[str, bytes] = {}
        read_to_end: set[str] = set()
        for path, lines in appended.items():
            before = old.get(existing.get(path, ""), b"")
            if marks.get(path, ("", 0)) == (existing.get(path), len(before)) or not before:
                read_to_end.add(path)
            if before and not before.endswith(b"\n"):
                before += b"\n"  # a torn last line: never glue a line onto it
            files[path] = before + "".join(line + "\n" for line in lines).encode("utf-8")
        if FORMAT_FILE not in existing:
            files[FORMAT_FILE] = (jsonlite.dumps({"format": oplog.FORMAT, "layout": "devices/<device>/<domain>/"
                                                  "<yyyy-mm>.jsonl, one JSON operation a line, append-only; "
                                                  "see nmem's docs/sync.md"}) + "\n").encode()
        message = f"nmem sync: device {self.device} appends {len(outbox)} operation{'s' * (len(outbox) != 1)}"
        commit, blobs = self.repo.commit_files(tip, files, message)
        new_marks = [FileMark(path, blobs[path], len(files[path])) for path in appended if path in read_to_end]
        return commit, new_marks


def _device_of(version: str) -> str | None:
    parsed = oplog.parse_hlc(version.partition("#")[0])
    return parsed[2] if parsed else None


def run_sync(store: Store, settings: Settings, *, fetch: bool = True, push: bool = True, force: bool = False,
             remote: str | None = None, domains: Sequence[str] = (), project: str | None = None,
             progress: Progress | None = None, clock: Callable[[], float] = time.time,
             wait: float | None = None) -> SyncReport:
    """Sync curated memories with the remote (both ways unless `fetch` or `push` is false)."""
    if not fetch and not push:
        raise InvalidArgument("nothing to do: fetch and push are both off")
    syncer = Syncer(store, settings, remote=remote, domains=domains, project=project, progress=progress,
                    clock=clock)
    return syncer.run(fetch=fetch, push=push, force=force, wait=wait)


__all__ = ["SyncReport", "Syncer", "domain_path", "parse_log_path", "run_sync"]
