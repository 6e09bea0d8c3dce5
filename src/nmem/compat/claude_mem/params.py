"""claude-mem's parameters: one declaration per parameter, read the same way from MCP
arguments and from HTTP query strings.

claude-mem's worker takes every value as a query-string text (`limit=20`, `files=a.py,b.py`)
and its MCP tools forward them as they come, so a number may arrive as `20` or `"20"` and a
list as an array or a comma-separated text. Every refusal is a `ValidationError` (MCP code
-32002, CLI exit 11) naming the operation and the parameter; nothing reaches the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nmem.errors import InvalidArgument, ValidationError
from nmem.util.timeutil import parse_time

STRING, INTEGER, LIST, DATE, CHOICE = "string", "integer", "list", "date", "choice"
INT_LIMIT = 2**63 - 1


@dataclass(frozen=True)
class Param:
    """One parameter as claude-mem spells it, the other spellings it accepts, its default."""

    name: str
    kind: str
    description: str
    aliases: tuple[str, ...] = ()
    default: Any = None
    required: bool = False
    choices: tuple[str, ...] = ()
    low: int | None = None
    high: int | None = None

    @property
    def spellings(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _integer(op: str, param: Param, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValidationError(f"{op}: {param.name} must be an integer, got {value!r}")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValidationError(f"{op}: {param.name} must be an integer, got {value!r}")
        value = int(value)
    if isinstance(value, str):
        text = value.strip()
        digits = text[1:] if text[:1] in "+-" else text
        if not digits.isdigit():
            raise ValidationError(f"{op}: {param.name} must be an integer, got {value!r}")
        value = int(text)
    if abs(value) > INT_LIMIT:
        raise ValidationError(f"{op}: {param.name} is out of range")
    if param.low is not None and value < param.low:
        raise ValidationError(f"{op}: {param.name} must be at least {param.low}, got {value}")
    if param.high is not None and value > param.high:
        raise ValidationError(f"{op}: {param.name} must be at most {param.high}, got {value}")
    return int(value)


def _list(op: str, param: Param, value: Any) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(i, (str, int)) for i in items):
        raise ValidationError(f"{op}: {param.name} must be a text (comma-separated) or a list of texts")
    return tuple(dict.fromkeys(str(i).strip() for i in items if str(i).strip()))


def _date(op: str, param: Param, value: Any) -> int | str:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValidationError(f"{op}: {param.name} must be an ISO date or epoch (seconds or milliseconds)")
    try:
        parse_time(value, name=param.name)
    except InvalidArgument as exc:
        raise ValidationError(f"{op}: {exc.message}") from None
    return value if isinstance(value, str) else int(value)


def _one(op: str, param: Param, value: Any) -> Any:
    if param.kind == INTEGER:
        return _integer(op, param, value)
    if param.kind == LIST:
        return _list(op, param, value)
    if param.kind == DATE:
        return _date(op, param, value)
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise ValidationError(f"{op}: {param.name} must be a text, got {value!r}")
    text = str(value).strip()
    if param.kind == CHOICE and text not in param.choices:
        raise ValidationError(f"{op}: {param.name} must be one of {', '.join(param.choices)}, got {text!r}")
    return text


def parse(op: str, params: tuple[Param, ...], args: Mapping[str, Any] | None) -> dict[str, Any]:
    """The parameters by claude-mem name, defaults filled in. The first spelling present
    wins; an empty value counts as absent (an HTTP `?query=`); unknown names are ignored,
    as claude-mem's worker ignores them."""
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise ValidationError(f"{op}: arguments must be an object")
    out: dict[str, Any] = {}
    for param in params:
        value = next((args[s] for s in param.spellings if s in args and not _blank(args[s])), None)
        if value is None:
            if param.required:
                raise ValidationError(f"{op}: {param.name} is required")
            out[param.name] = param.default
        else:
            out[param.name] = _one(op, param, value)
    return out


def json_schema(params: tuple[Param, ...]) -> dict[str, Any]:
    """The MCP input schema: claude-mem's names, types loose enough for the texts its clients
    send (`"20"`), aliases listed so a model sees them; `parse` does the checking."""
    props: dict[str, Any] = {}
    for param in params:
        if param.kind == INTEGER:
            schema: dict[str, Any] = {"type": ["integer", "string"]}
        elif param.kind == LIST:
            schema = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
        elif param.kind == DATE:
            schema = {"type": ["string", "integer"]}
        elif param.kind == CHOICE:
            schema = {"type": "string", "enum": list(param.choices)}
        else:
            schema = {"type": "string"}
        description = param.description
        if param.default is not None:
            description += f" Default {param.default}."
        if param.kind == INTEGER and (param.low is not None or param.high is not None):
            description += f" Range {param.low if param.low is not None else ''}..{param.high or ''}."
        props[param.name] = {**schema, "description": description.strip()}
        for alias in param.aliases:
            props[alias] = {**schema, "description": f"Alias of {param.name}."}
    out: dict[str, Any] = {"type": "object", "properties": props}
    required = [p.name for p in params if p.required]
    if required:
        out["required"] = required
    return out
