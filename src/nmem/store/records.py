"""Records the store takes and returns (plain classes: this module is on the hook path)."""

from __future__ import annotations

from nmem.models import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any

    from nmem.models import Session

# A session's outline (`Store.session_outline`), what summaries are made of:
ObsOutline = tuple[str, str | None, str, int | None]   # obs_type, file_path, content head, prompt_id
PromptOutline = tuple[int, str, str]                    # id, source, content head
OUTLINE_CHARS = 400


class SearchFilters(Record):
    """Filters shared by every search scope; None means "no filter"."""

    __slots__ = ("project", "obs_types", "namespaces", "domains", "tags", "files", "session_id", "source",
                 "date_start", "date_end", "include_archived")

    def __init__(self, project: str | None = None, obs_types: tuple[str, ...] = (),
                 namespaces: tuple[str, ...] = (), domains: tuple[str, ...] = (), tags: tuple[str, ...] = (),
                 files: tuple[str, ...] = (), session_id: str | None = None, source: str | None = None,
                 date_start: int | None = None, date_end: int | None = None,
                 include_archived: bool = False) -> None:
        self.project = project
        self.obs_types = obs_types
        self.namespaces = namespaces
        self.domains = domains
        self.tags = tags
        self.files = files
        self.session_id = session_id
        self.source = source
        self.date_start = date_start
        self.date_end = date_end
        self.include_archived = include_archived


class NewObservation(Record):
    __slots__ = ("session_id", "project", "timestamp", "obs_type", "source_event", "content", "tool_name",
                 "file_path", "metadata", "prompt_id")

    def __init__(self, session_id: str, project: str, timestamp: int, obs_type: str, source_event: str,
                 content: str, tool_name: str | None = None, file_path: str | None = None,
                 metadata: dict[str, Any] | None = None, prompt_id: int | None = None) -> None:
        self.session_id = session_id
        self.project = project
        self.timestamp = timestamp
        self.obs_type = obs_type
        self.source_event = source_event
        self.content = content
        self.tool_name = tool_name
        self.file_path = file_path
        self.metadata = metadata
        self.prompt_id = prompt_id


class NewMemory(Record):
    __slots__ = ("uid", "domain", "namespace", "summary", "content", "timestamp", "tags", "source", "relates_to",
                 "tier", "is_pinned")

    def __init__(self, uid: str, domain: str, namespace: str, summary: str, content: str, timestamp: int,
                 tags: tuple[str, ...] = (), source: str | None = None, relates_to: tuple[str, ...] = (),
                 tier: str = "warm", is_pinned: bool = False) -> None:
        self.uid = uid
        self.domain = domain
        self.namespace = namespace
        self.summary = summary
        self.content = content
        self.timestamp = timestamp
        self.tags = tags
        self.source = source
        self.relates_to = relates_to
        self.tier = tier
        self.is_pinned = is_pinned


class ImportMark(Record):
    """Where an import stopped in one transcript file of a session (`Store.import_marks`)."""

    __slots__ = ("session_id", "source", "offset", "state", "last_event_at")

    def __init__(self, session_id: str, source: str, offset: int, state: dict[str, Any] | None = None,
                 last_event_at: int | None = None) -> None:
        self.session_id = session_id
        self.source = source                  # "main", or "agent:<file name>" for a subagent's file
        self.offset = offset                  # bytes of complete lines taken in
        self.state = state                    # what a replay carries over (tool calls awaiting results)
        self.last_event_at = last_event_at    # the newest event time recorded from the file, if any


class OutboxOp(Record):
    """A memory write of this device waiting to be pushed (`Store.sync_outbox`)."""

    __slots__ = ("seq", "version", "uid", "domain", "line")

    def __init__(self, seq: int, version: str, uid: str, domain: str, line: str) -> None:
        self.seq = seq            # the outbox's own order
        self.version = version    # the operation's clock and line digest (nmem.store.oplog.version)
        self.uid = uid
        self.domain = domain
        self.line = line          # the exact JSON line pushed


class FileMark(Record):
    """How far a remote log file has been applied: its blob then, and the bytes of whole lines read."""

    __slots__ = ("path", "blob", "offset")

    def __init__(self, path: str, blob: str, offset: int) -> None:
        self.path = path
        self.blob = blob
        self.offset = offset


class Status(Record):
    __slots__ = ("url", "schema_version", "size_bytes", "sessions", "prompts", "observations", "memories",
                 "by_obs_type", "by_namespace", "by_tier", "by_project")

    def __init__(self, url: str, schema_version: int, size_bytes: int, sessions: int, prompts: int,
                 observations: int, memories: int, by_obs_type: dict[str, int] | None = None,
                 by_namespace: dict[str, int] | None = None, by_tier: dict[str, int] | None = None,
                 by_project: dict[str, int] | None = None) -> None:
        self.url = url
        self.schema_version = schema_version
        self.size_bytes = size_bytes
        self.sessions = sessions
        self.prompts = prompts
        self.observations = observations
        self.memories = memories
        self.by_obs_type: dict[str, int] = by_obs_type or {}
        self.by_namespace: dict[str, int] = by_namespace or {}
        self.by_tier: dict[str, int] = by_tier or {}
        self.by_project: dict[str, int] = by_project or {}


class SessionListing(Record):
    """A session as `nmem sessions` lists it: the record, its user prompts and actions
    (observations other than session lifecycle events), and its first user prompt."""

    __slots__ = ("session", "prompts", "actions", "first_prompt")

    def __init__(self, session: Session, prompts: int, actions: int, first_prompt: str | None) -> None:
        self.session = session
        self.prompts = prompts
        self.actions = actions
        self.first_prompt = first_prompt


class FtsStats(Record):
    """A full-text index's totals, for BM25 computed outside the engine."""

    __slots__ = ("docs", "tokens", "df")

    def __init__(self, docs: int, tokens: int, df: dict[str, int] | None = None) -> None:
        self.docs = docs                                   # rows indexed
        self.tokens = tokens                               # tokens indexed, all rows
        self.df: dict[str, int] = df or {}                 # rows holding each asked-for index term


class Candidates(Record):
    """What ranking one trail scope reads (`Store.rank_candidates`): the index's statistics
    for the question's stems, the expression that found the candidates, their ids best first
    (the engine's BM25), each one's session window reaching `span` records each side, and the
    text, token count and time of every row named (candidates and their windows); `records`,
    the candidates' records when the engine read them in the same statement."""

    __slots__ = ("stats", "match", "ids", "span", "windows", "texts", "records")

    def __init__(self, stats: FtsStats, match: str, ids: list[int], span: int,
                 windows: dict[int, list[tuple[int, int]]], texts: dict[int, tuple[str, int, int]],
                 records: dict[int, Any] | None = None) -> None:
        self.stats = stats
        self.match = match
        self.ids = ids
        self.span = span
        self.windows = windows
        self.texts = texts
        self.records: dict[int, Any] = records or {}


def day_counts(observations: Iterable[Sequence[Any]], prompts: Iterable[Sequence[Any]]
               ) -> list[tuple[str, int, int]]:
    """(day, observations, prompts) per day, oldest first, from two (day, count) groupings: what
    every engine's `activity_by_day` returns once its SQL has grouped each table."""
    days: dict[str, list[int]] = {}
    for row in observations:
        days.setdefault(str(row[0]), [0, 0])[0] = int(row[1])
    for row in prompts:
        days.setdefault(str(row[0]), [0, 0])[1] = int(row[1])
    return [(day, counts[0], counts[1]) for day, counts in sorted(days.items())]
