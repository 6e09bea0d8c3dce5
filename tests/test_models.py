"""Records are plain slotted classes (the hook path cannot afford dataclasses): they still
compare, hash, print, copy and serialise the way the frozen dataclasses before them did."""

from __future__ import annotations

import pytest

from nmem.models import COMPILE_AFTER, Memory, Observation, Record
from nmem.store import SearchFilters


def obs(**changes: object) -> Observation:
    base = Observation(1, "s1", "demo", None, 100, "command", "PostToolUse", "Bash", None, "ls",
                       {"exit_code": 0, "files": ["a"]})
    return base.replace(**changes) if changes else base


def test_equality_and_hash_follow_the_fields() -> None:
    assert obs() == obs() and obs() != obs(content="pwd")
    assert SearchFilters(project="p") == SearchFilters(project="p")
    assert hash(SearchFilters(project="p", obs_types=("command",))) == hash(SearchFilters(project="p",
                                                                                       obs_types=("command",)))
    assert obs() != SearchFilters()
    with pytest.raises(TypeError):
        hash(obs())  # a dict field is unhashable, as it was in the frozen dataclass


def test_replace_copies_with_changes_and_refuses_unknown_fields() -> None:
    filters = SearchFilters(project="p", date_start=5)
    narrowed = filters.replace(date_end=9)
    assert (narrowed.project, narrowed.date_start, narrowed.date_end) == ("p", 5, 9)
    assert filters.date_end is None
    with pytest.raises(TypeError, match="no field 'colour'"):
        filters.replace(colour="red")


def test_to_dict_copies_containers_and_adds_the_urn() -> None:
    record = obs()
    data = record.to_dict()
    assert data["urn"] == "nmem://project:demo/observations/1"
    data["metadata"]["files"].append("b")
    assert record.metadata == {"exit_code": 0, "files": ["a"]}
    memory = Memory("01ABC", "user", "gotchas", "s", "c")
    assert (memory.tags, memory.relates_to) == ([], [])
    assert memory.to_dict()["tags"] == [] and memory.to_dict()["urn"] == "nmem://user/gotchas/01ABC"


def test_repr_names_every_field() -> None:
    assert repr(SearchFilters(project="p")).startswith("SearchFilters(project='p', obs_types=()")


def test_fields_keep_their_declared_order_in_json() -> None:
    assert list(obs().to_dict()) == ["id", "session_id", "project", "prompt_id", "timestamp", "obs_type",
                                     "source_event", "tool_name", "file_path", "content", "metadata", "is_pinned",
                                     "urn", "ref"]


def test_a_record_builds_alike_before_and_after_it_compiles_its_init() -> None:
    """The first COMPILE_AFTER instances are set field by field, the rest by a compiled
    `__init__`: the same values, defaults (containers copied) and errors either way."""
    class Point(Record):
        x: int
        y: int = 0
        tags: list[str] = []  # noqa: RUF012 - a record copies it per instance

    built: list[Point] = []
    for _ in range(COMPILE_AFTER + 3):
        built += [Point(1), Point(1, 2, ["a"]), Point(x=1, tags=["a"], y=2)]
        for args, kwargs, message in (((), {}, "missing"), ((1, 2, [], 4), {}, "positional"),
                                      ((1,), {"x": 1}, "multiple values"), ((1,), {"z": 1}, "unexpected")):
            with pytest.raises(TypeError, match=message):
                Point(*args, **kwargs)
    assert built[-3:] == built[:3] == [Point(1, 0, []), Point(1, 2, ["a"]), Point(1, 2, ["a"])]
    assert Point.__init__.__code__.co_filename == "<string>"   # compiled by now
    first, second = Point(1), Point(1)
    first.tags.append("x")
    assert second.tags == []
