"""What the two engines spell differently, as each engine's `Dialect` answers it, and the
helpers that are the same on both."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Protocol
else:
    Protocol = object

LN2 = 0.6931471805599453
HALF_LIFE_DAYS = 7.0
DECAY_PER_SECOND = -LN2 / (HALF_LIFE_DAYS * 86400.0)   # recency = exp(DECAY_PER_SECOND * age)


def marks(n: int) -> str:
    """`?,?,?` for an `IN (…)` list of n values."""
    return ",".join("?" * n)


def each_of(select: str, count: int) -> str:
    """`select` (a bounded read of one key: its `?`s first) once for each of `count` keys, as one
    statement: a UNION ALL of index reads that stop at their LIMIT, where a window function over
    every row of the keys would read each one whole."""
    if count == 1:
        return select
    return " UNION ALL ".join(f"SELECT * FROM ({select}) AS each{i}" for i in range(count))


def like_escape(text: str) -> str:
    """`text` with LIKE's wildcards and the escape character itself escaped (`ESCAPE '\\'`)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def like_suffix(value: str) -> str:
    """A LIKE pattern for paths ending in `value` at a separator: "auth.py" is not "oauth.py"."""
    return "%/" + like_escape(value)


class Dialect(Protocol):
    name: str
    lock_rows: str    # appended to a SELECT that must hold its rows until the transaction ends
    same_as: str      # `a {same_as} b`: equal, NULL matching NULL
    binary: str       # after a text column: compare and sort it by code point, as SQLite does
    # how many keys' bounded reads one statement carries (`each_of`): where a statement is a
    # round trip, many; in-process, one (a cached statement run again costs less than preparing
    # a compound one)
    keys_per_statement: int

    def tag_match(self, alias: str) -> str:
        """A condition: memory `alias`'s tags (a JSON array as text) hold the one `?` value."""

    def recency(self, column: str) -> str:
        """0..1 with a 7-day half-life from `column` to the `?` now (the future counts as now)."""

    def in_ids(self, column: str, values: Sequence[Any]) -> tuple[str, Any]:
        """A condition that `column` is one of `values` (any number of them), and its one parameter."""

    def utc_day(self, column: str) -> str:
        """`YYYY-MM-DD` of the UTC day holding the epoch seconds in `column`."""
