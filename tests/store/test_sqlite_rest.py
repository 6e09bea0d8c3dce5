"""`SqliteStore` holds what hooks use and becomes `whole_class()` on the first use of the rest
(navigation, vectors, the lifecycle's rows, the change feed): the same object, the same answers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from nmem.store.sqlite import SqliteStore, whole_class
from nmem.store.sqlite.rest import REST


def names(cls: type) -> set[str]:
    return {n for klass in cls.__mro__ if klass is not object for n in vars(klass) if not n.startswith("__")}


def test_the_rest_overrides_nothing_so_the_class_never_changes_what_a_method_does() -> None:
    light = names(SqliteStore)
    for mixin in REST:
        own = {n for n in vars(mixin) if not n.startswith("__")}
        assert not own & light, f"{mixin.__name__} redefines {sorted(own & light)}"
        # its private helpers are its own: nothing on the light class calls them before the upgrade
        assert all(not n.startswith("_") or n not in light for n in own)
    assert names(whole_class()) == light | {n for m in REST for n in vars(m) if not n.startswith("__")}


def test_a_store_becomes_whole_on_first_use_of_the_rest(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "nmem.db"))
    try:
        assert type(store) is SqliteStore
        assert store.schema_version() > 0 and type(store) is SqliteStore   # its own methods: no change
        assert getattr(store, "_no_such_private", None) is None and type(store) is SqliteStore
        assert store.max_observation_id() == 0                              # ChangeReads
        assert type(store) is whole_class() and isinstance(store, SqliteStore)
        try:
            store.no_such_method  # noqa: B018
        except AttributeError as exc:
            assert "no_such_method" in str(exc)
        else:
            raise AssertionError("a missing attribute must stay missing")
    finally:
        store.close()


def test_opening_a_store_loads_none_of_the_rest(tmp_path: Path) -> None:
    code = ("import sys; from nmem.store import open_store; "
            f"s = open_store('sqlite:///{tmp_path}/nmem.db'); s.schema_version(); s.close(); "
            "print(sorted(m for m in sys.modules if m.startswith('nmem.store.sql')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = done.stdout
    for module in ("changes", "lifecycle", "navigation", "vectors"):
        assert f"nmem.store.sql.{module}'" not in loaded, loaded
