"""The phrases of an FTS5 query that its bm25() sums over, each as a query of its own.

FTS5's bm25() adds up, for each phrase of the query in order (repeats included), the phrase's
IDF times its hits in the row. A phrase under NOT has no hits in a row the query matches, so it
adds nothing and is left out. Each phrase is written back with what restricts its hits alone:
its column filter (`summary:`, `{a b}:`, `-col:`, also one set before a parenthesis), its `^`
(first token) and its prefix `*`. A NEAR group's phrases are listed as phrases of their own:
FTS5 counts only their hits near each other, these count every hit (docs/team.md).

Only for queries FTS5 has parsed already (the engine runs the whole query first): a piece this
does not know is skipped, never an error.
"""

from __future__ import annotations

_SPECIAL = '(){}:,+*^-'
_OPERATORS = ("AND", "OR", "NOT")


def _pieces(match: str) -> list[str]:
    """The query's strings ("..." with "" inside), punctuation and barewords (no `re`: SessionStart
    loads this module, and a hook process spares the import)."""
    out: list[str] = []
    i, n = 0, len(match)
    while i < n:
        ch = match[i]
        if ch.isspace():
            i += 1
        elif ch == '"':
            j = i + 1
            while j < n and (match[j] != '"' or match[j + 1:j + 2] == '"'):
                j += 2 if match[j] == '"' else 1
            out.append(match[i:j + 1])
            i = j + 1
        elif ch in _SPECIAL:
            out.append(ch)
            i += 1
        else:
            j = i
            while j < n and not match[j].isspace() and match[j] not in _SPECIAL and match[j] != '"':
                j += 1
            out.append(match[i:j])
            i = j
    return out


class _Phrases:
    def __init__(self, match: str) -> None:
        self.pieces = _pieces(match)
        self.pos = 0
        self.out: list[str] = []

    def peek(self, ahead: int = 0) -> str | None:
        i = self.pos + ahead
        return self.pieces[i] if i < len(self.pieces) else None

    def take(self) -> str:
        piece = self.pieces[self.pos]
        self.pos += 1
        return piece

    def expr(self, columns: str, listed: bool) -> None:
        """An OR of ANDs of NOTs, up to a closing parenthesis or the end."""
        while self.peek() is not None and self.peek() != ")":
            piece = self.peek()
            if piece in ("AND", "OR"):
                self.take()
            elif piece == "NOT":
                self.take()
                self.primary(columns, False)
            else:
                self.primary(columns, listed)

    def primary(self, columns: str, listed: bool) -> None:
        piece = self.peek()
        if piece is None:
            return
        if piece == "(":
            self.take()
            self.expr(columns, listed)
            if self.peek() == ")":
                self.take()
        elif piece == "NEAR" and self.peek(1) == "(":
            self.take()
            self.take()
            while self.peek() not in (None, ")", ","):
                self.phrase(columns, listed)
            while self.peek() not in (None, ")"):
                self.take()   # the distance
            if self.peek() == ")":
                self.take()
        else:
            chosen = self.column_filter()
            if chosen is None:
                self.phrase(columns, listed)
            else:
                self.primary(chosen, listed)

    def column_filter(self) -> str | None:
        """A column filter's text (`summary : `, `- {a b} : `) when one starts here (taken), else None."""
        start, sign = self.pos, ""
        if self.peek() == "-":
            sign = "- "
            self.take()
        if self.peek() == "{":
            names = []
            self.take()
            while self.peek() not in (None, "}"):
                names.append(self.take())
            if self.peek() == "}":
                self.take()
            chosen = "{" + " ".join(names) + "}"
        elif self.peek(1) == ":" and self.peek() not in (*_OPERATORS, None, "(", ")"):
            chosen = str(self.take())
        else:
            self.pos = start
            return None
        if self.peek() != ":":
            self.pos = start
            return None
        self.take()
        return f"{sign}{chosen} : "

    def phrase(self, columns: str, listed: bool) -> None:
        first = ""
        if self.peek() == "^":
            first = "^ "
            self.take()
        piece = self.peek()
        if piece is None or piece in ("(", ")", ",", "*", ":", "{", "}", "+", "-", "^"):
            if piece is not None:
                self.take()
            return
        words = [self.word(self.take())]
        while self.peek() == "+" and self.peek(1) is not None:
            self.take()
            words.append(self.word(self.take()))
        prefix = ""
        if self.peek() == "*":
            prefix = "*"
            self.take()
        if listed:
            joined = " ".join(words).replace('"', '""')
            self.out.append(f'{columns}{first}"{joined}"{prefix}')

    @staticmethod
    def word(piece: str) -> str:
        return piece[1:-1].replace('""', '"') if piece.startswith('"') else piece


def phrases(match: str) -> list[str]:
    """The phrases bm25() sums over in an FTS5 `match`, each an FTS5 query of its own."""
    found = _Phrases(match)
    found.expr("", True)
    return found.out
