"""The hook path imports only the standard library and nmem's light modules.

`python -X importtime -m nmem record` lists every module a hook run imports (on stderr);
each top-level name must be in `sys.stdlib_module_names` or be `nmem` itself, and none of
the heavy or CLI-only packages may appear.
"""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fixtures.harness import event, hook_env, hook_ok, query

FORBIDDEN = ("click", "yaml", "mcp", "pydantic", "numpy", "rich", "typer", "httpx", "httpx2", "nmem.lifecycle",
             "starlette", "uvicorn", "psycopg", "sentence_transformers", "torch",
             "nmem.adapters.cli", "nmem.adapters.mcp", "nmem.adapters.http",
             "nmem.service.api", "nmem.service.lifecycle")
# Names importtime prints that are not imports of the hook: the interpreter's own start-up
# (site's .pth files, the sitecustomize probe) is measured separately, and `copy` probes for
# Jython's `org.python.core` (a failed import that importtime still lists).
JYTHON_PROBE = "org"


def importtime(args: list[str], stdin: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    done = subprocess.run([sys.executable, "-X", "importtime", *args], input=stdin, capture_output=True,
                          text=True, env=env, timeout=60, check=False)
    modules = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name and name != "imported package":
                modules.append(name)
    return done, modules


@pytest.fixture
def startup_modules(tmp_path: Path) -> set[str]:
    """Modules a bare `python -c pass` imports in this environment (site, .pth hooks)."""
    _, modules = importtime(["-c", "pass"], "", hook_env(tmp_path / "bare"))
    return set(modules)


def check_hook_imports(modules: list[str], startup: set[str]) -> None:
    assert "nmem.adapters.hooks.run" in modules, "importtime output not parsed; is -X importtime working?"
    imported = [m for m in modules if m not in startup]
    tops = {m.split(".")[0] for m in imported}
    foreign = sorted(t for t in tops if t not in sys.stdlib_module_names and t not in ("nmem", JYTHON_PROBE))
    assert foreign == [], f"hook path imports non-stdlib modules: {foreign}"
    heavy = sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in FORBIDDEN))
    assert heavy == [], f"hook path imports heavy or CLI-only modules: {heavy}"


def seed(home: Path) -> None:
    """A database with some history, so SessionStart really renders context."""
    cwd = "/home/dev/code/imports-demo"
    hook_ok(home, event("UserPromptSubmit", "seed", cwd, prompt="[decision] keep the hook path stdlib-only"))
    hook_ok(home, event("PostToolUse", "seed", cwd, tool_name="Edit",
                        tool_input={"file_path": f"{cwd}/src/app.py", "old_string": "a", "new_string": "b"},
                        tool_response={"filePath": f"{cwd}/src/app.py"}))


POST_TOOL_USE: dict[str, Any] = event(
    "PostToolUse", "imports-1", "/home/dev/code/imports-demo", tool_name="Bash", tool_use_id="toolu_01",
    tool_input={"command": "pytest -q", "description": "Run tests"},
    tool_response={"stdout": "3 passed in 0.01s", "stderr": "", "interrupted": False, "isImage": False})


@pytest.mark.parametrize("args", [["-m", "nmem", "record"], ["-m", "nmem", "hook", "post-tool-use"]],
                         ids=["record", "hook-post-tool-use"])
def test_post_tool_use_imports_only_stdlib_and_nmem(tmp_path: Path, startup_modules: set[str],
                                                     args: list[str]) -> None:
    home = tmp_path / "home"
    seed(home)
    done, modules = importtime(args, json.dumps(POST_TOOL_USE), hook_env(home))
    assert done.returncode == 0, done.stderr[-2000:]
    check_hook_imports(modules, startup_modules)


def test_session_start_context_rendering_imports_only_stdlib_and_nmem(tmp_path: Path,
                                                                      startup_modules: set[str]) -> None:
    home = tmp_path / "home"
    seed(home)
    payload = event("SessionStart", "imports-2", "/home/dev/code/imports-demo", source="startup")
    done, modules = importtime(["-m", "nmem", "record"], json.dumps(payload), hook_env(home))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "<nmem-context>" in done.stdout, "SessionStart rendered no context; the test would prove nothing"
    assert "nmem.context.block" in modules
    check_hook_imports(modules, startup_modules)


def test_user_prompt_with_marker_imports_only_stdlib_and_nmem(tmp_path: Path, startup_modules: set[str]) -> None:
    home = tmp_path / "home"
    payload = event("UserPromptSubmit", "imports-3", "/home/dev/code/imports-demo",
                    prompt="[learned] WAL readers never block the writer")
    done, modules = importtime(["-m", "nmem", "record"], json.dumps(payload), hook_env(home))
    assert done.returncode == 0, done.stderr[-2000:]
    check_hook_imports(modules, startup_modules)


def test_remote_record_imports_only_stdlib_and_nmem(tmp_path: Path, startup_modules: set[str]) -> None:
    """`nmem record --remote URL` with nothing listening: http.client is tried, the event spooled."""
    home = tmp_path / "home"
    payload = event("UserPromptSubmit", "imports-4", "/home/dev/code/imports-demo", prompt="sent to a team server")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done, modules = importtime(["-m", "nmem", "record", "--remote", f"http://127.0.0.1:{port}"],
                               json.dumps(payload), hook_env(home))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "nmem.adapters.hooks.remote" in modules and "http.client" in modules
    assert list((home / "spool" / "remote").rglob("*.json")), "the event was not kept for later"
    check_hook_imports(modules, startup_modules)


def test_the_import_check_would_catch_a_cli_import(tmp_path: Path, startup_modules: set[str]) -> None:
    """The same parser sees click when the CLI is loaded, so a pass above is meaningful."""
    _, modules = importtime(["-m", "nmem", "--help"], "", hook_env(tmp_path / "home"))
    with pytest.raises(AssertionError):
        check_hook_imports([*modules, "nmem.adapters.hooks.run"], startup_modules)


# -- the installed command: designed to load nothing it does not need ---------------------------

# Standard-library modules whose import alone costs a hook several milliseconds on a small VM;
# the common events (a tool call, a plain prompt) need none of them.
HEAVY_STDLIB = ("re", "json", "enum", "typing", "dataclasses", "inspect", "pathlib", "datetime", "tomllib",
                "hashlib", "logging", "contextlib", "urllib", "traceback", "sqlite3", "fnmatch", "shlex")

COMMON_EVENTS: list[dict[str, Any]] = [
    POST_TOOL_USE,
    event("PostToolUse", "imports-4", "/home/dev/code/imports-demo", tool_name="Read",
          tool_input={"file_path": "/home/dev/code/imports-demo/src/billing/invoice.py"},
          tool_response={"type": "text", "file": {"numLines": 120}}),
    event("PostToolUse", "imports-4", "/home/dev/code/imports-demo", tool_name="Edit",
          tool_input={"file_path": "src/billing/invoice.py", "old_string": "rows = list(q)",
                      "new_string": "rows = iter(q)  # stream instead of buffering"},
          tool_response={"filePath": "/home/dev/code/imports-demo/src/billing/invoice.py"}),
    event("PostToolUse", "imports-4", "/home/dev/code/imports-demo", tool_name="Grep",
          tool_input={"pattern": "def export_rows", "path": "src"}, tool_response={"numFiles": 2, "filenames": []}),
    event("UserPromptSubmit", "imports-4", "/home/dev/code/imports-demo",
          prompt="make the invoice export stream rows instead of buffering them"),
]


# nmem's own modules a common event loads through the installed command: each costs a hook
# process its lookup, read and unmarshal (~0.15 ms on a small VM), so the path is kept to few,
# larger modules. A tool call loaded 43 at c20220e (before the redesign), 63 after it, 43 again
# since the store loads each concern on first use (a plain prompt one more: its marker reader);
# raise this only with a reason the next reader will accept (bench/hooks.py prints the count per
# event, and `--ir` the instructions).
HOOK_NMEM_MODULES = 45
# Loaded by other events or surfaces only: SessionStart and Stop start a sync; every concern of the
# SQLite engine but the trail (`store/sqlite/concerns.py`); curation (a marked prompt's memory);
# the team server's viewer; the sync outbox.
NOT_FOR_COMMON_EVENTS = ("nmem.sync", "nmem.store.sql.changes", "nmem.store.sql.lifecycle",
                         "nmem.store.sql.navigation", "nmem.store.sql.vectors", "nmem.store.oplog",
                         "nmem.store.sql.memories", "nmem.store.sqlite.search", "nmem.store.sql.context",
                         "nmem.store.sql.sync", "nmem.store.sql.team", "nmem.service.memories", "nmem.team")


def installed_command() -> list[str]:
    from nmem.setup.claude_code import hook_command

    return shlex.split(hook_command())


@pytest.mark.parametrize("payload", COMMON_EVENTS, ids=lambda p: p.get("tool_name") or p["hook_event_name"])
def test_installed_hook_command_loads_no_heavy_module_for_common_events(tmp_path: Path,
                                                                        payload: dict[str, Any]) -> None:
    home = tmp_path / "home"
    seed(home)
    python, *args = installed_command()
    assert python == sys.executable
    done, modules = importtime(args, json.dumps(payload), hook_env(home))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "nmem.adapters.hooks.run" in modules and "site" not in modules
    heavy = sorted({m.split(".")[0] for m in modules} & set(HEAVY_STDLIB))
    assert heavy == [], f"the hook path loads {heavy} for a {payload['hook_event_name']} event"
    own = [m for m in modules if m == "nmem" or m.startswith("nmem.")]
    assert len(own) <= HOOK_NMEM_MODULES, f"{len(own)} nmem modules for one {payload['hook_event_name']}: {own}"
    extra = sorted(m for m in own if any(m == n or m.startswith(n + ".") for n in NOT_FOR_COMMON_EVENTS))
    assert extra == [], f"a {payload['hook_event_name']} loads {extra}"


# A Stop stores the turn's replies (the trail, and the session's earlier replies from the context
# concern), closes the session and may start a sync: it searches nothing, so of the rest it loads none.
STOP_MAY_LOAD = ("nmem.sync", "nmem.store.sql.context")


def test_installed_stop_loads_no_search_concern(tmp_path: Path) -> None:
    home = tmp_path / "home"
    seed(home)
    payload = event("Stop", "seed", "/home/dev/code/imports-demo", last_assistant_message="The hook path stays stdlib.")
    _python, *args = installed_command()
    done, modules = importtime(args, json.dumps(payload), hook_env(home))
    assert (done.returncode, done.stdout) == (0, ""), done.stderr[-2000:]
    replies = query(home, "SELECT content FROM prompts WHERE session_id = 'seed' AND source = 'agent'")
    assert replies == [{"content": "The hook path stays stdlib."}], "the Stop stored nothing; the test proves nothing"
    assert "nmem.capture.summary" in modules and "nmem.store.sql.context" in modules
    own = [m for m in modules if m == "nmem" or m.startswith("nmem.")]
    extra = sorted(m for m in own if any(m == n or m.startswith(n + ".")
                                         for n in NOT_FOR_COMMON_EVENTS if n not in STOP_MAY_LOAD))
    assert extra == [], f"a Stop loads {extra}"


def test_a_config_file_is_parsed_once_then_read_from_its_cache(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text("[capture]\ndedup_window = 60\n", encoding="utf-8")
    args = installed_command()[1:]
    first, first_modules = importtime(args, json.dumps(POST_TOOL_USE), hook_env(home))
    second, second_modules = importtime(args, json.dumps(POST_TOOL_USE), hook_env(home))
    assert first.returncode == second.returncode == 0, (first.stderr[-1000:], second.stderr[-1000:])
    assert "tomllib" in first_modules
    assert "tomllib" not in second_modules and "re" not in second_modules


def test_the_heavy_module_check_would_catch_the_console_script_path(tmp_path: Path) -> None:
    """`-m nmem record` loads runpy's helpers and `nmem record` pip's `re`: the check above can fail."""
    home = tmp_path / "home"
    seed(home)
    done, modules = importtime(["-m", "nmem", "record"], json.dumps(POST_TOOL_USE), hook_env(home))
    assert done.returncode == 0
    assert {m.split(".")[0] for m in modules} & set(HEAVY_STDLIB)


# -- the other agents' adapters: the same budget, through the command `nmem install <agent>` writes ------

def agent_command(agent: str) -> list[str]:
    from nmem.setup import codex, cursor, gemini, opencode

    if agent == "opencode":
        return opencode.hook_argv()
    return shlex.split({"codex": codex, "gemini": gemini, "cursor": cursor}[agent].hook_command())


def agent_events() -> list[tuple[str, dict[str, Any]]]:
    from fixtures import codex_shapes as cx
    from fixtures import cursor_shapes as cu
    from fixtures import gemini_shapes as gm

    cwd = "/home/dev/code/imports-demo"
    return [
        ("cursor", cu.shell(cwd, "npm test", "12 passed")),
        ("opencode", {"hook_event_name": "tool.execute.after", "session_id": "ses_1", "cwd": cwd, "tool": "edit",
                      "args": {"filePath": f"{cwd}/src/a.ts", "oldString": "a", "newString": "b"}, "output": "",
                      "metadata": {}}),
        ("cursor", cu.file_edit(cwd, f"{cwd}/src/a.ts", "a", "b")),
        ("cursor", cu.prompt(cwd, "stream the invoice export")),
        ("gemini", gm.shell(cwd, "pytest -q", "3 passed")),
        ("gemini", gm.after_tool(cwd, "replace", {"file_path": f"{cwd}/src/a.py", "old_string": "a",
                                                  "new_string": "b"}, "Successfully modified")),
        ("gemini", gm.before_agent(cwd, "stream the invoice export")),
        ("codex", cx.bash(cwd, "pytest -q", "Exit code: 0\nWall time: 0.2 seconds\nOutput:\n3 passed\n")),
        ("codex", cx.apply_patch(cwd, cx.PATCH)),
        ("codex", cx.prompt(cwd, "stream the invoice export")),
    ]


@pytest.mark.parametrize(("agent", "payload"), agent_events(),
                         ids=lambda p: p if isinstance(p, str) else p.get("tool_name") or p["hook_event_name"])
def test_agent_hook_commands_load_only_stdlib_and_no_heavy_module(tmp_path: Path, startup_modules: set[str],
                                                                  agent: str, payload: dict[str, Any]) -> None:
    home = tmp_path / "home"
    seed(home)
    _python, *args = agent_command(agent)
    done, modules = importtime(args, json.dumps(payload), hook_env(home))
    assert done.returncode == 0, done.stderr[-2000:]
    check_hook_imports(modules, startup_modules)
    heavy = sorted({m.split(".")[0] for m in modules} & set(HEAVY_STDLIB))
    assert heavy == [], f"the {agent} hook loads {heavy} for a {payload['hook_event_name']} event"


def test_agent_session_start_imports_only_stdlib_and_nmem(tmp_path: Path, startup_modules: set[str]) -> None:
    from fixtures import codex_shapes as cx

    home = tmp_path / "home"
    seed(home)
    _python, *args = agent_command("codex")
    done, modules = importtime(args, json.dumps(cx.session_start("/home/dev/code/imports-demo")), hook_env(home))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "additionalContext" in done.stdout
    check_hook_imports(modules, startup_modules)
