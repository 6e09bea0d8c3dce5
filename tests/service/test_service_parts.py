"""`service.parts`: the light CLI's services made of only the mixins a command calls. Each is
built from `Service`'s own methods, and each command (with the options whose methods call into
another mixin) returns on it exactly what it returns on the whole `Service`."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from nmem.config import Settings
from nmem.service import parts
from nmem.service.api import Service
from nmem.service.base import Base
from test_cli_support import AUTH_FILE, CWD, seed


@pytest.mark.no_store
def test_each_command_has_a_composition_of_services_own_methods() -> None:
    assert set(parts.COMMANDS) == {"search", "recall", "get", "status", "capture"}
    for command in parts.COMMANDS:
        cls = parts.for_command(command)
        assert issubclass(cls, Base) and not issubclass(cls, Service)
        mixins = [c for c in cls.__mro__ if c not in (cls, Base, object)]
        assert all(m in Service.__mro__ for m in mixins), command
        for name in dir(cls):
            if not name.startswith("__"):
                assert defined(cls, name) is defined(Service, name), (command, name)


def defined(cls: type, name: str) -> object:
    """The attribute as the class that defines it holds it (a classmethod as itself, not bound)."""
    return next(vars(c)[name] for c in cls.__mro__ if name in vars(c))


@pytest.mark.no_store
def test_the_get_service_leaves_recording_and_ranking_out() -> None:
    public = {name for name in dir(parts.for_command("get")) if not name.startswith("_")}
    assert {"get", "get_memory"} <= public
    assert not public & {"record_event", "search", "recall", "status", "consolidate"}


@pytest.fixture
def seeded(service: Service) -> Iterator[tuple[Service, str]]:
    seed(service)
    memory = service.capture("Tokens live for an hour since the auth fix", summary="Token lifetime is one hour",
                             namespace="decisions", tags=["auth"], domain="project:demo")
    yield service, memory["memory_id"]


def unread(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows without the read counters, which every recall and get moves on."""
    return [{k: v for k, v in row.items() if k not in ("access_count", "accessed_at", "tier")} for row in rows]


CALLS: dict[str, Callable[[Any, str], Any]] = {
    "search": lambda s, _: [h.to_dict() for h in s.search("auth", scope="all", files=[AUTH_FILE], session_id="s1",
                                                        cwd=CWD).hits],
    "recall": lambda s, _: unread(s.recall_results("token", project="*", detail="full")),
    "get": lambda s, memory: unread([r.to_dict() for r in s.get(["1", "p1", memory, "s1"])[0]]),
    "status": lambda s, _: {k: v for k, v in s.status(verify=True).items() if k != "size_bytes"},
    "capture": lambda s, _: sorted(s.capture("Readers never block the writer", summary="Use WAL mode",
                                          namespace="decisions", tags=["db"], domain="user")),
}


@pytest.mark.parametrize("command", sorted(CALLS))
def test_a_command_returns_on_its_composition_what_it_returns_on_the_whole_service(
        seeded: tuple[Service, str], settings: Settings, command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.path.isdir(CWD):
        monkeypatch.chdir(CWD)
    whole, memory = seeded
    expected = CALLS[command](whole, memory)
    light = parts.for_command(command).open(settings)
    try:
        assert CALLS[command](light, memory) == expected
    finally:
        light.close()
