"""The light path (`nmem.adapters.cli.light`): `search`, `recall`, `get`, `status` and `capture`
run without click, and print exactly what the click commands print.

Every case runs the same command line twice through the installed `nmem` console script (the
program users run): once as users run it (light path) and once with `NMEM_CLI_LIGHT=0` (the full
click CLI), and compares stdout, stderr and the exit code. `-X importtime` tells which path a
process took.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nmem.adapters.cli import light
from nmem.service import recall
from nmem.service.api import Service
from test_cli_support import CWD, seed


def nmem(args: list[str], home: Path, *, stdin: str = "", light_path: bool = True, cwd: str | None = None,
         importtime: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NMEM_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["NMEM_HOME"] = str(home)
    if not light_path:
        env[light.LIGHT_ENV] = "0"
    flags = ["-X", "importtime"] if importtime else []
    return subprocess.run([sys.executable, *flags, SCRIPT, *args], input=stdin, capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=60, check=False)


SCRIPT = str(Path(sys.executable).parent / "nmem")  # pip's console script, as installed


def imported(done: subprocess.CompletedProcess[str]) -> set[str]:
    return {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


@pytest.fixture
def home(service: Service, nmem_home: Path) -> Path:
    seed(service)
    service.capture("Tokens live for an hour since the auth fix", summary="Token lifetime is one hour",
                    namespace="decisions", tags=["auth"], domain="project:demo")
    service.capture("Run the auth tests with -q", summary="Quiet auth tests", namespace="learnings",
                    domain="user")
    service.close()  # the file as the processes find it: no WAL of this process left behind
    return nmem_home


SAME = [
    ["search", "pytest"],
    ["search", "pytest", "--format", "json"],
    ["--format", "json", "search", "auth", "--scope", "observations", "--limit", "2"],
    ["search", "auth", "--full"],
    ["search", "auth", "--ids"],
    ["search", "--type", "command,command_error", "--order", "date_asc"],
    ["search", "token", "--project", "*", "--since", "7d", "--format=markdown"],
    ["search", "token", "--project", "*", "--since", "yesterday", "--until", "today"],
    ["search", "nothing-matches-this"],
    ["-q", "search", "pytest"],
    ["search", "pytest", "--format", "yaml"],
    ["search", "auth", "--session", "s1", "--offset", "1"],
    ["search", "auth", "--session", "no-such-session"],
    ["search", "auth", "--file", "src/auth.py"],
    ["recall", "auth"],
    ["recall", "--format", "json", "--detail", "full", "-n", "decisions"],
    ["recall", "token", "--tag", "auth", "--project", "*", "--limit", "5"],
    ["recall", "auth", "-l", "1", "--format", "json"],
    ["recall", "auth", "--domain", "user", "--include-archived"],
    ["get", "1", "2"],
    ["get", "1", "p1", "--format", "json"],
    ["get", "999999"],
    ["get", "1", "999999"],
    ["status"],
    ["status", "-v", "--format", "markdown"],
    ["status", "--domain", "user", "--verify"],
    ["status", "--domain", "nowhere"],
    ["--format", "quiet", "status"],
]


@pytest.mark.parametrize("args", SAME, ids=" ".join)
def test_the_light_path_prints_what_the_click_command_prints(home: Path, args: list[str]) -> None:
    fast = nmem(args, home, cwd=CWD if os.path.isdir(CWD) else None, importtime=True)
    full = nmem(args, home, light_path=False, cwd=CWD if os.path.isdir(CWD) else None)
    assert "nmem.adapters.cli.light" in imported(fast)
    assert "click" not in imported(fast), "the light path loaded click"
    fast_err = "".join(line + "\n" for line in fast.stderr.splitlines() if not line.startswith("import time:"))
    assert (fast.returncode, fast.stdout, fast_err) == (full.returncode, full.stdout, full.stderr)


def test_capture_writes_once_and_answers_as_the_click_command(home: Path) -> None:
    args = ["capture", "decisions", "Use WAL mode", "--content", "Readers never block the writer", "--tags",
            "sqlite,db", "--domain", "user", "--format", "json"]
    fast, full = nmem(args, home, importtime=True), nmem(args, home, light_path=False)
    assert "click" not in imported(fast)
    assert fast.returncode == full.returncode == 0, (fast.stderr[-500:], full.stderr)
    a, b = json.loads(fast.stdout), json.loads(full.stdout)
    # two memories now: the second is a duplicate of the first, and says so
    assert a["memory_id"] != b["memory_id"]
    different = {"id", "ref", "memory_id", "uri", "urn", "timestamp", "created_at", "updated_at", "warning"}
    assert {k: v for k, v in a.items() if k not in different} == {k: v for k, v in b.items() if k not in different}
    text = nmem(["capture", "learnings", "From stdin", "--stdin"], home, stdin="body on stdin\n")
    assert text.returncode == 0 and text.stdout.startswith("✓ Captured memory: learnings/")
    empty_fast = nmem(["capture", "learnings", "Empty", "--stdin"], home, stdin="  \n")
    empty_full = nmem(["capture", "learnings", "Empty", "--stdin"], home, stdin="  \n", light_path=False)
    assert (empty_fast.returncode, empty_fast.stdout, empty_fast.stderr) == \
        (empty_full.returncode, empty_full.stdout, empty_full.stderr) == \
        (2, "", "nmem: --stdin was given but standard input is empty\n")


@pytest.mark.parametrize("fmt", ["markdown", "html"])
def test_settings_from_home_and_config_options_read_alike_on_both_paths(home: Path, tmp_path: Path,
                                                                        fmt: str) -> None:
    """`--home` and `--config` name where the settings come from (`RunState`, one for both paths):
    the config's `cli.format` is used, or refused in the same words."""
    config = tmp_path / "other.toml"
    config.write_text(f'[cli]\nformat = "{fmt}"\n', encoding="utf-8")
    args = ["--home", str(home), "--config", str(config), "status"]
    elsewhere = tmp_path / "elsewhere"   # NMEM_HOME of the processes: --home must win
    fast, full = nmem(args, elsewhere, importtime=True), nmem(args, elsewhere, light_path=False)
    assert "click" not in imported(fast)
    fast_err = "".join(line + "\n" for line in fast.stderr.splitlines() if not line.startswith("import time:"))
    assert (fast.returncode, fast.stdout, fast_err) == (full.returncode, full.stdout, full.stderr)
    if fmt == "markdown":
        assert fast.returncode == 0 and fast.stdout.startswith("# nmem status") and "observations" in fast.stdout
    else:
        assert (fast.returncode, fast.stdout, fast_err) == (
            3, "", "nmem: cli.format: unknown format 'html'; use one of text, json, yaml, markdown, quiet\n")
    assert not elsewhere.exists()


UNREADABLE = "as a date (use 2026-05-01, an ISO time or epoch seconds)"
BAD_DATES = [
    (["search", "auth", "--since", "garbage"], f"nmem: --since: cannot read 'garbage' {UNREADABLE}"),
    (["search", "auth", "--until", "2026-13-45"], f"nmem: --until: cannot read '2026-13-45' {UNREADABLE}"),
    (["search", "--since", "12q"], "nmem: --since: expected an age like 30d, 12h or 2w, got '12q'"),
    (["search", "auth", "--since", "today", "--until", "yesterday"], "nmem: --since is after --until"),
]


def trail_rows(home: Path) -> list[Any]:
    conn = sqlite3.connect(home / "nmem.db")
    try:
        return [conn.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall()
                for t in ("sessions", "prompts", "observations", "memories")]
    finally:
        conn.close()


@pytest.mark.parametrize(("args", "error"), BAD_DATES, ids=lambda a: " ".join(a) if isinstance(a, list) else "")
def test_an_unreadable_date_names_the_option_typed_on_both_paths_and_changes_nothing(
        home: Path, args: list[str], error: str) -> None:
    before = trail_rows(home)
    fast, full = nmem(args, home, importtime=True), nmem(args, home, light_path=False)
    assert "click" not in imported(fast)
    fast_err = "".join(line + "\n" for line in fast.stderr.splitlines() if not line.startswith("import time:"))
    assert (fast.returncode, fast.stdout, fast_err) == (full.returncode, full.stdout, full.stderr) == \
        (2, "", error + "\n")
    assert trail_rows(home) == before


DEFERRED = [
    ["search", "--help"],
    ["search", "-h"],
    ["search", "--bogus"],
    ["search", "a", "b"],
    ["search", "--limit", "many"],
    ["search", "--limit", "99999999999999999999"],
    ["search", "--scope", "everything"],
    ["search", "--full=yes"],
    ["search", "--project"],
    ["get"],
    ["status", "extra"],
    ["recall", "--min-similarity", "0.5", "x"],
    ["capture", "decisions"],
    ["capture", "decisions", "x", "--stdin", "--content", "y"],
    ["-v", "status"],
    ["--format", "xml", "status"],
    ["--config", "/no/such/file.toml", "status"],
    ["search", "--", "-x"],
]


@pytest.mark.parametrize("args", DEFERRED, ids=" ".join)
def test_what_the_light_parser_does_not_read_for_certain_goes_to_click(home: Path, args: list[str]) -> None:
    assert light.main(list(args)) is None   # before it reads or opens anything
    done = nmem(args, home, importtime=True)
    assert "click" in imported(done)
    full = nmem(args, home, light_path=False)
    err = "".join(line + "\n" for line in done.stderr.splitlines() if not line.startswith("import time:"))
    assert (done.returncode, done.stdout, err) == (full.returncode, full.stdout, full.stderr)


def test_other_commands_never_take_the_light_path(home: Path) -> None:
    for args in (["timeline", "1"], ["sessions"], ["--version"], ["remember", "x"]):
        assert light.main(args) is None


def test_the_light_specs_match_the_click_commands() -> None:
    """Each option the light parser reads is one the click command declares, with the same
    choices and defaults; a new click option the light path does not know sends it to click."""
    import click

    from nmem.adapters.cli import cli

    assert light.RECALL_MODES == recall.RECALL_MODES and light.RECALL_DETAILS == recall.RECALL_DETAILS
    for name, spec in light.SPECS.items():
        command = cli.commands[name]
        options = {opt: p for p in command.params if isinstance(p, click.Option) for opt in p.opts}
        arguments = [p.name for p in command.params if isinstance(p, click.Argument)]
        assert [a.removesuffix("...") for a in spec.arguments] == arguments, name
        for opt, (dest, kind) in spec.options.items():
            param = options[opt]
            assert param.name == dest, (name, opt)
            if isinstance(kind, light.Choice):
                assert isinstance(param.type, click.Choice) and tuple(param.type.choices) == kind.values, opt
            if kind == light.FLAG:
                assert param.is_flag, opt
            if kind == light.MULTI:
                assert param.multiple, opt
        for dest, default in spec.defaults.items():
            param = next(p for p in command.params if p.name == dest)
            assert param.default == default, (name, dest)


# What a light command must not load: click and the whole API, and the standard modules whose
# import cost more than the command itself (`typing` and `dataclasses` bring `inspect`, `ast`,
# `dis`, `tokenize`); `re` (with `enum`) and `datetime` come only with a search or recall.
HEAVY = ("click", "typing", "dataclasses", "inspect", "contextlib", "json", "nmem.service.api", "nmem.service.core",
         "nmem.capture.recorder")
NO_SEARCH = ("re", "enum", "datetime", "nmem.search", "nmem.lifecycle")
LIGHT_COMMANDS = {
    "search": (["search", "pytest"], HEAVY),
    "recall": (["recall", "auth"], HEAVY),
    "get": (["get", "1", "p1"], HEAVY + NO_SEARCH),
    "status": (["status"], HEAVY + NO_SEARCH),
    "capture": (["capture", "learnings", "Quiet tests", "--content", "pytest -q", "--tags", "ci"], HEAVY + NO_SEARCH),
}


@pytest.mark.sqlite_only("what the default engine loads: PostgreSQL's driver brings `re`, `json` and more")
@pytest.mark.parametrize("command", sorted(LIGHT_COMMANDS))
def test_a_light_command_loads_only_what_it_runs(home: Path, command: str) -> None:
    args, forbidden = LIGHT_COMMANDS[command]
    done = nmem(args, home, cwd=CWD if os.path.isdir(CWD) else None, importtime=True)
    assert done.returncode == 0, done.stderr[-500:]
    modules = imported(done)
    assert f"nmem.service.{'memories' if command == 'capture' else command}" in modules or command == "get"
    loaded = sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in forbidden))
    assert loaded == [], loaded
