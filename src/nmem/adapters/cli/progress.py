"""Progress bars for long runs: on stderr, and only for a person watching it.

Nothing is drawn when stderr is not a terminal (a pipe, a log file) or under CI (the `CI`
environment variable most CI services set), so scripts and logs get only the command's
result.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click


def shown() -> bool:
    from nmem.adapters.cli.app import quiet

    return sys.stderr.isatty() and not os.environ.get("CI") and not quiet()


@contextmanager
def progress_bar(length: int, label: str) -> Iterator[Callable[[int], None]]:
    """`with progress_bar(n, "importing") as advance: advance(k)`."""
    if not shown() or length <= 0:
        yield lambda _steps: None
        return
    with click.progressbar(length=length, label=label, file=sys.stderr, show_pos=True) as bar:
        yield bar.update


@contextmanager
def progress_of(label: str) -> Iterator[Callable[[int, int], None]]:
    """A bar whose total is learnt on the way (`advance(done, total)`), e.g. pages of a copy."""
    if not shown():
        yield lambda _done, _total: None
        return
    bars: list[Any] = []  # the bar, once the first report gives its length
    shown_so_far = [0]

    def advance(done: int, total: int) -> None:
        if not bars:
            bars.append(click.progressbar(length=total, label=label, file=sys.stderr, show_pos=True))
            bars[0].__enter__()
        bars[0].update(done - shown_so_far[0])
        shown_so_far[0] = done

    try:
        yield advance
    finally:
        if bars:
            bars[0].__exit__(None, None, None)
