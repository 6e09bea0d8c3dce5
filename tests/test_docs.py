"""The reference docs are generated from the code; these fail when they drift."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from conftest import load_script
from nmem.adapters.cli import cli
from nmem.adapters.mcp.tools import TOOLS
from nmem.config import CONFIG_ENV, HOME_ENV, SETTINGS

DOCS = Path(__file__).resolve().parents[1] / "docs"
docs = load_script("docs")  # scripts/docs.py: a developer's tool, not part of the wheel


def test_committed_docs_equal_the_generated_ones() -> None:
    for path, text in docs.expected(DOCS).items():
        assert path.read_text(encoding="utf-8") == text, f"{path.name} is stale: run `python scripts/docs.py`"
    assert docs.main(["--check", "--docs-dir", str(DOCS)]) == 0


def test_every_setting_and_env_var_is_documented() -> None:
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    for setting in SETTINGS:
        assert f"`{setting.name}`" in text, setting.name
        assert setting.env is not None and f"`{setting.env}`" in text, setting.env
    for env in (HOME_ENV, CONFIG_ENV):
        assert f"`{env}`" in text
    assert '[projects."' in text and "memory = false" in text


def _command_paths(group: click.Group, prefix: str) -> list[str]:
    paths = []
    for name, command in group.commands.items():
        paths.append(f"{prefix} {name}")
        if isinstance(command, click.Group):
            paths.extend(_command_paths(command, f"{prefix} {name}"))
    return paths


def test_every_command_is_documented_with_its_help() -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    paths = _command_paths(cli, "nmem")
    assert {"nmem search", "nmem record", "nmem hook", "nmem config set", "nmem purge"} <= set(paths)
    for path in paths:
        assert f"\n## {path}\n" in text, path
        assert f"Usage: {path} " in text, path
    for option in ("--ids", "--full", "--confirm", "--older-than", "--stdin", "--recovery"):
        assert option in text


def test_check_reports_stale_docs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert docs.main(["--check", "--docs-dir", str(tmp_path)]) == 1
    assert capsys.readouterr().err.count("stale: ") == 4  # cli.md, configuration.md, mcp.md, openapi.json
    assert docs.main(["--docs-dir", str(tmp_path)]) == 0
    assert docs.main(["--check", "--docs-dir", str(tmp_path)]) == 0
    (tmp_path / "cli.md").write_text("edited by hand\n", encoding="utf-8")
    assert docs.main(["--check", "--docs-dir", str(tmp_path)]) == 1
    assert "cli.md" in capsys.readouterr().err


def test_help_text_does_not_depend_on_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    first = docs.cli_markdown()
    monkeypatch.setenv("COLUMNS", "40")
    assert docs.cli_markdown() == first


def test_readme_lists_every_mcp_tool_with_its_parameters() -> None:
    readme = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    table = readme.split(docs.README_START, 1)[1].split(docs.README_END, 1)[0]
    for tool in TOOLS:
        row = next(line for line in table.splitlines() if line.startswith(f"| `{tool.name}` |"))
        for param in tool.input_schema.get("properties", {}):
            assert f"`{param}`" in row, (tool.name, param)
