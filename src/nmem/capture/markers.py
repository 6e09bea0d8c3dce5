"""Prompt markers that turn part of a user prompt into a curated memory.

`[decision] use WAL mode because readers must not block` → a memory in `decisions`.
Markers are configurable (`capture.markers`, entries `marker=namespace`, defaults in
`nmem.config.DEFAULT_MARKERS`); matching is case-insensitive. A marker marks its sentence
(`[gotcha] the cache ignores the locale. Now fix the tests` keeps the first sentence only);
a prefix marker like `remember:` takes the rest of that sentence.
"""

from __future__ import annotations

from nmem.models import Record


class MarkedMemory(Record):
    namespace: str
    content: str
    marker: str


def parse_markers(entries: list[str] | tuple[str, ...]) -> list[tuple[str, str]]:
    out = []
    for entry in entries:
        marker, sep, namespace = entry.rpartition("=")
        if sep and marker.strip() and namespace.strip():
            out.append((marker.strip().lower(), namespace.strip().lower()))
    # Longest first so `[decided]` is not shadowed by a shorter overlapping marker.
    return sorted(out, key=lambda m: -len(m[0]))


def find_marked(prompt: str, entries: list[str] | tuple[str, ...]) -> list[MarkedMemory]:
    """Every marker in the prompt, each with the text it marks (its sentence or line)."""
    found: list[MarkedMemory] = []
    lowered = prompt.lower()
    for marker, namespace in parse_markers(entries):
        start = 0
        while (at := lowered.find(marker, start)) != -1:
            start = at + len(marker)
            if marker.endswith(("]", ":")) or marker.startswith("#"):
                content = _marked_text(prompt, at, start, prefix=marker.endswith(":"))
                if content and not any(m.content == content for m in found):
                    found.append(MarkedMemory(namespace, content, marker))
    return found


def _sentence_ends(line: str) -> list[int]:
    """Where the sentences of a line end: after `.`, `!` or `?` followed by a space and a word that
    does not start in lower case (`pip install -e . breaks` and `config.py` go on)."""
    ends = []
    for i, char in enumerate(line):
        if char in ".!?" and i + 1 < len(line) and line[i + 1] in " \t":
            rest = line[i + 1:].lstrip()
            if rest and not rest[0].islower():
                ends.append(i + 1)
    return ends


def _marked_text(prompt: str, at: int, end: int, prefix: bool = False) -> str:
    """The sentence holding the marker, without the marker; the whole prompt if it is bare.

    A prefix marker (`remember:`) takes only the rest of its sentence.
    """
    line_start = prompt.rfind("\n", 0, at) + 1
    line_end = prompt.find("\n", end)
    line_end = len(prompt) if line_end == -1 else line_end
    ends = [line_start + i for i in _sentence_ends(prompt[line_start:line_end])]
    start = at if prefix else max((e for e in ends if e <= at), default=line_start)
    stop = min((e for e in ends if e > end), default=line_end)
    before, after = prompt[start:at], prompt[end:stop]
    text = (before.rstrip() + after if after[:1] in ".,;!?" else before + after).strip(" \t-:")
    if not text:
        text = (prompt[:at] + prompt[end:]).strip(" \t-:\n")
    return " ".join(text.split())
