"""The MCP `configure` tool (subcog's `memory.configure`): read every setting, change a safe few.

Reading returns each setting's value, where it came from and whether the tool may change it;
secrets (`mcp.token`) and passwords in URLs are masked. Changes apply to this server process
only (to every client of an HTTP server), from the next call on, and are never written to
`config.toml` (`nmem config set` does that): an agent tunes how it searches, it does not
reconfigure the user's machine. Every refusal (unknown or read-only setting, wrong type,
out of range) is an invalid-params error (-32602), and a call with one bad change applies none.

Writable: search and context tuning (limits, fusion, strict mode, result shape), the log
level and the tools' excluded tool names. On a team server a change applies to every user of
the server, so only an admin may make one (others get a forbidden error); anyone may read.
Read-only, and why:
- `memory.enabled`, `capture.exclude_projects`: the user's opt-out; an agent must not undo it.
- `memory.path`, `store.url`: would swap the database under a running server.
- `mcp.*` transport settings, `http.*`: access control and limits of the server itself.
- `sync.*`: where memories are pushed; a client must not redirect them.
- `search.embeddings`, `search.embedding_model`: load a model into the server (`nmem index` territory).
- `project.name`, `capture.*` other than exclude_tools, `hooks.*`, `cli.format`: read by the hooks and
  the CLI, other processes, which a change here would never reach.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nmem.capture.privacy import redact_url
from nmem.config import SETTINGS, SETTINGS_BY_NAME, coerce
from nmem.errors import ConfigError, InvalidArgument
from nmem.service.api import Service
from nmem.team import accounts as team

RUNTIME = "runtime"  # the source of a value this tool set


def _between(low: float, high: float) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if low <= value <= high else f"must be between {low:g} and {high:g}"
    return check


def _one_of(*choices: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if value in choices else f"must be one of {', '.join(choices)}"
    return check


def _log_level(value: Any) -> str | None:
    return _one_of("debug", "info", "warning", "error")(str(value).lower())


# Writable settings and the check each new value must pass (None: its type is enough).
WRITABLE: dict[str, Callable[[Any], str | None] | None] = {
    "search.default_limit": _between(1, 100),
    "search.raw": None,
    "search.fusion": _one_of("weighted", "rrf", "dense"),
    "search.hybrid_weight": _between(0.0, 1.0),
    "search.hybrid_drop_labels": None,
    "mcp.search_shape": _one_of("object", "array"),
    "context.local_limit": _between(0, 200),
    "context.cross_limit": _between(0, 200),
    "context.recovery_local_limit": _between(0, 200),
    "context.recovery_cross_limit": _between(0, 200),
    "context.max_tokens": _between(100, 20000),
    "context.recovery_max_tokens": _between(100, 20000),
    "context.backfill_below": _between(0, 1000),
    "capture.exclude_tools": None,
    "log.level": _log_level,
}

DESCRIPTION = (
    "Read nmem's settings (every one, with its source; secrets masked) or change the safe subset for this "
    "server session: search limits, fusion and strict mode, the search result shape, context budgets. Changes "
    "last until the server stops and are not saved; the user's opt-outs, the database, the transport and sync "
    "cannot be changed here."
)
INPUT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "names": {"type": "array", "items": {"type": "string"},
              "description": "Only these settings (default: all)."},
    "set": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean", "array"]},
            "description": "Settings to change, name -> value; only writable ones (see `writable` in the answer)."},
}}
OUTPUT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "settings": {"type": "object", "additionalProperties": {"type": "object"}},
    "changed": {"type": "array", "items": {"type": "string"}},
}, "required": ["settings", "changed"]}


def _shown(name: str, value: Any) -> Any:
    setting = SETTINGS_BY_NAME[name]
    if setting.secret:
        return setting.shown(value)
    return redact_url(value) if isinstance(value, str) and "://" in value else value


def handle(service: Service, args: dict[str, Any], _: str | None) -> dict[str, Any]:
    settings = service.settings
    names = args.get("names")
    if names is not None:
        unknown = [n for n in names if n not in SETTINGS_BY_NAME]
        if unknown:
            raise InvalidArgument(f"unknown setting(s): {', '.join(unknown)}")
    changes = args.get("set") or {}
    if changes:
        team.require_admin("changing the server's settings")
    staged: dict[str, Any] = {}
    for name, raw in changes.items():  # every change checked before any applies
        if name not in SETTINGS_BY_NAME:
            raise InvalidArgument(f"unknown setting: {name}")
        if name not in WRITABLE:
            raise InvalidArgument(f"{name} cannot be changed through MCP (see the configure tool's docs); "
                                  "the user sets it with `nmem config set`")
        try:
            value = coerce(SETTINGS_BY_NAME[name], raw, "configure")
        except ConfigError as exc:
            raise InvalidArgument(exc.message) from None
        check = WRITABLE[name]
        problem = check(value) if check is not None else None
        if problem:
            raise InvalidArgument(f"{name} {problem}, got {raw!r}")
        staged[name] = value
    for name, value in staged.items():
        settings.values[name] = value
        settings.sources[name] = RUNTIME
    shown = {
        s.name: {"value": _shown(s.name, settings[s.name]), "source": settings.sources[s.name],
                 "writable": s.name in WRITABLE, "help": s.help}
        for s in SETTINGS if names is None or s.name in names
    }
    return {"settings": shown, "changed": sorted(staged)}
