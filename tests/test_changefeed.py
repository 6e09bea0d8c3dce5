"""The change feed: what any process wrote since a cursor (nmem.changes, Service.changes)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import hook_payload, record, run_nmem
from mcp_support import child_env
from nmem.changes import ChangeSet, ChangeWatcher, Cursor
from nmem.errors import InvalidArgument
from nmem.service.api import Service
from store_engines import both_engines

__all__ = ["both_engines"]  # the service tests here run on SQLite and PostgreSQL


def hook_then_drain(payload: dict, nmem_home: Path) -> subprocess.CompletedProcess[str]:
    """A hook process on this test's store; on a server store (PostgreSQL) hooks spool and
    `nmem drain` stores the events."""
    store = os.environ.get("NMEM_STORE_URL", "")
    env = child_env(nmem_home, **({"NMEM_STORE_URL": store} if store else {}))
    done = run_nmem(["record"], stdin=json.dumps(payload), env=env)
    if done.returncode == 0 and store and not store.startswith("sqlite:"):
        drained = run_nmem(["drain"], env=env)
        assert drained.returncode == 0, drained.stderr
    return done


def kinds(changes: list) -> list[tuple[str, str]]:
    return [(c.kind, c.action) for c in changes]


def test_starting_now_sees_only_later_writes(service: Service) -> None:
    record(service, "UserPromptSubmit", prompt="before the cursor")
    changes, cursor = service.changes(None)
    assert changes == []
    record(service, "PostToolUse", tool_name="Bash", tool_input={"command": "make test"},
           tool_response={"stdout": "ok", "exit_code": 0})
    changes, after = service.changes(cursor)
    assert kinds(changes) == [("observation", "created")]
    assert changes[0].record["content_preview"].startswith("make test")
    assert changes[0].urn == f"nmem://project:demo/observations/{changes[0].record['id']}"
    assert service.changes(after)[0] == []


def test_everything_from_zero_in_order_with_resumable_cursors(service: Service) -> None:
    record(service, "SessionStart", source="startup")
    record(service, "UserPromptSubmit", prompt="fix the login bug")
    record(service, "PostToolUse", tool_name="Read", tool_input={"file_path": "/work/demo/a.py"},
           tool_response={"file": {"content": "x"}})
    memory = service.remember("Use argon2 for hashing", namespace="decisions", project="demo")
    changes, end = service.changes("0")
    assert kinds(changes) == [("session", "started"), ("observation", "created"), ("prompt", "created"),
                              ("observation", "created"), ("memory", "created")]
    assert changes[-1].urn == memory.urn
    assert str(end) == changes[-1].cursor
    # resuming from any change's cursor gives exactly the ones after it
    for i, change in enumerate(changes):
        rest, _ = service.changes(change.cursor)
        assert [c.urn for c in rest] == [c.urn for c in changes[i + 1:]]


def test_memory_updates_pins_and_forgets_are_changes(service: Service) -> None:
    memory = service.remember("Cache keys include the tenant", namespace="learnings", project="demo")
    _, cursor = service.changes(None)
    service.update(memory.id, content="Cache keys include the tenant and the locale")
    service.pin(memory.id)
    changes, cursor2 = service.changes(cursor)
    # one row per record in the log: two writes since the cursor read as the latest one
    assert kinds(changes) == [("memory", "updated")]
    assert changes[0].record["is_pinned"] is True
    service.forget(memory.id)
    changes, _ = service.changes(cursor2)
    assert kinds(changes) == [("memory", "forgotten")]
    assert changes[0].record == {"id": memory.id, "domain": "project:demo", "namespace": "learnings",
                                 "urn": memory.urn, "ref": memory.id, "deleted_at": changes[0].timestamp}
    assert "tenant" not in json.dumps(changes[0].to_dict())  # a forgotten text is not in the feed


def test_a_session_ending_is_a_change(service: Service) -> None:
    record(service, "UserPromptSubmit", prompt="write the docs")
    _, cursor = service.changes(None)
    record(service, "SessionEnd", reason="exit")
    changes, _ = service.changes(cursor)
    assert ("session", "ended") in kinds(changes)


def test_limit_cuts_and_the_cursor_resumes(service: Service) -> None:
    _, cursor = service.changes(None)
    for i in range(7):
        record(service, "PostToolUse", tool_name="Bash", tool_input={"command": f"echo {i}"},
               tool_response={"stdout": str(i), "exit_code": 0})
    seen: list[str] = []
    while True:
        changes, cursor = service.changes(cursor, limit=3)
        if not changes:
            break
        assert len(changes) <= 3
        seen += [c.record["content_preview"] for c in changes if c.kind == "observation"]
    assert [s.split()[1] for s in seen] == [str(i) for i in range(7)]


def test_hook_process_writes_are_seen(service: Service, nmem_home: Path) -> None:
    _, cursor = service.changes(None)
    payload = hook_payload("PostToolUse", tool_name="Bash", tool_input={"command": "pytest -q"},
                           tool_response={"stdout": "3 passed", "exit_code": 0})
    done = hook_then_drain(payload, nmem_home)
    assert done.returncode == 0, done.stderr
    changes, _ = service.changes(cursor)
    assert kinds(changes) == [("session", "started"), ("observation", "created")]
    assert changes[1].record["content_preview"].startswith("pytest -q")


@pytest.mark.parametrize("bad", ["", "1.2", "a.b.c", "1.2.3.4", "-1.0.0", "9" * 30 + ".0.0"])
def test_bad_cursors_are_refused(service: Service, bad: str) -> None:
    with pytest.raises(InvalidArgument, match="not a change cursor"):
        service.changes(bad)


def test_cursor_text_round_trips() -> None:
    assert str(Cursor.parse("12.4.7")) == "12.4.7"
    assert Cursor.parse("0") == Cursor(0, 0, 0)
    assert Cursor.parse("3.0.1").covers(0, 3) and not Cursor.parse("3.0.1").covers(0, 4)


def test_a_second_store_in_this_process_leaves_the_first_seeing_other_writers(service: Service,
                                                                               nmem_home: Path) -> None:
    """Opening a store reads the file's header; closing that descriptor must not drop the SQLite
    locks of a store already open here (POSIX drops them all), else a hook closing last deletes the
    WAL and the first store reads a stale snapshot forever: the live feed went blind that way."""
    _, cursor = service.changes(None)
    second = Service.open(service.settings)
    try:
        for command in ("make one", "make two"):
            payload = hook_payload("PostToolUse", tool_name="Bash", tool_input={"command": command},
                                   tool_response={"stdout": "", "exit_code": 0})
            assert hook_then_drain(payload, nmem_home).returncode == 0
            changes, cursor = service.changes(cursor)
            assert [c.record["content_preview"] for c in changes if c.kind == "observation"] == [command]
    finally:
        second.close()


def test_tool_calls_and_prompts_add_nothing_to_the_change_log(service: Service) -> None:
    """The hook path's common events cost the feed nothing: only a session starting or ending,
    or a memory written, touches `change_log`."""
    record(service, "UserPromptSubmit", prompt="start the session")
    log_before = service.store.change_heads()[2]
    record(service, "UserPromptSubmit", prompt="and another prompt")
    record(service, "PostToolUse", tool_name="Read", tool_input={"file_path": "/work/demo/b.py"},
           tool_response={"file": {"content": "y"}})
    assert service.store.change_heads()[2] == log_before
    service.remember("A memory is one row", namespace="learnings", project="demo")
    assert service.store.change_heads()[2] == log_before + 1


def test_the_watcher_names_each_changed_resource_once_per_poll(service: Service) -> None:
    """MCP's resource subscriptions read the same feed: each write names its record's URN, its
    collection and domain (a trail record its session too); a memory appearing or forgotten
    changes the resource list, an edit does not."""
    watcher = ChangeWatcher(service.store)
    assert not watcher.poll()
    record(service, "UserPromptSubmit", prompt="fix the login bug")
    record(service, "PostToolUse", tool_name="Bash", tool_input={"command": "make test"},
           tool_response={"stdout": "ok", "exit_code": 0})
    found = watcher.poll()
    demo = "nmem://project:demo"
    session = f"{demo}/sessions/sess-1"
    (obs,) = [u for u in found.updated if u.startswith(f"{demo}/observations/")]
    (prompt,) = [u for u in found.updated if u.startswith(f"{demo}/prompts/")]
    assert found.updated == {demo, f"{demo}/observations", obs, f"{demo}/prompts", prompt, f"{demo}/sessions",
                             session}
    assert not found.list_changed and not watcher.poll()
    memory = service.remember("Use argon2 for hashing", namespace="decisions", project="demo")
    added = watcher.poll()
    assert added == ChangeSet({memory.urn, f"{demo}/decisions", demo}, list_changed=True)
    service.update(memory.id, content="Use argon2id for hashing")
    assert watcher.poll() == ChangeSet({memory.urn, f"{demo}/decisions", demo}, list_changed=False)
    service.forget(memory.id)
    assert watcher.poll().list_changed
    record(service, "SessionEnd", reason="exit")
    assert {session, f"{demo}/sessions", demo} <= watcher.poll().updated
