"""The REST API's parameters and bodies as pydantic models: they validate requests and write
the OpenAPI document's schemas. Values the service checks itself (dates, namespaces, ids)
stay strings here, so the service's own message reaches the client."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from nmem.adapters.http.routing import Body, Params
from nmem.service.args import AGENT_HELP, BOUND_PROJECT_HELP, RECALL_PROJECT_HELP, SEARCH_PROJECT_HELP

INT64_MAX = 2**63 - 1   # SQLite's integers
Count = Annotated[int, Field(ge=1, le=INT64_MAX, description="Capped at the endpoint's maximum.")]
Skip = Annotated[int, Field(ge=0, le=INT64_MAX)]
Around = Annotated[int, Field(ge=0, le=INT64_MAX, description="Default 5; capped at 100.")]
RecordId = Annotated[int, Field(ge=1, le=INT64_MAX)]
When = Annotated[str, Field(description="A date (2026-05-01), an ISO time or epoch seconds.")]
Words = Annotated[list[str], Field(description="Repeat the parameter or separate values with commas.")]
Agents = Annotated[list[str], Field(description=AGENT_HELP + " Repeat the parameter or separate names with commas.")]
Scope = Literal["observations", "prompts", "sessions", "memories", "all"]
Order = Literal["relevance", "date_desc", "date_asc"]
Format = Literal["index", "full"]
Tier = Literal["hot", "warm", "cold", "archived"]


class SearchParams(Params):
    query: str | None = Field(None, description="Words or an FTS5 query (AND/OR/NOT, \"phrase\", prefix*).")
    scope: Scope = Field("all", description="What to search (default all: observations, prompts, sessions, "
                                            "memories).")
    project: str | None = Field(None, description=SEARCH_PROJECT_HELP)
    obs_type: Words | None = Field(None, description="Observation type(s), e.g. command_error.")
    namespace: Words | None = Field(None, description="Memory namespace(s), e.g. decisions.")
    tags: Words | None = Field(None, description="Memory tags (all must match).")
    files: Words | None = Field(None, description="File path(s): absolute, relative to the project root, or "
                                                  "the end of a recorded path.")
    session_id: str | None = Field(None, description="A session id, a unique prefix (s1a2b3c4d) or its URN.")
    source: Literal["user", "agent", "thinking", "subagent"] | None = Field(
        None, description="Prompts: who wrote them (the user; the agent's replies, its thinking; subagents).")
    date_start: When | None = None
    date_end: When | None = None
    order_by: Order = "relevance"
    format: Format = Field("index", description="index: 120-character previews; full: whole records.")
    strict: bool = Field(False, description="Only records holding every word.")
    limit: Count | None = Field(None, description="Default 20; capped at 100.")
    offset: Skip = 0
    agent: Agents | None = None


class IdsParams(Params):
    ids: Annotated[list[RecordId], Field(min_length=1, max_length=50, description="1 to 50 observation ids.")]


class ObservationPath(Params):
    id: RecordId


class TimelineParams(Params):
    anchor: RecordId | None = Field(None, description="The observation to centre on.")
    query: str | None = Field(None, description="Anchor on this search's best match instead.")
    before: Around | None = None
    after: Around | None = None
    project: str | None = Field(None, description=SEARCH_PROJECT_HELP)
    agent: Agents | None = None
    obs_type: Words | None = Field(None, description="Only observations of these types (the anchor's search and "
                                                     "the neighbours).")
    tags: Words | None = Field(None, description="Memory tags: observations carry none, so none passes.")
    files: Words | None = Field(None, description="Only observations of these files.")
    date_start: When | None = None
    date_end: When | None = None


class SessionsParams(Params):
    project: str | None = Field(None, description=BOUND_PROJECT_HELP)
    since: When | None = None
    limit: Count | None = Field(None, description="Default 20; capped at 100.")
    agent: Agents | None = None


class TraceParams(Params):
    session_id: str = Field(description="A session id, a unique prefix (s1a2b3c4d) or its URN.")
    before: When | None = None
    after: When | None = None
    agent: Agents | None = Field(None, description="The session must be one of these agents' (else 404).")


class FileHistoryParams(Params):
    path: str = Field(description="Absolute, relative to the project root, or the end of a recorded path.")
    before: When | None = None
    after: When | None = None
    limit: Count | None = Field(None, description="Default 10; capped at 50.")


class RecentParams(Params):
    project: str | None = Field(None, description=BOUND_PROJECT_HELP)
    limit: Count | None = Field(None, description="Default 30; capped at 100.")


class RecallParams(Params):
    query: str | None = None
    namespace: str | None = None
    tags: Words | None = None
    domain: str | None = Field(None, description="all (default), project, user, org or project:<name>.")
    project: str | None = Field(None, description=RECALL_PROJECT_HELP)
    limit: Count | None = Field(None, description="Default 10; capped at 100.")
    include_archived: bool = False


class RefPath(Params):
    ref: str = Field(description="Any id nmem shows: 42, #42, p42, s1a2b3c4d, a memory id, or a URN.")


class RefsParams(Params):
    refs: Annotated[list[str], Field(min_length=1, max_length=50, description="1 to 50 ids or URNs.")]


class ContextParams(Params):
    project: str | None = Field(None, description="Default: the server's current project.")
    recovery: bool = Field(False, description="The larger block shown after a compaction or /clear.")


class LogParams(Params):
    limit: Count | None = Field(None, description="The last lines to show (default 200).")


class NewMemory(Body):
    content: str = Field(min_length=1, description="The knowledge, in markdown.")
    summary: str | None = Field(None, max_length=100, description="One line; default: the content's first line.")
    namespace: str | None = Field(None, description="decisions, learnings, gotchas, patterns, conventions...")
    tags: list[str] = Field(default_factory=list)
    domain: str | None = Field(None, description="project (default), user, org or project:<name>.")
    project: str | None = Field(None, description="The project of a `project` domain (default: the server's).")
    relates_to: list[str] = Field(default_factory=list)
    tier: Tier = "warm"
    pinned: bool = False
    source: str | None = Field(None, max_length=100, description="Who it comes from (a rule, a script; "
                                                                 "srvrmgr's rule_name). Default: http.")
    rule_name: str | None = Field(None, max_length=100, description="Alias of source (srvrmgr).")


class MemoryChanges(Body):
    content: str | None = Field(None, min_length=1)
    summary: str | None = Field(None, min_length=1, max_length=100)
    namespace: str | None = None
    tags: list[str] | None = None
    tier: Tier | None = None
    relates_to: list[str] | None = None


class RemoteEvent(Body):
    key: str = Field(pattern=r"^[A-Za-z0-9_.-]{8,128}$",
                     description="The event's idempotency key: a retry with the same key stores nothing twice.")
    event: dict[str, object] = Field(description="The hook's JSON input, as Claude Code gave it.")
    received_at: Annotated[int, Field(ge=0, le=INT64_MAX)] | None = Field(
        None, description="When the hook received it (epoch seconds); default now.")
    store: str | None = Field(None, pattern=r"^[0-9a-f]{8,64}$",
                              description="The store the sender means (a digest of its store URL, as a local hook "
                                          "sends it): a server serving another store answers 409 and stores nothing.")


class AuditParams(Params):
    user: str | None = Field(None, description="Only this user's rows (a non-admin always reads their own).")
    after: Skip = Field(0, description="Rows after this audit id (paging).")
    limit: Count = 100


class NewUser(Body):
    name: str
    admin: bool = False


class UserPath(Params):
    name: str


class TokenPath(Params):
    target: str = Field(description="A token id (`nmem token list`) or a user name (all of their tokens).")
