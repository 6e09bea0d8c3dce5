"""Click parameter types that check what they parse by the service's own rules."""

from __future__ import annotations

from typing import Any

import click

from nmem.errors import InvalidArgument
from nmem.util.numbers import INT_MAX, INT_MIN, as_int


class Integer(click.types.IntParamType):
    """An integer option or argument within `low..high` (by default SQLite's 64 bits).

    Click's `int` takes integers of any size, and one beyond 64 bits used to fail deep in
    SQLite as an internal error. Text that is not an integer is a usage error (exit 2); an
    integer out of range is a `ValidationError` (exit 11), as it is from the service.
    """

    name = "integer"

    def __init__(self, low: int = INT_MIN, high: int = INT_MAX) -> None:
        self.low = low
        self.high = high

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        label = _label(param)
        try:
            return as_int(value, label, self.low, self.high)
        except InvalidArgument:
            self.fail(f"{value!r} is not an integer", param, ctx)

    def __repr__(self) -> str:
        return f"Integer({self.low}, {self.high})"


def _label(param: click.Parameter | None) -> str:
    """How the user typed the parameter: `--limit`, or an argument's metavar (`ANCHOR`)."""
    if param is None:
        return "value"
    if isinstance(param, click.Option):
        return max(param.opts, key=len)
    return (param.name or "value").upper()
