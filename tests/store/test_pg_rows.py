"""The PostgreSQL store's rows: read by name or position as `sqlite3.Row` is, each statement's
own names (two shapes on one connection never mix), and a row is a bare tuple (no dict each:
a ranked search reads thousands)."""

from __future__ import annotations

import pytest

from store_engines import ENGINES

pytest.importorskip("psycopg")

POSTGRES = [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"]


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_row_reads_by_name_position_and_slice(store: object, engine: str) -> None:
    row = store._query("SELECT 1 AS a, 'two' AS b, NULL AS c")[0]  # type: ignore[attr-defined]
    assert (row["a"], row["b"], row["c"]) == (1, "two", None)
    assert (row[0], row[1], row[-1]) == (1, "two", None)
    assert row[:2] == (1, "two") and tuple(row) == (1, "two", None) and row == (1, "two", None)
    assert row.keys() == ["a", "b", "c"] and dict(zip(row.keys(), row, strict=True))["b"] == "two"
    with pytest.raises(KeyError):
        row["missing"]


@pytest.mark.parametrize("engine", POSTGRES)
def test_statements_of_other_columns_keep_their_own_names(store: object, engine: str) -> None:
    first = store._query("SELECT 1 AS x, 2 AS y")[0]  # type: ignore[attr-defined]
    second = store._query("SELECT 3 AS y, 4 AS x, 5 AS z")[0]  # type: ignore[attr-defined]
    again = store._query("SELECT 6 AS x, 7 AS y")[0]  # type: ignore[attr-defined]
    assert (first["x"], first["y"]) == (1, 2)
    assert (second["x"], second["y"], second["z"]) == (4, 3, 5)
    assert (again["x"], again["y"]) == (6, 7)
    assert type(first) is type(again) and type(first) is not type(second)   # one class per shape


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_row_holds_no_dict_of_its_own(store: object, engine: str) -> None:
    rows = store._query("SELECT g AS n FROM generate_series(1, 3) g")  # type: ignore[attr-defined]
    assert [r["n"] for r in rows] == [1, 2, 3]
    assert not any(hasattr(r, "__dict__") for r in rows)
