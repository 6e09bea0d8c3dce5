"""Progress bars of long runs: drawn on a terminal's stderr, never on a pipe or under CI."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_nmem


def export_file(tmp_path: Path) -> Path:
    path = tmp_path / "many.jsonl"
    lines = [json.dumps({"kind": "memory", "namespace": "learnings", "content": f"Fact number {i}"}) for i in range(50)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def stderr_on_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """Run nmem with stderr on a pseudo-terminal; what it drew there."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "nmem", *args], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=follower, env=env, timeout=60, check=False)
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal has no writer left
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.returncode == 0, b"".join(chunks)
        return b"".join(chunks).decode("utf-8", "replace")
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)


@pytest.mark.parametrize("ci", [False, True])
def test_import_draws_a_bar_only_for_a_person(nmem_home: Path, tmp_path: Path, ci: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "true"
    drawn = stderr_on_a_terminal(["import", str(export_file(tmp_path))], env)
    assert ("importing" in drawn) is not ci


def test_no_bar_on_a_pipe(nmem_home: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    result = run_nmem(["--format", "json", "import", str(export_file(tmp_path))], env=env)
    assert result.returncode == 0 and result.stderr == ""
    assert json.loads(result.stdout)["imported"]["memories"]["added"] == 50
