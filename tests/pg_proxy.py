"""A real TCP relay between nmem and PostgreSQL that can cut a connection at its next COMMIT, as a
dropped link or a crashed host does: before the COMMIT reaches the server (which then aborts the
transaction it finds abandoned) or after (the server commits; its answer never comes back).

The relay reads PostgreSQL's wire protocol from the client: a COMMIT is a simple Query `COMMIT`, or
the Bind of a statement psycopg prepared from `COMMIT` (it prepares a statement run five times on
one connection). The URL through it turns TLS and GSS encryption off, so the messages can be read.
"""

from __future__ import annotations

import socket
import struct
import threading
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

Cut = Literal["before", "after"]
SLOW_COMMIT_LOCK = 0x636F6D6D   # the advisory lock a slowed COMMIT waits for ("comm")
_UNTYPED = {80877103, 80877104, 80877102, 196608}   # SSL, GSS encryption, cancel requests; startup


def _cstring(data: bytes, at: int) -> tuple[bytes, int]:
    end = data.index(b"\0", at)
    return data[at:end], end + 1


class _Link:
    """One client connection and its connection to the server."""

    def __init__(self, relay: PgProxy, client: socket.socket, server: socket.socket) -> None:
        self.relay, self.client, self.server = relay, client, server
        self.buffer = b""
        self.started = False                      # the startup message went through
        self.commit_statements: set[bytes] = set()  # names of statements prepared from COMMIT
        self.answer_lost = False                  # the server's answers are dropped from now on

    def _is_commit(self, kind: bytes, body: bytes) -> bool:
        if kind == b"Q":
            return body.rstrip(b"\0").strip().upper() in (b"COMMIT", b"COMMIT;")
        if kind == b"P":
            name, at = _cstring(body, 0)
            query, _ = _cstring(body, at)
            if query.strip().upper() in (b"COMMIT", b"COMMIT;"):
                self.commit_statements.add(name)
            return False
        if kind == b"B":
            _, at = _cstring(body, 0)
            statement, _ = _cstring(body, at)
            return statement in self.commit_statements
        return False

    def _messages(self) -> tuple[list[tuple[bytes, bytes, bytes]], bytes]:
        """The complete messages in the buffer (kind, body, raw bytes) and what is left of it."""
        data, out, at = self.buffer, [], 0
        while True:
            if not self.started:
                if len(data) - at < 8:
                    break
                length, code = struct.unpack("!II", data[at:at + 8])
                if len(data) - at < length:
                    break
                out.append((b"", b"", data[at:at + length]))
                self.started = code == 196608 or code not in _UNTYPED
                at += length
                continue
            if len(data) - at < 5:
                break
            length = struct.unpack("!I", data[at + 1:at + 5])[0]
            if len(data) - at < 1 + length:
                break
            out.append((data[at:at + 1], data[at + 5:at + 1 + length], data[at:at + 1 + length]))
            at += 1 + length
        return out, data[at:]

    def from_client(self) -> None:
        try:
            while data := self.client.recv(65536):
                self.buffer += data
                messages, self.buffer = self._messages()
                out = b""
                for kind, body, raw in messages:
                    cut = self._is_commit(kind, body) and self.relay.take_cut()
                    if cut == "before":
                        self.close()   # the COMMIT never reaches the server: it finds its client gone
                        self.relay.done.set()
                        return
                    out += raw
                    if cut == "after":
                        self.answer_lost = True
                if out:
                    self.server.sendall(out)
                if self.answer_lost:
                    _shut(self.client)   # the client hears its connection end; the server runs the COMMIT
                    self.relay.done.set()
                    return
        except OSError:
            pass
        if not self.answer_lost:
            self.close()

    def from_server(self) -> None:
        try:
            while data := self.server.recv(65536):
                if self.answer_lost:
                    break   # the server answered (it committed): the answer is dropped
                self.client.sendall(data)
        except OSError:
            pass
        self.close()

    def close(self) -> None:
        for end in (self.client, self.server):
            _shut(end)


def _shut(end: socket.socket) -> None:
    try:
        end.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class PgProxy:
    """Relays every connection to `host:port`; `arm(cut, skip)` cuts the connection of the COMMIT
    that comes after `skip` others (counted over every connection), once."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.cut: Cut | None = None
        self.skip = 0
        self.done = threading.Event()    # the armed cut happened
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, cut: Cut, skip: int = 0) -> None:
        with self.lock:
            self.cut, self.skip = cut, skip
            self.done.clear()

    def take_cut(self) -> Cut | None:
        """At a COMMIT: the cut armed for it, if any (then disarmed)."""
        with self.lock:
            if self.cut is not None and self.skip:
                self.skip -= 1
                return None
            cut, self.cut = self.cut, None
            return cut

    def url(self, pg_url: str) -> str:
        """`pg_url` through the relay (its options kept), unencrypted."""
        parts = urlsplit(pg_url)
        auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        query = "&".join(q for q in (parts.query, "sslmode=disable&gssencmode=disable") if q)
        return urlunsplit((parts.scheme, f"{auth}127.0.0.1:{self.port}", parts.path, query, ""))

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            link = _Link(self, client, server)
            with self.lock:
                self.sockets += (client, server)
            threading.Thread(target=link.from_client, daemon=True).start()
            threading.Thread(target=link.from_server, daemon=True).start()

    def close(self) -> None:
        self.listener.close()
        with self.lock:
            for end in self.sockets:
                _shut(end)
                end.close()


def proxy_for(pg_url: str) -> PgProxy:
    parts = urlsplit(pg_url)
    return PgProxy(parts.hostname or "127.0.0.1", parts.port or 5432)


class SlowCommits:
    """COMMITs of writes to `table` wait, in progress on the server, while the test holds a lock: a
    deferred constraint trigger takes it at COMMIT (as a synchronous replica's wait, or a slow
    disk, keeps a COMMIT running)."""

    def __init__(self, pg_url: str, table: str) -> None:
        import psycopg

        self.admin = psycopg.connect(pg_url, autocommit=True)
        self.table = table
        self.admin.execute(
            "CREATE FUNCTION wait_at_commit() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN PERFORM pg_advisory_xact_lock_shared({SLOW_COMMIT_LOCK}); RETURN NULL; END $$")
        self.admin.execute(f"CREATE CONSTRAINT TRIGGER wait_at_commit AFTER INSERT ON {table} "
                           "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION wait_at_commit()")

    def hold(self) -> None:
        self.admin.execute("SELECT pg_advisory_lock(%s)", (SLOW_COMMIT_LOCK,))

    def release(self) -> None:
        self.admin.execute("SELECT pg_advisory_unlock(%s)", (SLOW_COMMIT_LOCK,))

    def close(self) -> None:
        self.admin.execute("SELECT pg_advisory_unlock_all()")
        self.admin.execute(f"DROP TRIGGER wait_at_commit ON {self.table}; DROP FUNCTION wait_at_commit()")
        self.admin.close()
