"""Project names: every git worktree of a repository is one project, directories can be named in
the config file; checked with real `git worktree add`, hook processes and the importer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import load_bench
from fixtures.harness import event, hook_env, hook_ok, query
from nmem.capture.project import git_toplevel, project_name, repository_name
from nmem.config import load_settings, write_setting
from nmem.errors import ConfigError
from test_cli_support import invoke, ok

cc = load_bench("cc_transcripts")
T0 = 1_790_000_000


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, Path]:
    return cc.git_repo_with_worktree(tmp_path / "src", "ledger-api", branch="leap-year",
                                     worktree_name="ledger-leap-year")


def fresh(path: Path | str) -> str:
    git_toplevel.cache_clear()
    repository_name.cache_clear()
    return project_name(str(path))


def test_a_linked_worktree_is_its_repository(repo: tuple[Path, Path]) -> None:
    main, worktree = repo
    (worktree / "src" / "ledger").mkdir(parents=True)
    assert fresh(main) == fresh(worktree) == fresh(worktree / "src" / "ledger") == "ledger-api"


def test_a_relative_gitdir_pointer_is_followed(repo: tuple[Path, Path]) -> None:
    _, worktree = repo
    dotgit = worktree / ".git"
    absolute = dotgit.read_text(encoding="utf-8").split(":", 1)[1].strip()
    relative = Path(absolute).relative_to(worktree.parent)
    dotgit.write_text(f"gitdir: ../{relative}\n", encoding="utf-8")
    assert fresh(worktree) == "ledger-api"


def test_worktrees_of_a_bare_repository_take_its_name(repo: tuple[Path, Path], tmp_path: Path) -> None:
    main, _ = repo
    bare = tmp_path / "hosted" / "billing.git"
    cc.git(tmp_path, "clone", "-q", "--bare", str(main), str(bare))
    cc.git(bare, "worktree", "add", "-q", str(tmp_path / "hosted" / "billing-main"), "main")
    assert fresh(tmp_path / "hosted" / "billing-main") == "billing"


def test_a_submodule_is_a_project_of_its_own(repo: tuple[Path, Path], tmp_path: Path) -> None:
    main, _ = repo
    lib, _ = cc.git_repo_with_worktree(tmp_path / "libs", "money-lib")
    cc.git(main, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "vendor/money-lib")
    assert (main / "vendor" / "money-lib" / ".git").is_file()
    assert fresh(main / "vendor" / "money-lib") == "money-lib"
    assert fresh(main) == "ledger-api"


def test_hooks_in_two_worktrees_record_one_project(repo: tuple[Path, Path], tmp_path: Path) -> None:
    main, worktree = repo
    home = tmp_path / "home"
    hook_ok(home, event("SessionStart", "s-main", str(main), source="startup"))
    hook_ok(home, event("SessionStart", "s-wt", str(worktree), source="startup"))
    hook_ok(home, event("PostToolUse", "s-wt", str(worktree), tool_name="Read",
                        tool_input={"file_path": str(worktree / "README.md")}, tool_response={}))
    sessions = query(home, "SELECT id, project FROM sessions ORDER BY id")
    assert sessions == [{"id": "s-main", "project": "ledger-api"}, {"id": "s-wt", "project": "ledger-api"}]
    assert {r["project"] for r in query(home, "SELECT project FROM observations")} == {"ledger-api"}


def test_an_imported_session_in_a_worktree_belongs_to_the_repository(repo: tuple[Path, Path], tmp_path: Path) -> None:
    _, worktree = repo
    tree = cc.Projects(tmp_path / "projects")
    s = tree.session(str(worktree), start=T0, branch="leap-year")
    s.prompt("fix february")
    s.edit(str(worktree / "README.md"), "# ledger-api", "# ledger-api (leap years)")
    s.say("Done.")
    s.save()
    home = tmp_path / "home"
    ok("import", "claude-code", str(tree.root), env=hook_env(home))
    assert query(home, "SELECT project FROM sessions") == [{"project": "ledger-api"}]


def write_config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text, encoding="utf-8")


def test_a_directory_in_the_config_names_its_project(repo: tuple[Path, Path], tmp_path: Path) -> None:
    main, worktree = repo
    scratch = tmp_path / "scratch" / "notes"
    scratch.mkdir(parents=True)
    home = tmp_path / "home"
    write_config(home, f'[projects]\n"{worktree}" = "ledger-experiments"\n"{tmp_path / "scratch"}" = "scratch"\n'
                       f'"{scratch}" = "notes"\n\n[projects."other"]\nmemory = false\n')
    hook_ok(home, event("SessionStart", "s-wt", str(worktree / "docs"), source="startup"))
    hook_ok(home, event("SessionStart", "s-main", str(main), source="startup"))
    hook_ok(home, event("SessionStart", "s-notes", str(scratch), source="startup"))
    hook_ok(home, event("SessionStart", "s-scratch", str(tmp_path / "scratch"), source="startup"))
    assert {r["id"]: r["project"] for r in query(home, "SELECT id, project FROM sessions")} == {
        "s-wt": "ledger-experiments", "s-main": "ledger-api", "s-notes": "notes", "s-scratch": "scratch"}
    shown = json.loads(ok("config", "show", "--format", "json", env=hook_env(home)).stdout)
    assert shown["project_dirs"] == {str(worktree): "ledger-experiments", str(tmp_path / "scratch"): "scratch",
                                     str(scratch): "notes"}
    assert shown["projects"] == {"other": {"memory": False}}


def test_a_home_relative_directory_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    home = tmp_path / "home"
    write_config(home, '[projects]\n"~/src/acme" = "acme"\n')
    settings = load_settings({"NMEM_HOME": str(home)})
    assert settings.project_dirs == {str(tmp_path / "src" / "acme"): "acme"}


def test_a_relative_directory_key_is_a_clear_config_error(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home, '[projects]\n"src/acme" = "acme"\n')
    with pytest.raises(ConfigError, match=r'"src/acme" = "acme": the key must be an absolute directory'):
        load_settings({"NMEM_HOME": str(home)})
    result = invoke("config", "show", env=hook_env(home))
    assert result.exit_code == ConfigError.exit_code
    assert "the key must be an absolute directory" in result.stderr
    write_config(home, '[projects]\n"/srv/acme" = " "\n')
    with pytest.raises(ConfigError, match="the project name must not be empty"):
        load_settings({"NMEM_HOME": str(home)})


def test_config_set_keeps_directory_keys(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home, '[projects]\n"/srv/acme" = "acme"\n\n[projects."acme"]\nmemory = false\n')
    settings = load_settings({"NMEM_HOME": str(home)})
    write_setting(settings, "search.default_limit", "7")
    again = load_settings({"NMEM_HOME": str(home)})
    assert again.project_dirs == {"/srv/acme": "acme"}
    assert again.projects == {"acme": {"memory": False}}
    assert again["search.default_limit"] == 7
