"""Open work carried across sessions: what resolves it and when it ages out (recorded through the
service's `record_event`, what the hook runs, with a settable clock; on SQLite and PostgreSQL)."""

from __future__ import annotations

from typing import Any

from context.test_context import ALPHA, T0, bash, edit, make_service, prompt, section, stop
from nmem.context.block import render
from store_engines import both_engines

__all__ = ["both_engines", "make_service"]

DAY = 86400
LINT = "src/ui/org.ts:3:7  error  'x' is assigned a value but never used\n\n1 problem (1 error, 0 warnings)"


def leave_work_open(svc: Any, at: int) -> None:
    prompt(svc, "tidy the org screens", at, session="s-open")
    edit(svc, f"{ALPHA}/src/ui/org.ts", at + 1, session="s-open")
    bash(svc, "npm run lint", at + 2, session="s-open", code=1, out=LINT)
    stop(svc, "Next steps:\n- add an e2e test for SSO org logins\n- rename the org route in src/routes.ts",
         at + 3, session="s-open")


def working_session(svc: Any, session: str, at: int, path: str, closing: str = "Done.") -> None:
    prompt(svc, f"work in {path}", at, session=session)
    edit(svc, f"{ALPHA}/{path}", at + 1, session=session)
    stop(svc, closing, at + 2, session=session)


def carried(block: str) -> list[str]:
    lead = section(block, "Last session")
    if "Still open from earlier sessions" not in lead:
        return []
    tail = lead.split("Still open from earlier sessions", 1)[1].split(":\n", 1)[1]
    return [line for line in tail.splitlines() if line.startswith("- ")]


def test_a_to_do_reported_done_by_a_later_closing_message_is_resolved(make_service: Any) -> None:
    svc = make_service()
    leave_work_open(svc, T0)
    working_session(svc, "s-next", T0 + 100, "tests/e2e/sso.spec.ts",
                    "I added an e2e test for SSO org logins; it passes.")
    items = carried(render(svc, "alpha", "startup", T0 + 200))
    assert not any("e2e test" in item for item in items), items
    assert any(item.startswith('- "rename the org route in src/routes.ts"') for item in items), items
    assert any(item.startswith("- ✗ npm run lint") for item in items), items


def test_open_work_ages_out_after_two_weeks(make_service: Any) -> None:
    svc = make_service()
    leave_work_open(svc, T0)
    prompt(svc, "what time is it in Tokyo?", T0 + 15 * DAY, session="s-question")
    assert carried(render(svc, "alpha", "startup", T0 + 15 * DAY + 60)) == []
    assert len(carried(render(svc, "alpha", "startup", T0 + 3 * DAY))) == 3, "within two weeks it carries"


def test_to_dos_age_out_after_three_working_sessions_failures_after_five(make_service: Any) -> None:
    svc = make_service()
    leave_work_open(svc, T0)
    for i in range(3):
        working_session(svc, f"s-w{i}", T0 + 100 * (i + 1), f"src/other_{i}.py")
    items = carried(render(svc, "alpha", "startup", T0 + 1000))
    assert len(items) == 1 and items[0].startswith("- ✗ npm run lint"), items
    for i in range(3, 5):
        working_session(svc, f"s-w{i}", T0 + 100 * (i + 1), f"src/other_{i}.py")
    assert carried(render(svc, "alpha", "startup", T0 + 2000)) == []


def test_sessions_that_change_nothing_never_age_open_work(make_service: Any) -> None:
    svc = make_service()
    leave_work_open(svc, T0)
    for i in range(6):
        prompt(svc, f"question {i}", T0 + 100 * (i + 1), session=f"s-q{i}")
        stop(svc, f"answer {i}", T0 + 100 * (i + 1) + 1, session=f"s-q{i}")
    assert len(carried(render(svc, "alpha", "startup", T0 + 1000))) == 3
