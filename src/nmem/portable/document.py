"""One JSON or YAML document: `{"nmem_export": 1, "memories": [...], "sessions": [...],
"prompts": [...], "observations": [...]}`. Both hold the same data; YAML writes multi-line
text as literal blocks, so a memory reads as written.

A document is built whole in memory (JSON Lines streams, for large trails). Reading also
takes what people write by hand: a list of memories, or one memory.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import date, datetime
from functools import cache
from typing import Any, TextIO

from nmem.errors import InvalidArgument
from nmem.portable.export import Export
from nmem.portable.limits import InputLimits, json_document, too_deep
from nmem.portable.limits import yaml_load as limited_yaml_load
from nmem.portable.records import FORMAT_VERSION, SKIPPED, grouped


def build(export: Export, progress: Callable[[int], None]) -> dict[str, Any]:
    document: dict[str, Any] = {"nmem_export": FORMAT_VERSION, "memories": list(export.memories())}
    sessions: list[dict[str, Any]] = []
    prompts: list[dict[str, Any]] = []
    observations: list[dict[str, Any]] = []
    for rows in export.sessions():
        sessions.append(rows.session)
        prompts.extend(rows.prompts)
        observations.extend(rows.observations)
        progress(1)
    if export.filters.trail:
        document.update(sessions=sessions, prompts=prompts, observations=observations)
    return document


def write_json(export: Export, out: TextIO, progress: Callable[[int], None]) -> None:
    out.write(json.dumps(build(export, progress), indent=2, ensure_ascii=False) + "\n")


@cache
def _dumper() -> Any:
    """A safe YAML dumper writing multi-line strings as literal blocks (`|`) where YAML allows one."""
    import yaml  # only YAML and Markdown need it: every other command starts ~15 ms faster

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)

    class LiteralDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]  # libyaml: ~10x
        pass

    LiteralDumper.add_representer(str, text)
    return LiteralDumper


def yaml_dump(data: Any, out: TextIO | None = None) -> str | None:
    import yaml

    dumped = yaml.dump(data, out, Dumper=_dumper(), sort_keys=False, allow_unicode=True, default_flow_style=False,
                       width=1_000_000)
    return None if dumped is None else str(dumped)


def write_yaml(export: Export, out: TextIO, progress: Callable[[int], None]) -> None:
    yaml_dump(build(export, progress), out)


def read_json(text: str, limits: InputLimits) -> Iterator[tuple[str, str, Any]]:
    try:
        document = json_document(text, limits)
    except ValueError as exc:
        raise InvalidArgument(f"not valid JSON: {exc}") from None
    yield from grouped(document, "document")


def yaml_load(text: str, limits: InputLimits) -> Any:
    """`yaml.safe_load` (through libyaml when PyYAML has it, about ten times faster), with its
    aliases' expansion bounded (`nmem.portable.limits.yaml_load`)."""
    return limited_yaml_load(text, limits)


def read_yaml(text: str, limits: InputLimits) -> Iterator[tuple[str, str, Any]]:
    import yaml

    try:
        document = yaml_load(text, limits)
    except yaml.YAMLError as exc:
        raise InvalidArgument(f"not valid YAML: {' '.join(str(exc).split())}") from None
    for kind, where, data in grouped(document, "document"):
        if too_deep(data, limits.max_depth):  # before dates_as_text walks it
            yield SKIPPED, where, f"nested deeper than import.max_depth ({limits.max_depth})"
        else:
            yield kind, where, dates_as_text(data)


def dates_as_text(value: Any) -> Any:
    """YAML reads `2026-05-01` as a date: give it back as the text nmem's time parser takes."""
    if isinstance(value, dict):
        return {k: dates_as_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [dates_as_text(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return value
