"""`make attack`'s sync area in quick mode: every hostile-remote scenario replayed with real git
remotes and real `nmem` processes loses nothing, leaks nothing and crashes nowhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import load_bench

pytestmark = pytest.mark.slow


def test_every_sync_scenario_is_clean(tmp_path: Path) -> None:
    load_bench("attack")  # attack_sync imports Row from it by name, as when run from bench/
    rows = list(load_bench("attack_sync").scenarios(tmp_path, quick=True))
    assert len(rows) == 9
    assert all(row.area == "sync" and row.tried > 0 for row in rows), rows
    dirty = [row for row in rows if not row.clean]
    assert not dirty, dirty
    growth = rows[-1]
    assert "segments" in growth.note and "month file" in growth.note
