"""WHERE clauses for the search filters (PostgreSQL placeholders and JSON operators)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nmem.store.records import SearchFilters


def _marks(n: int) -> str:
    return ",".join(["%s"] * n)


def observation_filters(filters: SearchFilters, clauses: list[str], params: list[Any]) -> None:
    """WHERE clauses (on alias `o`) for the filters that apply to observations."""
    if filters.project:
        clauses.append("o.project = %s")
        params.append(filters.project)
    if filters.obs_types:
        clauses.append(f"o.obs_type IN ({_marks(len(filters.obs_types))})")
        params.extend(filters.obs_types)
    if filters.files:
        ors = []
        for f in filters.files:
            if f.startswith("/"):
                ors.append("o.file_path = %s")
                params.append(f)
                continue
            # a suffix must start at a path separator: "auth.py" is not "oauth.py"
            ors.append("(o.file_path = %s OR o.file_path LIKE %s ESCAPE '\\')")
            params.extend([f, "%/" + f.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")])
        clauses.append("(" + " OR ".join(ors) + ")")
    if filters.session_id:
        clauses.append("o.session_id = %s")
        params.append(filters.session_id)
    date_clauses("o.timestamp", filters, clauses, params)


def prompt_filters(filters: SearchFilters, clauses: list[str], params: list[Any]) -> None:
    """WHERE clauses (aliases `p`, `s`) for the filters that apply to prompts."""
    if filters.project:
        clauses.append("s.project = %s")
        params.append(filters.project)
    if filters.session_id:
        clauses.append("p.session_id = %s")
        params.append(filters.session_id)
    if filters.source:
        clauses.append("p.source = %s")
        params.append(filters.source)
    date_clauses("p.timestamp", filters, clauses, params)


def memory_filters(filters: SearchFilters, clauses: list[str], params: list[Any]) -> None:
    """WHERE clauses (alias `m`) for the filters that apply to memories."""
    if filters.domains:
        clauses.append(f"m.domain IN ({_marks(len(filters.domains))})")
        params.extend(filters.domains)
    elif filters.project:
        clauses.append("m.domain IN (%s, 'user', 'org')")
        params.append(f"project:{filters.project}")
    if filters.namespaces:
        clauses.append(f"m.namespace IN ({_marks(len(filters.namespaces))})")
        params.extend(filters.namespaces)
    for tag in filters.tags:
        clauses.append(f"{has_tag('m')}")
        params.append(tag)
    if not filters.include_archived:
        clauses.append("m.tier != 'archived'")
    date_clauses("m.updated_at", filters, clauses, params)


def has_tag(alias: str) -> str:
    """A memory's tags (a JSON array in text, as SQLite keeps it) hold the parameter."""
    return f"jsonb_exists(CASE WHEN {alias}.tags LIKE '[%%' THEN {alias}.tags::jsonb END, %s)"


def date_clauses(col: str, filters: SearchFilters, clauses: list[str], params: list[Any]) -> None:
    if filters.date_start is not None:
        clauses.append(f"{col} >= %s")
        params.append(filters.date_start)
    if filters.date_end is not None:
        clauses.append(f"{col} <= %s")
        params.append(filters.date_end)


def session_filters(filters: SearchFilters, clauses: list[str], params: list[Any]) -> None:
    if filters.project:
        clauses.append("s.project = %s")
        params.append(filters.project)
    if filters.session_id:
        clauses.append("s.id = %s")
        params.append(filters.session_id)
    date_clauses("s.started_at", filters, clauses, params)
