"""Optional embeddings: backends, stored vectors, `nmem index`, hybrid fusion, and the BM25 fallback.

CI has no torch: everything but the last test runs on the built-in hashing backend; the
MiniLM test runs only where sentence-transformers and the model package are installed.
"""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import Clock, record
from nmem.config import load_settings
from nmem.errors import ConfigError
from nmem.search import embedders as emb
from nmem.search import fusion
from nmem.service import indexer
from nmem.service.api import Service
from nmem.store import SearchFilters
from store_engines import both_engines
from test_cli_support import invoke

__all__ = ["both_engines"]  # every test here runs on SQLite and PostgreSQL

T0 = 1_790_000_000
EMBEDDING_ENV = ("NMEM_EMBEDDINGS", "NMEM_EMBEDDING_MODEL", "NMEM_SEARCH_FUSION", "NMEM_HYBRID_WEIGHT")


@pytest.fixture(autouse=True)
def fresh_backends(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in EMBEDDING_ENV:
        monkeypatch.delenv(var, raising=False)
    emb.forget_loaded()
    yield
    emb.forget_loaded()


def prompt(service: Service, text: str, at: int, session_id: str = "s1", cwd: str = "/w/demo") -> int:
    out = record(service, "UserPromptSubmit", now=at, session_id=session_id, cwd=cwd, prompt=text)
    return int(out.prompt_id)


@pytest.fixture
def talk(service: Service, clock: Clock) -> dict[str, int]:
    """Prompts in two projects: some share words with the questions below, some only word pieces."""
    clock.now = T0 + 86400
    texts = {
        "pool": "the postgres connection pool runs out under load",
        "sunset": "painted a sunset over the lake with the kids",
        "wal": "switch sqlite to WAL so readers never block the writer",
        "camping": "we went camping in the mountains last summer",
        "retry": "add exponential backoff to the billing client retries",
    }
    ids = {name: prompt(service, text, T0 + i) for i, (name, text) in enumerate(texts.items())}
    ids["other"] = prompt(service, "postgres pool sizing in the other project", T0 + 10, "s2", "/w/other")
    return ids


def use(service: Service, backend: str = "hashing", fusion: str = "weighted", weight: float = 0.5,
        model: str | None = None) -> None:
    service.settings.values.update({"search.embeddings": backend, "search.fusion": fusion,
                                    "search.hybrid_weight": weight})
    if model is not None:
        service.settings.values["search.embedding_model"] = model


def index(service: Service) -> indexer.IndexReport:
    return indexer.build_index(service.store, emb.load_embedder("hashing", ""))


def prompt_ids(result: Any) -> list[int]:
    return [int(h.record.id) for h in result.hits]


# -- the hashing backend ------------------------------------------------------------------

def test_hashing_is_deterministic_normalised_and_the_same_in_another_process() -> None:
    one, two = emb.HashingEmbedder(), emb.HashingEmbedder()
    text = "Fix the flaky login redirect test in tests/test_login.py"
    a, b = one.embed([text])[0], two.embed([text])[0]
    assert list(a) == list(b) and len(a) == one.dimension == 384
    assert math.isclose(emb.dot(a, a), 1.0, rel_tol=1e-5)
    assert one.embed([""])[0].tolist() == [0.0] * 384  # nothing to hash: the zero vector, no error
    code = ("from nmem.search.embedders import HashingEmbedder, pack; "
            f"print(pack(HashingEmbedder().embed([{text!r}])[0]).hex())")
    # hash() is salted per process; CRC-32 is not: stored vectors stay valid across runs
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": "12345"})
    assert other.stdout.strip() == emb.pack(a).hex()


def test_hashing_ranks_related_text_above_unrelated() -> None:
    e = emb.HashingEmbedder()
    query, *docs = e.embed([
        "postgresql connection pooling",
        "the postgres connection pool runs out under load",      # a word, and pieces of two more
        "we went camping in the mountains last summer",          # nothing
        "configure pooled connections for PostgreSQL",           # a word, and pieces of two more
        "the connection was reset by the peer",                  # one word
    ])
    postgres, camping, pooled, reset = (emb.dot(query, d) for d in docs)
    assert min(postgres, pooled, reset) > 0.2
    assert abs(camping) < 0.1
    word, *others = e.embed(["postgresql", *docs_text()])
    scores = [emb.dot(word, d) for d in others]
    assert scores.index(max(scores)) == 0  # "postgres": pieces of the word alone


def docs_text() -> list[str]:
    return ["the postgres connection pool runs out under load", "we went camping in the mountains last summer",
            "the connection was reset by the peer", "painted a sunset over the lake with the kids"]


def test_pack_round_trip_is_float32_little_endian() -> None:
    vec = emb.normalise([3.0, 4.0])
    blob = emb.pack(vec)
    assert len(blob) == 8 and blob[:4] == bytes.fromhex("9a99193f")  # 0.6 as <f4
    assert [round(x, 6) for x in emb.unpack(blob)] == [0.6, 0.8]
    assert emb.cosines(vec, [blob, emb.pack([0.0, 1.0]), b"\x00" * 4]) == pytest.approx([1.0, 0.8, 0.0])


def test_cosines_agree_with_and_without_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    query, *docs = emb.HashingEmbedder().embed(["sqlite writer lock", "the writer holds the sqlite lock",
                                               "camping in the mountains", "readers wait for the writer"])
    blobs = [emb.pack(d) for d in docs]
    expected = [emb.dot(query, d) for d in docs]
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "numpy", None)  # CI: no numpy, plain Python
        assert emb.cosines(query, blobs) == pytest.approx(expected, abs=1e-6)
    pytest.importorskip("numpy")
    assert "numpy" in sys.modules  # loaded now: the vectorised path
    assert emb.cosines(query, blobs) == pytest.approx(expected, abs=1e-6)


def test_unknown_backend_is_a_config_error_and_missing_model_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown backend 'word2vec'"):
        emb.load_embedder("word2vec", "")
    with pytest.raises(emb.EmbeddingsUnavailable, match="no sentence-transformers model at"):
        emb.load_embedder("minilm", str(tmp_path / "nowhere"))
    with pytest.raises(emb.EmbeddingsUnavailable, match="not installed"):
        emb.resolve_model("no_such_model_package_xyz")
    model_dir = tmp_path / "pkg_with_model" / "model"
    model_dir.mkdir(parents=True)
    (model_dir / "modules.json").write_text("[]", encoding="utf-8")
    assert emb.resolve_model(str(model_dir)) == (model_dir.resolve(), "model")


def test_register_backend_plugs_in_another_embedder(service: Service, talk: dict[str, int]) -> None:
    class Letters:
        name, dimension = "letters-2", 2

        def embed(self, texts: Any) -> list[Any]:
            return [emb.normalise([t.count("a") + 0.01, t.count("o") + 0.01]) for t in texts]

    emb.register_backend("letters", lambda model: Letters())
    try:
        report = indexer.build_index(service.store, emb.load_embedder("letters", ""))
        assert report.model == "letters-2" and report.embedded["prompts"] == 6
    finally:
        del emb.BACKENDS["letters"]


@pytest.mark.parametrize(("question", "labels", "semantic"), [
    ("What has Melanie painted?", {"melani"}, "What has painted?"),
    ("What do Melanie's kids like?", {"melani"}, "What do kids like?"),
    ("What do Melanie\u2019s kids like?", {"melani"}, "What do kids like?"),
    ("Did Jon and Gina both dance?", {"jon", "gina"}, "Did and both dance?"),
    ("What does Pytest say about the fixture?", {"pytest"}, "What does say about the fixture?"),
    ("What does pytest say about the fixture?", {"pytest"}, "What does pytest say about the fixture?"),  # no name
    ("what was the error in the deploy", {"error"}, "what was the error in the deploy"),  # "Error: …" hits
    ("Error in the deploy, why?", {"error"}, "Error in the deploy, why?"),            # capitalised as first word
    ("What has Melanie painted?", set(), "What has Melanie painted?"),          # no label among the hits
    ("What has Melanie painted?", {"carolin"}, "What has Melanie painted?"),    # a label it does not name
    ("Melanie?", {"melani"}, "Melanie?"),                                       # nothing would be left
    ("What about Melanie?", {"melani"}, "What about Melanie?"),                 # only stop words would be left
])
def test_the_question_is_embedded_without_the_labels_it_names(question: str, labels: set[str],
                                                               semantic: str) -> None:
    assert fusion.without_labels(question, labels) == semantic


class Recorder:
    """The hashing backend, remembering every text it embeds."""

    name, dimension = "recorder-384", 384

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.inner = emb.HashingEmbedder()

    def embed(self, texts: Any) -> list[Any]:
        self.texts.extend(texts)
        return self.inner.embed(texts)


def test_hybrid_embeds_the_question_without_the_speaker_it_names(service: Service, clock: Clock) -> None:
    clock.now = T0 + 86400
    for i, text in enumerate(["Caroline: I painted a sunset over the lake", "Melanie: we went camping",
                              "Caroline: the support group was powerful"]):
        prompt(service, text, T0 + i)
    recorder = Recorder()
    emb.register_backend("recorder", lambda model: recorder)
    try:
        indexer.build_index(service.store, emb.load_embedder("recorder", ""))
        use(service, backend="recorder")
        recorder.texts.clear()
        found = service.search("What has Caroline painted?", scope="prompts")
        assert recorder.texts == ["What has painted?"]
        assert "Caroline: I painted" in found.hits[0].record.content
        service.settings.values["search.hybrid_drop_labels"] = False
        recorder.texts.clear()
        service.search("What has Caroline painted?", scope="prompts")
        assert recorder.texts == ["What has Caroline painted?"]
    finally:
        del emb.BACKENDS["recorder"]


# -- stored vectors -----------------------------------------------------------------------

def test_vectors_round_trip_beside_the_rows(service: Service, talk: dict[str, int]) -> None:
    store = service.store
    memory = service.remember("Use WAL mode for SQLite", namespace="decisions", project="demo")
    assert store.count_missing_vectors("prompt", "m") == 6
    assert store.count_missing_vectors("memory", "m") == 1
    rows = store.missing_vectors("prompt", "m", 0, 3)
    assert [r[0] for r in rows] == sorted(talk.values())[:3] and rows[0][1].startswith("the postgres")
    store.put_vectors("prompt", "m", 2, [(rid, emb.pack([1.0, float(rid)])) for rid, _ in rows])
    assert [r[0] for r in store.missing_vectors("prompt", "m", 0, 10)] == sorted(talk.values())[3:]
    assert [r[0] for r in store.missing_vectors("prompt", "m", rows[-1][0], 10)] == sorted(talk.values())[3:]
    got = store.get_vectors("prompt", "m", [talk["pool"], talk["sunset"], 99_999])
    assert {k: list(emb.unpack(v)) for k, v in got.items()} == {talk["pool"]: [1.0, float(talk["pool"])],
                                                                 talk["sunset"]: [1.0, float(talk["sunset"])]}
    assert store.get_vectors("prompt", "other-model", [talk["pool"]]) == {}
    # memories are addressed by uid, as their records are
    [(row_id, text)] = store.missing_vectors("memory", "m", 0, 10)
    assert text == "Use WAL mode for SQLite\nUse WAL mode for SQLite"
    store.put_vectors("memory", "m", 2, [(row_id, emb.pack([0.0, 1.0]))])
    assert list(store.get_vectors("memory", "m", [memory.id])) == [memory.id]
    assert store.count_vectors("prompt", "m") == 3 and store.count_vectors("memory", "m") == 1
    with pytest.raises(ValueError, match="no vectors for kind"):
        store.count_vectors("session", "m")


def test_scan_applies_the_search_filters(service: Service, talk: dict[str, int]) -> None:
    index(service)
    store, model = service.store, "hashing-v1-384"
    ids, blobs = store.vector_scan("prompt", model, SearchFilters(project="demo"), 100)
    assert ids == sorted((v for k, v in talk.items() if k != "other"), reverse=True)  # newest first
    assert all(len(b) == 4 * 384 for b in blobs)
    assert store.vector_scan("prompt", model, SearchFilters(project="demo"), 2)[0] == ids[:2]
    assert store.vector_scan("prompt", model, SearchFilters(session_id="s2"), 100)[0] == [talk["other"]]
    assert store.vector_scan("prompt", model, SearchFilters(date_start=T0 + 3), 100)[0] == [
        talk["other"], talk["retry"], talk["camping"]]
    assert store.vector_scan("observation", model, SearchFilters(project="demo"), 100)[0] == []
    service.remember("Archived idea", namespace="ideas", project="demo", tier="archived")
    kept = service.remember("A live decision", namespace="decisions", project="demo")
    index(service)
    assert store.vector_scan("memory", model, SearchFilters(project="demo"), 100)[0] == [kept.id]
    assert store.vector_scan("memory", model, SearchFilters(project="elsewhere"), 100)[0] == []


def test_a_vector_goes_with_its_row_or_its_old_text(service: Service, talk: dict[str, int]) -> None:
    store = service.store
    obs = record(service, "PostToolUse", now=T0 + 20, session_id="s1", cwd="/w/demo", tool_name="Bash",
                 tool_input={"command": "pytest -q"}, tool_response={"exit_code": 0}).observation_id
    memory = service.remember("Keep the hook path stdlib only", namespace="conventions", project="demo")
    index(service)
    model = "hashing-v1-384"
    assert store.count_vectors("observation", model) == 1 and store.count_vectors("memory", model) == 1
    service.update(memory.id, tags=["hooks"])  # text unchanged: the vector stays
    assert store.count_vectors("memory", model) == 1
    service.update(memory.id, content="Keep the hook path free of third-party imports")
    assert store.count_vectors("memory", model) == 0
    service.purge(ids=[obs], confirm=True)
    assert store.count_vectors("observation", model) == 0
    report = index(service)
    assert report.embedded == {"observations": 0, "prompts": 0, "memories": 1}
    service.forget(memory.id)
    assert store.count_vectors("memory", model) == 0
    # a vector written for a row deleted meanwhile is pruned by the next pass
    store.put_vectors("prompt", model, 384, [(987_654, emb.pack([1.0] + [0.0] * 383))])
    assert index(service).removed == 1


def test_incremental_passes_start_past_their_marks(service: Service, talk: dict[str, int]) -> None:
    marks: dict[str, int] = {}
    embedder = emb.load_embedder("hashing", "")
    first = indexer.build_index(service.store, embedder, marks=marks)
    assert first.embedded["prompts"] == 6 and marks == {"prompt": max(talk.values())}
    new = prompt(service, "a new prompt about caching", T0 + 50)
    second = indexer.build_index(service.store, embedder, marks=marks)
    assert second.embedded["prompts"] == 1 and marks["prompt"] == new
    stopped = indexer.build_index(service.store, embedder, rebuild=True, should_stop=lambda: True)
    assert stopped.stopped and stopped.removed == 7 and sum(stopped.vectors.values()) == 0


# -- nmem index ---------------------------------------------------------------------------

def test_nmem_index_embeds_what_is_missing_and_rebuilds(service: Service, talk: dict[str, int]) -> None:
    service.remember("Use WAL mode", namespace="decisions", project="demo")
    env = {"NMEM_EMBEDDINGS": "hashing"}
    first = invoke("index", "--format", "json", env=env)
    assert first.exit_code == 0, first.stderr
    data = json.loads(first.stdout)
    assert data["model"] == "hashing-v1-384" and data["dimension"] == 384
    assert data["embedded"] == {"observations": 0, "prompts": 6, "memories": 1}
    assert data["vectors"] == data["embedded"] and data["removed"] == 0
    assert "embedding with hashing-v1-384" in first.stderr
    again = json.loads(invoke("index", "--format", "json", env=env).stdout)
    assert again["embedded"] == {"observations": 0, "prompts": 0, "memories": 0}
    rebuilt = json.loads(invoke("index", "--rebuild", "--format", "json", env=env).stdout)
    assert rebuilt["removed"] == 7 and rebuilt["embedded"] == data["embedded"]
    text = invoke("index", env=env)
    assert text.exit_code == 0 and "hashing-v1-384 (384 dimensions)" in text.stdout


def test_nmem_index_needs_a_backend(service: Service) -> None:
    off = invoke("index")
    assert off.exit_code == 3 and "embeddings are off" in off.stderr
    missing = invoke("index", env={"NMEM_EMBEDDINGS": "minilm", "NMEM_EMBEDDING_MODEL": "/nonexistent/model"})
    assert missing.exit_code == 3 and "cannot embed with minilm" in missing.stderr
    ahead = invoke("index", "--backend", "hashing")
    assert ahead.exit_code == 0 and "once search.embeddings is hashing" in ahead.stderr


# -- fusion arithmetic ----------------------------------------------------------------------

def test_weighted_fusion_scales_each_list_by_its_best() -> None:
    lexical = [(("prompt", 1), 10.0), (("prompt", 2), 5.0)]
    similarity = {("prompt", 2): 0.8, ("prompt", 3): 0.4, ("prompt", 1): -0.2}
    fused = dict(fusion.weighted_fusion(lexical, similarity, 0.5))
    assert fused[("prompt", 1)] == pytest.approx(0.5 * 1.0 + 0.5 * 0.0)     # negative cosine counts as 0
    assert fused[("prompt", 2)] == pytest.approx(0.5 * 0.5 + 0.5 * 1.0)
    assert fused[("prompt", 3)] == pytest.approx(0.5 * 0.0 + 0.5 * 0.5)
    order = [k for k, _ in fusion.weighted_fusion(lexical, similarity, 0.5)]
    assert order == [("prompt", 2), ("prompt", 1), ("prompt", 3)]
    assert [k for k, _ in fusion.weighted_fusion(lexical, similarity, 0.0)][:2] == [("prompt", 1), ("prompt", 2)]
    assert [k for k, _ in fusion.weighted_fusion(lexical, similarity, 1.0)] == [
        ("prompt", 2), ("prompt", 3), ("prompt", 1)]
    # ties keep BM25 order; no candidates, no results
    tie = fusion.weighted_fusion([(("o", 1), 1.0), (("o", 2), 1.0)], {}, 0.5)
    assert [k for k, _ in tie] == [("o", 1), ("o", 2)]
    assert fusion.weighted_fusion([], {}, 0.5) == []


def test_rrf_and_dense_rankings() -> None:
    fused = dict(fusion.rrf_fusion([("p", 1), ("p", 2)], [("p", 2), ("p", 3)], 0.5, k=60))
    assert fused[("p", 1)] == pytest.approx(0.5 / 61)
    assert fused[("p", 2)] == pytest.approx(0.5 / 62 + 0.5 / 61)
    assert fused[("p", 3)] == pytest.approx(0.5 / 62)
    assert [k for k, _ in fusion.rrf_fusion([("p", 1), ("p", 2)], [("p", 2), ("p", 3)], 0.5)] == [
        ("p", 2), ("p", 1), ("p", 3)]
    assert [k for k, _ in fusion.rrf_fusion([("p", 1)], [("p", 2)], 0.8)] == [("p", 2), ("p", 1)]
    assert fusion.dense_ranking({("p", 1): 0.1, ("p", 2): 0.9}) == [(("p", 2), 0.9), (("p", 1), 0.1)]


# -- hybrid search through the service ------------------------------------------------------------

def test_hybrid_finds_what_shares_only_word_pieces(service: Service, talk: dict[str, int]) -> None:
    question = "postgresql"
    assert prompt_ids(service.search(question, scope="prompts", project="demo")) == []  # BM25 alone
    use(service)
    index(service)
    found = service.search(question, scope="prompts", project="demo")
    assert prompt_ids(found)[0] == talk["pool"]
    assert talk["other"] not in prompt_ids(found)  # the project filter holds for vectors too
    assert all(h.kind == "prompt" and h.score > 0 for h in found.hits)


def test_hybrid_keeps_bm25_hits_first_when_vectors_are_missing(service: Service, talk: dict[str, int]) -> None:
    use(service, weight=0.3)
    bm25 = prompt_ids(service.search("sqlite writer", scope="prompts"))
    assert bm25 == [talk["wal"]]
    assert prompt_ids(service.search("sqlite writer", scope="prompts")) == bm25  # nothing indexed yet


def test_dense_and_rrf_modes_and_paging(service: Service, talk: dict[str, int]) -> None:
    index(service)
    use(service, fusion="dense")
    dense = service.search("camping trip in the mountains", scope="prompts", project="demo")
    assert prompt_ids(dense)[0] == talk["camping"] and dense.match is None
    use(service, fusion="rrf")
    rrf = service.search("camping mountains", scope="prompts", project="demo")
    assert prompt_ids(rrf)[0] == talk["camping"] and rrf.match is not None
    use(service, weight=0.5)
    fusion.DENSE_FLOOR, floor = 0.0, fusion.DENSE_FLOOR
    try:
        everything = prompt_ids(service.search("the kids painted", scope="prompts", project="demo", limit=10))
        pages = [prompt_ids(service.search("the kids painted", scope="prompts", project="demo", limit=2,
                                           offset=o)) for o in (0, 2, 4)]
    finally:
        fusion.DENSE_FLOOR = floor
    assert everything[0] == talk["sunset"]
    assert [i for page in pages for i in page] == everything


def test_the_floor_keeps_unrelated_rows_out(service: Service, talk: dict[str, int]) -> None:
    index(service)
    use(service)
    found = prompt_ids(service.search("sunset painting", scope="prompts", project="demo"))
    assert found[0] == talk["sunset"] and talk["camping"] not in found


def test_hybrid_covers_every_scope_and_memories(service: Service, talk: dict[str, int]) -> None:
    wal = service.remember("Readers never block the writer in WAL mode", namespace="decisions", project="demo")
    index(service)
    use(service)
    hits = service.search("writers blocking readers", scope="all", project="demo").hits
    kinds = {(h.kind, str(h.record.id)) for h in hits}
    assert ("memory", wal.id) in kinds and ("prompt", str(talk["wal"])) in kinds
    recalled = service.recall("blocked writers", project="demo")
    assert [h.record.id for h in recalled] == [wal.id]
    # filters that rule a kind out rule its vectors out too
    assert service.search("writers readers", scope="prompts", obs_type="command").hits == []
    assert fusion.kinds_for("all", SearchFilters(obs_types=("command",))) == ("observation",)
    assert fusion.kinds_for("sessions", SearchFilters()) == ()


def test_bm25_answers_alone_for_fts_syntax_date_order_and_sessions(service: Service, talk: dict[str, int]) -> None:
    index(service)
    before = {q: prompt_ids(service.search(q, scope="prompts", order_by=o)) for q, o in
              (('"postgres connection"', "relevance"), ("postgres OR sqlite", "relevance"),
               ("postgres", "date_desc"))}
    use(service, weight=1.0)
    after = {q: prompt_ids(service.search(q, scope="prompts", order_by=o)) for q, o in
             (('"postgres connection"', "relevance"), ("postgres OR sqlite", "relevance"),
              ("postgres", "date_desc"))}
    assert after == before
    assert service.search("!!!", scope="prompts").hits == []
    assert service._hybrid_search("sessions", "postgres", SearchFilters(), "relevance", 10, 0) is None


def test_bad_fusion_settings_are_config_errors(service: Service, talk: dict[str, int]) -> None:
    use(service, fusion="mean")
    with pytest.raises(ConfigError, match=r"search\.fusion"):
        service.search("postgres", scope="prompts")
    use(service, weight=1.5)
    with pytest.raises(ConfigError, match="between 0 and 1"):
        service.search("postgres", scope="prompts")


def test_weight_setting_reads_floats(nmem_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMEM_HYBRID_WEIGHT", "0.25")
    assert load_settings()["search.hybrid_weight"] == 0.25
    monkeypatch.setenv("NMEM_HYBRID_WEIGHT", "lots")
    with pytest.raises(ConfigError, match="expected float"):
        load_settings()
    monkeypatch.delenv("NMEM_HYBRID_WEIGHT")
    nmem_home.mkdir(parents=True, exist_ok=True)
    (nmem_home / "config.toml").write_text("[search]\nhybrid_weight = 1\nembeddings = \"hashing\"\n")
    settings = load_settings()
    assert settings["search.hybrid_weight"] == 1.0 and isinstance(settings["search.hybrid_weight"], float)
    assert settings["search.embeddings"] == "hashing"


# -- falling back to BM25 ---------------------------------------------------------------------

def test_missing_extra_falls_back_to_bm25_with_one_warning(service: Service, talk: dict[str, int],
                                                           caplog: pytest.LogCaptureFixture) -> None:
    bm25 = prompt_ids(service.search("postgres pool", scope="prompts"))
    use(service, backend="minilm", model="/nonexistent/minilm")
    with caplog.at_level(logging.WARNING, logger="nmem.embeddings"):
        first = prompt_ids(service.search("postgres pool", scope="prompts"))
        second = prompt_ids(service.search("postgres pool", scope="prompts"))
    assert first == second == bm25 != []
    warnings = [r for r in caplog.records if r.name == "nmem.embeddings"]
    assert len(warnings) == 1
    assert "BM25 only" in warnings[0].getMessage() and "/nonexistent/minilm" in warnings[0].getMessage()


def test_missing_sentence_transformers_falls_back(service: Service, talk: dict[str, int], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "modules.json").write_text("[]", encoding="utf-8")
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import fails as if not installed
    use(service, backend="minilm", model=str(model_dir))
    with caplog.at_level(logging.WARNING, logger="nmem.embeddings"):
        assert prompt_ids(service.search("sqlite writer", scope="prompts")) == [talk["wal"]]
    assert "sentence-transformers is not installed" in caplog.text


def test_importing_nmem_loads_no_numpy_or_torch() -> None:
    code = ("import sys, nmem.service.api, nmem.adapters.cli, nmem.search.embedders; "
            "from nmem.search.embedders import HashingEmbedder; HashingEmbedder().embed(['x']); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'numpy', 'torch', 'sentence_transformers', 'transformers', 'scipy'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# -- the MCP server's background pass -----------------------------------------------------------

def test_background_pass_uses_its_own_connections(service: Service, talk: dict[str, int]) -> None:
    use(service)
    marks: dict[str, int] = {}
    report = indexer.index_pass(service.store.url, service.settings, threading.Event(), marks)
    assert report is not None and report.embedded["prompts"] == 6
    assert service.store.count_vectors("prompt", "hashing-v1-384") == 6
    use(service, backend="none")
    assert indexer.index_pass(service.store.url, service.settings, threading.Event(), {}) is None


def test_server_indexes_in_the_background_while_it_runs(service: Service, talk: dict[str, int]) -> None:
    from nmem.adapters.mcp.server import NmemServer

    use(service)
    app = NmemServer(service, project="demo")

    async def main() -> None:
        async with app.running():
            with anyio.fail_after(20):
                while service.store.count_vectors("prompt", "hashing-v1-384") < 6:
                    await anyio.sleep(0.05)

    anyio.run(main)


# -- the real model, where the extra is installed --------------------------------------------------

@pytest.mark.slow
def test_minilm_backend_end_to_end(service: Service, talk: dict[str, int]) -> None:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip(emb.MODEL_PACKAGE)
    embedder = emb.load_embedder("minilm", emb.MODEL_PACKAGE)
    assert embedder.dimension == 384 and embedder.name == f"st:{emb.MODEL_PACKAGE}:384"
    query, car, vehicle, cake = embedder.embed(["car", "automobile", "vehicle", "chocolate cake recipe"])
    assert math.isclose(emb.dot(query, query), 1.0, rel_tol=1e-4)
    assert emb.dot(query, car) > emb.dot(query, cake) and emb.dot(query, vehicle) > emb.dot(query, cake)
    use(service, backend="minilm", model=emb.MODEL_PACKAGE)
    indexer.build_index(service.store, embedder)
    found = service.search("an evening of watercolours by the water", scope="prompts", project="demo")
    assert prompt_ids(found)[0] == talk["sunset"]
