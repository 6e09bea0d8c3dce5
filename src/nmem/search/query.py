"""Turn what a person or agent typed into FTS5 MATCH expressions.

Queries that use FTS5 syntax (quotes, `*`, parentheses, AND/OR/NOT/NEAR) run as typed so
experts keep full control; anything else is plain language and is rewritten into tiers,
strictest first: every content word (AND), then any content word (OR). The caller runs
tiers in order and stops at the first that finds something, so a question that shares
any content word with a stored record never comes back empty.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Word characters as FTS5's unicode61 tokenizer sees them (underscore separates tokens).
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_OPERATOR = re.compile(r"(^|\s)(AND|OR|NOT)(\s|$)|\bNEAR\(")
_SYNTAX_CHARS = set('"*()^')

STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its
itself just me more most my myself no nor not now of off on once only or other our ours
ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours yourself yourselves
""".split())


@dataclass(frozen=True)
class QueryPlan:
    """MATCH expressions to try in order; `raw` when the user wrote FTS5 syntax."""

    tiers: tuple[str, ...]
    raw: bool
    terms: tuple[str, ...] = ()


def uses_fts_syntax(text: str) -> bool:
    return any(ch in _SYNTAX_CHARS for ch in text) or bool(_OPERATOR.search(text))


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def content_terms(text: str) -> list[str]:
    """Distinct lower-cased tokens minus stop words (all tokens if only stop words remain)."""
    seen: dict[str, None] = {}
    words = [t.lower() for t in tokens(text)]
    for word in words:
        if word not in STOP_WORDS:
            seen.setdefault(word, None)
    if not seen:
        for word in words:
            seen.setdefault(word, None)
    return list(seen)


def plan(text: str) -> QueryPlan:
    """Plan a query. Empty plans (no tiers) mean there is nothing to match on."""
    stripped = text.strip()
    if not stripped:
        return QueryPlan((), raw=False)
    if uses_fts_syntax(stripped):
        return QueryPlan((stripped,), raw=True)
    terms = content_terms(stripped)
    if not terms:
        return QueryPlan((), raw=False)
    quoted = [quote(t) for t in terms]
    if len(quoted) == 1:
        return QueryPlan((quoted[0],), raw=False, terms=tuple(terms))
    return QueryPlan((" AND ".join(quoted), " OR ".join(quoted)), raw=False, terms=tuple(terms))
