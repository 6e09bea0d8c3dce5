"""The `wordllama` backend: static embeddings read from the installed wheel (no download, no
torch), and the paraphrase a lexical search cannot find ("incident" for "accident") found
through hybrid search. Skipped where the `wordllama` extra is not installed."""

from __future__ import annotations

import pytest
from test_ranking import prompt

from conftest import Clock
from nmem.search import embedders as emb
from nmem.service import indexer
from nmem.service.api import Service

pytest.importorskip("wordllama")

T0 = 1_790_000_000


def test_wordllama_loads_from_the_wheel_and_places_paraphrases_near(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    embedder = emb.load_embedder("wordllama", emb.MODEL_PACKAGE)
    assert embedder.name.startswith("wordllama:l2_supercat:") and embedder.dimension == 256
    car, crash, puppy = embedder.embed(["my son had a car accident on the highway",
                                        "the road incident with the truck", "we adopted a puppy"])
    assert abs(emb.dot(car, car) - 1.0) < 1e-4
    assert emb.dot(car, crash) > emb.dot(car, puppy) + 0.1


def test_an_unknown_wordllama_configuration_is_unavailable_not_a_crash() -> None:
    with pytest.raises(emb.EmbeddingsUnavailable, match="cannot load wordllama"):
        emb.load_wordllama("no_such_config")


def test_hybrid_with_wordllama_finds_the_paraphrase(service: Service, clock: Clock) -> None:
    clock.now = T0 + 86400
    crash = prompt(service, "my son was in a car accident on the road trip, he is fine", T0, "s1")
    for i in range(5):
        prompt(service, f"the deploy incident report for build {i} is in the wiki", T0 + 10 + i, f"d{i}")
    question = "a crash with the automobile"
    assert service.search(question, scope="prompts", limit=3).hits == []   # no word in common
    service.settings.values.update({"search.embeddings": "wordllama", "search.fusion": "weighted",
                                    "search.hybrid_weight": 0.5})
    indexer.build_index(service.store, emb.load_embedder("wordllama", emb.MODEL_PACKAGE))
    hits = service.search(question, scope="prompts", limit=3).hits
    assert hits and hits[0].record.id == crash
