"""Trail retention: the `retention.ttl` setting read as one age limit per observation type."""

from __future__ import annotations

from nmem.errors import ConfigError, InvalidArgument
from nmem.models import OBS_TYPES
from nmem.util.timeutil import parse_age

EVERY_OTHER = "*"


def ttl_policy(entries: list[str]) -> dict[str, int]:
    """`["file_read=30d", "*=1y"]` → {obs_type: seconds} for every type a limit applies to.
    A type named on its own wins over `*`; an unknown type or bad age is a ConfigError."""
    named: dict[str, int] = {}
    fallback: int | None = None
    for entry in entries:
        kind, sep, age = str(entry).partition("=")
        kind = kind.strip()
        if not sep or not kind:
            raise ConfigError(f"retention.ttl: expected type=age (file_read=30d), got {entry!r}")
        if kind != EVERY_OTHER and kind not in OBS_TYPES:
            raise ConfigError(f"retention.ttl: unknown observation type {kind!r}; valid: "
                              f"{', '.join(OBS_TYPES)} or *")
        try:
            seconds = parse_age(age, name=f"retention.ttl {kind}")
        except InvalidArgument as exc:
            raise ConfigError(exc.message) from exc
        if seconds <= 0:
            raise ConfigError(f"retention.ttl {kind}: the age must be positive")
        if kind == EVERY_OTHER:
            fallback = seconds
        else:
            named[kind] = seconds
    if fallback is not None:
        for kind in OBS_TYPES:
            named.setdefault(kind, fallback)
    return named
