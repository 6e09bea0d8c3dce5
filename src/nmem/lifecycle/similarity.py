"""Near-duplicate detection for curated memories: TF-IDF cosine over words and word pairs.

Why TF-IDF rather than shingles/MinHash: memories are short (a summary and a few lines), where
MinHash estimates of Jaccard are noisy, and every memory of a project shares its boilerplate
("use", "the", the project's name). IDF weights that boilerplate down, so two notes agree only
when they agree on their rare words, the ones that carry the fact. Two guards catch the hard
negatives that still look alike: different numbers (versions, ports, timeouts) and a negation
on one side only (`use X` / `never use X`) mean a different fact, never a duplicate.
Candidates come from an inverted index on terms, so the work grows with shared terms, not n².
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence

_WORD = re.compile(r"[a-z0-9][a-z0-9_.+#-]*[a-z0-9+#]|[a-z0-9]")
_NUMBER = re.compile(r"\d+(?:\.\d+)*")
NEGATIONS = frozenset({"not", "no", "never", "don't", "dont", "doesn't", "avoid", "without", "disable", "disabled"})
STOP = frozenset("""a an and are as at be by for from has have in into is it its of on or so that the this
to was we were will with when which while our you your should must can""".split())
# Terms in more than this share of a domain's memories say nothing about which fact it is.
COMMON_SHARE = 0.5


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def terms(text: str) -> list[str]:
    """Content words (stemmed lightly) and adjacent word pairs of `text`."""
    words = [_stem(w) for w in _WORD.findall(text.lower().replace("’", "'")) if w not in STOP]
    return words + [f"{a} {b}" for a, b in itertools.pairwise(words)]


def numbers(text: str) -> frozenset[str]:
    return frozenset(_NUMBER.findall(text))


def negated(text: str) -> bool:
    return any(w in NEGATIONS for w in re.findall(r"[a-z']+", text.lower()))


class Corpus:
    """TF-IDF vectors of a set of texts, and the pairs whose cosine reaches a threshold."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = list(texts)
        counts = [Counter(terms(t)) for t in self.texts]
        df: Counter[str] = Counter()
        for c in counts:
            df.update(c.keys())
        n = len(self.texts)
        self.idf = {t: math.log((1 + n) / (1 + d)) + 1 for t, d in df.items()}
        self.vectors: list[dict[str, float]] = []
        for c in counts:
            vec = {t: (1 + math.log(k)) * self.idf[t] for t, k in c.items()}
            norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
            self.vectors.append({t: v / norm for t, v in vec.items()})
        self.common = {t for t, d in df.items() if n >= 4 and d > COMMON_SHARE * n}
        self._numbers = [numbers(t) for t in self.texts]
        self._negated = [negated(t) for t in self.texts]

    def cosine(self, i: int, j: int) -> float:
        a, b = self.vectors[i], self.vectors[j]
        if len(a) > len(b):
            a, b = b, a
        return sum(v * b.get(t, 0.0) for t, v in a.items())

    def compatible(self, i: int, j: int) -> bool:
        """False when the texts state different facts however alike they read."""
        return self._numbers[i] == self._numbers[j] and self._negated[i] == self._negated[j]

    def pairs(self, threshold: float, groups: Sequence[str] | None = None) -> list[tuple[int, int, float]]:
        """(i, j, cosine) with i < j, cosine >= threshold, compatible, and (with `groups`) in the same group."""
        index: dict[str, list[int]] = defaultdict(list)
        for i, vec in enumerate(self.vectors):
            for t in vec:
                if t not in self.common:
                    index[t].append(i)
        seen: set[tuple[int, int]] = set()
        out: list[tuple[int, int, float]] = []
        for i, vec in enumerate(self.vectors):
            for t in vec:
                for j in index.get(t, ()):
                    if j <= i or (i, j) in seen:
                        continue
                    seen.add((i, j))
                    if groups is not None and groups[i] != groups[j]:
                        continue
                    sim = self.cosine(i, j)
                    if sim >= threshold and self.compatible(i, j):
                        out.append((i, j, sim))
        return out


def clusters(count: int, pairs: Sequence[tuple[int, int, float]]) -> list[list[int]]:
    """Connected groups (two or more members) of the pairs, each sorted, in order of first member."""
    parent = list(range(count))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, j, _ in pairs:
        a, b = find(i), find(j)
        if a != b:
            parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = defaultdict(list)
    for i in range(count):
        groups[find(i)].append(i)
    return sorted((g for g in groups.values() if len(g) > 1), key=lambda g: g[0])


def novel_sentences(base: str, other: str, covered: float = 0.7) -> list[str]:
    """Sentences of `other` whose content words are mostly absent from `base`: what a merge
    adds to the survivor so nothing a duplicate said is lost."""
    have = set(terms(base))
    out = []
    for sentence in re.split(r"(?<=[.!?])\s+|\n+", other):
        text = sentence.strip()
        words = [w for w in terms(text) if " " not in w]
        if not words:
            continue
        if sum(w in have for w in words) / len(words) < covered:
            out.append(text)
            have.update(words)
    return out
