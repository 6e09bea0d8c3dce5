"""What a test worker that died printed as it died, at the end of the run. Under xdist a worker
killed by a signal (a segmentation fault in C code, say) is reported only as "worker crashed";
its Python traceback goes to the middle of the progress output, where a CI log cut to its end
loses it. Each worker writes its fatal-error traceback (`faulthandler`) to a file of its own, and
the controller prints the files that are not empty in the run's summary."""

from __future__ import annotations

import faulthandler
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Any

import pytest

CRASH_DIR = "NMEM_TEST_CRASH_DIR"
SHOWN_LINES = 12   # frames of the struck thread shown
_open: list[IO[str]] = []


@pytest.hookimpl(trylast=True)   # after pytest's own faulthandler plugin, which points it at stderr
def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:   # the controller (or a run without xdist): the workers it starts inherit the place
        if CRASH_DIR not in os.environ:
            os.environ[CRASH_DIR] = tempfile.mkdtemp(prefix="nmem-test-crashes-")
        return
    log = open(Path(os.environ[CRASH_DIR]) / f"{worker}.log", "a", encoding="utf-8")  # noqa: SIM115 - open until the process ends
    _open.append(log)
    faulthandler.enable(file=log, all_threads=True)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") is not None or CRASH_DIR not in os.environ:
        return
    place = Path(os.environ[CRASH_DIR])
    for log in sorted(place.glob("*.log")):
        lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        if lines:
            terminalreporter.section(f"test worker {log.stem} died", sep="-")
            terminalreporter.write_line("\n".join(died_where(lines)))
            terminalreporter.write_line(f"(every thread's stack: {log})")
    if not any(p.stat().st_size for p in place.glob("*.log")):
        shutil.rmtree(place, ignore_errors=True)


def died_where(lines: list[str]) -> list[str]:
    """The fatal error and the innermost frames of the thread it struck (faulthandler prints every
    thread, most recent call first): what a log cut to its last lines should still hold."""
    error = [line for line in lines if line.startswith("Fatal Python error")][:1]
    start = next((i for i, line in enumerate(lines) if line.startswith("Current thread")), None)
    if start is None:
        return lines[:SHOWN_LINES]
    return error + lines[start:start + 1 + SHOWN_LINES]
