"""Shared fixtures: every test gets its own data dir, so nothing touches ~/.nmem."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from mcp import Client

from crash_report import pytest_configure, pytest_terminal_summary  # noqa: F401 - hooks
from nmem.adapters.mcp.server import NmemServer
from nmem.capture.claude_code import parse
from nmem.config import Settings, load_settings
from nmem.service.api import Service
from nmem.store.keys import database_key
from store_engines import ENGINES, pg_schemas, pg_url, sqlite_template, store, store_url

# Bytecode is cached even where the environment says not to (PYTHONDONTWRITEBYTECODE, set in some CI
# images and shells): otherwise every test process rewrites and compiles every test module, and every
# `nmem serve` a test starts compiles the HTTP and MCP adapters again. Only speed changes.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

__all__ = ["pg_schemas", "pg_url", "sqlite_template", "store", "store_url"]  # fixtures every test module may use

# Every test under these directories that opens a store (through `store`, `store_url`, `nmem_home`,
# `settings`, `service`...) runs once per engine; see pytest_generate_tests.
BOTH_ENGINES = ("store", "service")
TESTS = Path(__file__).resolve().parent


@pytest.fixture
def engine() -> str:
    """The store engine a test runs on: SQLite, unless the test runs on both (BOTH_ENGINES, or a
    module elsewhere that imports `both_engines`)."""
    return "sqlite"


def on_both_engines(path: Path) -> bool:
    parts = path.resolve().relative_to(TESTS).parts
    return len(parts) > 1 and parts[0] in BOTH_ENGINES


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A store or service test runs on SQLite and on PostgreSQL (which skips, saying why, without
    NMEM_TEST_PG), unless marked `sqlite_only("why")` or parametrized over `engine` itself."""
    if "engine" not in metafunc.fixturenames or not on_both_engines(metafunc.definition.path):
        return
    if metafunc.definition.get_closest_marker("sqlite_only") is not None:
        return
    if any("engine" in str(m.args[0]) for m in metafunc.definition.iter_markers("parametrize")):
        return
    metafunc.parametrize("engine", ENGINES)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under BOTH_ENGINES a test either runs on the engines, or says why not: `sqlite_only("why")`
    (SQLite's own behaviour, or a test that opens both engines itself) or `no_store` (it opens none)."""
    wrong: list[str] = []
    for item in items:
        if not on_both_engines(item.path):
            continue
        only = item.get_closest_marker("sqlite_only")
        if only is not None and not (only.args and isinstance(only.args[0], str) and only.args[0].strip()):
            wrong.append(f"{item.nodeid}: sqlite_only needs its reason, sqlite_only(\"why\")")
        elif only is None and item.get_closest_marker("no_store") is None and "engine" not in item.fixturenames:
            wrong.append(f"{item.nodeid}: opens no store through the engine fixtures; use `store`, "
                         "`store_url` or `service`, or mark it sqlite_only(\"why\") or no_store")
    if wrong:
        raise pytest.UsageError("tests that do not run on both engines:\n  " + "\n  ".join(wrong))


@pytest.fixture
def nmem_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str, request: pytest.FixtureRequest) -> Path:
    home = tmp_path / "nmem-home"
    monkeypatch.setenv("NMEM_HOME", str(home))
    for var in ("NMEM_DB", "NMEM_CONFIG", "NMEM_STORE_URL", "NMEM_PROJECT", "NMEM_ENABLED", "NMEM_FORMAT",
                "NMEM_KEY", "NMEM_KEY_FILE", "NMEM_KEYRING"):
        monkeypatch.delenv(var, raising=False)
    if engine == "postgres":
        monkeypatch.setenv("NMEM_STORE_URL", str(request.getfixturevalue("pg_url")))
    return home


@pytest.fixture
def settings(nmem_home: Path) -> Settings:
    return load_settings()


@pytest.fixture
def service(settings: Settings, request: pytest.FixtureRequest) -> Iterator[Service]:
    if settings.store_url == f"sqlite:///{settings.db_path}" and not os.path.exists(settings.db_path) \
            and database_key(settings) is None:
        request.getfixturevalue("sqlite_template").copy_to(Path(settings.db_path))
    svc = Service.open(settings)
    yield svc
    svc.close()


class Clock:
    """A settable clock so tests control timestamps."""

    def __init__(self, now: float = 1_790_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(service: Service) -> Clock:
    c = Clock()
    service.clock = c
    return c


def hook_payload(event: str, session_id: str = "sess-1", cwd: str = "/work/demo", **fields: Any) -> dict[str, Any]:
    return {"hook_event_name": event, "session_id": session_id, "cwd": cwd,
            "transcript_path": f"/tmp/{session_id}.jsonl", **fields}


def record(service: Service, event: str, *, now: float | None = None, **fields: Any) -> Any:
    return service.record_event(parse(hook_payload(event, **fields), now=now))


def run_nmem(args: list[str], *, stdin: str = "", env: dict[str, str] | None = None,
             timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run nmem as a real process, the way Claude Code or a shell does."""
    return subprocess.run([sys.executable, "-m", "nmem", *args], input=stdin, capture_output=True,
                          text=True, env=env, timeout=timeout, check=False)


def dumps(payload: dict[str, Any]) -> str:
    return json.dumps(payload)


# -- MCP server fixtures (anyio runs the async tests on asyncio) ------------------------------

# mcp_support uses the helpers above, so it is imported once they exist.
from mcp_support import PROJECT, Seeded, seed  # noqa: E402


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def seeded(service: Service) -> Seeded:
    return seed(service)


@pytest.fixture
def app(service: Service, seeded: Seeded) -> NmemServer:
    return NmemServer(service, project=PROJECT)


@pytest.fixture
async def client(app: NmemServer) -> AsyncIterator[Client]:
    """A 2025-11-25 client (what Claude Code speaks over stdio) connected in memory."""
    async with Client(app.server, mode="legacy") as c:
        assert c.protocol_version == "2025-11-25"
        yield c


def load_bench(name: str) -> ModuleType:
    """A script of bench/ as a module under its own name, since the scripts import each other
    by name as when run from bench/ (`import corpus`, `from measure import …`); once each."""
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).resolve().parents[1] / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_script(name: str) -> ModuleType:
    """A developer tool of scripts/ (not in the wheel) as a module; once each."""
    key = f"nmem_scripts_{name}"
    if key not in sys.modules:
        path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(key, path)
        assert spec is not None and spec.loader is not None
        sys.modules[key] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[key]
