"""Hostile import files get a clear refusal (or a report of what was skipped), never a hang,
a crash or a runaway: through `nmem import` as a real subprocess, under a timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

DEEP = 5000


def nmem(home: Path, *args: str, stdin: Any = subprocess.DEVNULL, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NMEM_")}
    environ.update(NMEM_HOME=str(home), NMEM_FORMAT="json", **env)
    return subprocess.run([sys.executable, "-m", "nmem", *args], env=environ, stdin=stdin, capture_output=True,
                          text=True, timeout=60, check=False)


def contents(home: Path) -> list[str]:
    out = nmem(home, "export", "--format", "jsonl").stdout
    return [json.loads(line)["content"] for line in out.splitlines()[1:] if line.strip()]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.mark.parametrize("source", [[], ["mcp-memory"], ["claude-mem"], ["claude-code"], ["codex"]])
def test_a_fifo_is_refused_without_reading_it(tmp_path: Path, home: Path, source: list[str]) -> None:
    fifo = tmp_path / "memory.jsonl"
    os.mkfifo(fifo)
    done = nmem(home, "import", *source, str(fifo))   # a read would block: the timeout would fail the test
    assert done.returncode == 2, done.stderr
    assert "not a regular file" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("source", [["--format", "jsonl"], ["mcp-memory"]])
def test_a_device_is_refused(home: Path, source: list[str]) -> None:
    done = nmem(home, "import", *source, "/dev/zero")
    assert done.returncode == 2 and "not a regular file" in done.stderr


def test_files_past_the_size_cap_are_refused_before_reading(tmp_path: Path, home: Path) -> None:
    big = tmp_path / "big.jsonl"
    with big.open("wb") as fh:
        fh.truncate(2 * 1024 * 1024)
    for args in (["import", str(big)], ["import", "mcp-memory", str(big)]):
        done = nmem(home, *args, NMEM_IMPORT_MAX_FILE="1048576")
        assert done.returncode == 11, done.stderr
        assert "import.max_file_bytes" in done.stderr
    with open("/dev/zero", "rb") as zero:
        done = nmem(home, "import", "--format", "jsonl", stdin=zero, NMEM_IMPORT_MAX_FILE="1048576")
    assert done.returncode == 11 and "standard input is larger than import.max_file_bytes" in done.stderr
    assert contents(home) == []


def test_a_line_past_the_line_cap_is_skipped_and_the_rest_imported(tmp_path: Path, home: Path) -> None:
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps({"content": "kept"}) + "\n" + json.dumps({"content": "x" * 5000}) + "\n")
    done = nmem(home, "import", str(path), NMEM_IMPORT_MAX_LINE="1000")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["skipped"] == ["line 2: longer than import.max_line_bytes (1000 bytes)"]
    assert contents(home) == ["kept"]


def test_a_yaml_alias_bomb_is_refused_and_a_few_aliases_still_import(tmp_path: Path, home: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    levels = "\n".join(f"l{i + 1}: &l{i + 1} [" + ", ".join([f"*l{i}"] * 9) + "]" for i in range(9))
    bomb.write_text('l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n' + levels + "\n")
    done = nmem(home, "import", str(bomb))
    assert done.returncode == 2 and "import.yaml_alias_nodes" in done.stderr, done.stderr
    loop = tmp_path / "loop.yaml"
    loop.write_text("- &a [*a]\n")
    assert "contains itself" in nmem(home, "import", str(loop)).stderr
    shared = tmp_path / "shared.yaml"
    shared.write_text("- content: one\n  tags: &t [a, b]\n- content: two\n  tags: *t\n")
    assert nmem(home, "import", str(shared)).returncode == 0
    assert sorted(contents(home)) == ["one", "two"]


@pytest.mark.parametrize("name, text, good", [
    ("deep.jsonl", json.dumps({"content": "good"}) + '\n{"content": "bad", "tags": ' + "[" * DEEP + "]" * DEEP
     + "}\n", "line 2"),
    ("deep.json", '[{"content": "good"}, {"content": "bad", "metadata": ' + "[" * 300 + "]" * 300 + "}]",
     "document[1]"),
    ("deep.yaml", "- content: good\n- content: bad\n  tags: " + "[" * 900 + "]" * 900 + "\n", "document[1]"),
    ("deep.md", "<!-- nmem-export version=1 -->\n\n<!-- nmem:memory -->\n## good\n\n```yaml\ndomain: user\n```\n\n"
     "good\n\n<!-- nmem:memory -->\n## bad\n\n```yaml\ntags: " + "[" * 900 + "]" * 900 + "\n```\n\nbad\n", "line 12"),
])
def test_a_record_nested_too_deeply_is_skipped_and_reported(tmp_path: Path, home: Path, name: str, text: str,
                                                           good: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    done = nmem(home, "import", str(path))
    assert done.returncode == 0, done.stderr
    assert [s.split(":")[0] for s in json.loads(done.stdout)["skipped"]] == [good]
    assert "import.max_depth" in done.stderr
    assert contents(home) == ["good"]


def test_a_json_document_too_deep_to_parse_is_refused(tmp_path: Path, home: Path) -> None:
    path = tmp_path / "whole.json"
    path.write_text("[" * DEEP + "]" * DEEP)
    done = nmem(home, "import", str(path))
    assert done.returncode == 2 and "nested too deeply" in done.stderr and "Traceback" not in done.stderr


def test_mcp_memory_skips_a_deep_line_and_keeps_the_graph(tmp_path: Path, home: Path) -> None:
    path = tmp_path / "memory.jsonl"
    path.write_text(json.dumps({"type": "entity", "name": "Ada", "entityType": "person", "observations": ["codes"]})
                    + '\n{"type": "entity", "name": ' + "[" * DEEP + "]" * DEEP + "}\n")
    done = nmem(home, "import", "mcp-memory", str(path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["skipped"] == ["memory.jsonl, line 2: nested deeper than import.max_depth (100)"]
    assert len(contents(home)) == 1


def test_one_deep_line_in_one_transcript_keeps_the_directory(tmp_path: Path, home: Path) -> None:
    root = tmp_path / "projects" / "-work-demo"
    root.mkdir(parents=True)
    for n in (1, 2):
        sid = str(uuid.UUID(int=n))
        line = {"type": "user", "sessionId": sid, "cwd": "/work/demo", "timestamp": f"2026-01-0{n}T10:00:00Z",
                "uuid": f"u{n}", "message": {"role": "user", "content": f"prompt of session {n}"}}
        bad = '{"type": "user", "message": ' + "[" * DEEP + "]" * DEEP + "}\n" if n == 1 else ""
        (root / f"{sid}.jsonl").write_text(bad + json.dumps(line) + "\n")
    done = nmem(home, "import", "claude-code", str(root.parent))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["imported_sessions"] == 2
    assert any("skipped 1 line" in error for error in report["errors"])


def test_hand_written_memories_import_once(tmp_path: Path, home: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text("".join(json.dumps({"domain": "user", "content": f"note {i % 50}"}) + "\n" for i in range(200)))
    first = json.loads(nmem(home, "import", str(path)).stdout)["imported"]["memories"]
    assert (first["added"], first["unchanged"]) == (50, 150)
    again = json.loads(nmem(home, "import", str(path)).stdout)["imported"]["memories"]
    assert (again["added"], again["unchanged"]) == (0, 200)
