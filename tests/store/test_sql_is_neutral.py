"""The SQL in `nmem.store.sql` is written once for both engines: no engine's own spelling in it.

What differs between SQLite and PostgreSQL lives in each engine's dialect, search, schema and
connection modules; a `%s` mark, a JSON function of one engine, FTS5's MATCH, ts_rank or a
PRAGMA in the shared statements would run on one engine only.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import nmem.store.sql

pytestmark = pytest.mark.no_store  # reads the SQL text; opens no store

SQL_DIR = Path(nmem.store.sql.__file__).parent
ENGINE_TOKENS = ("%s", "json_each", "jsonb", "MATCH", "ts_rank", "PRAGMA", "GREATEST", "RETURNING", "ANY(",
                 "INSERT OR", "lastrowid", "::")


def strings(path: Path) -> list[tuple[int, str]]:
    """Every string literal of a module (f-string parts included) with its line, docstrings left out."""
    tree = ast.parse(path.read_text())
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs]



def test_the_shared_modules_exist() -> None:
    names = {p.stem for p in SQL_DIR.glob("*.py")}
    assert {"base", "dialect", "filters", "trail", "memories", "context", "navigation", "lifecycle", "team",
            "vectors"} <= names


def test_no_engine_spelling_in_the_shared_sql() -> None:
    found = []
    for path in sorted(SQL_DIR.glob("*.py")):
        for line, text in strings(path):
            for token in ENGINE_TOKENS:
                if token in text and not (token == "MATCH" and not re.search(r"\bMATCH\b", text)):
                    found.append(f"{path.name}:{line}: {token!r} in {text[:60]!r}")
    assert found == []


def test_the_shared_modules_import_no_engine() -> None:
    for path in sorted(SQL_DIR.glob("*.py")):
        imported = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ImportFrom | ast.Import)]
        names = [n.module or "" for n in imported if isinstance(n, ast.ImportFrom)]
        names += [a.name for n in imported if isinstance(n, ast.Import) for a in n.names]
        engines = [m for m in names if m.startswith(("nmem.store.sqlite", "nmem.store.postgres", "psycopg",
                                                     "sqlite3", "_sqlite3"))]
        assert engines == [], f"{path.name} imports {engines}"


def test_the_postgres_engine_imports_nothing_of_sqlites() -> None:
    pg_dir = SQL_DIR.parent / "postgres"
    for path in sorted(pg_dir.glob("*.py")):
        assert "nmem.store.sqlite" not in path.read_text(), f"{path.name} imports the SQLite engine"
