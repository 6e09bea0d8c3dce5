"""A test worker that dies (a segmentation fault in C code) is named in the run's summary with
the fatal error and the frames of the thread it struck, not only as "worker crashed"
(tests/crash_report.py): a CI log shows its last lines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from crash_report import CRASH_DIR

TESTS = Path(__file__).resolve().parent

DIES = """
import ctypes


def test_lives() -> None:
    pass


def test_dies_in_c() -> None:
    ctypes.string_at(0)
"""


def test_a_dead_workers_fatal_error_and_frames_are_in_the_summary(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_dies.py").write_text(DIES)
    (tests / "conftest.py").write_text("from crash_report import pytest_configure, pytest_terminal_summary\n")
    # its own place for the logs (not this run's, whose summary would report the death as its own)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env.update(PYTHONPATH=str(TESTS), **{CRASH_DIR: str(tmp_path / "crashes")})
    (tmp_path / "crashes").mkdir()
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-q", "-p", "no:cacheprovider", "tests"],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120, check=False)
    summary = done.stdout[done.stdout.index("= FAILURES ="):]
    assert done.returncode == 1 and "1 failed, 1 passed" in summary, done.stdout[-3000:]
    assert "died ---" in summary and "Fatal Python error: Segmentation fault" in summary
    assert 'test_dies.py", line 10 in test_dies_in_c' in summary
