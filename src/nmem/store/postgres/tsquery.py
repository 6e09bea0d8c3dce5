"""nmem's full-text query language (FTS5's, see nmem.search.query) as a PostgreSQL `tsquery`.

What maps and how:
    word, "a phrase"        'word', 'a' <-> 'phrase' (words split as FTS5's unicode61 splits them)
    word*, "a phr"*         prefix: 'word':*, 'a' <-> 'phr':*
    a AND b, a b            'a' & 'b'   (an implicit AND between neighbours, as in FTS5)
    a OR b, a NOT b         'a' | 'b', 'a' & !'b'; precedence NOT > AND > OR, parentheses group
    NEAR(a b, 10)           'a' & 'b'   (tsquery has only exact distances: NEAR is an AND here)
    ^word                   'word'      (no first-token anchor in tsquery)
    col: / {a b}: filters   accepted, not applied (one tsvector per row, not one per column)
Anything FTS5 would reject (an operator without an operand, an unbalanced parenthesis) raises
the same QuerySyntaxError the SQLite engine raises. The result is for `to_tsquery('nmem', …)`,
which stems each quoted word as the indexed text was stemmed.
"""

from __future__ import annotations

import re

from nmem.errors import QuerySyntaxError

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_PIECE = re.compile(r'\s+|"(?:[^"]|"")*"|[()*^:,+{}-]|[^\s"()*^:,+{}-]+')
_OPERATORS = ("AND", "OR", "NOT")
_COLUMNS = ("content", "summary", "tags", "namespace", "project")

# A parsed query: None matches nothing (a phrase of no words), else tsquery text.
Expr = str | None


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pieces = [p for p in _PIECE.findall(text) if not p.isspace()]
        if "".join(_PIECE.findall(text)) != text:
            self.fail("unterminated string")
        self.pos = 0

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
        parts = [self.and_expr()]
        while self.peek() == "OR":
            self.take()
            parts.append(self.and_expr())
        kept = [p for p in parts if p is not None]
        if not kept:
            return None
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
            negated = self.primary()
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
        while self.peek() not in (")", ",", None):
            parts.append(self.phrase())
        if self.peek() == ",":
            self.take()
            if not self.take().isdigit():
                self.fail("NEAR distance must be a number")
        if self.take() != ")" or not parts:
            self.fail("malformed NEAR group")
        if any(p is None for p in parts):
            return None
        return parts[0] if len(parts) == 1 else "(" + " & ".join(str(p) for p in parts) + ")"

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
        return quoted[0] if len(quoted) == 1 else "(" + " <-> ".join(quoted) + ")"


def _bareword(text: str) -> bool:
    """What FTS5 accepts unquoted: letters, digits, underscore and any non-ASCII character."""
    return all(not ch.isascii() or ch.isalnum() or ch == "_" for ch in text)


def to_tsquery_text(match: str) -> str | None:
    """The tsquery text of an FTS5 MATCH expression, or None when it can match nothing."""
    return _Parser(match).parse()
