"""Filtering by coding agent: `agent` (one name or a list) narrows search, timeline, trace and
the sessions listing on both engines; hits, timelines, traces and listed sessions say which
agent recorded them; curated memories belong to no agent and drop out; sessions from before
nmem kept the agent (NULL) count as Claude Code's; an unknown name is an error that lists
the known ones and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from agent_support import CC, CODEX, GEMINI, LEGACY, seed_agents
from nmem.capture.agents import AGENTS
from nmem.errors import InvalidArgument, NotFound
from nmem.service.api import Service


@pytest.fixture
def agents_seeded(service: Service) -> Service:
    return seed_agents(service)


def sessions_of(hits: Any) -> set[str]:
    """The sessions the trail hits come from (a memory's hit comes from none)."""
    return {hit.record.id if hit.kind == "session" else hit.record.session_id
            for hit in hits if hit.kind != "memory"}


@pytest.mark.parametrize("scope", ["observations", "prompts", "all"])
@pytest.mark.parametrize("mode", [{}, {"strict": True}, {"raw": True}, {"order_by": "date_desc"}], ids=str)
def test_search_keeps_the_named_agents_and_each_hit_names_its_agent(agents_seeded: Service, scope: str,
                                                                    mode: dict[str, Any]) -> None:
    everyone = agents_seeded.search("invoice export", scope=scope, limit=50, **mode).hits
    assert sessions_of(everyone) == {CC, LEGACY, CODEX, GEMINI}  # without the filter: every agent
    codex = agents_seeded.search("invoice export", scope=scope, limit=50, agent="codex", **mode).hits
    assert codex and sessions_of(codex) == {CODEX}
    assert {hit.agent for hit in codex} == {"codex"}
    assert all(hit.to_dict()["agent"] == "codex" for hit in codex)
    pair = agents_seeded.search("invoice export", scope=scope, limit=50, agent=["codex", "gemini"], **mode).hits
    assert sessions_of(pair) == {CODEX, GEMINI}
    assert pair == agents_seeded.search("invoice export", scope=scope, limit=50, agent="gemini, codex", **mode).hits


def test_claude_code_includes_sessions_from_before_the_agent_was_recorded(agents_seeded: Service) -> None:
    hits = agents_seeded.search("invoice export", limit=50, agent="claude-code").hits
    assert sessions_of(hits) == {CC, LEGACY}
    assert {hit.agent for hit in hits if hit.record.session_id == CC} == {"claude-code"}
    assert {hit.agent for hit in hits if hit.record.session_id == LEGACY} == {None}
    assert "agent" not in next(h for h in hits if h.record.session_id == LEGACY).to_dict()


def test_curated_memories_belong_to_no_agent(agents_seeded: Service) -> None:
    assert agents_seeded.search("invoice export", scope="memories").hits  # found without the filter
    for agent in AGENTS:
        assert agents_seeded.search("invoice export", scope="memories", agent=agent).hits == []
        assert all(h.kind != "memory" for h in agents_seeded.search("invoice export", agent=agent, limit=50).hits)


def test_session_scope_filters_sessions_by_their_agent(agents_seeded: Service) -> None:
    listed = agents_seeded.search(None, scope="sessions", agent="gemini", project="*").hits
    assert [(h.record.id, h.agent) for h in listed] == [(GEMINI, "gemini")]


def test_sessions_listing_and_trace_name_and_filter_by_agent(agents_seeded: Service) -> None:
    rows = agents_seeded.sessions("demo", limit=10)
    assert {r["id"]: r["agent"] for r in rows} == {CC: "claude-code", LEGACY: None, CODEX: "codex",
                                                  GEMINI: "gemini"}
    assert [r["id"] for r in agents_seeded.sessions("demo", agent="codex")] == [CODEX]
    assert [r["id"] for r in agents_seeded.sessions("demo", agent="claude-code")] == [CC, LEGACY]
    latest = agents_seeded.session_trace(project="demo")
    assert (latest["session_id"], latest["agent"]) == (GEMINI, "gemini")
    codex = agents_seeded.session_trace(project="demo", agent="codex")
    assert (codex["session_id"], codex["agent"]) == (CODEX, "codex")
    assert [p["content"] for p in codex["prompts"] if p["source"] == "agent"] == ["The invoice export streams now."]
    with pytest.raises(NotFound, match="run by codex, not gemini"):
        agents_seeded.session_trace(CODEX, agent="gemini")


def test_timeline_anchors_on_the_agents_best_match_and_names_it(agents_seeded: Service) -> None:
    found = agents_seeded.timeline(query="invoice export", agent="gemini", before=1, after=1)
    assert (found["agent"], found["anchor"]["session_id"]) == ("gemini", GEMINI)
    codex_obs = agents_seeded.search("buffered", scope="observations", agent="codex").hits[0].record.id
    assert agents_seeded.timeline(codex_obs)["agent"] == "codex"
    with pytest.raises(NotFound, match="recorded by codex"):
        agents_seeded.timeline(codex_obs, agent="cursor")


@pytest.mark.parametrize("bad", ["vim", ["codex", "emacs"], 7])
def test_an_unknown_agent_is_an_error_listing_the_known_ones(agents_seeded: Service, bad: Any) -> None:
    before = agents_seeded.sessions("demo")
    for call in (lambda: agents_seeded.search("invoice", agent=bad),
                 lambda: agents_seeded.sessions("demo", agent=bad),
                 lambda: agents_seeded.session_trace(project="demo", agent=bad),
                 lambda: agents_seeded.timeline(query="invoice", agent=bad)):
        with pytest.raises(InvalidArgument) as raised:
            call()
        if not isinstance(bad, int):
            assert "known agents: " + ", ".join(AGENTS) in str(raised.value)
    assert agents_seeded.sessions("demo") == before
