"""Cutting text for people and models to read: at a word or sentence boundary where one is near,
`…` marking a cut (previews, table cells, summaries, the context block's gists).

Light (no imports, no `re`): the hook path cuts what it stores, and reads cut what they show.
"""

from __future__ import annotations

PREVIEW_CHARS = 120
ELLIPSIS = "…"
ARROW = " → "
# A cut backs up to the last space when one is this close; a longer word (a path, a hash) is cut inside.
WORD_MARGIN = 24
_DANGLING = " \t\n,;:-–—·→|"  # what a cut leaves hanging at its end


def preview(text: str, size: int = PREVIEW_CHARS) -> str:
    """`text` cut to at most `size` characters, at a word boundary where one is near, `…` marking the cut."""
    if len(text) <= size:
        return text
    kept = text[: size - 1]
    if not text[size - 1].isspace():
        kept = word_cut(kept, min(WORD_MARGIN, size // 4))
    return kept.rstrip(_DANGLING) + ELLIPSIS


def word_cut(text: str, margin: int) -> str:
    """`text` without its last partial word, if a space lies within `margin` characters of its end."""
    start = max(len(text) - margin - 1, 0)
    space = max(text.rfind(" ", start), text.rfind("\n", start))
    return text[:space] if space > 0 else text


def word_start(text: str, margin: int) -> str:
    """`text` without its first partial word, if a space lies within `margin` characters of its start."""
    found = [i for i in (text.find(" ", 0, margin + 1), text.find("\n", 0, margin + 1)) if i >= 0]
    return text[min(found) + 1:] if found else text


def short_path(path: str, size: int) -> str:
    """`path` within `size` characters, its leading directories given up first (`…/billing/invoice.py`)."""
    if len(path) <= size:
        return path
    kept = path.rsplit("/", 1)[-1]
    for part in reversed(path.split("/")[:-1]):
        if len(part) + len(kept) + 3 > size:
            break
        kept = f"{part}/{kept}"
    shown = f"{ELLIPSIS}/{kept}"
    return shown if len(shown) <= size else preview(kept, size)


def joined(subject: str, result: str, size: int = PREVIEW_CHARS, path: str | None = None) -> str:
    """`subject → result` within `size` characters; a long subject gives way so the result shows
    (a subject ending with a path, `path` or its last word, keeps the path's end: the file's name)."""
    subject = " ".join(subject.split())
    result = " ".join(result.split())
    room = max(size - len(result) - len(ARROW), size // 3)
    if len(subject) > room:
        last = subject.rsplit(" ", 1)[-1]
        path = path or (last if "/" in last else None)
        if path and subject.endswith(path):
            prefix = subject[: -len(path)]
            subject = prefix + short_path(path, max(room - len(prefix), 16))
        else:
            subject = preview(subject, room)
    return preview(f"{subject}{ARROW}{result}", size)


SENTENCE_ENDS = (". ", "! ", "? ", ".\n", "!\n", "?\n")


def one_line(text: str) -> str:
    """Whitespace runs (newlines included) folded to single spaces."""
    return " ".join(text.split())


def clip(text: str, size: int) -> str:
    """`text` on one line, cut like every preview : at a word boundary, `…` marking a cut."""
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
