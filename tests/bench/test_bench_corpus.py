"""The benchmark's synthetic corpus: deterministic, shaped like Claude Code hook payloads."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from nmem.capture import events as ev
from nmem.capture.claude_code import parse
from nmem.service.api import Service


def _load_corpus() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "bench" / "corpus.py"
    spec = importlib.util.spec_from_file_location("nmem_bench_corpus", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


corpus = _load_corpus()


def test_same_seed_same_payloads() -> None:
    first = json.dumps(list(corpus.generate(400, seed=11)), sort_keys=True)
    again = json.dumps(list(corpus.generate(400, seed=11)), sort_keys=True)
    other = json.dumps(list(corpus.generate(400, seed=12)), sort_keys=True)
    assert first == again
    assert first != other


def test_a_smaller_corpus_is_a_prefix_of_a_larger_one() -> None:
    small = list(corpus.generate(300, seed=5))
    large = list(corpus.generate(900, seed=5))
    assert large[:len(small)] == small


def test_take_continues_the_same_stream() -> None:
    stream = corpus.Corpus(seed=3)
    pieces = list(stream.take(200)) + list(stream.take(300))
    assert pieces == list(corpus.generate(500, seed=3))


def test_every_payload_parses_and_time_moves_forward() -> None:
    payloads = list(corpus.generate(1500, seed=2))
    stamps = [p[corpus.TS_KEY] for p in payloads]
    assert stamps == sorted(stamps)
    kinds = set()
    tools = set()
    for payload in payloads:
        event = parse(payload, now=payload[corpus.TS_KEY])
        assert event.timestamp == payload[corpus.TS_KEY]
        assert event.session_id == payload["session_id"]
        kinds.add(event.kind)
        if event.tool_name:
            tools.add("mcp" if event.tool_name.startswith("mcp__") else event.tool_name)
    assert {ev.SESSION_START, ev.PROMPT, ev.TOOL, ev.TOOL_FAILURE, ev.STOP, ev.SESSION_END} <= kinds
    assert {"Read", "Edit", "Write", "Bash", "Grep", "Glob", "WebFetch", "mcp"} <= tools


def test_the_observation_count_is_what_was_asked(service: Service) -> None:
    stream = corpus.Corpus(seed=4)
    with service.store.transaction():
        for payload in stream.take(600):
            service.record_event(parse(payload, now=payload[corpus.TS_KEY]))
    assert service.status()["observations"] == stream.observations == 600


def test_queries_and_paths_work_against_the_corpus(service: Service) -> None:
    stream = corpus.Corpus(seed=9)
    with service.store.transaction():
        for payload in stream.take(800):
            service.record_event(parse(payload, now=payload[corpus.TS_KEY]))
    fts = corpus.fts_queries(60, seed=1)
    assert fts == corpus.fts_queries(60, seed=1)
    found = [len(service.search(q).hits) for q in fts]  # a syntax error would raise here
    assert sum(1 for n in found if n) > len(fts) // 2
    plain = corpus.plain_queries(60, seed=1)
    assert sum(1 for q in plain if service.search(q).hits) > len(plain) // 2
    for path in corpus.file_paths(stream, 20, seed=1):
        assert path.startswith(corpus.HOME + "/")
        assert service.file_history(path)["sessions"], path


@pytest.mark.parametrize("n", [0, 1, 7])
def test_small_counts(n: int) -> None:
    stream = corpus.Corpus(seed=1)
    payloads = list(stream.take(n))
    assert sum(p["hook_event_name"] in corpus.OBSERVATION_EVENTS for p in payloads) == n
