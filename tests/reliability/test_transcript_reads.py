"""The Stop hook reads `transcript_path` from its input: only a regular file is read, only its
tail, and never while the hook holds the database's write lock.

A FIFO used to hang the hook inside its write transaction (every other hook then waited and
spooled), and /dev/zero grew one hook to 23 GB. Each case runs a real hook process with its
address space capped at 1 GiB and a timeout, and the Stop must still be stored: the session
closed, the closing message kept.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fixtures.harness import hook_env, query

CWD = "/home/dev/code/transcripts"
MEMORY_CAP = 1 << 30
# `python -m nmem record` with the address space capped: a hook that reads a device into
# memory fails here instead of taking the machine's memory.
CAPPED_HOOK = (
    "import resource, runpy, sys\n"
    f"resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_CAP}, {MEMORY_CAP}))\n"
    "sys.argv = ['nmem', 'record']\n"
    "runpy.run_module('nmem', run_name='__main__', alter_sys=True)\n"
)


def stop(home: Path, transcript: str, session: str) -> subprocess.CompletedProcess[str]:
    payload = {"session_id": session, "cwd": CWD, "hook_event_name": "Stop", "transcript_path": transcript,
               "last_assistant_message": f"done with {session}"}
    return subprocess.run([sys.executable, "-c", CAPPED_HOOK], input=json.dumps(payload), capture_output=True,
                          text=True, env=hook_env(home), timeout=30, check=False)


def start(home: Path, session: str) -> None:
    payload = {"session_id": session, "cwd": CWD, "hook_event_name": "UserPromptSubmit", "transcript_path": "",
               "prompt": f"work on {session}"}
    done = subprocess.run([sys.executable, "-m", "nmem", "record"], input=json.dumps(payload), capture_output=True,
                          text=True, env=hook_env(home), timeout=30, check=False)
    assert (done.returncode, done.stderr) == (0, "")


def agent_prompts(home: Path, session: str) -> list[str]:
    rows = query(home, "SELECT content FROM prompts WHERE session_id = ? AND source <> 'user' ORDER BY id", session)
    return [r["content"] for r in rows]


def assert_stop_stored(home: Path, session: str, done: subprocess.CompletedProcess[str]) -> None:
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    (row,) = query(home, "SELECT ended_at FROM sessions WHERE id = ?", session)
    assert row["ended_at"] is not None
    assert agent_prompts(home, session) == [f"done with {session}"]


def transcript_lines(thought: str) -> bytes:
    lines: list[dict[str, Any]] = [
        {"type": "user", "message": {"role": "user", "content": "tidy the export module"}},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "thinking", "thinking": thought}, {"type": "text", "text": "Tidied."}]}},
    ]
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def test_a_fifo_is_not_read(tmp_path: Path) -> None:
    home = tmp_path / "home"
    start(home, "fifo")
    fifo = tmp_path / "transcript.fifo"
    os.mkfifo(fifo)  # no writer: opening it for reading would block forever
    assert_stop_stored(home, "fifo", stop(home, str(fifo), "fifo"))


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_is_not_read(tmp_path: Path, device: str) -> None:
    home = tmp_path / "home"
    start(home, "device")
    assert_stop_stored(home, "device", stop(home, device, "device"))


def test_a_symlink_to_a_device_is_not_followed_into_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    start(home, "link")
    link = tmp_path / "session.jsonl"
    link.symlink_to("/dev/zero")
    assert_stop_stored(home, "link", stop(home, str(link), "link"))


def test_a_directory_is_not_read(tmp_path: Path) -> None:
    home = tmp_path / "home"
    start(home, "dir")
    assert_stop_stored(home, "dir", stop(home, str(tmp_path), "dir"))


def test_a_huge_transcript_is_read_from_its_tail_only(tmp_path: Path) -> None:
    """4 GiB (sparse) ahead of the last turn: far past the memory cap if read whole."""
    home = tmp_path / "home"
    start(home, "huge")
    transcript = tmp_path / "huge.jsonl"
    with transcript.open("wb") as fh:
        fh.truncate(4 << 30)
        fh.seek(4 << 30)
        fh.write(b"\n" + transcript_lines("the export writes rows as they come"))
    done = stop(home, str(transcript), "huge")
    assert (done.returncode, done.stderr) == (0, "")
    assert agent_prompts(home, "huge") == ["the export writes rows as they come", "Tidied.", "done with huge"]


def test_a_regular_transcript_through_a_symlink_is_read(tmp_path: Path) -> None:
    home = tmp_path / "home"
    start(home, "regular")
    transcript = tmp_path / "real.jsonl"
    transcript.write_bytes(transcript_lines("stream instead of buffering"))
    link = tmp_path / "link.jsonl"
    link.symlink_to(transcript)
    done = stop(home, str(link), "regular")
    assert (done.returncode, done.stderr) == (0, "")
    assert agent_prompts(home, "regular") == ["stream instead of buffering", "Tidied.", "done with regular"]


def test_an_import_skips_a_line_too_long_to_be_a_message(tmp_path: Path) -> None:
    """`nmem import` reads whole transcripts: a 96 MiB run without a newline is skipped in
    bounded memory (the address space capped at 96 MiB), and the lines after it are read."""
    transcript = tmp_path / "long-line.jsonl"
    with transcript.open("wb") as fh:
        fh.truncate(96 << 20)
        fh.seek(96 << 20)
        fh.write(b"\n" + transcript_lines("after the long line"))
    script = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({96 << 20}, {96 << 20}))\n"
        "from nmem.capture.transcript import iter_lines\n"
        "print(sum(1 for _ in iter_lines(sys.argv[1])))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(transcript)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "2", "")
