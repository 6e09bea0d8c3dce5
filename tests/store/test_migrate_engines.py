"""`nmem migrate --to URL`: every row copied between SQLite and PostgreSQL, verified, both ways."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from conftest import record, run_nmem
from nmem.config import load_settings
from nmem.errors import InvalidArgument
from nmem.service.api import Service
from nmem.store import SearchFilters, open_store
from nmem.store.migrate import TABLES, holds_data, migrate, store_checks
from nmem.team.accounts import digest as team_digest

T0 = 1_790_000_000

pytestmark = [pytest.mark.postgres,
              pytest.mark.sqlite_only("copies between the engines itself: a SQLite service and a PostgreSQL schema")]


def fill(service: Service) -> None:
    for i in range(30):
        record(service, "UserPromptSubmit", now=T0 + 10 * i, session_id=f"s{i % 3}", prompt=f"fix the login bug {i}")
        record(service, "PostToolUse", now=T0 + 10 * i + 1, session_id=f"s{i % 3}", tool_name="Bash",
               tool_input={"command": f"pytest tests/test_login.py -k case{i}"}, tool_response={"exit_code": i % 2})
    service.remember("Sessions expire after 30 minutes", namespace="decisions", project="demo", tags=["auth"])
    gone = service.remember("to be forgotten", namespace="learnings", project="demo")
    service.forget(gone.urn)
    service.remember("Use PostgreSQL 15 for billing because it supports transactions.", namespace="decisions",
                     project="demo")
    service.remember("Decision: we use PostgreSQL 15 for billing, because it supports transactions.",
                     namespace="decisions", project="demo")
    assert service.consolidate()["merges"], "a run with changes for the undo log"


def test_sqlite_to_postgres_and_back_keeps_every_row(service: Service, pg_url: str, tmp_path: Path) -> None:
    fill(service)
    source = service.settings.store_url
    service.close()
    checks = migrate(source, pg_url)
    assert {c.table: c.rows for c in checks}["observations"] == 30
    pg = open_store(pg_url)
    try:
        assert [c.to_dict() for c in store_checks(pg)] == [c.to_dict() for c in checks]
        found = pg.search_observations("login", SearchFilters(), "date_desc", 5, 0)
        assert [o.id for o, _ in found] == [30, 29, 28, 27, 26]  # ids kept, the full-text index rebuilt
        new_id = pg.add_prompt("s0", T0 + 999, "user", "after the move")
        assert new_id == 31, "identity columns continue after the copied ids"
        rows = {c.table: c.rows for c in checks}
        assert rows["lifecycle_runs"] == 1 and rows["lifecycle_changes"] >= 2 and rows["lifecycle_state"] == 1
    finally:
        pg.close()
    with Service.open(load_settings({"NMEM_HOME": str(tmp_path / "pg"), "NMEM_STORE_URL": pg_url})) as svc:
        (run,) = svc.consolidation_runs()
        undone = svc.undo_consolidation(run["id"])  # the undo log came along
        assert len(undone["restored"]) == 2 and undone["conflicts"] == []
        assert svc.store.start_run("consolidate", T0) == run["id"] + 1
    back = f"sqlite:///{tmp_path / 'back.db'}"
    again = migrate(pg_url, back)
    assert {c.table: c.rows for c in again}["prompts"] == 31
    assert {c.table: c.rows for c in again}["lifecycle_runs"] == 2
    with Service.open(load_settings({"NMEM_HOME": str(tmp_path / "h"), "NMEM_STORE_URL": back})) as svc:
        assert [h.record.summary for h in svc.recall("expire", project="demo")] == ["Sessions expire after 30 minutes"]
        st = svc.store.status()   # SQLite's kept counts (schema step 17) follow the copied rows
        conn = sqlite3.connect(tmp_path / "back.db")
        try:
            assert st.by_obs_type == dict(conn.execute("SELECT obs_type, COUNT(*) FROM observations GROUP BY 1"))
            assert st.by_prompt_source == dict(conn.execute("SELECT source, COUNT(*) FROM prompts GROUP BY 1"))
        finally:
            conn.close()
        assert (st.observations, st.prompts) == (30, 31)


def test_postgresql_plans_the_copy_with_statistics_of_what_it_copied(service: Service, pg_url: str) -> None:
    """Each table is analysed once copied: the foreign keys of the next ones are checked at the end
    of their COPY, and with no statistics PostgreSQL looked a session up through (started_at, id)."""
    fill(service)
    source = service.settings.store_url
    service.close()
    rows = {c.table: c.rows for c in migrate(source, pg_url)}
    pg = open_store(pg_url)
    try:
        for table in ("sessions", "prompts", "observations"):
            (found,) = pg._query("SELECT reltuples FROM pg_class WHERE oid = to_regclass(?)", (table,))  # type: ignore[attr-defined]
            assert found[0] == rows[table], table
    finally:
        pg.close()


def test_a_non_empty_target_is_refused_unless_forced(service: Service, pg_url: str) -> None:
    fill(service)
    source = service.settings.store_url
    service.close()
    first = migrate(source, pg_url)
    with pytest.raises(InvalidArgument, match="already holds data"):
        migrate(source, pg_url)
    assert [c.to_dict() for c in migrate(source, pg_url, force=True)] == [c.to_dict() for c in first]
    assert len(first) == len(TABLES)


def test_the_cli_copies_and_prints_the_checks(nmem_home: Path, pg_url: str, tmp_path: Path) -> None:
    env = {"NMEM_HOME": str(nmem_home), "PATH": "/usr/bin:/bin"}
    with Service.open(load_settings(env)) as svc:
        fill(svc)
    done = run_nmem(["migrate", "--to", pg_url, "--format", "json"], env=env)
    assert done.returncode == 0, done.stderr
    tables = {t["table"]: t["rows"] for t in json.loads(done.stdout)["tables"]}
    assert (tables["sessions"], tables["observations"], tables["memories"]) == (3, 30, 4)
    refused = run_nmem(["migrate", "--to", pg_url], env=env)
    assert refused.returncode == InvalidArgument.exit_code and "already holds data" in refused.stderr


def test_a_store_with_team_users_is_not_copied_where_users_cannot_go(
        service: Service, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine without team tables (PostgreSQL before it kept users, played here by taking its
    team rows away) would drop users, tokens, the audit trail and writers, so the migration
    refuses and the target stays empty."""
    import builtins

    import nmem.store.migrate as migrate_module
    from nmem.store.postgres import PostgresStore

    def lacks_team_rows(obj: object, name: str) -> bool:  # both engines share TeamRows: hide it on one
        return not (isinstance(obj, PostgresStore) and name == "team_active") and builtins.hasattr(obj, name)

    fill(service)
    assert service.store.add_user("alice", True, T0)  # type: ignore[attr-defined]
    source = service.settings.store_url
    service.close()
    monkeypatch.setattr(migrate_module, "hasattr", lacks_team_rows, raising=False)
    with pytest.raises(InvalidArgument, match=r"has team users.*nothing was copied"):
        migrate(source, pg_url)
    monkeypatch.undo()
    pg = open_store(pg_url)
    try:
        assert not holds_data(pg)
    finally:
        pg.close()


def test_team_users_tokens_audit_and_writers_are_copied_both_ways(nmem_home: Path, pg_url: str,
                                                                   tmp_path: Path) -> None:
    env = {"NMEM_HOME": str(nmem_home), "PATH": "/usr/bin:/bin"}
    with Service.open(load_settings(env)) as svc:
        fill(svc)
        memory = svc.remember("Deploys go through the release branch", namespace="decisions", project="demo")
    for args in (["user", "add", "alice", "--admin"], ["user", "add", "bob"]):
        done = run_nmem(args, env=env)
        assert done.returncode == 0, done.stderr
    token = run_nmem(["token", "create", "bob"], env=env)
    assert token.returncode == 0, token.stderr
    with Service.open(load_settings(env)) as svc:
        svc.store.record_writes("bob", T0, [("remember", memory.urn)],  # type: ignore[attr-defined]
                                memories=[memory.id], observations=[7])
    done = run_nmem(["migrate", "--to", pg_url, "--format", "json"], env=env)
    assert done.returncode == 0, done.stderr
    tables = {t["table"]: t["rows"] for t in json.loads(done.stdout)["tables"]}
    assert (tables["team_users"], tables["team_tokens"], tables["audit"]) == (2, 1, 1)
    pg_env = {"NMEM_HOME": str(tmp_path / "pg-home"), "NMEM_STORE_URL": pg_url, "PATH": "/usr/bin:/bin"}
    listed = run_nmem(["user", "list", "--format", "json"], env=pg_env)
    assert listed.returncode == 0, listed.stderr
    assert "alice" in listed.stdout and "bob" in listed.stdout
    pg: Any = open_store(pg_url)
    try:
        assert pg.token_user(team_digest(token.stdout.strip())) == ("bob", False)
        assert pg.memory_writers([memory.id]) == {memory.id: "bob"} and pg.observation_writers([7]) == {7: "bob"}
        assert [(r["user"], r["action"], r["urn"]) for r in pg.audit_rows(None, 0, 10)] == [
            ("bob", "remember", memory.urn)]
        assert pg.add_user("carol", False, T0 + 1)
        assert pg.add_token("carol", "digest-c", T0 + 1) == 2, "identity columns continue after the copied ids"
        pg.record_writes("carol", T0 + 2, [("forget", memory.urn)])
    finally:
        pg.close()
    back = f"sqlite:///{tmp_path / 'back.db'}"
    again = {c.table: c.rows for c in migrate(pg_url, back)}
    assert (again["team_users"], again["team_tokens"], again["audit"]) == (3, 2, 2)
    returned: Any = open_store(back)
    try:
        assert returned.token_user("digest-c") == ("carol", False)
        assert returned.memory_writers([memory.id]) == {memory.id: "bob"}
        assert [r["user"] for r in returned.audit_rows(None, 0, 10)] == ["bob", "carol"]
    finally:
        returned.close()


def test_the_agent_that_recorded_a_session_survives_the_move_both_ways(service: Service, pg_url: str,
                                                                       tmp_path: Path) -> None:
    record(service, "UserPromptSubmit", now=T0, session_id="s-agent", prompt="fix the login bug")
    assert service.store.get_session("s-agent").agent == "claude-code"
    source = service.settings.store_url
    service.close()
    migrate(source, pg_url)
    back = f"sqlite:///{tmp_path / 'back.db'}"
    migrate(pg_url, back)
    for url in (pg_url, back):
        store = open_store(url)
        try:
            assert store.get_session("s-agent").agent == "claude-code", url
        finally:
            store.close()


def test_every_column_both_engines_hold_is_copied(service: Service, pg_url: str) -> None:
    """A column a later schema step adds to both engines must join `TABLES`, or a move drops it."""
    import psycopg  # the postgres extra: only where PostgreSQL tests run

    sqlite_path = service.settings.store_url.removeprefix("sqlite:///")
    service.close()
    open_store(pg_url).close()   # the schema, migrated
    lite = sqlite3.connect(sqlite_path)
    try:
        with psycopg.connect(pg_url) as pg:
            for table, columns, _ in TABLES:
                in_sqlite = {row[1] for row in lite.execute(f"PRAGMA table_xinfo({table})") if row[6] == 0}
                in_pg = {row[0] for row in pg.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
                    " AND table_name = %s AND is_generated = 'NEVER'", (table,))}
                assert (in_sqlite & in_pg) - set(columns) == set(), table
    finally:
        lite.close()
