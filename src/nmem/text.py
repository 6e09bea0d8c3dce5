"""Cutting text for people and models to read: at a word or sentence boundary, never mid-word.

Light (no `re`): summaries are made on the hook path and the context block at SessionStart.
"""

from __future__ import annotations

from nmem.textcut import preview

SENTENCE_ENDS = (". ", "! ", "? ", ".\n", "!\n", "?\n")


def one_line(text: str) -> str:
    """Whitespace runs (newlines included) folded to single spaces."""
    return " ".join(text.split())


def clip(text: str, size: int) -> str:
    """`text` on one line, cut like every preview (nmem.textcut): at a word boundary, `…` marking a cut."""
    return preview(one_line(text), size)


def _drop_markup(line: str) -> str:
    """A markdown line as prose: no heading marks, bullets or emphasis stars."""
    line = line.strip()
    line = line.lstrip("#").strip() if line.startswith("#") else line
    if line[:2] in ("- ", "* ", "+ "):
        line = line[2:]
    return line.replace("**", "").replace("__", "")


def _is_structure(line: str) -> bool:
    """A heading, list item, table row or code fence: where a message stops being prose."""
    text = line.strip()
    head, dot, _ = text.partition(". ")
    return (text.startswith(("#", "- ", "* ", "+ ", "• ", "|", "```", "> "))
            or bool(dot and head.isdigit() and len(head) <= 3))


def paragraphs(text: str) -> list[tuple[str, bool]]:
    """The text's paragraphs (blank-line separated) on one line each, markup dropped, each with
    whether it was prose (no heading, list, table or code in it)."""
    out: list[tuple[str, bool]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        raw = [line for line in block.splitlines() if line.strip()]
        para = one_line(" ".join(_drop_markup(line) for line in raw))
        if para:
            out.append((para, not any(_is_structure(line) for line in raw)))
    return out


def gist(text: str, size: int) -> str:
    """What a message says first: its opening prose, whole sentences of it that fit in `size`
    characters (a first sentence longer than that is clipped at a word boundary). Lists,
    headings and code after the opening prose are left out."""
    paras = paragraphs(text)
    if not paras:
        return ""
    kept = ""
    for i, (para, prose) in enumerate(paras):
        if i and not prose:
            break
        joined = f"{kept} {para}" if kept else para
        if len(joined) <= size:
            kept = joined
            continue
        # the paragraph does not fit whole: take the sentences of it that do
        room = size - len(kept) - (1 if kept else 0)
        end = _last_sentence_end(para, room)
        if end > 0:
            kept = f"{kept} {para[:end]}" if kept else para[:end]
        break
    return kept or clip(paras[0][0], size)


def _last_sentence_end(text: str, room: int) -> int:
    """The end (exclusive) of the last sentence of `text` that ends within `room` characters, or 0."""
    best = 0
    for end in SENTENCE_ENDS:
        at = text.rfind(end, 0, room)
        if at != -1:
            best = max(best, at + 1)
    if best == 0 and len(text) <= room:
        return len(text)
    return best
