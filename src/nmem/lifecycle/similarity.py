"""Near-duplicate detection for curated memories: IDF-weighted containment of content words.

score(a, b) = weight of the words a and b share / weight of the smaller one's words, each word
weighted by its IDF over the memories compared (an overlap coefficient).

Why this and not shingles/MinHash or plain TF-IDF cosine: memories are short (a summary and a
few lines), where MinHash estimates of Jaccard are noisy; and a restated memory is mostly a
superset of the original (a "Decision:" prefix, a sentence of detail added, a word dropped),
which cosine punishes for every added word while containment does not. IDF makes the words
that carry the fact count: two notes that differ in one rare word (another tool, component or
file) lose that word's whole weight, while boilerplate shared by every note ("use", "the", the
project's name) weighs little. Two guards catch hard negatives that still look alike: different
numbers (versions, ports, timeouts) and a negation on one side only (`use X` / `never use X`)
mean another fact. bench/consolidate.py measures it (docs/lifecycle.md has the figures).
Candidates come from an inverted index probed with each memory's rarest words (prefix
filtering, exact), so the work grows with shared rare words, not n².
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter, defaultdict

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

_WORD = re.compile(r"[a-z0-9][a-z0-9_.+#-]*[a-z0-9+#]|[a-z0-9]")
_NUMBER = re.compile(r"\d+(?:\.\d+)*")
NEGATIONS = frozenset({"not", "no", "never", "don't", "dont", "doesn't", "avoid", "without", "disable", "disabled"})
STOP = frozenset("""a an and are as at be by for from has have in into is it its of on or so that the this
to was we were will with when which while our you your should must can""".split())
EPSILON = 1e-9   # sums of the same weights in another order differ in the last bit
# A note less than a quarter the weight of another is not its duplicate, however contained.
MIN_RATIO = 0.25


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
    """IDF-weighted word sets of a set of texts, and the pairs whose containment reaches a threshold."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = list(texts)
        self.words = [frozenset(w for w in terms(t) if " " not in w) for t in self.texts]
        df: Counter[str] = Counter()
        for words in self.words:
            df.update(words)
        n = len(self.texts)
        self.idf = {t: math.log((1 + n) / (1 + d)) + 1 for t, d in df.items()}
        self.mass = [sum(self.idf[w] for w in words) for words in self.words]
        self._numbers = [numbers(t) for t in self.texts]
        self._negated = [negated(t) for t in self.texts]

    def score(self, i: int, j: int) -> float:
        """Weight of the shared words over the weight of the smaller text's words (0-1)."""
        small = min(self.mass[i], self.mass[j])
        if small <= 0 or min(self.mass[i], self.mass[j]) < MIN_RATIO * max(self.mass[i], self.mass[j]):
            return 0.0
        return sum(self.idf[w] for w in self.words[i] & self.words[j]) / small

    def compatible(self, i: int, j: int) -> bool:
        """False when the texts state different facts however alike they read."""
        return self._numbers[i] == self._numbers[j] and self._negated[i] == self._negated[j]

    def similar(self, i: int, j: int, threshold: float) -> bool:
        return self.score(i, j) >= threshold - EPSILON and self.compatible(i, j)

    def pairs(self, threshold: float, groups: Sequence[str] | None = None) -> list[tuple[int, int, float]]:
        """(i, j, score) with i < j, score >= threshold, compatible, and (with `groups`) in the same group.

        Exact, without comparing every pair (prefix filtering): a text shares at least a
        `threshold` share of its weight with another only if it shares one of its heaviest words,
        those that together outweigh the rest by more than 1 - threshold. Each text looks for
        heavier partners through those words only, so common words never drive the search."""
        index: dict[str, list[int]] = defaultdict(list)
        for i, words in enumerate(self.words):
            for t in words:
                index[t].append(i)
        order = [(self.mass[i], i) for i in range(len(self.words))]
        out: list[tuple[int, int, float]] = []
        for i in range(len(self.words)):
            seen: set[int] = set()
            for t in self._prefix(i, threshold):
                for j in index[t]:
                    if j == i or j in seen or order[j] < order[i]:
                        continue
                    seen.add(j)
                    if groups is not None and groups[i] != groups[j]:
                        continue
                    value = self.score(i, j)
                    if value >= threshold - EPSILON and self.compatible(i, j):
                        out.append((min(i, j), max(i, j), value))
        return sorted(out)

    def _prefix(self, i: int, threshold: float) -> list[str]:
        """The heaviest words of text i whose weight exceeds (1 - threshold) of its whole."""
        words = sorted(self.words[i], key=lambda w: (-self.idf[w], w))
        budget = (1 - threshold) * self.mass[i]
        taken, weight = [], 0.0
        for w in words:
            taken.append(w)
            weight += self.idf[w]
            if weight > budget + 1e-9:
                break
        return taken


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


def star_groups(corpus: Corpus, threshold: float, groups: Sequence[str] | None = None,
                priority: Sequence[tuple[Any, ...]] | None = None) -> list[tuple[int, list[int]]]:
    """(survivor, members) for each connected group of similar texts. The survivor is the member
    similar to most others (ties: higher `priority`); only members similar to the survivor itself
    join it, because similarity is not transitive (a~b and b~c do not make a~c)."""
    pairs = corpus.pairs(threshold, groups)
    degree: Counter[int] = Counter()
    for i, j, _ in pairs:
        degree[i] += 1
        degree[j] += 1
    out = []
    for group in clusters(len(corpus.texts), pairs):
        survivor = max(group, key=lambda i: (degree[i], priority[i] if priority is not None else (), -i))
        members = [i for i in group if i != survivor and corpus.similar(survivor, i, threshold)]
        if members:
            out.append((survivor, members))
    return out


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
