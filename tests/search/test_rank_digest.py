"""The ranking pinned: every hit (kind, id, repr(score)) and expression of a fixed set of questions
over a fixed small trail, on each engine, as a digest. Work done once per search instead of per
candidate (bench/rank_cpu.py measures it) must leave every bit of it as it was; a change that
means to rank differently updates the digests and says why."""

from __future__ import annotations

import hashlib
import random
import re

import pytest

from nmem.search import rank
from nmem.service.api import Service
from nmem.store import NewObservation, SearchFilters
from store_engines import both_engines

__all__ = ["both_engines"]  # every test here runs on SQLite and PostgreSQL

T0 = 1_790_000_000
WORDS = ("deploy rollback staging migration schema index cache token refresh login session timeout retry "
         "webhook payload parser config flag release branch merge conflict pytest fixture mock coverage "
         "docker image build lint mypy ruff async worker queue backlog latency p99 café naïve résumé").split()
QUESTIONS = ("why did the deploy roll back on staging", "when did the login session time out",
             "how many retries does the webhook worker make", "what broke the schema migration",
             "cache token refresh", "docker image build fails lint", "café résumé", "pytest fixture mock coverage",
             "what did we decide about the release branch", "queue backlog latency p99")
# sha256 of the lines `digest` makes, per engine and scope (the engines' BM25 picks the candidates)
PINNED = {
    ("sqlite", "observations"): "96e7cb377bd83919a59620a26c848b21d1e9dd8c0100500f9bc522fb1553e701",
    ("sqlite", "all"): "66fab9573bdeaa79ca8d0a8bf9c487cd0fd13b6335b9f066dbc9ba2be69141b4",
    ("postgres", "observations"): "acfcb15b61e5155c80de12fc06c489c1cc8f4efae7f0a46f807cbea2700b0cd0",
    ("postgres", "all"): "f489f0ad55c1d45b7cd20cce4e1d631dc90dd4e2377d722f8bc09aa0835869e1",
}


def fill(service: Service) -> None:
    """Four sessions of two projects: prompts, observations that follow them, some asking."""
    rng = random.Random(7)
    store = service.store
    with store.transaction():
        for s in range(4):
            sid, project = f"s{s}", ("web", "api")[s % 2]
            store.ensure_session(sid, project, T0 + s * 3600)
            at = T0 + s * 3600
            for _ in range(8):
                words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9)))
                asks = "?" if rng.random() < 0.3 else ""
                prompt = store.add_prompt(sid, at, "user", f"please {words}{asks}")
                at += 1
                store.add_prompt(sid, at, "agent", f"agent: {' '.join(rng.sample(WORDS, 4))}.")
                for _ in range(rng.randint(1, 4)):
                    at += rng.choice((0, 1, 1, 2))
                    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 12)))
                    store.add_observation(NewObservation(sid, project, at, rng.choice(("command", "file_edit")),
                                                         "PostToolUse", f"{rng.choice(('pytest', 'git'))}: {text}",
                                                         prompt_id=prompt))
                at += 5


def digest(service: Service, scope: str) -> str:
    lines = []
    for q, question in enumerate(QUESTIONS):
        kw = {"project": "web"} if q % 2 == 0 else {"prefer_project": "api"}
        result = service.search(question, scope=scope, limit=20, **kw)
        lines += [f"{q}\t{h.kind}\t{h.record.id}\t{h.score!r}\t{result.match}" for h in result.hits]
        lines.append(f"{q}\t{len(result.hits)}\t{result.match}")
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


@pytest.mark.parametrize("scope", ["observations", "all"])
def test_the_ranking_of_a_fixed_trail_is_pinned(service: Service, engine: str, scope: str) -> None:
    fill(service)
    service.clock = lambda: float(T0 + 5 * 3600)
    assert digest(service, scope) == PINNED[(engine, scope)]


def test_candidates_come_with_windows_wide_enough_for_promoted_neighbours(service: Service) -> None:
    """One read brings the candidates' windows reaching `reach`, and the texts of the rows
    within `span`: a promoted neighbour's window is cut from them (`_Nearby`), never read again."""
    fill(service)
    store = service.store
    read = store.rank_candidates("observations", ["deploi", "rollback"], lambda df: ['"deploi" OR "rollback"'],
                                 SearchFilters(), 10, 2, 4)
    assert read.ids and read.span == 4
    assert read.windows == store.session_windows("observations", read.ids, 4)
    assert max(abs(d) for i in read.ids for _, d in read.windows[i]) == 4
    near = sorted({*read.ids, *(n for i in read.ids for n, d in read.windows[i] if abs(d) <= 2)})
    assert read.texts.items() >= store.fts_texts("observations", near).items()


def test_session_windows_order_records_of_one_second_by_id_past_a_power_of_ten(service: Service) -> None:
    """Records of one second follow their ids, 9 before 10 (SQLite sorted them as text: 10 first)."""
    store = service.store
    with store.transaction():
        store.ensure_session("s1", "demo", T0)
        store.ensure_session("s2", "demo", T0)
        for n in range(7):
            store.add_observation(NewObservation("s2", "demo", T0 + n, "command", "PostToolUse", f"cmd {n}"))
        ids = [store.add_observation(NewObservation("s1", "demo", T0 + 9, "command", "PostToolUse", f"step {n}"))
               for n in range(5)]
    assert ids[1:3] == [9, 10]   # ids 8 to 12, one second
    windows = store.session_windows("observations", ids, 4)
    for at, anchor in enumerate(ids):
        assert windows[anchor] == [(n, d - at) for d, n in enumerate(ids) if n != anchor]


@pytest.mark.no_store
@pytest.mark.parametrize("seed", range(4))
def test_the_prefix_scan_finds_what_a_lookbehind_at_every_position_finds(seed: int) -> None:
    """The counter's scan, each alternative opening with its first character, finds the words
    `(?<!T)(?:p1|p2|…)T*` finds: prefixes of one letter, sharing letters, digits, underscores,
    accents and line breaks around them."""
    rng = random.Random(seed)
    alphabet = "aab_1é-. \nde"
    token = r"[^\W_]"
    for _ in range(300):
        prefixes = tuple(sorted({"".join(rng.choice("abdeé1") for _ in range(rng.randint(1, 3)))
                                 for _ in range(rng.randint(1, 4))}, key=len, reverse=True))
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        plain = re.compile(rf"(?<!{token})(?:{'|'.join(map(re.escape, prefixes))}){token}*")
        pattern = rank._prefix_pattern(prefixes)
        assert pattern is not None
        assert pattern.findall(text) == plain.findall(text), (prefixes, text)
