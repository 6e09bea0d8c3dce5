"""A ranked search on PostgreSQL reads its ~50 candidates' records in the ranking statement, but
builds only the records of the page it shows (issue 25: building every candidate's record, an
observation's metadata parsed as JSON, was most of the client's CPU a search): arranging the
pool takes each candidate's session, prompt, source and time from what the statement read beside
them (`Candidates.sessions`, the texts). The hits stay those of the records built whole."""

from __future__ import annotations

from typing import Any

import pytest

from nmem.models import Observation, Prompt
from nmem.service.api import Service
from nmem.store import NewObservation
from store_engines import ENGINES

pytest.importorskip("psycopg")

POSTGRES = [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"]
T0 = 1_790_000_000
SESSIONS = 80   # each says "deploy" in a prompt and two observations: more candidates than the pool (50)


def _fill(service: Service) -> None:
    store = service.store
    with store.transaction():
        for s in range(SESSIONS):
            sid = f"s-{s}"
            store.ensure_session(sid, "proj", T0 + 10 * s)
            said = store.add_prompt(sid, T0 + 10 * s, "user", f"deploy step {s} of the release " + "x " * (s % 7))
            for k in range(2):   # a neighbour sharing the word: promoted past the pool, or not
                store.add_observation(NewObservation(sid, "proj", T0 + 10 * s + 1 + k, "command", "PostToolUse",
                                                     f"deploy script run {s} " + "y " * ((s + 3 * k) % 5),
                                                     tool_name="Bash", metadata={"n": s}, prompt_id=said))


def _counted(monkeypatch: pytest.MonkeyPatch, cls: Any) -> list[int]:
    built: list[int] = []
    original = cls.from_row.__func__

    def from_row(klass: Any, row: Any) -> Any:
        built.append(int(row["id"]))
        return original(klass, row)

    monkeypatch.setattr(cls, "from_row", classmethod(from_row))
    return built


@pytest.mark.parametrize("engine", POSTGRES)
@pytest.mark.parametrize(("scope", "cls"), [("observations", Observation), ("prompts", Prompt)])
def test_a_page_of_ten_builds_ten_records(service: Service, engine: str, scope: str, cls: Any,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _fill(service)
    service.search("deploy", scope=scope, limit=10)   # the words' counts cached: one statement below
    built = _counted(monkeypatch, cls)
    found = service.search("deploy", scope=scope, limit=10)
    assert len(found.hits) == 10
    assert sorted(built) == sorted(h.record.id for h in found.hits)   # before: all 50 candidates
    if scope == "observations":
        assert all(h.record.metadata == {"n": int(h.record.content.split()[3])} for h in found.hits)
    assert all(h.origin is not None for h in found.hits)
