"""bench/attack_team.py in quick mode: every team scenario of the trust review, replayed against a
real team server on loopback, ends with nothing lost, leaked or answered with the wrong error."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import load_bench

pytestmark = pytest.mark.slow


def test_every_team_attack_is_tried_and_none_gets_through(tmp_path: Path) -> None:
    load_bench("attack")  # the driver: attack_team imports its Row by name
    rows = list(load_bench("attack_team").scenarios(tmp_path, True))
    assert len(rows) >= 8 and all(row.area == "team" and row.tried > 0 for row in rows)
    dirty = [row for row in rows if not row.clean]
    assert dirty == [], dirty
