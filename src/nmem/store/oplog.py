"""Operation lines and the hybrid logical clock (docs/sync.md, "The model").

A write to a curated memory becomes one JSON line carrying the memory's state after the
write and a clock `wall-counter-device`; its *version* (clock, `#`, a digest of the exact
line) orders it against every other write of the same memory. The store writes these lines
inside the write's own transaction, so this module stays on the hook path's diet: no `re`,
no `json`, no `hashlib`.
"""

from __future__ import annotations

import time

from nmem import jsonlite
from nmem.models import TIERS, Record

try:  # the digest without hashlib, which loads OpenSSL (~4 ms): see nmem.capture.extract
    from _sha256 import sha256 as _sha256  # type: ignore[import-not-found, unused-ignore]  # Python 3.11
except ImportError:
    try:
        from _sha2 import sha256 as _sha256  # type: ignore[import-not-found, no-redef, unused-ignore]  # 3.12+
    except ImportError:  # builds without the builtin module
        from hashlib import sha256 as _sha256  # type: ignore[assignment, unused-ignore]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FORMAT = 1                 # of an operation line ("v")
LAYOUT = 2                 # of the remote's files (nmem-sync.json): 2 = append-only segments
PUT = "put"
DELETE = "delete"
WALL_DIGITS = 13           # milliseconds since the epoch, until the year 2286
COUNTER_DIGITS = 5
COUNTER_MAX = 10 ** COUNTER_DIGITS - 1
DIGEST_CHARS = 16
MAX_LINE_BYTES = 4 << 20   # a line longer than this is refused as invalid, never applied
SUMMARY_CHARS = 100
DEVICE_CHARS = frozenset("0123456789abcdefghijklmnopqrstuvwxyz")
_ULID_CHARS = frozenset("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
_SLUG_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")
_DIGITS = frozenset("0123456789")


# -- the clock ---------------------------------------------------------------------------------

def tick(wall: int, counter: int, now_ms: int) -> tuple[int, int]:
    """The clock of a local write: after the last clock and no earlier than now."""
    if now_ms > wall:
        return now_ms, 0
    if counter >= COUNTER_MAX:
        return wall + 1, 0  # the counter never outgrows its width: it carries into the wall
    return wall, counter + 1


def witness(wall: int, counter: int, other: str, limit_ms: int | None = None) -> tuple[int, int]:
    """The last clock after seeing `other`: every later local write orders after it. A clock
    beyond `limit_ms` (now + sync.max_skew) is never adopted: one poisoned line must not drag
    every later write of every machine into the far future."""
    parsed = parse_hlc(other)
    if parsed is None or (limit_ms is not None and parsed[0] > limit_ms):
        return wall, counter
    return max((wall, counter), parsed[:2])


def now_ms(timestamp: int) -> int:
    """The write's time in milliseconds, inside the write's second (`timestamp`): the wall clock's
    while it is still in that second (two edits 270 ms apart order by time, not by device id), the
    second's last millisecond once the clock has passed it (a write stamped late in a second and
    clocked just after it still orders after an earlier write of that second), and the second's
    first millisecond for a stamp ahead of the clock."""
    now, start = time.time_ns() // 1_000_000, timestamp * 1000
    return start if now < start else min(now, start + 999)


def after_prev(wall: int, counter: int, prev: str | None) -> tuple[int, int]:
    """A write's clock, ordered after the version it replaces even when that one is ahead of this
    machine's clock (an operation accepted from beyond `sync.max_skew`): an edit made after seeing a
    version always wins over it. The device's own clock does not adopt it."""
    parsed = parse_hlc(prev.partition("#")[0]) if prev else None
    if parsed is None or (wall, counter) > parsed[:2]:
        return wall, counter
    later = tick(parsed[0], parsed[1], 0)
    return later if later[0] < 10 ** WALL_DIGITS else (wall, counter)


def hlc(wall: int, counter: int, device: str) -> str:
    return f"{wall:0{WALL_DIGITS}d}-{counter:0{COUNTER_DIGITS}d}-{device}"


def parse_hlc(text: str) -> tuple[int, int, str] | None:
    """(wall, counter, device), or None if `text` is not a clock in the fixed-width form."""
    if len(text) < WALL_DIGITS + COUNTER_DIGITS + 3:
        return None
    wall, counter = text[:WALL_DIGITS], text[WALL_DIGITS + 1:WALL_DIGITS + 1 + COUNTER_DIGITS]
    device = text[WALL_DIGITS + COUNTER_DIGITS + 2:]
    if (text[WALL_DIGITS] != "-" or text[WALL_DIGITS + COUNTER_DIGITS + 1] != "-"
            or not set(wall) <= _DIGITS or not set(counter) <= _DIGITS or not valid_device(device)):
        return None
    return int(wall), int(counter), device


def valid_device(device: str) -> bool:
    return 4 <= len(device) <= 40 and set(device) <= DEVICE_CHARS


def version(clock: str, line: str) -> str:
    """The clock, then a digest of the exact line: unique per line, ordered by the clock."""
    return f"{clock}#{_sha256(line.encode('utf-8')).hexdigest()[:DIGEST_CHARS]}"


# -- lines ---------------------------------------------------------------------------------------

def put_payload(row: Any) -> dict[str, Any]:
    """What a `put` carries: the memory as it stands, from a `memories` row. Not its tier:
    each machine recomputes that from its own access statistics."""
    return {
        "domain": row["domain"], "namespace": row["namespace"], "summary": row["summary"],
        "content": row["content"], "tags": list(jsonlite.loads(row["tags"] or "[]")), "source": row["source"],
        "relates_to": list(jsonlite.loads(row["relates_to"] or "[]")),
        "is_pinned": bool(row["is_pinned"]), "created_at": row["created_at"], "updated_at": row["updated_at"],
    }


def delete_payload(row: Any) -> dict[str, Any]:
    """What a `delete` carries: what a tombstone keeps."""
    return {"domain": row["domain"], "namespace": row["namespace"], "created_at": row["created_at"],
            "deleted_at": row["deleted_at"]}


def line_for(clock: str, op: str, uid: str, prev: str | None, memory: dict[str, Any]) -> str:
    """One operation as a JSON line (without its newline); key order is fixed, so is the digest."""
    return jsonlite.dumps({"v": FORMAT, "hlc": clock, "op": op, "uid": uid, "prev": prev, "memory": memory},
                          ensure_ascii=False)


def next_op(row: Any, state: Any, timestamp: int) -> tuple[int, int, str, str]:
    """The outbox entry for a write just made to memory `row`, on a device whose clock is
    `state` (device, wall, counter): the new clock (wall, counter), the line and its version.
    Each engine stores the four; the clock and the line are the same on every engine."""
    wall, counter = tick(state["wall"], state["counter"], now_ms(timestamp))
    clock = hlc(*after_prev(wall, counter, row["sync_version"]), state["device"])
    if row["deleted_at"] is None:
        line = line_for(clock, PUT, row["uid"], row["sync_version"], put_payload(row))
    else:
        line = line_for(clock, DELETE, row["uid"], row["sync_version"], delete_payload(row))
    return wall, counter, line, version(clock, line)


class Op(Record):
    """An operation read from a device's log, checked."""

    version: str
    clock: str
    op: str
    uid: str
    prev: str | None
    memory: dict[str, Any]
    device: str

    @property
    def wall_ms(self) -> int:
        return int(self.clock[:WALL_DIGITS])


class InvalidLine(ValueError):
    """A line that is not a valid operation for the file it was read from."""


def decode(line: str, device: str, domain: str | None) -> Op:
    """Parse and check one line of `devices/<device>/<domain…>` (domain None: of the sealed log,
    which holds every domain); raises InvalidLine saying why."""
    if len(line) > MAX_LINE_BYTES:
        raise InvalidLine("line too long")
    try:
        data = jsonlite.loads(line)
    except ValueError:
        raise InvalidLine("not JSON") from None
    except RecursionError:
        raise InvalidLine("nested too deeply") from None
    if not isinstance(data, dict):
        raise InvalidLine("not an object")
    if data.get("v") != FORMAT:
        raise InvalidLine(f"unknown format {data.get('v')!r}")
    clock = data.get("hlc")
    parsed = parse_hlc(clock) if isinstance(clock, str) else None
    if parsed is None or not isinstance(clock, str):
        raise InvalidLine(f"bad clock {clock!r}")
    if parsed[2] != device:
        raise InvalidLine(f"clock of device {parsed[2]} in the file of device {device}")
    uid = data.get("uid")
    if not (isinstance(uid, str) and len(uid) == 26 and set(uid) <= _ULID_CHARS):
        raise InvalidLine(f"bad uid {uid!r}")
    prev = data.get("prev")
    if prev is not None and not (isinstance(prev, str) and len(prev) <= 100):
        raise InvalidLine("bad prev")
    op = data.get("op")
    memory = data.get("memory")
    if not isinstance(memory, dict):
        raise InvalidLine("no memory")
    if domain is None:
        if not valid_domain(memory.get("domain")):
            raise InvalidLine(f"bad domain {memory.get('domain')!r}")
    elif memory.get("domain") != domain:
        raise InvalidLine(f"domain {memory.get('domain')!r} in a file of domain {domain!r}")
    namespace = memory.get("namespace")
    if not (isinstance(namespace, str) and 0 < len(namespace) <= 40 and "a" <= namespace[0] <= "z"
            and set(namespace) <= _SLUG_CHARS):
        raise InvalidLine(f"bad namespace {namespace!r}")
    if op == PUT:
        _check_put(memory)
    elif op == DELETE:
        if not (_is_int(memory.get("created_at")) and _is_int(memory.get("deleted_at"))):
            raise InvalidLine("a delete needs created_at and deleted_at")
    else:
        raise InvalidLine(f"unknown op {op!r}")
    return Op(version(clock, line), clock, op, uid, prev, memory, device)


def valid_domain(domain: object) -> bool:
    if not isinstance(domain, str) or len(domain) > 200:
        return False
    return domain in ("user", "org") or (domain.startswith("project:") and len(domain) > len("project:"))


def _check_put(memory: dict[str, Any]) -> None:
    summary, content = memory.get("summary"), memory.get("content")
    if not (isinstance(summary, str) and len(summary) <= SUMMARY_CHARS):
        raise InvalidLine("bad summary")
    if not (isinstance(content, str) and content.strip()):
        raise InvalidLine("empty content")
    for name in ("tags", "relates_to"):
        value = memory.get(name)
        if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise InvalidLine(f"bad {name}")
    source = memory.get("source")
    if source is not None and not isinstance(source, str):
        raise InvalidLine("bad source")
    if "tier" in memory and memory["tier"] not in TIERS:  # older lines carry it; it is not applied
        raise InvalidLine(f"bad tier {memory.get('tier')!r}")
    if not isinstance(memory.get("is_pinned"), bool):
        raise InvalidLine("bad is_pinned")
    if not (_is_int(memory.get("created_at")) and _is_int(memory.get("updated_at"))):
        raise InvalidLine("a put needs created_at and updated_at")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 53
