"""JSON for the hook path: the C codec behind the `json` module, without importing `json`.

`import json` brings `re` and `enum` along (about 11 ms on a small VM, a third of a hook's
whole budget); `_json`, the accelerator `json` itself uses, loads in under 0.4 ms
(`python -S -X importtime -c 'import _json'`). `loads` and
`dumps` here produce exactly what `json.loads` and `json.dumps` produce for the same
arguments; malformed input is handed to `json.loads` so the error (a `ValueError`) reads
the same.
"""

from __future__ import annotations

import _json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_WHITESPACE = " \t\n\r"
# A JSON text encoded in UTF-8 starts with one of these bytes; anything else (a BOM,
# UTF-16) goes through `json.loads`, which detects encodings.
_UTF8_STARTS = frozenset(b' \t\n\r{["-0123456789tfn')


class _DecoderOptions:
    """What `_json.make_scanner` reads off a decoder: json.JSONDecoder's defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity and -Infinity, as json reads them


def _not_serializable(value: object) -> Any:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


_scan = _json.make_scanner(_DecoderOptions())  # type: ignore[arg-type]  # duck-typed like json.JSONDecoder


def loads(data: str | bytes) -> Any:
    """`json.loads(data)`."""
    if isinstance(data, bytes):
        if not data or data[0] not in _UTF8_STARTS:
            return _stdlib_loads(data)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return _stdlib_loads(data)
    else:
        text = data
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = _scan(text, start)
    except (StopIteration, ValueError, SystemError):
        # The scanner builds its error from `json.decoder`, and fails with SystemError when
        # that module is not loaded yet: `json.loads` raises the proper error for this text.
        return _stdlib_loads(text)
    if end != len(text) and text[end:].strip(_WHITESPACE):
        return _stdlib_loads(text)
    return value


def dumps(value: Any, *, sort_keys: bool = False, ensure_ascii: bool = True,
          default: Callable[[Any], Any] | None = None) -> str:
    """`json.dumps(value, sort_keys=..., ensure_ascii=..., default=...)` with json's default separators."""
    encode_str = _json.encode_basestring_ascii if ensure_ascii else _json.encode_basestring
    if isinstance(value, str):
        return str(encode_str(value))
    encoder = _json.make_encoder({}, default or _not_serializable, encode_str, None, ": ", ", ",
                                 sort_keys, False, True)
    return "".join(encoder(value, 0))


def _stdlib_loads(data: str | bytes) -> Any:
    import json

    return json.loads(data)


def replace_surrogates(value: Any) -> Any:
    """`value` with every lone surrogate in its strings (keys too) replaced by U+FFFD.

    JSON can spell a lone surrogate (`"\\ud800"`), Python decodes it, and SQLite cannot store
    it (it is not encodable as UTF-8).
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in value)
        return value
    if isinstance(value, dict):
        return {replace_surrogates(k): replace_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [replace_surrogates(v) for v in value]
    return value


def may_hold_surrogates(text: str) -> bool:
    """Whether decoding JSON `text` can produce a lone surrogate (a cheap test before walking it)."""
    return "\\ud" in text or "\\uD" in text or (not text.isascii() and _has_surrogate(text))


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
