"""nmem.jsonlite reads and writes exactly what the json module does (the hook path's codec)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from nmem import jsonlite

VALUES: list[Any] = [
    {"session_id": "s1", "tool_input": {"command": "pytest -q", "flags": [1, 2.5, None, True, False]}},
    {"z": 1, "a": {"nested": ["é", "☃", "\n\t\"\\", "\u0000"]}, "m": -0.0},
    "plain string with ünïcode", "", 0, -12, 10**30, 1e300, 1.5e-7, [], {}, [[[]]], [{"k": "v"}] * 3,
    {"1": 2, "": "empty key"},
]


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("sort_keys", [False, True])
@pytest.mark.parametrize("ensure_ascii", [False, True])
def test_dumps_matches_json(value: Any, sort_keys: bool, ensure_ascii: bool) -> None:
    assert jsonlite.dumps(value, sort_keys=sort_keys, ensure_ascii=ensure_ascii) == json.dumps(
        value, sort_keys=sort_keys, ensure_ascii=ensure_ascii)


@pytest.mark.parametrize("value", VALUES)
def test_loads_matches_json_for_text_and_bytes(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False)
    assert jsonlite.loads(text) == json.loads(text)
    assert jsonlite.loads(f" \n{text}\r\n ") == json.loads(text)
    assert jsonlite.loads(text.encode("utf-8")) == json.loads(text.encode("utf-8"))


def test_non_finite_numbers_and_keys_as_json_reads_and_writes_them() -> None:
    parsed = jsonlite.loads('{"a": NaN, "b": Infinity, "c": -Infinity}')
    assert math.isnan(parsed["a"]) and parsed["b"] == math.inf and parsed["c"] == -math.inf
    keys: dict[Any, Any] = {1: float("inf"), None: 2, False: 3, 2.5: 4}
    assert jsonlite.dumps(keys) == json.dumps(keys)


def test_default_serialises_what_json_cannot() -> None:
    obj = object()
    assert jsonlite.dumps({"o": obj}, default=str) == json.dumps({"o": obj}, default=str)
    with pytest.raises(TypeError, match="not JSON serializable"):
        jsonlite.dumps({"o": obj})


@pytest.mark.parametrize("bad", ["", "   ", "{broken", "[1,", '{"a": tru}', '{"a": 1} trailing', "\ufeff{}",
                                 b"\xff\xfe{", b"{\xff}"])
def test_malformed_input_raises_json_own_error(bad: str | bytes) -> None:
    with pytest.raises(ValueError) as ours:
        jsonlite.loads(bad)
    with pytest.raises(ValueError) as theirs:
        json.loads(bad)
    assert str(ours.value) == str(theirs.value)


def test_bytes_with_a_bom_or_utf16_are_decoded_as_json_does() -> None:
    for data in ('{"a": "é"}'.encode("utf-8-sig"), '{"a": "é"}'.encode("utf-16")):
        assert jsonlite.loads(data) == json.loads(data) == {"a": "é"}
