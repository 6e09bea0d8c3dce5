"""Settings: env > file > default, type coercion, per-project opt-out, unknown keys, write_setting."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import record
from nmem.config import CONFIG_CACHE, SETTINGS, Settings, load_settings, write_setting
from nmem.errors import ConfigError
from nmem.service.api import Service
from nmem.store import SearchFilters

T0 = 1_790_000_000


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def env_for(home: Path, **extra: str) -> dict[str, str]:
    return {"NMEM_HOME": str(home), **extra}


def write_config(home: Path, text: str) -> Path:
    path = home / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def services() -> Iterator[Any]:
    opened: list[Service] = []

    def factory(settings: Settings) -> Service:
        svc = Service.open(settings)
        opened.append(svc)
        return svc

    yield factory
    for svc in opened:
        svc.close()


# -- precedence -----------------------------------------------------------------------------------------


def test_defaults_without_file_or_env(home: Path) -> None:
    s = load_settings(env_for(home))
    assert s.values == {setting.name: setting.default for setting in SETTINGS}
    assert set(s.sources.values()) == {"default"}
    assert s.db_path == str(home / "nmem.db")
    assert s.store_url == f"sqlite:///{home / 'nmem.db'}"
    assert s.config_file == str(home / "config.toml")
    assert (s.unknown_keys, s.projects) == ([], {})


def test_file_overrides_default(home: Path) -> None:
    write_config(home, "[search]\ndefault_limit = 42\n[capture]\ndedup_window = 60\n")
    s = load_settings(env_for(home))
    assert (s["search.default_limit"], s.sources["search.default_limit"]) == (42, "file")
    assert (s["capture.dedup_window"], s.sources["capture.dedup_window"]) == (60, "file")
    assert (s["context.local_limit"], s.sources["context.local_limit"]) == (20, "default")


def test_env_overrides_file(home: Path) -> None:
    write_config(home, "[search]\ndefault_limit = 42\n")
    s = load_settings(env_for(home, NMEM_SEARCH_LIMIT="7"))
    assert (s["search.default_limit"], s.sources["search.default_limit"]) == (7, "env")


def test_dotted_keys_and_tables_are_the_same_setting(home: Path) -> None:
    write_config(home, '"search.default_limit" = 9\n')
    assert load_settings(env_for(home))["search.default_limit"] == 9


def test_nmem_config_points_at_another_file(home: Path, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.toml"
    other.write_text("[memory]\nenabled = false\n", encoding="utf-8")
    write_config(home, "[memory]\nenabled = true\n")
    s = load_settings(env_for(home, NMEM_CONFIG=str(other)))
    assert s.config_file == str(other)
    assert s["memory.enabled"] is False


def test_database_location_overrides(home: Path, tmp_path: Path) -> None:
    s = load_settings(env_for(home, NMEM_DB=str(tmp_path / "x" / "db.sqlite")))
    assert s.db_path == str(tmp_path / "x" / "db.sqlite")
    assert s.store_url == f"sqlite:///{tmp_path / 'x' / 'db.sqlite'}"
    s = load_settings(env_for(home, NMEM_DB="/ignored.db", NMEM_STORE_URL="sqlite:////tmp/y.db"))
    assert s.store_url == "sqlite:////tmp/y.db"


# -- coercion ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "expected"), [
    ("1", True), ("true", True), ("YES", True), (" on ", True),
    ("0", False), ("false", False), ("No", False), ("off", False), ("", False),
])
def test_boolean_env_values(home: Path, raw: str, expected: bool) -> None:
    assert load_settings(env_for(home, NMEM_ENABLED=raw))["memory.enabled"] is expected


def test_list_env_values_are_comma_separated(home: Path) -> None:
    s = load_settings(env_for(home, NMEM_EXCLUDE_PROJECTS=" secret-*, /home/me/private/* ,,"))
    assert s["capture.exclude_projects"] == ["secret-*", "/home/me/private/*"]


@pytest.mark.parametrize(("env", "message"), [
    ({"NMEM_SEARCH_LIMIT": "twenty"}, "search.default_limit ($NMEM_SEARCH_LIMIT): expected int, got 'twenty'"),
    ({"NMEM_ENABLED": "maybe"}, "memory.enabled ($NMEM_ENABLED): expected bool, got 'maybe'"),
    ({"NMEM_DEDUP_WINDOW": "1.5"}, "capture.dedup_window ($NMEM_DEDUP_WINDOW): expected int, got '1.5'"),
])
def test_bad_env_values_are_config_errors(home: Path, env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(env_for(home, **env))
    assert err.value.message == message
    assert err.value.exit_code == 3


@pytest.mark.parametrize(("toml", "fragment"), [
    ("[search]\ndefault_limit = true\n", "expected int, got True"),
    ("[search]\ndefault_limit = 2.5\n", "expected int, got 2.5"),
    ('[search]\ndefault_limit = "ten"\n', "expected int, got 'ten'"),
    ('[memory]\nenabled = "sure"\n', "expected bool, got 'sure'"),
    ("[capture]\nexclude_tools = [1, 2]\n", "expected list, got [1, 2]"),
    ('[project]\nname = ["a"]\n', "expected str, got ['a']"),
])
def test_bad_file_values_are_config_errors(home: Path, toml: str, fragment: str) -> None:
    path = write_config(home, toml)
    with pytest.raises(ConfigError) as err:
        load_settings(env_for(home))
    assert fragment in err.value.message
    assert str(path) in err.value.message


def test_numeric_strings_in_the_file_are_accepted(home: Path) -> None:
    write_config(home, '[search]\ndefault_limit = "15"\n[memory]\nenabled = "off"\n')
    s = load_settings(env_for(home))
    assert (s["search.default_limit"], s["memory.enabled"]) == (15, False)


def test_malformed_toml_is_a_config_error(home: Path) -> None:
    write_config(home, "[search\ndefault_limit = 1\n")
    with pytest.raises(ConfigError, match=r"cannot read .*config\.toml"):
        load_settings(env_for(home))


def test_projects_must_be_tables(home: Path) -> None:
    write_config(home, 'projects = "nope"\n')
    with pytest.raises(ConfigError, match=r"\[projects\] must be a table"):
        load_settings(env_for(home))
    write_config(home, '[projects]\ndemo = 1\n')
    with pytest.raises(ConfigError, match=r"\[projects.demo\] must be a table"):
        load_settings(env_for(home))


def test_unknown_keys_are_collected_not_fatal(home: Path) -> None:
    write_config(home, "verbose = true\n[search]\ndefault_limit = 5\nfuzzy = 1\n[telemetry]\nurl = 'x'\n")
    s = load_settings(env_for(home))
    assert s["search.default_limit"] == 5
    assert sorted(s.unknown_keys) == ["search.fuzzy", "telemetry.url", "verbose"]


# -- opt-outs -------------------------------------------------------------------------------------------------


def test_per_project_opt_out_skips_recording(home: Path, services: Any) -> None:
    write_config(home, '[projects."secret-client"]\nmemory = false\n[projects."demo"]\nmemory = true\n')
    s = load_settings(env_for(home))
    assert s.projects == {"secret-client": {"memory": False}, "demo": {"memory": True}}
    svc = services(s)
    skipped = record(svc, "UserPromptSubmit", now=T0, session_id="a", cwd="/w/secret-client", prompt="private")
    kept = record(svc, "UserPromptSubmit", now=T0, session_id="b", cwd="/w/demo", prompt="public")
    assert (skipped.skipped, skipped.stored) == ("disabled", None)
    assert kept.stored == "prompt"
    assert svc.store.get_session("a") is None
    assert [p.content for p, _ in svc.store.search_prompts(None, _no_filters(), "date_desc", 10, 0)] == ["public"]


def test_excluded_project_globs_skip_recording(home: Path, services: Any, tmp_path: Path) -> None:
    private_root = tmp_path / "private"
    s = load_settings(env_for(home, NMEM_EXCLUDE_PROJECTS=f"client-*,{private_root}/*"))
    svc = services(s)
    by_name = record(svc, "UserPromptSubmit", now=T0, session_id="a", cwd="/w/client-acme", prompt="x")
    by_dir = record(svc, "UserPromptSubmit", now=T0, session_id="b", cwd=str(private_root / "notes"), prompt="y")
    kept = record(svc, "UserPromptSubmit", now=T0, session_id="c", cwd="/w/acme-client", prompt="z")
    assert (by_name.skipped, by_dir.skipped, kept.skipped) == ("disabled", "disabled", None)
    assert svc.status()["sessions"] == 1


def test_global_switch_off_skips_every_project(home: Path, services: Any) -> None:
    write_config(home, "[memory]\nenabled = false\n")
    s = load_settings(env_for(home))
    assert s.project_enabled("anything") is False
    svc = services(s)
    assert record(svc, "SessionStart", now=T0, cwd="/w/demo").skipped == "disabled"
    assert svc.status()["enabled"] is False


def test_project_override_from_settings_names_the_project(home: Path, services: Any) -> None:
    svc = services(load_settings(env_for(home, NMEM_PROJECT="forced")))
    assert record(svc, "UserPromptSubmit", now=T0, cwd="/w/demo", prompt="x").project == "forced"


def _no_filters() -> SearchFilters:
    return SearchFilters()


# -- write_setting --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "raw", "value"), [
    ("search.default_limit", "50", 50),
    ("memory.enabled", "false", False),
    ("capture.exclude_tools", "mcp__vault__*, Bash", ["mcp__vault__*", "Bash"]),
    ("project.name", 'we"ird\\name', 'we"ird\\name'),
    ("log.level", "debug", "debug"),
])
def test_write_setting_round_trips(home: Path, name: str, raw: str, value: Any) -> None:
    s = load_settings(env_for(home))
    assert write_setting(s, name, raw) == value
    again = load_settings(env_for(home))
    assert (again[name], again.sources[name]) == (value, "file")


def test_write_setting_keeps_other_keys_and_project_tables(home: Path) -> None:
    write_config(home, '[search]\ndefault_limit = 5\n[projects."secret"]\nmemory = false\n')
    write_setting(load_settings(env_for(home)), "capture.dedup_window", "90")
    again = load_settings(env_for(home))
    assert (again["search.default_limit"], again["capture.dedup_window"]) == (5, 90)
    assert again.projects == {"secret": {"memory": False}}


def test_write_setting_keeps_unknown_top_level_keys_at_top_level(home: Path) -> None:
    write_config(home, "verbose = true\n[search]\ndefault_limit = 5\n")
    write_setting(load_settings(env_for(home)), "memory.enabled", "false")
    data = tomllib.loads((home / "config.toml").read_text(encoding="utf-8"))
    assert data["verbose"] is True
    assert data["search"] == {"default_limit": 5}
    assert data["memory"] == {"enabled": False}


def test_write_setting_rejects_unknown_names_and_bad_values_without_writing(home: Path) -> None:
    path = write_config(home, "[search]\ndefault_limit = 5\n")
    before = path.read_text(encoding="utf-8")
    s = load_settings(env_for(home))
    with pytest.raises(ConfigError, match=r"unknown setting: search\.fuzzy"):
        write_setting(s, "search.fuzzy", "1")
    with pytest.raises(ConfigError, match="expected int, got 'lots'"):
        write_setting(s, "search.default_limit", "lots")
    assert path.read_text(encoding="utf-8") == before


def test_write_setting_creates_the_file_and_directory(tmp_path: Path) -> None:
    home = tmp_path / "fresh" / "home"
    s = load_settings(env_for(home))
    write_setting(s, "context.max_chars", "4000")
    assert (home / "config.toml").is_file()
    assert load_settings(env_for(home))["context.max_chars"] == 4000


# -- the parsed-config cache (hooks skip tomllib while the file is unchanged) -----------------


def test_config_cache_is_written_private_and_used_while_the_file_is_unchanged(home: Path) -> None:
    write_config(home, "[search]\ndefault_limit = 42\n")
    assert load_settings(env_for(home))["search.default_limit"] == 42
    cache = home / CONFIG_CACHE
    assert cache.stat().st_mode & 0o777 == 0o600
    # A forged cache entry for the same file identity is what the next load reads: proof it is used.
    data = json.loads(cache.read_text(encoding="utf-8"))
    data["data"]["search"]["default_limit"] = 7
    cache.write_text(json.dumps(data), encoding="utf-8")
    assert load_settings(env_for(home))["search.default_limit"] == 7


def test_config_cache_follows_edits_even_of_the_same_size(home: Path) -> None:
    path = write_config(home, "[search]\ndefault_limit = 42\n")
    assert load_settings(env_for(home))["search.default_limit"] == 42
    stamp = path.stat().st_mtime_ns
    path.write_text("[search]\ndefault_limit = 43\n", encoding="utf-8")
    os.utime(path, ns=(stamp, stamp))  # same size and mtime: the inode change time still differs
    assert load_settings(env_for(home))["search.default_limit"] == 43


@pytest.mark.parametrize("garbage", ["", "{not json", "[]", '{"file": [], "data": 3}'])
def test_a_broken_config_cache_is_ignored_and_rewritten(home: Path, garbage: str) -> None:
    write_config(home, "[search]\ndefault_limit = 42\n")
    (home / CONFIG_CACHE).write_text(garbage, encoding="utf-8")
    assert load_settings(env_for(home))["search.default_limit"] == 42
    assert json.loads((home / CONFIG_CACHE).read_text(encoding="utf-8"))["data"] == {"search": {"default_limit": 42}}


def test_a_config_with_toml_dates_still_loads_without_a_cache(home: Path) -> None:
    write_config(home, "[search]\ndefault_limit = 5\n[projects.demo]\nsince = 2026-01-01\n")
    assert load_settings(env_for(home))["search.default_limit"] == 5
    assert not (home / CONFIG_CACHE).exists()


def test_a_broken_config_file_is_an_error_even_after_a_cached_good_one(home: Path) -> None:
    path = write_config(home, "[search]\ndefault_limit = 42\n")
    load_settings(env_for(home))
    path.write_text("[search\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(env_for(home))
