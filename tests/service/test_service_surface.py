"""The service API is one class made of mixins over one base: each public method is defined
in exactly one of them, and the hook's `CaptureService` holds only capture (curation loads with
the events that remember)."""

from __future__ import annotations

import inspect

import pytest

from nmem.service.api import Service
from nmem.service.base import Base
from nmem.service.core import CaptureService

pytestmark = pytest.mark.no_store  # the class's shape; opens no store


def mixins() -> list[type]:
    return [cls for cls in Service.__mro__ if cls not in (Service, CaptureService, Base, object)]



def test_every_mixin_derives_from_base_alone() -> None:
    assert mixins(), "Service has no mixins"
    assert all(cls.__bases__ == (Base,) for cls in mixins()), [c.__name__ for c in mixins()]


def test_no_public_name_is_defined_in_two_mixins() -> None:
    owners: dict[str, list[str]] = {}
    for cls in [Base, *mixins()]:
        for name in vars(cls):
            if not name.startswith("_"):
                owners.setdefault(name, []).append(cls.__name__)
    assert {name: where for name, where in owners.items() if len(where) > 1} == {}


def test_status_is_defined_once() -> None:
    assert [cls.__name__ for cls in Service.__mro__ if "status" in vars(cls)] == ["Status"]


def test_the_capture_service_has_no_search_and_no_curation() -> None:
    public = {name for name, _ in inspect.getmembers(CaptureService) if not name.startswith("_")}
    assert "record_event" in public
    assert not public & {"search", "recall", "timeline", "status", "consolidate", "remember", "forget", "pin",
                         "update"}
    assert {"remember", "forget", "pin", "update"} <= {n for n, _ in inspect.getmembers(Service)}
