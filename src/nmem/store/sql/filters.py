"""WHERE clauses for the search filters, shared by every read that takes `SearchFilters`."""

from __future__ import annotations

from nmem.store.sql.dialect import like_suffix, marks

# A session whose `agent` is NULL predates the column (SQLite step 16, PostgreSQL step 5), when
# Claude Code was the only agent nmem captured: a filter on Claude Code keeps it.
UNNAMED_AGENT = "claude-code"

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from nmem.store.records import SearchFilters
    from nmem.store.sql.dialect import Dialect


def observation_filters(filters: SearchFilters, clauses: list[str], params: list[Any]) -> None:
    """WHERE clauses (on alias `o`) for the filters that apply to observations."""
    if filters.namespaces or filters.tags:
        clauses.append("1 = 0")  # only curated memories have a namespace or tags (claude-mem's concepts)
    if filters.project:
        clauses.append("o.project = ?")
        params.append(filters.project)
    if filters.obs_types:
        clauses.append(f"o.obs_type IN ({marks(len(filters.obs_types))})")
        params.extend(filters.obs_types)
    if filters.files:
        ors = []
        for f in filters.files:
            if f.startswith("/"):  # a whole path (the service resolves relative ones)
                ors.append("o.file_path = ?")
                params.append(f)
                continue
            ors.append("(o.file_path = ? OR o.file_path LIKE ? ESCAPE '\\')")
            params.extend([f, like_suffix(f)])
        clauses.append("(" + " OR ".join(ors) + ")")
    if filters.session_id:
        clauses.append("o.session_id = ?")
        params.append(filters.session_id)
    if filters.agents:
        clauses.append(f"o.session_id IN (SELECT a.id FROM sessions a WHERE {agent_match('a', filters.agents)})")
        params.extend(filters.agents)
    date_clauses("o.timestamp", filters, clauses, params)


def prompt_filters(filters: SearchFilters, clauses: list[str], params: list[Any]) -> None:
    """WHERE clauses (aliases `p`, `s`) for the filters that apply to prompts."""
    if filters.project:
        clauses.append("s.project = ?")
        params.append(filters.project)
    if filters.session_id:
        clauses.append("p.session_id = ?")
        params.append(filters.session_id)
    if filters.source == "subagent":   # every subagent's answers, whatever their type
        clauses.append("(p.source = ? OR p.source LIKE ?)")
        params.extend(["subagent", "subagent:%"])
    elif filters.source:
        clauses.append("p.source = ?")
        params.append(filters.source)
    agent_filter("s", filters, clauses, params)
    date_clauses("p.timestamp", filters, clauses, params)


def memory_filters(filters: SearchFilters, clauses: list[str], params: list[Any], dialect: Dialect) -> None:
    """WHERE clauses (alias `m`) for the filters that apply to memories."""
    if filters.domains:
        clauses.append(f"m.domain IN ({marks(len(filters.domains))})")
        params.extend(filters.domains)
    elif filters.project:
        # A project sees its own memories plus the user's and the organisation's.
        clauses.append("m.domain IN (?, 'user', 'org')")
        params.append(f"project:{filters.project}")
    if filters.namespaces:
        clauses.append(f"m.namespace IN ({marks(len(filters.namespaces))})")
        params.extend(filters.namespaces)
    for tag in filters.tags:
        clauses.append(dialect.tag_match("m"))
        params.append(tag)
    if not filters.include_archived:
        clauses.append("m.tier != 'archived'")
    if filters.agents:
        clauses.append("1 = 0")  # a curated memory belongs to no session, so to no agent
    date_clauses("m.updated_at", filters, clauses, params)


def date_clauses(col: str, filters: SearchFilters, clauses: list[str], params: list[Any]) -> None:
    if filters.date_start is not None:
        clauses.append(f"{col} >= ?")
        params.append(filters.date_start)
    if filters.date_end is not None:
        clauses.append(f"{col} <= ?")
        params.append(filters.date_end)


def session_filters(filters: SearchFilters, clauses: list[str], params: list[Any]) -> None:
    if filters.project:
        clauses.append("s.project = ?")
        params.append(filters.project)
    if filters.session_id:
        clauses.append("s.id = ?")
        params.append(filters.session_id)
    agent_filter("s", filters, clauses, params)
    date_clauses("s.started_at", filters, clauses, params)


def agent_match(alias: str, agents: tuple[str, ...]) -> str:
    """The condition (one `?` an agent) that a session row `alias` was run by one of `agents`."""
    named = f"{alias}.agent IN ({marks(len(agents))})"
    return f"({named} OR {alias}.agent IS NULL)" if UNNAMED_AGENT in agents else named


def agent_filter(alias: str, filters: SearchFilters, clauses: list[str], params: list[Any]) -> None:
    """WHERE clause on a session row `alias` for the agents filter."""
    if filters.agents:
        clauses.append(agent_match(alias, filters.agents))
        params.extend(filters.agents)
