"""Parsing the times people and models type: epoch seconds, ISO dates, and ages like `30d`."""

from __future__ import annotations

from nmem.errors import InvalidArgument, ValidationError

_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
# The times a date can name (years 1 to 9999, what ISO dates reach), in epoch seconds.
MIN_TIME = -62_135_596_800
MAX_TIME = 253_402_300_799
MAX_AGE = 10_000 * 31536000  # seconds: an age longer than this reaches before any date


def parse_time(value: object, *, name: str = "date", end_of_day: bool = False) -> int | None:
    """Epoch seconds (int, float, digit string; milliseconds are detected) or an ISO date/time.

    A bare date (`2026-05-01`) means its first second, or its last with `end_of_day`.
    Naive times are UTC.
    """
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise InvalidArgument(f"{name}: expected a date, got {value!r}")
    if isinstance(value, (int, float)) or (isinstance(value, str) and _is_number(value)):
        number = float(value)
    elif isinstance(value, str):
        from datetime import UTC, datetime  # only ISO strings from the CLI or MCP need it

        text = value.strip().replace("Z", "+00:00")
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise InvalidArgument(
                f"{name}: cannot read {value!r} as a date (use 2026-05-01, an ISO time or epoch seconds)"
            ) from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        seconds = int(parsed.timestamp())
        if end_of_day and len(text) == 10:
            seconds += 86399
        return seconds
    else:
        raise InvalidArgument(f"{name}: expected a date, got {value!r}")
    if number > 1e11:  # milliseconds, as JavaScript clients send them
        number /= 1000.0
    if not MIN_TIME <= number <= MAX_TIME:  # also NaN and infinities
        raise ValidationError(f"{name}: {_brief(value)} is out of range (a date from year 1 to 9999)")
    return int(number)


def _brief(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}… ({len(text)} characters)"


def _is_number(text: str) -> bool:
    """Digits with an optional fraction, blanks around: `1714000000`, ` 1714000000.5 `."""
    whole, dot, fraction = text.strip().partition(".")
    return _is_digits(whole) and (not dot or _is_digits(fraction))


def _is_digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


def parse_age(value: str, *, name: str = "age") -> int:
    """`90s`, `15m`, `12h`, `30d`, `2w`, `1y` → seconds."""
    text = value.strip()
    count, unit = text[:-1].rstrip(), text[-1:].lower()
    if not (_is_digits(count) and unit in _UNIT_SECONDS):
        raise InvalidArgument(f"{name}: expected an age like 30d, 12h or 2w, got {_brief(value)}")
    # int() refuses 4,300 digits and more; any count that long is out of range anyway
    seconds = int(count) * _UNIT_SECONDS[unit] if len(count.lstrip("0")) <= 20 else MAX_AGE + 1
    if seconds > MAX_AGE:
        raise ValidationError(f"{name}: {_brief(value)} is out of range (at most 10000 years)")
    return seconds


def ago(ts: int, now: int) -> str:
    """A short relative age: `just now`, `5m ago`, `3h ago`, `2d ago`."""
    delta = max(now - ts, 0)
    if delta < 60:
        return "just now"
    if delta < 3600:
        return f"{delta // 60}m ago"
    if delta < 86400:
        return f"{delta // 3600}h ago"
    return f"{delta // 86400}d ago"
