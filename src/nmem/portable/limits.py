"""What an import may take of the machine: every importer reads its input through here.

- Only a regular file is read (a FIFO would block forever, `/dev/zero` never ends): anything
  else is refused before it is read; standard input is read up to the same size cap.
- A file larger than `import.max_file_bytes` is refused before it is read (InputTooLarge).
- A JSON line longer than `import.max_line_bytes` is skipped and reported, never parsed.
- A record nested deeper than `import.max_depth` is skipped and reported (Python's parsers
  and every recursive walk after them would otherwise fail with RecursionError).
- YAML aliases may add at most `import.yaml_alias_nodes` nodes when expanded, so a tiny
  "billion laughs" file is refused instead of growing to gigabytes.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from typing import Any, BinaryIO

from nmem.config import Settings
from nmem.errors import InputTooLarge, InvalidArgument

_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class InputLimits:
    max_file_bytes: int = 256 * 1024 * 1024
    max_line_bytes: int = 16 * 1024 * 1024
    max_depth: int = 100
    yaml_alias_nodes: int = 10_000

    @classmethod
    def from_settings(cls, settings: Settings) -> InputLimits:
        return cls(**{name: int(settings[f"import.{name}"]) for name in cls.__dataclass_fields__})


class Skipped:
    """A line or record left out of an import, and why (`where` names it as errors do)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _too_large(name: str, limits: InputLimits) -> InputTooLarge:
    return InputTooLarge(f"{name} is larger than import.max_file_bytes ({limits.max_file_bytes} bytes): "
                         "raise that setting (NMEM_IMPORT_MAX_FILE) to import it")


def read_file(path: str, limits: InputLimits) -> bytes:
    """The whole content of a regular file, refused when it is anything else or too large."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InvalidArgument(f"{path} is not a regular file (a FIFO, device or directory is never read)")
        if info.st_size > limits.max_file_bytes:
            raise _too_large(path, limits)
        return _read_capped(fh, path, limits)


def read_stream(stream: BinaryIO, name: str, limits: InputLimits) -> bytes:
    """A stream (standard input) read whole, up to the size cap."""
    return _read_capped(stream, name, limits)


def _read_capped(stream: BinaryIO, name: str, limits: InputLimits) -> bytes:
    chunks: list[bytes] = []
    size = 0
    try:
        while chunk := stream.read(min(_CHUNK, limits.max_file_bytes + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limits.max_file_bytes:  # the file grew while read, or a stream
                raise _too_large(name, limits)
    except OSError as exc:
        raise InvalidArgument(f"cannot read {name}: {exc.strerror}") from None
    return b"".join(chunks)


def decode(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidArgument(f"{name} is not UTF-8 text") from None


def too_deep(value: Any, limit: int) -> bool:
    """Whether lists and objects nest deeper than `limit` in `value` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def json_line(text: str, limits: InputLimits) -> Any:
    """One JSON Lines line parsed: a `Skipped` when too long or too deep; ValueError when not JSON."""
    cap = limits.max_line_bytes
    if len(text) > cap or (len(text) * 4 > cap and len(text.encode("utf-8", "surrogatepass")) > cap):
        return Skipped(f"longer than import.max_line_bytes ({limits.max_line_bytes} bytes)")
    try:
        value = json.loads(text)
    except RecursionError:
        value = None
        deep = True
    else:
        deep = too_deep(value, limits.max_depth)
    if deep:
        return Skipped(f"nested deeper than import.max_depth ({limits.max_depth})")
    return value


def json_document(text: str, limits: InputLimits) -> Any:
    """A whole JSON document; too deep to parse at all is an error (there is no line to skip)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise InvalidArgument(f"nested too deeply to read (import.max_depth is {limits.max_depth})") from None


def yaml_load(text: str, limits: InputLimits) -> Any:
    """`yaml.safe_load` (through libyaml when PyYAML has it), refusing a document whose aliases
    would expand past `limits.yaml_alias_nodes` extra nodes, or that refers to itself."""
    import yaml

    try:
        value = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # a safe loader, C or Python
    except RecursionError:
        raise InvalidArgument(f"nested too deeply to read (import.max_depth is {limits.max_depth})") from None
    if isinstance(value, (dict, list)):
        _check_expansion(value, limits)
    return value


def _check_expansion(value: Any, limits: InputLimits) -> None:
    """A loaded YAML document shares one object per anchor among its aliases: count the nodes
    the document has once every alias is expanded (as any walk over it will), without expanding."""
    expanded: dict[int, int] = {}   # id -> nodes once expanded (itself, its scalars, its containers')
    distinct = 0                    # nodes as stored: each container once, with its own scalars
    visiting: set[int] = set()
    order: list[tuple[Any, bool]] = [(value, False)]
    while order:
        item, done = order.pop()
        key = id(item)
        children = list(item.values()) if isinstance(item, dict) else item
        if done:
            visiting.discard(key)
            expanded[key] = 1 + sum(expanded[id(c)] if isinstance(c, (dict, list)) else 1 for c in children)
            continue
        if key in visiting:
            raise InvalidArgument("the YAML document contains itself (a recursive alias)")
        if key in expanded:
            continue
        distinct += 1 + sum(1 for c in children if not isinstance(c, (dict, list)))
        visiting.add(key)
        order.append((item, True))
        order.extend((child, False) for child in children if isinstance(child, (dict, list)))
    total = expanded[id(value)]
    if total - distinct > limits.yaml_alias_nodes:
        raise InvalidArgument(f"YAML aliases expand the document by {total - distinct} nodes, more than "
                              f"import.yaml_alias_nodes ({limits.yaml_alias_nodes}); refusing it")
