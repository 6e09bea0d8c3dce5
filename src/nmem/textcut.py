"""Cutting text for previews and table cells: at a word boundary where one is near, `…` marking the cut.

Light (no imports): the hook path cuts what it stores, and reads cut what they show.
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
