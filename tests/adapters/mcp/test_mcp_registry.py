"""The MCP Registry entry (`server.json`) against the registry's published schema (vendored in
tests/fixtures/mcp_registry/, its source in SOURCE.md), and what the registry checks beside it:
the PyPI package it names is this one, at this version, and the README PyPI publishes carries
the `mcp-name:` line that proves the package belongs to the server."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest

REPO = Path(__file__).resolve().parents[3]
SCHEMA = json.loads((REPO / "tests" / "fixtures" / "mcp_registry" / "server.schema.json").read_text())
SERVER: dict[str, Any] = json.loads((REPO / "server.json").read_text())
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def errors(document: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(SCHEMA, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    return [e.message for e in validator.iter_errors(document)]


def test_server_json_is_valid_against_the_registry_schema() -> None:
    assert errors(SERVER) == []
    assert SERVER["$schema"] == SCHEMA["$id"]


def test_the_schema_check_would_catch_a_bad_entry() -> None:
    assert errors({**SERVER, "description": "x" * 101})
    assert errors({**SERVER, "packages": [{**SERVER["packages"][0], "version": "latest"}]})


def test_name_package_and_version_are_this_distribution() -> None:
    assert SERVER["name"].startswith("io.github.") and SERVER["name"].count("/") == 1
    assert len(SERVER["description"]) <= 100
    assert SERVER["version"] == PROJECT["version"]
    for package in SERVER["packages"]:
        assert (package["registryType"], package["identifier"], package["version"]) == (
            "pypi", PROJECT["name"], PROJECT["version"])
    transports = {p["transport"]["type"] for p in SERVER["packages"]}
    assert transports == {"stdio", "streamable-http"}


@pytest.mark.parametrize("package", SERVER["packages"], ids=lambda p: p["transport"]["type"])
def test_each_package_runs_a_command_nmem_has(package: dict[str, Any]) -> None:
    from click.testing import CliRunner

    from nmem.adapters.cli import cli

    args = [a["value"] for a in package["packageArguments"] if "value" in a and a["type"] == "positional"]
    named = {a["name"]: a.get("value", a.get("default")) for a in package["packageArguments"] if a["type"] == "named"}
    argv = [*args, *(x for pair in named.items() for x in pair), "--help"]
    done = CliRunner().invoke(cli, argv)
    assert done.exit_code == 0, done.output
    assert PROJECT["scripts"].get(PROJECT["name"]) == "nmem.__main__:main"  # `uvx nmem-memory` runs nmem


def test_readme_carries_the_mcp_name_line() -> None:
    readme = (REPO / PROJECT["readme"]).read_text()
    assert f"mcp-name: {SERVER['name']}" in readme
