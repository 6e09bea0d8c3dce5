"""Safe pipes: what `search --ids` prints and what purge deletes match strictly (every word)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from nmem.service.api import Service
from test_cli_support import OTHER_CWD, as_json, bash, invoke, ok, stderr_lines

T0 = 1_790_000_000


def twenty_tests(service: Service) -> dict[str, int]:
    """Twenty test runs sharing the word "test"; only one is test_3."""
    return {f"test_{i}": bash(service, f"pytest tests/test_{i}.py -q", T0 + i) for i in range(1, 21)}


def test_readme_pipe_purges_only_the_row_that_matches(service: Service) -> None:
    runs = twenty_tests(service)
    ids = ok("search", "test_3", "--ids").stdout.split()
    assert ids == [str(runs["test_3"])]
    for ref in ids:  # what `xargs -I{} nmem purge --id {} --confirm` runs, one id at a time
        ok("purge", "--id", ref, "--confirm")
    left = {o.id for o in service.get_observations(list(runs.values()))}
    assert left == set(runs.values()) - {runs["test_3"]}


def test_ids_and_strict_keep_what_holds_every_word_while_the_table_ranks(service: Service) -> None:
    runs = twenty_tests(service)
    ranked = as_json("search", "test_3")
    assert len(ranked) == 20  # a question: everything sharing a word is a candidate
    assert ranked[0]["id"] == runs["test_3"]
    assert [h["id"] for h in as_json("search", "test_3", "--strict")] == [runs["test_3"]]
    # FTS5 syntax runs as typed in both
    assert {h["id"] for h in as_json("search", "test_1*", "--strict")} == {
        runs[f"test_{i}"] for i in (1, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19)}
    assert ok("search", "!!!", "--ids").stdout == ""


def test_purge_query_without_confirm_shows_what_would_go_and_deletes_nothing(service: Service) -> None:
    runs = twenty_tests(service)
    result = invoke("purge", "--query", "test_3")
    assert result.exit_code == 2
    assert stderr_lines(result) == ["nmem: nothing deleted: 1 observation would go; add --confirm to delete it"]
    header, row = result.stdout.splitlines()
    assert header.split() == ["ID", "WHEN", "TYPE", "PROJECT", "CONTENT"]
    assert row.split()[0] == str(runs["test_3"]) and "pytest tests/test_3.py -q" in row
    many = invoke("purge", "--query", "pytest", "--format", "json")
    assert many.exit_code == 2
    preview = json.loads(many.stdout)
    assert (preview["deleted"], preview["matched"], len(preview["observations"])) == (0, 20, 20)
    assert int(service.status()["observations"]) == 20
    none = invoke("purge", "--query", "nothing like this")
    assert (none.exit_code, stderr_lines(none)) == (2, ["nmem: nothing deleted: no observation matches"])


def test_purge_query_deletes_exactly_the_strict_matches_and_keeps_pins(service: Service) -> None:
    runs = twenty_tests(service)
    ok("pin", f"o{runs['test_4']}")
    result = ok("purge", "--query", "test_3 OR test_4", "--confirm")
    assert stderr_lines(result) == ["nmem: purged 1 observation"]
    left = {o.id for o in service.get_observations(list(runs.values()))}
    assert left == set(runs.values()) - {runs["test_3"]}


def test_purge_query_is_narrowed_by_type_age_and_project(service: Service) -> None:
    now = int(time.time())
    old_cmd = bash(service, "make deploy", now - 40 * 86400)
    new_cmd = bash(service, "make deploy", now - 60)
    other = bash(service, "make deploy", now - 40 * 86400, cwd=OTHER_CWD, session_id="s2")
    failed = bash(service, "make deploy", now - 40 * 86400, code=1, stdout="Error: no target")
    ok("purge", "--query", "deploy", "--type", "command", "--older-than", "30d", "--project", "demo", "--confirm")
    assert {o.id for o in service.get_observations([old_cmd, new_cmd, other, failed])} == {new_cmd, other, failed}


def test_purge_query_errors_change_nothing(service: Service) -> None:
    runs = twenty_tests(service)
    for args, message in (
        (("--query", "!!!"), "nmem: purge query '!!!' has no word to match"),
        (("--query", "test", "--id", str(runs["test_1"])),
         "nmem: purge takes either ids or a query/type/age selector, not both"),
        (("--query", '"unbalanced'), None),
    ):
        result = invoke("purge", *args, "--confirm")
        assert result.exit_code == 2, args
        if message:
            assert stderr_lines(result) == [message]
    assert int(service.status()["observations"]) == 20


def test_the_readme_pipes_run_in_a_shell(nmem_home: Path, service: Service) -> None:
    runs = twenty_tests(service)
    service.close()
    python = shlex.quote(sys.executable)
    env = {**os.environ, "NMEM_HOME": str(nmem_home)}
    opened = subprocess.run(["sh", "-c", f'{python} -m nmem search "test_3" --ids | xargs {python} -m nmem get '
                                         "--format json"], capture_output=True, text=True, env=env, check=True)
    assert [r["id"] for r in json.loads(opened.stdout)] == [runs["test_3"]]
    purged = subprocess.run(["sh", "-c", f'{python} -m nmem purge --query "test_3" --confirm'],
                            capture_output=True, text=True, env=env, check=True)
    assert purged.stderr.strip() == "nmem: purged 1 observation"
