"""Query expansion from the best hits (pseudo-relevance feedback), pure: no store.

A question often shares only some of its words with what answers it: "what activities has
Melanie done with her family?" finds the turns that say *family*, while the others say *kids*,
*camping*, *museum*. The words the best first hits hold besides the question's own (weighed
by how strongly each hit scored, how much of the hit they make up, and how rare they are in
the index) name the subject in the trail's own words; searched again with them at a fraction
of a question word's weight, the records that share only those come up (RM3, Lavrenko and
Croft's relevance model, fed back into the query).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

from nmem.search.porter import stem
from nmem.search.query import STOP_WORDS
from nmem.search.rank import fold, label_stems, without_label

_WORD = re.compile(r"[^\W\d_][^\W_]{2,}")   # three letters or more, not starting with a digit


def feedback_words(hits: Iterable[tuple[str, float]], skip: Iterable[str], pool: int) -> list[tuple[str, str, float]]:
    """(stem, a word that has it, weight) of the words the hits hold, best first, at most
    `pool`: each hit (text, score) lends every word it holds `score / total × count / length`.
    Stop words, the `skip` stems (the question's own) and the labels the hits open with
    ("Caroline: …", a speaker every turn names) are left out."""
    hits = [(text, score) for text, score in hits if score > 0]
    total = sum(score for _, score in hits)
    if not total:
        return []
    skipped = set(skip)
    for text, _ in hits:
        skipped.update(label_stems(text))
    weight: dict[str, float] = {}
    surface: dict[str, str] = {}
    for text, score in hits:
        words = [w for w in _WORD.findall(fold(without_label(text))) if w not in STOP_WORDS]
        if not words:
            continue
        share = score / total / len(words)
        for word in words:
            s = stem(word)
            if s in skipped:
                continue
            weight[s] = weight.get(s, 0.0) + share
            surface.setdefault(s, word)
    best = sorted(weight, key=lambda s: (-weight[s], s))[:pool]
    return [(s, surface[s], weight[s]) for s in best]


def expansion(words: Sequence[tuple[str, str, float]], df: Mapping[str, int], docs: int,
              terms: int) -> list[tuple[str, float]]:
    """The `terms` best feedback words as (word, weight 0..1 relative to the best): the
    feedback weight times the word's IDF. A word the index never saw is left out."""
    scored: list[tuple[str, float]] = []
    for s, word, w in words:
        rows = df.get(s, 0)
        if not rows:
            continue
        idf = math.log(1.0 + (max(docs, rows) - rows + 0.5) / (rows + 0.5))
        scored.append((word, w * idf))
    scored.sort(key=lambda t: -t[1])
    scored = scored[:terms]
    top = scored[0][1] if scored else 0.0
    return [(word, value / top) for word, value in scored] if top > 0 else []
