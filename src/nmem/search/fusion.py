"""How BM25 and vector similarity combine (pure: no store, no embedder): weighted scores,
reciprocal rank fusion or vectors alone (`search.fusion`, `search.hybrid_weight`), which record
kinds a scope reaches, and the question without the words naming a label of its BM25 hits."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from nmem.errors import ConfigError
from nmem.search.porter import stem
from nmem.search.query import STOP_WORDS
from nmem.search.rank import fold, label_stems

if TYPE_CHECKING:
    from nmem.config import Settings
    from nmem.models import SearchHit
    from nmem.store import SearchFilters

Key = tuple[str, int | str]  # (kind, record id) as SearchHit carries them

FUSIONS = ("weighted", "rrf", "dense")
VECTOR_KINDS = ("observation", "prompt", "memory")
SCOPE_KINDS: dict[str, tuple[str, ...]] = {
    "observations": ("observation",), "prompts": ("prompt",), "memories": ("memory",),
    "all": VECTOR_KINDS, "sessions": (),
}
CANDIDATES = 100          # BM25 hits and nearest vectors each bring this many candidates
DENSE_SCAN_ROWS = 10_000  # nearest-vector search reads at most the newest N matching rows
RRF_K = 60
# A record found by its vector alone joins the results only if its cosine is at least this
# share of the best candidate's: without it every search would return `limit` rows, the
# tail unrelated to the question.
DENSE_FLOOR = 0.5
_WORD = re.compile(r"[^\W_]+")
_SPACES = re.compile(r"\s+")


def weighted_fusion(lexical: Sequence[tuple[Key, float]], similarity: Mapping[Key, float],
                    weight: float) -> list[tuple[Key, float]]:
    """(1 - w) · BM25 / best BM25 + w · cosine / best cosine, over both candidate sets.

    Scores are scaled by the best of each list, so the top BM25 hit and the nearest vector
    each contribute their full share; negative cosines count as 0, and a candidate missing
    from one list gets 0 from it. Ties keep BM25 order, then nearest first.
    """
    best_lex = max((s for _, s in lexical), default=0.0)
    best_sim = max((max(s, 0.0) for s in similarity.values()), default=0.0)
    lex = {k: (s / best_lex if best_lex > 0 else 0.0) for k, s in lexical}
    order = {k: i for i, (k, _) in enumerate(lexical)}
    keys = list(order) + [k for k in sorted(similarity, key=lambda k: -similarity[k]) if k not in order]
    scored = []
    for position, key in enumerate(keys):
        sim = max(similarity.get(key, 0.0), 0.0) / best_sim if best_sim > 0 else 0.0
        scored.append((key, (1.0 - weight) * lex.get(key, 0.0) + weight * sim, position))
    scored.sort(key=lambda t: (-t[1], t[2]))
    return [(k, s) for k, s, _ in scored]


def rrf_fusion(lexical: Sequence[Key], dense: Sequence[Key], weight: float, k: int = RRF_K
               ) -> list[tuple[Key, float]]:
    """Weighted reciprocal rank fusion: (1 - w) / (k + BM25 rank) + w / (k + vector rank), ranks from 1."""
    scores: dict[Key, float] = {}
    for rank, key in enumerate(lexical, 1):
        scores[key] = scores.get(key, 0.0) + (1.0 - weight) / (k + rank)
    for rank, key in enumerate(dense, 1):
        scores[key] = scores.get(key, 0.0) + weight / (k + rank)
    order = {key: i for i, key in enumerate([*lexical, *dense])}
    return sorted(scores.items(), key=lambda t: (-t[1], order[t[0]]))


def dense_ranking(similarity: Mapping[Key, float]) -> list[tuple[Key, float]]:
    return sorted(similarity.items(), key=lambda t: -t[1])


def kinds_for(scope: str, filters: SearchFilters) -> tuple[str, ...]:
    """Vector kinds a scope reaches under these filters (as the BM25 search skips kinds)."""
    out = []
    for kind in SCOPE_KINDS.get(scope, ()):
        if kind == "observation" and (filters.namespaces or filters.tags):
            continue
        if kind == "prompt" and (filters.obs_types or filters.namespaces or filters.tags or filters.files):
            continue
        if kind == "memory" and (filters.obs_types or filters.files or filters.session_id):
            continue
        out.append(kind)
    return tuple(out)


def fusion_settings(settings: Settings) -> tuple[str, float]:
    fusion = str(settings["search.fusion"]).strip().lower()
    if fusion not in FUSIONS:
        raise ConfigError(f"search.fusion: unknown fusion {fusion!r}; use {', '.join(FUSIONS)}")
    weight = float(settings["search.hybrid_weight"])
    if not 0.0 <= weight <= 1.0:
        raise ConfigError(f"search.hybrid_weight must be between 0 and 1, got {weight}")
    return fusion, weight


_QUESTION_WORD = re.compile(r"([^\W_]+)(?:['\u2019]s\b)?")


def without_labels(query: str, labels: Iterable[str]) -> str:
    """The question as its vector should read it: the words naming a record label left out.

    A label ("Caroline: …", "pytest: …") is matched lexically (`rank`'s label boost). Embedded,
    the name pulls the question's vector towards everything said under that label, whatever
    it was about: measured on LoCoMo, the question's vector without its speaker's name
    finds the right turns far better (bench/README.md, "Embeddings"). The question comes back
    unchanged when no word names a label, or when nothing searchable would be left.
    """
    wanted = set(labels)
    if not wanted:
        return query
    first = _QUESTION_WORD.search(query)

    def keep(m: re.Match[str]) -> str:
        # Only a word written as a name (capitalised, past the question's first word) goes:
        # "what was the error" keeps its *error* though hits open with "Error: …".
        named = m.group(1)[:1].isupper() and first is not None and m.start() != first.start()
        return "" if named and stem(fold(m.group(1))) in wanted else m.group(0)

    rest = _QUESTION_WORD.sub(keep, query)
    rest = _SPACES.sub(" ", rest).strip()
    searchable = any(word.lower() not in STOP_WORDS for word in _WORD.findall(rest))
    return rest if searchable and rest != query.strip() else query


def hit_labels(hits: Iterable[SearchHit]) -> set[str]:
    """Index terms of the labels the hits open with."""
    return {s for hit in hits for s in label_stems(str(getattr(hit.record, "content", "") or ""))}


def _key(hit: SearchHit) -> Key:
    return (hit.kind, hit.record.id)


def key(hit: SearchHit) -> Key:
    return (hit.kind, hit.record.id)
