"""The subcog CLI contracts (§2): global --config/-v/-q and --format quiet; capture --spec and its
answer; recall --mode/--min-similarity/--spec/--detail; status --domain/--verbose/--verify;
forget by the integer number recall shows (srvrmgr); search --raw (ADR-006 strict mode)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import click
import pytest

from nmem.adapters.cli import cli
from nmem.service.api import Service
from test_cli_support import as_json, invoke, ok, seed, stderr_lines


@pytest.fixture(autouse=True)
def project_demo(nmem_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMEM_PROJECT", "demo")


# -- global options -------------------------------------------------------------------------------

def test_config_option_reads_that_file(tmp_path: Path, service: Service) -> None:
    service.remember("Use WAL mode", namespace="decisions")
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text('[cli]\nformat = "json"\n', encoding="utf-8")
    data = json.loads(ok("--config", str(elsewhere), "status").stdout)
    assert data["memories"] == 1
    assert ok("status").stdout.startswith("nmem status\n")  # without it, the default file (none): text
    missing = invoke("--config", str(tmp_path / "nope.toml"), "status")
    assert missing.exit_code == 3
    assert missing.stderr == f"nmem: --config {tmp_path / 'nope.toml'}: no such file\n"


def test_config_option_errors_in_that_file_are_configuration_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[search]\ndefault_limit = 'many'\n", encoding="utf-8")
    result = invoke("--config", str(bad), "status")
    assert result.exit_code == 3 and "search.default_limit" in result.stderr


def test_verbose_and_quiet(service: Service) -> None:
    service.remember("Use WAL mode", namespace="decisions")
    plain = ok("recall", "WAL")
    assert stderr_lines(plain) == ['nmem: 1 memories for "WAL"']
    once = ok("-v", "recall", "WAL")
    assert next(line for line in stderr_lines(once) if "[v1]" in line).startswith("nmem: [v1] settings from ")
    assert not any("[v2]" in line for line in stderr_lines(once))
    twice = ok("-vv", "recall", "WAL")
    assert "nmem: [v2] non-default settings: project.name (env)" in stderr_lines(twice)
    assert once.stdout == plain.stdout == twice.stdout
    quiet = ok("-q", "recall", "WAL")
    assert quiet.stderr == "" and quiet.stdout == plain.stdout
    assert invoke("-q", "-v", "recall", "WAL").exit_code == 2
    failing = invoke("-q", "forget", "01NOSUCHMEMORY0000000000000")
    assert failing.exit_code == 10 and failing.stderr.startswith("nmem: memory not found")  # errors still print


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    out: list[tuple[tuple[str, ...], click.Command]] = []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            out += _commands(command, (*prefix, name))
        else:
            out.append(((*prefix, name), command))
    return out


def test_every_command_with_format_takes_quiet() -> None:
    with_format = [(path, c) for path, c in _commands(cli)
                   if any(p.name == "fmt" for p in c.params)]
    assert len(with_format) > 20
    for path, command in with_format:
        option = next(p for p in command.params if p.name == "fmt")
        assert isinstance(option.type, click.Choice) and "quiet" in option.type.choices, path


def test_format_quiet_prints_nothing_and_keeps_the_exit_code(service: Service) -> None:
    history = seed(service)
    memory = service.remember("Use WAL mode", namespace="decisions")
    for args in (("capture", "learnings", "Quiet works"), ("recall", "WAL"), ("search", "pytest"),
                 ("status",), ("get", str(history.failure)), ("timeline", str(history.failure)),
                 ("sessions",), ("forget", memory.id)):
        result = ok(*args, "--format", "quiet")
        assert result.stdout == "", args
    assert ok("--format", "quiet", "status").stdout == ""
    missing = invoke("get", "999999", "--format", "quiet")
    assert (missing.exit_code, missing.stdout) == (10, "")
    assert ok("status", env={"NMEM_FORMAT": "quiet"}).stdout == ""


# -- capture ---------------------------------------------------------------------------------------

def test_capture_answers_as_subcog(service: Service) -> None:
    data = as_json("capture", "decisions", "API versioning", "--spec", "feature-api",
                   "--tags", "api,versioning", "--content", "## Key insight\nversion in the path")
    assert data["success"] is True
    assert data["memory_id"] == data["id"]
    assert data["uri"] == data["urn"] == f"nmem://project:demo/decisions/{data['id']}"
    assert data["indexed"] is True and data["warning"] is None
    stored = service.get_memory(str(data["id"]))
    assert stored.tags == ["api", "versioning", "spec:feature-api"]
    assert stored.content == "## Key insight\nversion in the path"


def test_capture_text_output(service: Service) -> None:
    text = ok("capture", "patterns", "Error handling pattern", "--domain", "user").stdout
    lines = text.splitlines()
    assert lines[0].startswith("✓ Captured memory: patterns/")
    uid = lines[0].rsplit("/", 1)[1]
    assert lines[1:] == ["  Domain: user", f"  URI: nmem://user/patterns/{uid}"]


def test_capture_from_stdin_warns_about_redaction_and_duplicates(service: Service) -> None:
    body = "## Context\nconnect with password=hunter2hunter2 to the replica\n"
    first = as_json("capture", "decisions", "Use PostgreSQL", "--stdin", input=body)
    assert first["warning"] == "secrets redacted"
    assert "hunter2" not in service.get_memory(str(first["id"])).content
    again = as_json("capture", "decisions", "Use PostgreSQL", "--stdin", input=body)
    assert again["warning"] == f"secrets redacted; duplicate of {first['id']} (kept as a new memory)"
    text = ok("capture", "decisions", "Use PostgreSQL", "--stdin", input=body).stdout
    assert "  Warning: secrets redacted; duplicate of " in text
    assert invoke("capture", "decisions", "x", "--stdin", input="  \n").exit_code == 2
    assert invoke("capture", "decisions", "x", "--spec", " ").exit_code == 2


# -- recall ----------------------------------------------------------------------------------------

@pytest.fixture
def memories(service: Service) -> dict[str, str]:
    pg = service.capture("PostgreSQL JSONB performs well for our documents", summary="Use PostgreSQL",
                         namespace="decisions", spec="feature-db")
    lite = service.remember("SQLite in WAL mode for local development databases", namespace="decisions")
    cache = service.remember("Redis caches sessions for one hour", namespace="learnings", domain="user")
    return {"pg": str(pg["id"]), "lite": lite.id, "cache": cache.id}


def test_recall_spec_filters(memories: dict[str, str]) -> None:
    assert [r["id"] for r in as_json("recall", "--spec", "feature-db")["results"]] == [memories["pg"]]
    assert as_json("recall", "--spec", "other-feature")["results"] == []


def test_recall_detail_levels(memories: dict[str, str]) -> None:
    minimal = as_json("recall", "PostgreSQL", "--detail", "minimal")["results"][0]
    assert set(minimal) == {"kind", "id", "namespace", "summary", "urn", "uri", "score", "number"}
    summary = as_json("recall", "PostgreSQL")["results"][0]
    assert "content_preview" in summary and "content" not in summary
    full = as_json("recall", "PostgreSQL", "--detail", "full")["results"][0]
    assert full["content"] == "PostgreSQL JSONB performs well for our documents"
    assert "PostgreSQL JSONB performs well" in ok("recall", "PostgreSQL", "--detail", "full").stdout
    assert invoke("recall", "x", "--detail", "everything").exit_code == 2


def test_recall_modes(memories: dict[str, str]) -> None:
    bm25 = as_json("recall", "PostgreSQL", "--mode", "bm25")["results"]
    assert [r["id"] for r in bm25] == [memories["pg"]] and "similarity" not in bm25[0]
    for mode in ("vector", "hybrid"):
        refused = invoke("recall", "PostgreSQL", "--mode", mode)
        assert refused.exit_code == 3, refused.stderr
        assert refused.stderr.startswith(f"nmem: recall mode {mode} needs embeddings: pip install ")
    assert invoke("recall", "x", "--mode", "semantic").exit_code == 2


def test_recall_vector_and_hybrid_with_the_builtin_embedder(memories: dict[str, str]) -> None:
    env = {"NMEM_EMBEDDINGS": "hashing"}
    vector = json.loads(ok("recall", "local development databases", "--mode", "vector", "--format", "json",
                           env=env).stdout)["results"]
    assert vector[0]["id"] == memories["lite"]  # vectors are made for memories on the way
    assert all(0 <= r["similarity"] <= 1 for r in vector)
    assert [r["similarity"] for r in vector] == sorted((r["similarity"] for r in vector), reverse=True)
    hybrid = json.loads(ok("recall", "PostgreSQL documents", "--mode", "hybrid", "--format", "json",
                           env=env).stdout)["results"]
    assert hybrid[0]["id"] == memories["pg"]
    best = vector[0]["similarity"]
    strict = json.loads(ok("recall", "local development databases", "--mode", "vector", "--min-similarity",
                           str(best - 0.001), "--format", "json", env=env).stdout)["results"]
    assert [r["id"] for r in strict] == [memories["lite"]]
    text = ok("recall", "local development databases", "--mode", "vector", env=env).stdout
    assert f"({best:.2f} similarity)" in text


def test_min_similarity_needs_vectors(memories: dict[str, str]) -> None:
    assert invoke("recall", "x", "--mode", "bm25", "--min-similarity", "0.5").exit_code == 2
    assert invoke("recall", "x", "--min-similarity", "1.5").exit_code == 2
    implied = invoke("recall", "x", "--min-similarity", "0.5")  # implies hybrid: embeddings needed
    assert implied.exit_code == 3


# -- forget by number --------------------------------------------------------------------------------

def test_forget_takes_the_number_recall_shows(memories: dict[str, str], service: Service) -> None:
    row = next(r for r in as_json("recall", "Redis")["results"] if r["id"] == memories["cache"])
    assert isinstance(row["number"], int)
    assert f"\n[{row['number']}] {row['namespace']}/{row['id']}" in ok("recall", "Redis").stdout
    gone = as_json("forget", str(row["number"]))
    assert gone["id"] == memories["cache"]
    assert all(r["id"] != memories["cache"] for r in as_json("recall")["results"])
    again = invoke("forget", str(row["number"]))
    assert again.exit_code == 10 and again.stderr == f"nmem: memory not found: {row['number']}\n"
    assert invoke("forget", "0").exit_code == 11
    assert service.get_memory(memories["pg"])  # nothing else touched


# -- status ----------------------------------------------------------------------------------------

def test_status_domain_and_verbose(memories: dict[str, str]) -> None:
    everything = as_json("status")
    assert everything["memories"] == 3
    assert everything["by_domain"] == {"project:demo": 2, "user": 1}
    user = as_json("status", "--domain", "user")
    assert (user["domain"], user["memories"], user["by_namespace"]) == ("user", 1, {"learnings": 1})
    project = as_json("status", "--domain", "project")
    assert (project["domain"], project["memories"], project["by_namespace"]) == ("project:demo", 2, {"decisions": 2})
    assert "Memories by domain" not in ok("status").stdout
    verbose = ok("status", "--verbose").stdout
    assert "Memories by domain:" in verbose and "project:demo" in verbose
    fields = [" ".join(line.split()) for line in ok("status", "--domain", "project").stdout.splitlines()]
    assert "memories: 2 in project:demo" in fields  # however wide the field names are aligned
    assert invoke("status", "--domain", "galaxy").exit_code == 11


def test_status_verify(memories: dict[str, str], nmem_home: Path) -> None:
    good = as_json("status", "--verify")
    assert good["verify"] == {"ok": True, "integrity": "ok",
                              "fts": {"observations_fts": "ok", "prompts_fts": "ok", "memories_fts": "ok"}}
    assert "result:           ok" in ok("status", "--verify").stdout
    conn = sqlite3.connect(nmem_home / "nmem.db")
    with conn:  # an index row lost behind the table's back
        conn.execute("DELETE FROM memories_fts_docsize WHERE id = (SELECT MIN(id) FROM memories)")
    conn.close()
    bad = invoke("status", "--verify", "--format", "json")
    assert bad.exit_code == 4
    assert json.loads(bad.stdout)["verify"]["ok"] is False
    assert json.loads(bad.stdout)["verify"]["fts"]["memories_fts"] != "ok"
    assert bad.stderr.startswith("nmem: status --verify found problems: memories_fts: ")
    assert invoke("status").exit_code == 0  # only --verify checks


# -- search --raw (ADR-006 strict mode) --------------------------------------------------------------

def test_search_raw_sends_the_query_as_typed(service: Service) -> None:
    seed(service)
    ranked = as_json("search", "what made the login test flaky?", "--scope", "prompts")
    assert ranked, "plain language is rewritten and ranked"
    as_typed = invoke("search", "what made the login test flaky?", "--scope", "prompts", "--raw")
    assert as_typed.exit_code == 2 and 'syntax error near "?"' in as_typed.stderr  # FTS5's own verdict
    assert as_json("search", "what flaky auth", "--scope", "prompts", "--raw") == []  # "what" is not there
    typed = as_json("search", "the flaky auth", "--scope", "prompts", "--raw")
    assert [r["content_preview"] for r in typed] == ["fix the flaky auth test"]
    both = as_json("search", "pytest AND token", "--raw")
    assert [r["id"] for r in both] == [r["id"] for r in as_json("search", "pytest AND token", "--strict")]
    syntax = invoke("search", '"unbalanced', "--raw")
    assert syntax.exit_code == 2
    setting = ok("search", "what flaky auth", "--scope", "prompts", "--format", "json",
                 env={"NMEM_SEARCH_RAW": "true"})
    assert json.loads(setting.stdout) == []
