"""Turn what a person or agent typed into FTS5 MATCH expressions.

Queries that use FTS5 syntax (quotes, `prefix*`, `^first`, AND/OR/NOT/NEAR) run as typed so
experts keep full control (only words FTS5 could not parse, like `auth.py`, get quoted).
A question that only quotes a title (`what did I think of "The Lean Startup"?`) runs as
typed first and, if that finds nothing, as plain language (`fallback`).
Anything else is plain language, rewritten into tiers, strictest first: every content word
(AND), then any content word (OR). Searches ordered by date run the tiers in order and stop
at the first that finds something; searches by relevance rank the OR tier's hits
(`nmem.search.rank`). Either way a question that shares any content word with a stored
record never comes back empty.
"""

from __future__ import annotations

import re

from nmem.models import Record

# Word characters as FTS5's unicode61 tokenizer sees them (underscore separates tokens).
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_OPERATOR = re.compile(r"(^|[\s()])(AND|OR|NOT)([\s()]|$)|\bNEAR\(")
# Prefix search (`auth*`) and initial-token anchors (`^fix`); a `*` or `^` elsewhere
# (`**kwargs`, `x^2`) is just punctuation in a plain-language question.
_PREFIX_OR_ANCHOR = re.compile(r"\w\*|(^|[\s(])\^\w")
# Raw queries are split into quoted strings (possibly unterminated), parentheses, whitespace
# and words; only words are touched.
_RAW_PIECES = re.compile(r'("(?:[^"]|"")*"?|[(),]|\s+)')
_EMPTY_GROUP = re.compile(r"\(\s*\)")  # `parse_time()`: FTS5 rejects an empty group, so it is no syntax
_QUOTED = re.compile(r'"(?:[^"]|"")*"?')
_COLUMN_FILTER = re.compile(r"^(-?)(content|summary|tags|namespace|project):(.*)$", re.DOTALL)

STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its
itself just me more most my myself no nor not now of off on once only or other our ours
ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours yourself yourselves
don doesn didn isn aren wasn weren hasn haven hadn wouldn shouldn couldn mustn needn shan ain
t s d ll m ve
""".split())


class QueryPlan(Record):
    """MATCH expressions to try in order; `raw` when the user wrote FTS5 syntax."""

    tiers: tuple[str, ...]
    raw: bool
    terms: tuple[str, ...] = ()
    fallback: QueryPlan | None = None     # plain-language plan if the raw query finds nothing

    @property
    def any_term(self) -> str | None:
        """The OR of every content word: the candidate query of relevance ranking."""
        return None if self.raw or not self.tiers else self.tiers[-1]


def uses_fts_syntax(text: str) -> bool:
    """Quotes, prefix stars, anchors or AND/OR/NOT/NEAR. Parentheses alone (`parse_time()`)
    are code in a question, not grouping."""
    return '"' in text or bool(_PREFIX_OR_ANCHOR.search(text)) or bool(_OPERATOR.search(text))


def _quotes_only(text: str) -> bool:
    """FTS5 syntax made of quotes alone, with words outside them: a question quoting a title."""
    return (not _PREFIX_OR_ANCHOR.search(text) and not _OPERATOR.search(text)
            and bool(tokens(_QUOTED.sub(" ", text))))


def _bareword(text: str) -> bool:
    """Characters FTS5 accepts in an unquoted token (anything else is a syntax error)."""
    return all(not ch.isascii() or ch.isalnum() or ch == "_" for ch in text)


def _raw_word(word: str) -> str:
    """Keep an FTS5 word as typed unless FTS5 could not parse it; then quote its core, so
    `auth.py OR login.py` and `src/auth*` work while operators, phrases, prefixes stay."""
    if word in ("AND", "OR", "NOT", "NEAR", "+", "*", "^") or "{" in word or "}" in word:
        return word
    column = _COLUMN_FILTER.match(word)
    if column:
        return f"{column.group(1)}{column.group(2)}:{_raw_word(column.group(3)) if column.group(3) else ''}"
    lead = "^" if word.startswith("^") else ""
    trail = "*" if word.endswith("*") and len(word) > len(lead) + 1 else ""
    core = word[len(lead):len(word) - len(trail)]
    if not core or _bareword(core):
        return word
    return f"{lead}{quote(core)}{trail}"


def raw_query(text: str) -> str:
    """A query written in FTS5 syntax, with words FTS5 cannot parse quoted."""
    out: list[str] = []
    groups: list[bool] = []  # open parentheses: True when it is NEAR's
    last_word = ""
    for piece in _RAW_PIECES.split(_EMPTY_GROUP.sub(" ", text)):
        if not piece or piece.isspace() or piece.startswith('"'):
            out.append(piece)
        elif piece == "(":
            groups.append(last_word == "NEAR")
            out.append(piece)
        elif piece == ")":
            if groups:
                groups.pop()
            out.append(piece)
        elif piece == ",":
            out.append("," if groups and groups[-1] else " ")  # only NEAR takes a comma
        else:
            out.append(_raw_word(piece))
        if piece and not piece.isspace():
            last_word = piece
    return "".join(out)


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
        raw = QueryPlan((raw_query(stripped),), raw=True)
        if _quotes_only(stripped):
            fallback = plan(stripped.replace('"', " "))
            if fallback.tiers:
                return raw.replace(fallback=fallback)
        return raw
    terms = content_terms(stripped)
    if not terms:
        return QueryPlan((), raw=False)
    quoted = [quote(t) for t in terms]
    if len(quoted) == 1:
        return QueryPlan((quoted[0],), raw=False, terms=tuple(terms))
    return QueryPlan((" AND ".join(quoted), " OR ".join(quoted)), raw=False, terms=tuple(terms))
