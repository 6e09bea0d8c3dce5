"""Records the store takes and returns (plain classes: this module is on the hook path)."""

from __future__ import annotations

from nmem.models import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any

    from nmem.models import Session

    # Each session's coding agent and project root, by session id (`Store.session_origins`)
    Origins = dict[str, tuple[str | None, str | None]]

# A session's outline (`Store.session_outline`), what summaries are made of:
ObsOutline = tuple[str, str | None, str, int | None]   # obs_type, file_path, content head, prompt_id
PromptOutline = tuple[int, str, str]                    # id, source, content head
# A ranked row's indexed text (`Store.fts_texts`, `Candidates.texts`): text, tokens, time, and a
# prompt's source (who wrote it: reply detection tells a writer going on from an answer; None
# for observations)
IndexedText = tuple[str, int, int, str | None]
OUTLINE_CHARS = 400


class Found(list):  # type: ignore[type-arg]
    """Trail records a read returned (a list, as before), with `origins`: the agent and root of
    their sessions, read in the same statement (a session without a row reads as (None, None)),
    so a search names them without another read (`Search._name_agents`)."""

    __slots__ = ("origins",)

    def __init__(self, rows: Iterable[Any] = (), origins: Origins | None = None) -> None:
        super().__init__(rows)
        self.origins: Origins = origins if origins is not None else {}


class SearchFilters(Record):
    """Filters shared by every search scope; None means "no filter"."""

    project: str | None = None
    obs_types: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    session_id: str | None = None
    source: str | None = None
    date_start: int | None = None
    date_end: int | None = None
    include_archived: bool = False
    agents: tuple[str, ...] = ()  # the coding agents whose sessions it keeps (nmem.capture.agents)
    # False: the trail (observations, prompts, sessions) is known to hold nothing these filters
    # keep (a project without sessions), so only memories are searched; a store may ignore it.
    trail: bool = True


class NewObservation(Record):
    session_id: str
    project: str
    timestamp: int
    obs_type: str
    source_event: str
    content: str
    tool_name: str | None = None
    file_path: str | None = None
    metadata: dict[str, Any] | None = None
    prompt_id: int | None = None


class NewMemory(Record):
    uid: str
    domain: str
    namespace: str
    summary: str
    content: str
    timestamp: int
    tags: tuple[str, ...] = ()
    source: str | None = None
    relates_to: tuple[str, ...] = ()
    tier: str = "warm"
    is_pinned: bool = False


class ImportMark(Record):
    """Where an import stopped in one transcript file of a session (`Store.import_marks`)."""

    session_id: str
    source: str  # "main", or "agent:<file name>" for a subagent's file
    offset: int  # bytes of complete lines taken in
    state: dict[str, Any] | None = None  # what a replay carries over (tool calls awaiting results)
    last_event_at: int | None = None  # the newest event time recorded from the file, if any


class OutboxOp(Record):
    """A memory write of this device waiting to be pushed (`Store.sync_outbox`)."""

    seq: int  # the outbox's own order
    version: str  # the operation's clock and line digest (nmem.store.oplog.version)
    uid: str
    domain: str
    line: str  # the exact JSON line pushed


class FileMark(Record):
    """How far a remote log file has been applied: its blob then, and the bytes of whole lines read."""

    path: str
    blob: str
    offset: int


class Status(Record):
    url: str
    schema_version: int
    size_bytes: int
    sessions: int
    prompts: int
    observations: int
    memories: int
    by_obs_type: dict[str, int]
    by_namespace: dict[str, int]
    by_tier: dict[str, int]
    by_project: dict[str, int]
    by_prompt_source: dict[str, int] = {}  # noqa: RUF012 - user, agent, thinking, subagent:<type>


class SessionListing(Record):
    """A session as `nmem sessions` lists it: the record, its user prompts and actions
    (observations other than session lifecycle events), and its first user prompt."""

    session: Session
    prompts: int
    actions: int
    first_prompt: str | None


class FtsStats(Record):
    """A full-text index's totals, for BM25 computed outside the engine."""

    docs: int  # rows indexed
    tokens: int  # tokens indexed, all rows
    df: dict[str, int]  # rows holding each asked-for index term


class Candidates(Record):
    """What ranking one trail scope reads (`Store.rank_candidates`): the index's statistics
    for the question's stems, the expression that found the candidates, their ids best first
    (the engine's BM25), each one's session window reaching `span` records each side, and the
    text, token count, time and source of the rows named (the candidates and at least their
    neighbours within the ranking's window; `span` may reach further, for promotion); `records`,
    the candidates' records when the engine read them in the same statement; `sessions`, their
    session and prompt when it read those with the windows."""

    stats: FtsStats
    match: str
    ids: list[int]
    span: int
    windows: dict[int, list[tuple[int, int]]]
    texts: dict[int, IndexedText]
    records: Mapping[int, Any] | None = None   # an engine may build each record only when it is read
    origins: Origins | None = None   # the agent and root of the records' sessions, read with them
    # each candidate's session and (an observation's) prompt, when the engine read them with the
    # windows: what arranging the ranked records reads of them besides the texts' times and sources
    sessions: dict[int, tuple[str, int | None]] | None = None


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
