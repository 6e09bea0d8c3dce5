"""nmem's full-text query language (FTS5's, see nmem.search.query) as a PostgreSQL `tsquery`.

What maps and how:
    word, "a phrase"        'word', 'a' <-> 'phrase' (words split as FTS5's unicode61 splits them)
    word*, "a phr"*         prefix: 'word':*, 'a' <-> 'phr':*
    a AND b, a b            'a' & 'b'   (an implicit AND between neighbours, as in FTS5)
    a OR b, a NOT b         'a' | 'b', 'a' & !'b'; precedence NOT > AND > OR, parentheses group
    NEAR(a b, 10)           'a' & 'b' & ('a' <1> 'b' | 'b' <1> 'a' | … | 'b' <11> 'a'): the distances
                            FTS5 allows (at most 10 tokens between the two phrases), spelled out;
                            a NEAR of three phrases or more (or of a distance past NEAR_SPELLED) is
                            the AND of its phrases
    ^word                   'word'      (no first-token anchor in tsquery)
    col: / {a b}: filters   accepted, not applied (one tsvector per row, not one per column)
Beside the tsquery, `parse` lists the query's phrases as FTS5's bm25() weighs them: every
phrase in order, repeats included, but those under a NOT (no row that matches holds them); a
phrase of a two-phrase NEAR carries its group and distance (FTS5 counts only its hits near the
other phrase's). Anything FTS5 would reject (an operator without an operand, an unbalanced parenthesis) raises
the same QuerySyntaxError the SQLite engine raises. The result is for `to_tsquery('nmem', …)`,
which stems each quoted word as the indexed text was stemmed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache

from nmem.errors import QuerySyntaxError

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_PIECE = re.compile(r'\s+|"(?:[^"]|"")*"|[()*^:,+{}-]|[^\s"()*^:,+{}-]+')
_OPERATORS = ("AND", "OR", "NOT")
_COLUMNS = ("content", "summary", "tags", "namespace", "project")

# A parsed query: None matches nothing (a phrase of no words), else tsquery text.
Expr = str | None

# A NEAR of two phrases is spelled out as the distances it allows up to this distance (22
# phrase tests at NEAR's default of 10); past it, it is the AND of its phrases.
NEAR_SPELLED = 30


@dataclass(frozen=True)
class Phrase:
    """One phrase of the query as FTS5's bm25() weighs it: its tsquery text ('word', 'a' <-> 'b',
    'pre':*) and, for a phrase of a spelled-out NEAR, the group (1, 2, …), the distance and the
    NEAR's own tsquery text; and whether every row the query matches holds it (no OR above it)."""

    text: str
    near: int = 0
    distance: int = 0
    group: str = ""
    required: bool = True   # every match holds it (no OR above it)


@dataclass(frozen=True)
class Parsed:
    """A query's tsquery text (None: it matches nothing) and its phrases."""

    text: str | None
    phrases: tuple[Phrase, ...]


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pieces = [p for p in _PIECE.findall(text) if not p.isspace()]
        if "".join(_PIECE.findall(text)) != text:
            self.fail("unterminated string")
        self.pos = 0
        self.phrases: list[Phrase] = []
        self.negating = 0     # NOT operands being parsed: their phrases are not listed
        self.groups = 0

    def fail(self, why: str) -> QuerySyntaxError:
        raise QuerySyntaxError(f"invalid search query: syntax error: {why} in {self.text!r}")

    def peek(self, ahead: int = 0) -> str | None:
        i = self.pos + ahead
        return self.pieces[i] if i < len(self.pieces) else None

    def take(self) -> str:
        piece = self.peek()
        if piece is None:
            self.fail("unexpected end of query")
        self.pos += 1
        return str(piece)

    def parse(self) -> Expr:
        if not self.pieces:
            self.fail("empty query")
        expr = self.or_expr()
        if self.peek() is not None:
            self.fail(f"near {self.peek()!r}")
        return expr

    def or_expr(self) -> Expr:
        first = len(self.phrases)
        parts = [self.and_expr()]
        while self.peek() == "OR":
            self.take()
            parts.append(self.and_expr())
        kept = [p for p in parts if p is not None]
        if not kept:
            return None
        if len(kept) > 1:   # a match may hold any one of the parts
            self.phrases[first:] = [replace(p, required=False) for p in self.phrases[first:]]
        return kept[0] if len(kept) == 1 else "(" + " | ".join(kept) + ")"

    def and_expr(self) -> Expr:
        parts = [self.not_expr()]
        while self.peek() is not None and self.peek() not in ("OR", ")"):
            if self.peek() == "AND":
                self.take()
            parts.append(self.not_expr())
        if any(p is None for p in parts):
            return None
        return parts[0] if len(parts) == 1 else "(" + " & ".join(str(p) for p in parts) + ")"

    def not_expr(self) -> Expr:
        expr = self.primary()
        while self.peek() == "NOT":
            self.take()
            self.negating += 1
            negated = self.primary()
            self.negating -= 1
            if expr is not None and negated is not None:
                expr = f"({expr} & !{negated})"
        return expr

    def primary(self) -> Expr:
        piece = self.peek()
        if piece is None or piece in _OPERATORS or piece in (")", ",", "*", ":"):
            self.fail(f"near {piece!r}" if piece else "unexpected end of query")
        if piece == "(":
            self.take()
            expr = self.or_expr()
            if self.take() != ")":
                self.fail("unbalanced parenthesis")
            return expr
        if piece == "NEAR" and self.peek(1) == "(":
            return self.near()
        if self._column_filter():
            return self.primary()
        if piece == "^":
            self.take()
        return self.phrase()

    def _column_filter(self) -> bool:
        """Skip `col:`, `-col:` or `{a b}:` before an operand; a column FTS5 lacks is an error."""
        start = self.pos
        if self.peek() == "-":
            self.take()
        if self.peek() == "{":
            self.take()
            while self.peek() not in ("}", None):
                self._check_column(self.take())
            self.take()
        elif self.peek(1) == ":" and self.peek() not in _OPERATORS:
            self._check_column(self.take())
        else:
            self.pos = start
            return False
        if self.peek() != ":":
            self.fail("a column filter without its operand")
        self.take()
        return True

    def _check_column(self, name: str) -> None:
        if name.lower() not in _COLUMNS:
            self.fail(f"no such column: {name}")

    def near(self) -> Expr:
        self.take()
        self.take()
        parts: list[Expr] = []
        first = len(self.phrases)
        while self.peek() not in (")", ",", None):
            parts.append(self.phrase())
        distance = 10
        if self.peek() == ",":
            self.take()
            given = self.take()
            if not given.isdigit():
                self.fail("NEAR distance must be a number")
            distance = int(given)
        if self.take() != ")" or not parts:
            self.fail("malformed NEAR group")
        if any(p is None for p in parts):
            return None
        if len(parts) == 1:
            return parts[0]
        both = "(" + " & ".join(str(p) for p in parts) + ")"
        if len(parts) > 2 or distance >= NEAR_SPELLED:
            return both
        # FTS5: at most `distance` tokens between the end of one phrase and the start of the other;
        # tsquery's `a <d> b`: b starts d positions after a ends
        a, b = parts
        spelled = " | ".join(f"{x} <{d}> {y}" for d in range(1, distance + 2) for x, y in ((a, b), (b, a)))
        text = f"({a} & {b} & ({spelled}))"
        if len(self.phrases) == first + 2:   # listed (not under a NOT): FTS5 counts their near hits only
            self.groups += 1
            self.phrases[first:] = [Phrase(p.text, self.groups, distance, text) for p in self.phrases[first:]]
        return text

    def phrase(self) -> Expr:
        piece = self.take()
        if piece in _OPERATORS or piece in ("(", ")", ",", "*", ":", "^", "{", "}"):
            self.fail(f"near {piece!r}")
        text = piece[1:-1].replace('""', '"') if piece.startswith('"') else piece
        if not piece.startswith('"') and not _bareword(piece):
            self.fail(f"near {piece!r}")
        prefix = self.peek() == "*"
        if prefix:
            self.take()
        words = [w.lower() for w in _TOKEN.findall(text)]
        if not words:
            return None
        quoted = [f"'{w}'" for w in words]
        if prefix:
            quoted[-1] += ":*"
        text = quoted[0] if len(quoted) == 1 else "(" + " <-> ".join(quoted) + ")"
        if not self.negating:
            self.phrases.append(Phrase(text))
        return text


def _bareword(text: str) -> bool:
    """What FTS5 accepts unquoted: letters, digits, underscore and any non-ASCII character."""
    return all(not ch.isascii() or ch.isalnum() or ch == "_" for ch in text)


def to_tsquery_text(match: str) -> str | None:
    """The tsquery text of an FTS5 MATCH expression, or None when it can match nothing."""
    return _Parser(match).parse()


@lru_cache(maxsize=4096)
def parse(match: str) -> Parsed:
    """The tsquery text of an FTS5 MATCH expression and the phrases bm25() weighs (each question's
    once: a search of the last days parses its candidate queries again at every search)."""
    parser = _Parser(match)
    text = parser.parse()
    return Parsed(text, tuple(parser.phrases) if text is not None else ())
