"""bench/attack_input.py in quick mode: every hostile-input scenario runs through real processes
and a real server, and every column but `tried` is zero."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import load_bench

attack = load_bench("attack")
attack_input = load_bench("attack_input")


@pytest.mark.slow
def test_every_input_scenario_is_refused_cleanly(tmp_path: Path) -> None:
    rows = list(attack_input.scenarios(tmp_path, True))
    assert len(rows) >= 9
    assert all(row.area == "input" for row in rows)
    assert [row for row in rows if not row.clean] == [], attack.table(rows)
    assert sum(row.tried for row in rows) >= 40
