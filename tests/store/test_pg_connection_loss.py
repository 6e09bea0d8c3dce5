"""A PostgreSQL store after its server ended a backend (`pg_terminate_backend`, as an administrator
or a restart does): whatever statement was in flight, the store raises nmem's own error or carries
on, the next call is served, and a commit whose answer was lost is known, not guessed."""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import pytest

from nmem.errors import NmemError, StoreDisconnected
from nmem.store import open_store
from store_engines import ENGINES

psycopg = pytest.importorskip("psycopg")

POSTGRES = [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"]
pytestmark = pytest.mark.parametrize("engine", POSTGRES)


def _admin(pg_url: str) -> Any:
    return psycopg.connect(pg_url.split("?", maxsplit=1)[0], autocommit=True)


def _schema(pg_url: str) -> str:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        return str(conn.execute("SELECT current_schema()").fetchone()[0])


@pytest.fixture
def app_name() -> str:
    return f"nmem-loss-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def pg_store(pg_url: str, app_name: str) -> Iterator[Any]:
    """The test's schema opened as nmem opens a store, its connections named `app_name`."""
    store = open_store(f"{pg_url}&application_name={quote(app_name)}", busy_timeout_ms=2000)
    try:
        yield store
    finally:
        store.close()


def _wait_for(check: Callable[[], bool], what: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.02)


def _end_waiting_on_a_lock(admin: Any, app_name: str) -> int:
    """Ends the store's backend that waits for an advisory lock the test holds (the change feed's,
    the migrations'); the pid it ended."""
    sql = ("SELECT pid FROM pg_stat_activity WHERE application_name = %s "
           "AND wait_event_type = 'Lock' AND wait_event = 'advisory'")
    pids: list[int] = []
    _wait_for(lambda: bool(pids.extend(r[0] for r in admin.execute(sql, (app_name,))) or pids),
              "a backend of the store waiting for the lock")
    admin.execute("SELECT pg_terminate_backend(%s)", (pids[0],))
    return pids[0]


def test_a_feed_read_whose_backend_ends_while_it_waits_is_read_again(pg_url: str, pg_store: Any, app_name: str,
                                                                     engine: str) -> None:
    """The change feed's read of what has settled waits for the writers' lock; its backend ended
    there left the store raising psycopg's own error (not nmem's), which ended a server's change
    watch and with it the server's lifespan: every request after failed with 500."""
    schema = _schema(pg_url)
    outcome: list[Any] = []
    with _admin(pg_url) as admin, _admin(pg_url) as writer:
        writer.execute("BEGIN")   # a writer in flight holds the feed lock shared, as every nmem writer does
        writer.execute("SELECT pg_advisory_xact_lock_shared(28269, hashtext(%s))", (schema,))
        reader = threading.Thread(target=lambda: outcome.append(_outcome(pg_store.settled_heads)))
        reader.start()
        _end_waiting_on_a_lock(admin, app_name)
        writer.execute("COMMIT")
        reader.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], tuple) and len(outcome[0]) == 3, outcome
    assert pg_store.settled_heads() is not None   # and the store goes on


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except NmemError as exc:   # nmem's own errors are fine answers; anything else is the bug
        return exc
    except Exception as exc:   # what escaped is what the test reports
        return f"{type(exc).__module__}.{type(exc).__name__}: {exc}"


class _Proxy:
    """A TCP relay to the PostgreSQL server that can hold back the server's next answer: the
    client's statement reaches the server and runs, its answer does not come back, as when the
    link drops after the server committed."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.hold = threading.Event()     # hold back what the server sends next
        self.held = threading.Event()     # set once something was held back
        self.closed = False
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            self.sockets += (client, server)
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, from_server: bool) -> None:
        holding = False   # this connection's answers are lost on the way from now on
        try:
            while data := source.recv(65536):
                if from_server and (holding or self.hold.is_set()):
                    holding = True
                    self.hold.clear()   # one answer held: other connections go through
                    self.held.set()
                    continue
                sink.sendall(data)
        except OSError:
            pass
        for end in (sink, source):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.closed = True
        self.listener.close()
        for end in self.sockets:
            end.close()


@pytest.fixture
def proxy(pg_url: str) -> Iterator[_Proxy]:
    parts = urlsplit(pg_url)
    relay = _Proxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    yield relay
    relay.close()


def _through(pg_url: str, port: int, app_name: str) -> str:
    parts = urlsplit(pg_url)
    auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    url = urlunsplit((parts.scheme, f"{auth}127.0.0.1:{port}", parts.path, parts.query, ""))
    return f"{url}&application_name={quote(app_name)}"


def _stored(pg_url: str) -> list[str]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        return [r[0] for r in conn.execute("SELECT content FROM memories ORDER BY id")]


def _commit_whose_answer_is_lost(pg_url: str, proxy: _Proxy, app_name: str, store: Any,
                                 content: str) -> Any:
    """A memory written in a transaction whose COMMIT reaches the server but whose answer does
    not come back: the server's backend is ended while the answer is held."""
    from nmem.store.records import NewMemory

    def write() -> None:
        with store.transaction():
            store.insert_memory(NewMemory(uid=uuid.uuid4().hex, domain="user", namespace="notes",
                                          summary=content, content=content, timestamp=1))
            proxy.hold.set()   # the COMMIT goes out as this block ends; its answer is held

    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(_outcome(write)))
    thread.start()
    with _admin(pg_url) as admin:
        _wait_for(proxy.held.is_set, "the COMMIT's answer held back")
        _wait_for(lambda: content in _stored(pg_url), "the commit on the server")
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s "
                      "AND state = 'idle'", (app_name,))
    thread.join(30)
    return outcome[0] if outcome else "no answer"


def test_a_commit_whose_answer_is_lost_is_known_committed(pg_url: str, proxy: _Proxy, app_name: str,
                                                          engine: str) -> None:
    """The server committed; the answer never came. Reported as disconnected, the caller would
    write it again (a duplicate); the store asks the server what became of its transaction."""
    store = open_store(_through(pg_url, proxy.port, app_name), busy_timeout_ms=2000)
    try:
        outcome = _commit_whose_answer_is_lost(pg_url, proxy, app_name, store, "committed, answer lost")
        assert outcome is None, outcome
        assert _stored(pg_url) == ["committed, answer lost"]
        with store.transaction():   # and the store goes on
            store._exec("SELECT 1")
    finally:
        store.close()


def test_a_commit_the_server_undid_is_store_disconnected(pg_url: str, pg_store: Any, app_name: str,
                                                         caplog: pytest.LogCaptureFixture, engine: str) -> None:
    """The backend ended while its COMMIT ran (a deferred check still running): nothing stored,
    the caller hears StoreDisconnected (503, try again), the log says why, and the next write is
    served."""
    from nmem.store.records import NewMemory

    caplog.set_level(logging.WARNING, logger="nmem.store")

    with _admin(pg_url) as admin:
        admin.execute(f"SET search_path = {_schema(pg_url)}")
        admin.execute("CREATE FUNCTION slow_check() RETURNS trigger LANGUAGE plpgsql AS "
                      "$$ BEGIN PERFORM pg_sleep(30); RETURN NULL; END $$")
        admin.execute("CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON memories "
                      "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_check()")

        def write() -> None:
            with pg_store.transaction():
                pg_store.insert_memory(NewMemory(uid=uuid.uuid4().hex, domain="user", namespace="notes",
                                                 summary="undone", content="undone", timestamp=1))

        outcome: list[Any] = []
        thread = threading.Thread(target=lambda: outcome.append(_outcome(write)))
        thread.start()
        sql = ("SELECT pid FROM pg_stat_activity WHERE application_name = %s AND wait_event = 'PgSleep'")
        pids: list[int] = []
        _wait_for(lambda: bool(pids.extend(r[0] for r in admin.execute(sql, (app_name,))) or pids), "the COMMIT")
        admin.execute("SELECT pg_terminate_backend(%s)", (pids[0],))
        thread.join(30)
        admin.execute("DROP TRIGGER slow_commit ON memories; DROP FUNCTION slow_check()")
    assert len(outcome) == 1 and isinstance(outcome[0], StoreDisconnected), outcome
    assert _stored(pg_url) == []
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR and r.name == "nmem.store"]
    assert said == ["cannot commit: the database server closed the connection (AdminShutdown 57P01: "
                    "terminating connection due to administrator command)"], said
    with pg_store.transaction():   # and the store goes on
        pg_store._exec("SELECT 1")


@pytest.fixture
def own_role(pg_url: str) -> Iterator[str]:
    """A login role of the test's own (the server trusts it), so that refusing its logins leaves
    every other session on the shared server alone."""
    role = f"nmem_loss_{uuid.uuid4().hex[:8]}"
    with _admin(pg_url) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN SUPERUSER")
    try:
        yield role
    finally:
        with _admin(pg_url) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))
            admin.execute(f"DROP ROLE {role}")


def _as_role(pg_url: str, role: str) -> str:
    """The test server's URL, logging in as `role`."""
    parts = urlsplit(pg_url)
    return urlunsplit((parts.scheme, f"{role}@{parts.hostname}:{parts.port or 5432}", parts.path, parts.query, ""))


def test_the_store_serves_the_first_call_after_the_server_takes_connections_again(
        pg_url: str, own_role: str, engine: str) -> None:
    """While the server refuses connections (a restart, a failover: here its logins refused and
    its backends ended) every call is refused as unavailable, and the first call after it takes
    connections again is served: the pool does not wait out a back-off of its own first."""
    url = _as_role(pg_url, own_role)
    store = open_store(url, busy_timeout_ms=1000)
    try:
        assert store.schema_version() > 0
        refused: list[Any] = []
        with _admin(pg_url) as admin:
            admin.execute(f"ALTER ROLE {own_role} NOLOGIN")
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (own_role,))
            down_until = time.monotonic() + 8   # long enough for the pool to back off past a second
            while time.monotonic() < down_until:
                refused.append(_outcome(store.schema_version))
                time.sleep(0.2)
            admin.execute(f"ALTER ROLE {own_role} LOGIN")
        assert refused and all(isinstance(r, NmemError) and r.http_status == 503 for r in refused), refused
        assert _outcome(store.schema_version) == store.schema_version() > 0
        with store.transaction():
            store._exec("SELECT 1")
    finally:
        store.close()


def test_a_call_that_waits_out_the_servers_refusal_is_served(pg_url: str, own_role: str, engine: str) -> None:
    """A call that began while the server refused connections (its backends ended, its logins
    refused: a failover), and is still waiting when the server takes them again, is served. The
    pool tried to make a connection once, was refused, and made no other while the call waited:
    the store asks it once more, as the pool was not out of connections (before, the call failed
    on "no database connection free", a server starting then exited on it)."""
    url = _as_role(pg_url, own_role)
    store = open_store(url, busy_timeout_ms=3000)
    try:
        assert store.schema_version() > 0
        pool = store._pool
        outcome: list[Any] = []
        with _admin(pg_url) as admin:
            admin.execute(f"ALTER ROLE {own_role} NOLOGIN")
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (own_role,))
            _wait_for(lambda: not admin.execute("SELECT 1 FROM pg_stat_activity WHERE usename = %s",
                                                (own_role,)).fetchall(), "the role's backends ended")
            pool.check()   # the ended connections out of the pool: the call finds it empty
            _wait_for(lambda: pool.get_stats().get("pool_size", 0) == 0, "an empty pool")
            refused = pool.get_stats().get("connections_errors", 0)
            call = threading.Thread(target=lambda: outcome.append(_outcome(store.schema_version)))
            call.start()
            # the pool's one attempt for the call (nothing else asks it for one) was refused
            _wait_for(lambda: pool.get_stats().get("connections_errors", 0) > refused
                      and pool.get_stats().get("requests_waiting", 0) > 0,
                      "the call waiting after the pool's attempt was refused")
            admin.execute(f"ALTER ROLE {own_role} LOGIN")
        call.join(30)
        assert len(outcome) == 1 and outcome[0] == store.schema_version() > 0, outcome
    finally:
        store.close()


def test_a_store_whose_backend_ends_while_it_opens_opens(pg_url: str, app_name: str, engine: str) -> None:
    """A server starting while PostgreSQL ends its backends: the opening's migration check (one
    transaction, under the migration lock that another opener holds here) runs again."""
    from nmem.store.postgres.connection import MIGRATION_LOCK

    opened: list[Any] = []
    with _admin(pg_url) as admin, _admin(pg_url) as opener:
        opener.execute("BEGIN")
        opener.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        thread = threading.Thread(target=lambda: opened.append(_outcome(
            lambda: open_store(f"{pg_url}&application_name={quote(app_name)}", busy_timeout_ms=2000))))
        thread.start()
        _end_waiting_on_a_lock(admin, app_name)
        opener.execute("COMMIT")
        thread.join(30)
    assert len(opened) == 1 and not isinstance(opened[0], NmemError | str), opened
    try:
        assert opened[0].schema_version() > 0
    finally:
        opened[0].close()
