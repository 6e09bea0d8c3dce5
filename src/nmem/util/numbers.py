"""Integer arguments as every surface takes them: an int, an integral float (JSON's 1e2) or
digits, kept inside SQLite's signed 64 bits, each refusal an `nmem.errors` type."""

from __future__ import annotations

from nmem.errors import InvalidArgument, ValidationError

INT_MAX = 2**63 - 1  # SQLite's integers are signed 64-bit
INT_MIN = -INT_MAX   # as the MCP tools' schemas say


def clamp(value: object, low: int, high: int, default: int, name: str = "value") -> int:
    """A count within `low..high`: None is the default, anything inside 64 bits is clamped to
    the range, anything beyond them is refused (`as_int`)."""
    if value is None:
        return default
    return max(low, min(high, as_int(value, name)))


def as_int(value: object, name: str, low: int = INT_MIN, high: int = INT_MAX) -> int:
    """An integer argument: an int, an integral float (JSON's 1e2) or a digit string.

    Not an integer (a boolean, 1.5, "ten") is an InvalidArgument; an integer outside
    `low..high` a ValidationError. The default range is SQLite's: a wider integer would
    otherwise reach the database and fail there as an OverflowError.
    """
    if isinstance(value, bool):
        raise InvalidArgument(f"{name} must be an integer, got {value!r}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and is_integer_text(value):
        text = value.strip()
        if len(text.lstrip("+-").lstrip("0")) > 20:  # past 64 bits; int() refuses 4,300 digits and more
            bound = f"at least {low}" if text.startswith("-") else f"at most {high}"
            raise ValidationError(f"{name} must be {bound}, got {_shown_text(text)}")
        number = int(text)
    else:
        raise InvalidArgument(f"{name} must be an integer, got {_shown_text(repr(value))}")
    if number < low:
        raise ValidationError(f"{name} must be at least {low}, got {_shown_text(str(number))}")
    if number > high:
        raise ValidationError(f"{name} must be at most {high}, got {_shown_text(str(number))}")
    return number


def is_integer_text(value: str) -> bool:
    text = value.strip()
    digits = text[1:] if text[:1] in ("-", "+") else text
    return digits.isascii() and digits.isdigit()


def _shown_text(text: str) -> str:
    """A refused value as typed, unless it is too long to be worth echoing."""
    return text if len(text) <= 40 else f"{text[:20]}… ({len(text)} characters)"
