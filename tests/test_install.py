"""`install` / `uninstall` of the Claude Code wiring, and the shipped plugin directory.

Settings files that already hold other hooks, permissions and MCP servers are merged into,
backed up, left alone on a second install, and restored exactly by uninstall.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import nmem
from conftest import run_nmem
from fixtures.harness import counts, event, hook_env
from nmem.errors import ConfigError
from nmem.setup import claude_code
from nmem.setup.claude_code import (
    HOOK_EVENTS,
    hook_command,
    install,
    mcp_entry,
    merged_hooks,
    nmem_executable,
    uninstall,
    wiring,
)

REPO = Path(__file__).resolve().parents[1]
PLUGIN = REPO / "plugins" / "nmem"

USER_SETTINGS: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm test:*)"], "deny": ["Read(./.env)"]},
    "env": {"FOO": "bar"},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "/usr/local/bin/guard.sh",
                                                      "timeout": 10}]}],
        "PostToolUse": [{"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "prettier --write"}]}],
        "SessionStart": [{"hooks": [{"type": "command", "command": "nmem search --recent"}]}],
    },
    "statusLine": {"type": "command", "command": "~/.claude/statusline.sh"},
}
CLAUDE_JSON: dict[str, Any] = {
    "numStartups": 42,
    "mcpServers": {"github": {"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
                              "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}}},
    "projects": {"/home/dev/code/billing-api": {"mcpServers": {}, "allowedTools": []}},
}
PROJECT_SETTINGS: dict[str, Any] = {
    "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/lint.sh"}]}]},
    "enabledMcpjsonServers": ["db"],
}
PROJECT_MCP: dict[str, Any] = {"mcpServers": {"db": {"type": "stdio", "command": "./bin/db-mcp", "args": ["--ro"]}}}


def write_json(path: Path, data: dict[str, Any]) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = (json.dumps(data, indent=4) + "\n").encode()
    path.write_bytes(raw)
    return raw


def load(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def nmem_handlers(settings: dict[str, Any]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name, groups in settings.get("hooks", {}).items():
        for group in groups:
            for handler in group.get("hooks", []):
                if claude_code.is_nmem_command(handler.get("command")):
                    found.setdefault(name, []).append(handler["command"])
    return found


def backups(path: Path) -> list[Path]:
    """Backups of `path`, kept under the data dir (`NMEM_HOME`, set by the autouse fixture)."""
    flat = path.resolve().as_posix().strip("/").replace("/", "--")
    return sorted((Path(os.environ["NMEM_HOME"]) / "backups").glob(f"*-{flat}"))


@pytest.fixture(autouse=True)
def data_dir(nmem_home: Path) -> Path:
    return nmem_home


@pytest.fixture
def user_home(tmp_path: Path) -> Path:
    home = tmp_path / "userhome"
    write_json(home / ".claude" / "settings.json", USER_SETTINGS)
    write_json(home / ".claude.json", CLAUDE_JSON)
    return home


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "billing-api"
    write_json(root / ".claude" / "settings.json", PROJECT_SETTINGS)
    write_json(root / ".mcp.json", PROJECT_MCP)
    return root


def test_user_scope_install_merges_and_backs_up(user_home: Path) -> None:
    settings_path, mcp_path = user_home / ".claude" / "settings.json", user_home / ".claude.json"
    original_settings, original_mcp = settings_path.read_bytes(), mcp_path.read_bytes()
    report = install("user", home=user_home)
    assert sorted(report.changed) == sorted([str(settings_path), str(mcp_path)])

    settings = load(settings_path)
    exe = nmem_executable()
    assert os.path.isabs(exe) and os.access(exe, os.X_OK)
    ours = nmem_handlers(settings)
    assert sorted(ours) == sorted(HOOK_EVENTS)
    assert all(cmds == [hook_command()] for cmds in ours.values()), ours
    python, flag, entry, verb = shlex.split(hook_command())
    assert (python, flag, verb) == (sys.executable, "-S", "record")
    assert os.path.isabs(entry) and os.path.samefile(entry, Path(nmem.__file__).parent / "hook_entry.py")
    # Everything that was there is still there.
    for key in ("model", "permissions", "env", "statusLine"):
        assert settings[key] == USER_SETTINGS[key]
    assert settings["hooks"]["PreToolUse"] == USER_SETTINGS["hooks"]["PreToolUse"]
    assert settings["hooks"]["PostToolUse"][0] == USER_SETTINGS["hooks"]["PostToolUse"][0]
    assert settings["hooks"]["SessionStart"][0] == USER_SETTINGS["hooks"]["SessionStart"][0]

    config = load(mcp_path)
    assert config["mcpServers"]["github"] == CLAUDE_JSON["mcpServers"]["github"]
    assert config["mcpServers"]["nmem"]["command"] == exe and config["mcpServers"]["nmem"]["args"] == ["serve"]
    assert (config["numStartups"], config["projects"]) == (42, CLAUDE_JSON["projects"])

    assert [p.read_bytes() for p in backups(settings_path)] == [original_settings]
    assert [p.read_bytes() for p in backups(mcp_path)] == [original_mcp]


def test_second_install_changes_nothing(user_home: Path) -> None:
    install("user", home=user_home)
    files = [user_home / ".claude" / "settings.json", user_home / ".claude.json"]
    before = {p: p.read_bytes() for p in files}
    listing = sorted(p.name for p in (user_home / ".claude").iterdir())
    report = install("user", home=user_home)
    assert report.changed == [] and report.backups == []
    assert {p: p.read_bytes() for p in files} == before
    assert sorted(p.name for p in (user_home / ".claude").iterdir()) == listing


def test_install_replaces_an_older_nmem_entry_instead_of_adding_one(user_home: Path) -> None:
    settings_path = user_home / ".claude" / "settings.json"
    stale = load(settings_path)
    stale["hooks"]["Stop"] = [{"hooks": [{"type": "command", "command": "/old/venv/bin/nmem record"}]}]
    stale["hooks"]["SessionEnd"] = [{"hooks": [
        {"type": "command", "command": "/old/venv/bin/python -S /old/venv/lib/nmem/hook_entry.py record"}]}]
    write_json(settings_path, stale)
    install("user", home=user_home)
    assert nmem_handlers(load(settings_path))["Stop"] == [hook_command()]
    assert nmem_handlers(load(settings_path))["SessionEnd"] == [hook_command()]


def test_only_nmem_commands_are_recognised_as_ours() -> None:
    ours = ["/v/bin/nmem record", "nmem hook post-tool-use", "'/a b/python' -S '/a b/site/nmem/hook_entry.py' record"]
    theirs = ["/v/bin/python -S /v/other/hook_entry.py record", "/v/bin/python /v/nmem/hook_entry.py record",
              "/v/bin/nmem serve", "mynmem record", "echo nmem record", "'unbalanced", None, 42]
    assert [claude_code.is_nmem_command(c) for c in ours] == [True] * len(ours)
    assert [claude_code.is_nmem_command(c) for c in theirs] == [False] * len(theirs)


def test_uninstall_restores_exactly_what_was_there(user_home: Path) -> None:
    settings_path, mcp_path = user_home / ".claude" / "settings.json", user_home / ".claude.json"
    install("user", home=user_home)
    uninstall("user", home=user_home)
    assert load(settings_path) == USER_SETTINGS
    assert load(mcp_path) == CLAUDE_JSON
    assert wiring("user", home=user_home)["events"] == []
    report = uninstall("user", home=user_home)
    assert report.changed == [], "a second uninstall has nothing to remove"


def test_install_then_uninstall_on_empty_home(tmp_path: Path) -> None:
    home = tmp_path / "fresh"
    install("user", home=home)
    assert sorted(nmem_handlers(load(home / ".claude" / "settings.json"))) == sorted(HOOK_EVENTS)
    assert backups(home / ".claude" / "settings.json") == [], "nothing to back up"
    report = uninstall("user", home=home)
    assert not home.exists(), "the files and directories install created are gone"
    assert str(home / ".claude" / "settings.json") in report.removed and str(home / ".claude") in report.removed


def test_backups_of_install_and_uninstall_in_the_same_second_are_both_kept(user_home: Path, tmp_path: Path) -> None:
    settings_path = user_home / ".claude" / "settings.json"
    original = settings_path.read_bytes()
    for _ in range(5):
        start = int(time.time())
        install("user", home=user_home)
        installed = settings_path.read_bytes()
        uninstall("user", home=user_home)
        if int(time.time()) == start:
            break
        for p in backups(settings_path):
            p.unlink()
        settings_path.write_bytes(original)
    kept = [p.read_bytes() for p in backups(settings_path)]
    assert original in kept, "the backup of the user's own settings was overwritten"
    assert installed in kept


def test_project_scope_install_and_uninstall(project: Path, tmp_path: Path) -> None:
    user_home = tmp_path / "userhome"
    write_json(user_home / ".claude.json", CLAUDE_JSON)
    shared = {p: p.read_bytes() for p in (project / ".claude" / "settings.json", project / ".mcp.json")}
    install("project", project_dir=project, home=user_home)
    local = project / ".claude" / "settings.local.json"
    assert sorted(nmem_handlers(load(local))) == sorted(HOOK_EVENTS)
    assert {p: p.read_bytes() for p in shared} == shared, "files a repository shares are untouched"
    config = load(user_home / ".claude.json")
    entry = config["projects"][str(project.resolve())]["mcpServers"]["nmem"]
    assert os.path.isabs(entry["command"]) and entry["args"] == ["serve"]
    assert config["projects"]["/home/dev/code/billing-api"] == CLAUDE_JSON["projects"]["/home/dev/code/billing-api"]
    assert not list(project.rglob("*nmem*")), "no backups or temporary files in the project"
    assert install("project", project_dir=project, home=user_home).changed == []
    uninstall("project", project_dir=project, home=user_home)
    assert not local.exists() and (project / ".claude").is_dir()
    assert {p: p.read_bytes() for p in shared} == shared
    assert load(user_home / ".claude.json") == CLAUDE_JSON


def test_project_install_leaves_no_residue_in_a_fresh_project(tmp_path: Path) -> None:
    project, user_home = tmp_path / "app", tmp_path / "userhome"
    (project / "src").mkdir(parents=True)
    (project / "src" / "main.py").write_text("print('hi')\n", encoding="utf-8")
    write_json(user_home / ".claude.json", CLAUDE_JSON)
    before = sorted(str(p.relative_to(project)) for p in project.rglob("*"))
    report = install("project", project_dir=project, home=user_home)
    assert str(project / ".claude" / "settings.local.json") in report.changed
    uninstall("project", project_dir=project, home=user_home)
    assert sorted(str(p.relative_to(project)) for p in project.rglob("*")) == before
    assert load(user_home / ".claude.json") == CLAUDE_JSON


def test_uninstall_keeps_a_created_file_the_user_added_to(tmp_path: Path) -> None:
    project, user_home = tmp_path / "app", tmp_path / "userhome"
    project.mkdir()
    install("project", project_dir=project, home=user_home)
    local = project / ".claude" / "settings.local.json"
    data = load(local)
    data["permissions"] = {"allow": ["Bash(make test)"]}
    write_json(local, data)
    uninstall("project", project_dir=project, home=user_home)
    assert load(local) == {"permissions": {"allow": ["Bash(make test)"]}}


def test_project_install_moves_what_an_older_nmem_wrote_into_shared_files(project: Path, tmp_path: Path) -> None:
    user_home = tmp_path / "userhome"
    old_settings = merged_hooks(PROJECT_SETTINGS, "/old/venv/bin/python -S /old/venv/lib/nmem/hook_entry.py record")
    write_json(project / ".claude" / "settings.json", old_settings)
    write_json(project / ".mcp.json", {"mcpServers": {**PROJECT_MCP["mcpServers"],
                                                      "nmem": mcp_entry("/old/venv/bin/nmem")}})
    report = install("project", project_dir=project, home=user_home)
    assert load(project / ".claude" / "settings.json") == PROJECT_SETTINGS
    assert load(project / ".mcp.json") == PROJECT_MCP
    assert sorted(nmem_handlers(load(project / ".claude" / "settings.local.json"))) == sorted(HOOK_EVENTS)
    assert len(report.backups) == 2 and all(Path(b).parent == Path(os.environ["NMEM_HOME"]) / "backups"
                                            for b in report.backups)
    assert [json.loads(p.read_bytes()) for p in backups(project / ".claude" / "settings.json")] == [old_settings]


def test_shared_mcp_writes_the_bare_command_and_says_it_needs_approval(project: Path, tmp_path: Path) -> None:
    user_home = tmp_path / "userhome"
    report = install("project", project_dir=project, home=user_home, shared_mcp=True)
    servers = load(project / ".mcp.json")["mcpServers"]
    assert servers["nmem"] == {"type": "stdio", "command": "nmem", "args": ["serve"]}
    assert servers["db"] == PROJECT_MCP["mcpServers"]["db"]
    assert any("approve" in n and ".mcp.json" in n for n in report.notes)
    assert not (user_home / ".claude.json").exists()
    uninstall("project", project_dir=project, home=user_home)
    assert load(project / ".mcp.json") == PROJECT_MCP


def test_unreadable_settings_are_left_alone(tmp_path: Path) -> None:
    home = tmp_path / "broken"
    path = home / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"hooks": {', encoding="utf-8")
    with pytest.raises(ConfigError):
        install("user", home=home)
    assert path.read_text(encoding="utf-8") == '{"hooks": {'
    assert backups(path) == []


def test_installed_hook_command_runs_and_records(tmp_path: Path) -> None:
    """The command written into settings.json is what Claude Code runs through `sh -c`."""
    home = tmp_path / "fresh"
    install("user", home=home)
    (command,) = {c for cmds in nmem_handlers(load(home / ".claude" / "settings.json")).values() for c in cmds}
    nmem_home = tmp_path / "nmem-home"
    payload = event("PostToolUse", "inst", "/home/dev/code/demo", tool_name="Bash", tool_input={"command": "ls"},
                    tool_response={"stdout": "", "stderr": ""})
    done = subprocess.run(["sh", "-c", command], input=json.dumps(payload), capture_output=True, text=True,
                          env=hook_env(nmem_home, PATH="/usr/bin:/bin"), timeout=60, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    assert counts(nmem_home)["observations"] == 1


# -- the plugin directory -----------------------------------------------------------------------


def test_plugin_manifest() -> None:
    assert sorted(p.name for p in (PLUGIN / ".claude-plugin").iterdir()) == ["plugin.json"]
    manifest = load(PLUGIN / ".claude-plugin" / "plugin.json")
    assert manifest["name"] == "nmem"
    assert all(isinstance(manifest.get(k, ""), str) for k in ("version", "description"))


def test_plugin_hooks_file_has_the_wrapper_and_every_event() -> None:
    data = load(PLUGIN / "hooks" / "hooks.json")
    assert set(data) <= {"description", "hooks"}
    hooks = data["hooks"]
    assert sorted(hooks) == sorted(HOOK_EVENTS)
    for name, groups in hooks.items():
        handlers = [h for g in groups for h in g["hooks"]]
        assert len(handlers) == 1, name
        (handler,) = handlers
        assert handler["type"] == "command"
        assert shlex.split(handler["command"])[-1] in ("record", name) or "record" in handler["command"]
        assert Path(shlex.split(handler["command"])[0]).name == "nmem-memory"  # no other package's `nmem`
        assert isinstance(handler.get("timeout", 30), int)


def test_plugin_mcp_file() -> None:
    data = load(PLUGIN / ".mcp.json")
    server = data["mcpServers"]["nmem"]
    assert Path(server["command"]).name == "nmem-memory" and server["args"] == ["serve"]
    assert server.get("type", "stdio") == "stdio"


# -- through the CLI ----------------------------------------------------------------------------


def test_cli_install_and_uninstall_project_scope(project: Path, tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    user_home = tmp_path / "userhome"
    env = hook_env(tmp_path / "nmem-home", HOME=str(user_home))
    shared = {p: p.read_bytes() for p in (project / ".claude" / "settings.json", project / ".mcp.json")}
    args = ["claude-code", "--scope", "project", "--project-dir", str(project), "--format", "json"]
    first = run_nmem(["install", *args], env=env)
    assert first.returncode == 0, first.stderr
    local = project / ".claude" / "settings.local.json"
    assert json.loads(first.stdout)["changed"] == [str(local), f"{user_home / '.claude.json'}"]
    assert "settings.local.json is not ignored by git" in first.stderr
    assert sorted(nmem_handlers(load(local))) == sorted(HOOK_EVENTS)
    assert {p: p.read_bytes() for p in shared} == shared
    again = run_nmem(["install", *args], env=env)
    assert again.returncode == 0 and json.loads(again.stdout)["changed"] == []
    removed = run_nmem(["uninstall", *args], env=env)
    assert removed.returncode == 0, removed.stderr
    assert {p: p.read_bytes() for p in shared} == shared
    assert not local.exists()
    assert not user_home.exists(), "project scope created ~/.claude.json for its entry alone, and removed it"
    assert not (tmp_path / "nmem-home" / "backups").exists(), "nothing there before was overwritten"


def test_cli_install_in_an_ignoring_repository_says_nothing_about_git(tmp_path: Path) -> None:
    project = tmp_path / "app"
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / ".gitignore").write_text(".claude/settings.local.json\n", encoding="utf-8")
    env = hook_env(tmp_path / "nmem-home", HOME=str(tmp_path / "userhome"))
    done = run_nmem(["install", "claude-code", "--scope", "project", "--project-dir", str(project)], env=env)
    assert done.returncode == 0, done.stderr
    assert "ignored by git" not in done.stderr
    shared = run_nmem(["install", "claude-code", "--scope", "project", "--project-dir", str(project), "--shared-mcp"],
                      env=env)
    assert shared.returncode == 0 and "approve" in shared.stderr
    wrong = run_nmem(["install", "claude-code", "--shared-mcp"], env=env)
    assert wrong.returncode == 2 and "--shared-mcp goes with --scope project" in wrong.stderr


def test_cli_install_user_scope_uses_home(user_home: Path, tmp_path: Path) -> None:
    env = hook_env(tmp_path / "nmem-home", HOME=str(user_home))
    done = run_nmem(["install", "claude-code"], env=env)
    assert done.returncode == 0, done.stderr
    assert sorted(nmem_handlers(load(user_home / ".claude" / "settings.json"))) == sorted(HOOK_EVENTS)
    assert "nmem" in load(user_home / ".claude.json")["mcpServers"]
    assert run_nmem(["uninstall", "claude-code"], env=env).returncode == 0
    assert load(user_home / ".claude" / "settings.json") == USER_SETTINGS


def test_hooks_alone_install_without_an_nmem_script(user_home: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # an interpreter with no `nmem` script beside it or on PATH: the hooks need none, only the MCP entry does
    bare = tmp_path / "bin" / "python3"
    bare.parent.mkdir()
    monkeypatch.setattr(sys, "executable", str(bare))
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    report = install("user", home=user_home, with_mcp=False)
    assert report.changed == [str(user_home / ".claude" / "settings.json")]
    assert shlex.split(nmem_handlers(load(user_home / ".claude" / "settings.json"))["Stop"][0])[0] == str(bare)
    with pytest.raises(ConfigError, match="cannot find the nmem executable"):
        install("user", home=user_home)


def test_cli_uninstall_says_where_the_data_stays_and_leaves_no_empty_mcp_servers_or_manifest(tmp_path: Path) -> None:
    user_home, data = tmp_path / "userhome", tmp_path / "nmem-home"
    user_home.mkdir()
    claude_json = user_home / ".claude.json"
    claude_json.write_text(json.dumps({"numStartups": 3, "theme": "dark"}) + "\n", encoding="utf-8")
    env = hook_env(data, HOME=str(user_home))
    installed = run_nmem(["install", "claude-code"], env=env)
    assert installed.returncode == 0, installed.stderr
    assert "nmem" in load(claude_json)["mcpServers"]
    manifest = data / "install-manifest.json"
    assert manifest.exists(), "install lists the files it created"
    removed = run_nmem(["uninstall", "claude-code", "--format", "json"], env=env)
    assert removed.returncode == 0, removed.stderr
    assert load(claude_json) == {"numStartups": 3, "theme": "dark"}, "no empty mcpServers left behind"
    assert not manifest.exists() and str(manifest) in json.loads(removed.stdout)["removed"]
    assert f"your memories and trail stay in {data / 'nmem.db'} (data directory {data})" in removed.stderr
    assert not (user_home / ".claude").exists()
