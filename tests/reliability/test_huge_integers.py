"""Integers SQLite cannot hold (beyond ±(2**63 - 1)) are validation errors everywhere.

They used to reach SQLite and come back as "internal error: OverflowError" (CLI exit 1) or
as the MCP SDK's JSON-RPC code 0. Now: a wrong type is an InvalidArgument (exit 2, MCP
-32602), a number out of range a ValidationError (exit 11, MCP -32002), and nothing is
changed. MCP's side is in tests/adapters/mcp/test_mcp_errors.py.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from conftest import record, run_nmem
from nmem.errors import InvalidArgument, ValidationError
from nmem.service.api import Service
from nmem.util.timeutil import parse_age, parse_time
from test_cli_support import invoke

T0 = 1_790_000_000
HUGE = 2**64
TOO_BIG = 2**63          # one past SQLite's largest integer
DIGITS = "9" * 5000      # longer than int() converts


@pytest.fixture
def ids(service: Service) -> list[int]:
    out = []
    for i in range(3):
        done = record(service, "PostToolUse", now=T0 + i, session_id="s1", cwd="/w/demo", tool_name="Bash",
                      tool_input={"command": f"make step{i}"}, tool_response={"exit_code": 0})
        out.append(int(done.observation_id))
    return out


def observations(service: Service) -> int:
    return int(service.store.status().observations)


@pytest.mark.parametrize("call", [
    lambda s: s.get_observations([TOO_BIG]),
    lambda s: s.get_observations([1, -TOO_BIG]),
    lambda s: s.get_observations(["99999999999999999999"]),
    lambda s: s.get_observations([DIGITS]),
    lambda s: s.get_observations([1e300]),
    lambda s: s.timeline(HUGE),
    lambda s: s.timeline("-" + DIGITS),
    lambda s: s.timeline(1, before=HUGE),
    lambda s: s.timeline(1, after=-HUGE),
    lambda s: s.search("make", limit=HUGE),
    lambda s: s.search("make", offset=HUGE),
    lambda s: s.search("make", offset=-1),
    lambda s: s.search("make", date_start=10**30),
    lambda s: s.search("make", date_start=float("inf")),
    lambda s: s.search("make", date_end=float("nan")),
    lambda s: s.search("make", date_end=str(10**25)),
    lambda s: s.recall("x", limit=HUGE),
    lambda s: s.recent_context(limit=HUGE),
    lambda s: s.file_history("/w/demo/x", limit=HUGE),
    lambda s: s.session_trace("s1", before=HUGE),
    lambda s: s.pin("99999999999999999999"),
    lambda s: s.purge(ids=[TOO_BIG], confirm=True),
    lambda s: s.purge(ids=[1, DIGITS], confirm=True),
    lambda s: s.purge(older_than=HUGE, confirm=True),
    lambda s: s.purge(older_than=-5, confirm=True),
])
def test_out_of_range_integers_are_validation_errors_that_change_nothing(service: Service, ids: list[int],
                                                                          call: Any) -> None:
    with pytest.raises(ValidationError) as err:
        call(service)
    assert (err.value.exit_code, err.value.mcp_code) == (11, -32002)
    assert "out of range" in err.value.message or "must be at" in err.value.message
    assert len(err.value.message) < 200  # a 5,000-digit number is not echoed whole
    assert observations(service) == len(ids)


@pytest.mark.parametrize("call", [
    lambda s: s.get_observations([True]),
    lambda s: s.get_observations(["12a"]),
    lambda s: s.get_observations(["--5"]),
    lambda s: s.get_observations([1.5]),
    lambda s: s.get_observations([float("inf")]),
    lambda s: s.timeline("٣"),                      # a digit, but not an ASCII one
    lambda s: s.search("make", limit=False),
    lambda s: s.purge(ids=[1, "two"], confirm=True),
])
def test_non_integers_are_invalid_arguments(service: Service, ids: list[int], call: Any) -> None:
    with pytest.raises(InvalidArgument) as err:
        call(service)
    assert (err.value.exit_code, err.value.mcp_code) == (2, -32602)
    assert observations(service) == len(ids)


def test_the_largest_integers_still_work(service: Service, ids: list[int]) -> None:
    """SQLite's own bounds are fine; an offset past any page is just an empty page, in every search path."""
    largest = 2**63 - 1
    assert service.get_observations([largest, -largest, ids[0]])[0].id == ids[0]
    for scope in ("observations", "all", "prompts", "sessions", "memories"):
        for order in ("relevance", "date_desc"):
            assert service.search("make", scope=scope, order_by=order, offset=largest).hits == []
            assert service.search(None, scope=scope, order_by=order, offset=largest).hits == []
    assert len(service.search("make", limit=largest).hits) == 3  # clamped to 100
    assert service.search("make", limit="2", offset=1.0).hits  # digit strings and integral floats count
    assert service.purge(ids=[largest], confirm=True) == 0
    assert observations(service) == len(ids)


def test_times_and_ages_stay_within_dates() -> None:
    assert parse_time(99_999_999_999) == 99_999_999_999             # seconds, up to 1e11
    assert parse_time(253_402_300_799_000) == 253_402_300_799       # milliseconds: 9999-12-31T23:59:59Z
    for bad in (253_402_300_800_000, -62_135_596_801, 2**63, "1" * 30):
        with pytest.raises(ValidationError):
            parse_time(bad)
    assert parse_age("10000y") == 10_000 * 31536000
    for bad in ("10001y", "99999999999999999999d", DIGITS + "s"):
        with pytest.raises(ValidationError):
            parse_age(bad)


# -- the CLI --------------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["get", "99999999999999999999"],
    ["get", DIGITS],
    ["get", f"nmem://project:demo/observations/{DIGITS}"],
    ["timeline", "99999999999999999999"],
    ["timeline", "1", "--before", "99999999999999999999"],
    ["timeline", "1", "--after", "-99999999999999999999"],
    ["search", "make", "--limit", "99999999999999999999"],
    ["search", "make", "--offset", "99999999999999999999"],
    ["search", "make", "--offset", "-1"],
    ["search", "make", "--since", "99999999999999999999999"],
    ["recall", "x", "--limit", "99999999999999999999"],
    ["file-history", "x", "--limit", "99999999999999999999"],
    ["pin", "99999999999999999999"],
    ["purge", "--id", "99999999999999999999", "--confirm"],
    ["purge", "--id", DIGITS, "--confirm"],
    ["purge", "--older-than", "99999999999999999999d", "--confirm"],
    ["serve", "--transport", "http", "--port", "99999999999999999999"],
])
def test_cli_exit_11_with_one_clear_line(service: Service, ids: list[int], args: list[str]) -> None:
    result = invoke(*args)
    assert result.exit_code == 11, result.stderr
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("nmem: ") and ("must be at" in line or "out of range" in line), line
    assert len(line) < 200
    assert observations(service) == len(ids)


def test_cli_non_integers_are_usage_errors(service: Service) -> None:
    for args in (["search", "x", "--limit", "ten"], ["purge", "--id", "true", "--confirm"],
                 ["timeline", "1", "--before", "1.5"]):
        result = invoke(*args)
        assert result.exit_code == 2, (args, result.stderr)
        assert "is not an integer" in result.stderr


@pytest.mark.slow
def test_a_real_process_says_one_line_and_exits_11(nmem_home: Path, ids: list[int]) -> None:
    env = {**os.environ, "NMEM_HOME": str(nmem_home)}
    for args in (["get", "99999999999999999999"], ["purge", "--id", DIGITS, "--confirm"]):
        done = run_nmem(args, env=env)
        assert done.returncode == 11, done.stderr
        assert done.stdout == ""
        assert len(done.stderr.splitlines()) == 1
        assert "Traceback" not in done.stderr and "internal error" not in done.stderr
