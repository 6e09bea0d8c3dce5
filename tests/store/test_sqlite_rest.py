"""`SqliteStore` holds the connection and the trail (what a tool call's hook uses) and takes each
other concern (memories, search, context, sync, team, navigation, vectors, the lifecycle's rows,
the change feed) on the first use of one of its names: the same object, the same answers."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from nmem.store.sqlite import SqliteStore, whole_class
from nmem.store.sqlite.concerns import CONCERNS, NEEDS

pytestmark = pytest.mark.sqlite_only("how the SQLite engine's class is split for the hook: SQLite's own modules")


def names(cls: type, skip: tuple[type, ...] = ()) -> set[str]:
    return {n for klass in cls.__mro__ if klass is not object and klass not in skip
            for n in vars(klass) if not n.startswith("__")}


def concern_classes() -> dict[str, type]:
    return {module: getattr(__import__(module, fromlist=[klass]), klass) for module, (klass, _) in CONCERNS.items()}


def called_names(cls: type) -> set[str]:
    """Every name the functions of `cls` and its bases mention (attribute reads included)."""
    found: set[str] = set()
    codes = [v.__code__ for k in cls.__mro__ for v in vars(k).values() if hasattr(v, "__code__")]
    codes += [f.__code__ for k in cls.__mro__ for v in vars(k).values() if isinstance(v, property)
              for f in (v.fget, v.fset) if f is not None]
    while codes:
        code = codes.pop()
        found.update(code.co_names)
        codes.extend(c for c in code.co_consts if hasattr(c, "co_names"))
    return found


def test_the_concern_table_names_each_concerns_public_methods() -> None:
    light = names(SqliteStore)
    for module, cls in concern_classes().items():
        public = {n for n in names(cls, SqliteStore.__mro__) if not n.startswith("_")}
        assert public == set(CONCERNS[module][1]), f"CONCERNS[{module!r}] must list {sorted(public)}"
        assert not public & light, f"{cls.__name__} redefines {sorted(public & light)}"


def test_a_concern_joins_with_the_concerns_whose_engine_hooks_it_calls() -> None:
    classes = concern_classes()
    private = {m: {n for n in names(c, SqliteStore.__mro__) if n.startswith("_")} for m, c in classes.items()}
    for module, cls in classes.items():
        calls = called_names(cls)
        needs = {other for other, own in private.items() if other != module and calls & own}
        assert needs == set(NEEDS.get(module, ())), f"NEEDS[{module!r}] must be {sorted(needs)}"
        assert not any(NEEDS.get(need) for need in needs), "a needed concern needs nothing more (no chains)"


def test_no_concern_redefines_what_another_or_the_light_class_holds() -> None:
    light = names(SqliteStore)
    light_calls = called_names(SqliteStore)
    seen: dict[str, str] = {}
    for cls in concern_classes().values():
        own = names(cls, SqliteStore.__mro__)
        for name in own:
            owner = seen.setdefault(name, cls.__name__)
            assert owner == cls.__name__, f"{name} is both {owner}'s and {cls.__name__}'s"
        # A private helper the light class also has (an engine hook of SqlBase) is never called by
        # the light class before the concern joins: which class an object is cannot change an answer.
        for name in own & light:
            assert name.startswith("_") and name not in light_calls, f"{cls.__name__}.{name} shadows the light class's"
    assert names(whole_class()) == light | set(seen)


def test_a_store_takes_a_concern_on_first_use_of_one_of_its_names(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "nmem.db"))
    try:
        assert type(store) is SqliteStore
        assert store.schema_version() > 0 and type(store) is SqliteStore   # its own methods: no change
        assert getattr(store, "_no_such_private", None) is None and type(store) is SqliteStore
        assert store.sessions_by_prefix("s", 5) == []                       # NavigationReads
        navigation = {"nmem.store.sql.navigation", "nmem.store.sqlite.search"}   # with what it needs
        assert type(store)._concerns == navigation and isinstance(store, SqliteStore)
        assert store.session_roots([]) == {}                                 # ContextReads joins too
        assert type(store)._concerns == {*navigation, "nmem.store.sql.context"}
        assert store.sessions_by_prefix("s", 5) == []                       # still there
        try:
            store.no_such_method  # noqa: B018
        except AttributeError as exc:
            assert "no_such_method" in str(exc)
        else:
            raise AssertionError("a missing attribute must stay missing")
    finally:
        store.close()


def test_threads_sharing_a_store_keep_every_concern_each_loaded(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "nmem.db"))
    wanted = [names_[0] for _, names_ in CONCERNS.values()]
    try:
        threads = [threading.Thread(target=getattr, args=(store, name)) for name in wanted]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert type(store) is whole_class()
    finally:
        store.close()


def test_a_name_whose_concern_another_thread_loaded_since_its_lookup_missed_is_found(tmp_path: Path) -> None:
    """Two threads' first searches at once (a server warming its read threads): one misses
    `rank_candidates` and reaches `__getattr__` after the other has loaded its concern. It gets
    the method, not an AttributeError (which failed a search of the first burst)."""
    store = SqliteStore(str(tmp_path / "nmem.db"))
    try:
        name = next(iter(CONCERNS["nmem.store.sqlite.search"][1]))
        getattr(store, name)                  # the other thread loads the concern...
        found = store.__getattr__(name)       # ...then this one's missed lookup goes on
        assert found == getattr(store, name)
    finally:
        store.close()


def test_opening_a_store_and_writing_the_trail_loads_no_concern(tmp_path: Path) -> None:
    code = ("import sys; from nmem.store import open_store; "
            f"s = open_store('sqlite:///{tmp_path}/nmem.db'); s.schema_version(); "
            "s.ensure_session('s1', 'p', 1, None, 'claude-code'); s.get_session('s1'); s.close(); "
            "print(sorted(m for m in sys.modules if m.startswith('nmem.store.sql')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = done.stdout
    for module in CONCERNS:
        assert f"{module}'" not in loaded, loaded
