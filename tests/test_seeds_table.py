"""docs/seeds.md, the conformance table of the five seeds, cannot drift from the code: every row
is well formed, every "as specified" or "superset" row names tests that exist (`make seeds` runs
exactly them, and the suite runs them all), every deviation gives its reason, every row still
in progress names its owner; and the tools and routes the seeds name each have a row."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
docs = load_script("docs")


def test_every_row_is_well_formed_and_its_tests_exist() -> None:
    rows = docs.seed_rows(ROOT / "docs")
    assert docs.seed_problems(rows, ROOT) == []
    assert {str(r["id"]).split(".", 1)[0] for r in rows} == set(docs.SEEDS)


def test_the_checker_would_catch_a_missing_test_a_bare_deviation_and_an_unowned_gap(tmp_path: Path) -> None:
    rows = [
        {"id": "adr006.x.1", "contract": "c", "interface": "mcp", "status": "as specified",
         "tests": ["tests/test_seeds_table.py::test_that_does_not_exist"]},
        {"id": "adr006.x.2", "contract": "c", "interface": "mcp", "status": "deviation", "reason": "because"},
        {"id": "adr006.x.3", "contract": "c", "interface": "mcp", "status": "not done (in progress)"},
        {"id": "adr006.x.3", "contract": "c", "interface": "mcp", "status": "superset",
         "tests": ["tests/test_seeds_table.py::test_every_row_is_well_formed_and_its_tests_exist"]},
        {"id": "nowhere.1", "contract": "c", "interface": "mcp", "status": "done", "tests": ["tests/nope.py::t"]},
    ]
    found = "\n".join(docs.seed_problems(rows, ROOT))
    for expected in ("defines no test test_that_does_not_exist", "adr006.x.2: a deviation gives its reason",
                     "adr006.x.3: a row in progress names its `owner`", "adr006.x.3: duplicate id",
                     "adr006.x.3: a superset row says in `note`", "nowhere.1: the id must start with",
                     "nowhere.1: status must be one of", "no test file tests/nope.py"):
        assert expected in found


def test_the_markdown_is_generated_from_the_table_with_its_counts() -> None:
    rows = docs.seed_rows(ROOT / "docs")
    text = (ROOT / "docs" / "seeds.md").read_text(encoding="utf-8")
    assert text == docs.seeds_markdown(rows), "docs/seeds.md is stale: run `make docs`"
    counts = docs.seed_counts(rows)["all"]
    assert f"| **all** | {len(rows)} | " + " | ".join(str(counts[s]) for s in docs.STATUSES) + " |" in text
    for row in rows:
        assert f"| {row['id']} | " in text


def test_rows_in_progress_are_only_the_other_branches_work() -> None:
    owners = {r.get("owner") for r in docs.seed_rows(ROOT / "docs") if r["status"] == docs.IN_PROGRESS}
    assert owners <= {"subcog-profile", "cli-fast"}


def _contracts() -> str:
    return "\n".join(f"{r['contract']} {r.get('note', '')}" for r in docs.seed_rows(ROOT / "docs"))


def test_every_tool_and_route_the_seeds_name_has_a_row() -> None:
    text = _contracts()
    seeds = ROOT.parent / "shared" / "seeds"
    named: set[str] = {"search", "get_observations", "timeline", "recent_context", "session_trace", "file_history",
                       "remember", "recall", "forget", "decisions", "changes", "how_it_works", "find_by_concept",
                       "find_by_file", "find_by_type", "get_recent_context", "get_context_timeline",
                       "get_timeline_by_query", "search_observations", "search_sessions", "search_user_prompts",
                       "memory.capture", "memory.configure", "memory.consolidate", "memory.sync",
                       "/stream/consolidate", "/stream/sync", "/stream/recall", "/health"}
    if seeds.is_dir():  # the shared seeds, when this checkout sits beside them: every backticked tool name
        source = (seeds / "claude-mem-mcp-server.md").read_text(encoding="utf-8")
        named |= set(re.findall(r"name: '([a-z_]+)'", source))
    missing = sorted(n for n in named if n not in text)
    assert missing == []
