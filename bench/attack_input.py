"""`make attack`, area input: hostile files and request bodies (bench/attack.py drives it).

Every scenario runs real processes: `nmem import …` as a subprocess, and `nmem serve
--transport http` on a loopback port for the HTTP ones, each child under a memory limit
(RLIMIT_AS) and a timeout, so a regression shows as an error row instead of eating the
machine. `errors` counts outcomes that are not the clear refusal (or the clean import) the
scenario expects: a hang, a crash, a traceback, a 500, an unbounded connection; `lost` counts
valid records of a hostile file that did not arrive, and acknowledged HTTP writes that are not
in the database afterwards.

The PostgreSQL scenario needs NMEM_TEST_PG (a server it may create a schema on); it ends the
server's backends of the nmem server's own connections with `pg_terminate_backend` while
requests run, never restarting the cluster others share.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from attack import Row

CHILD_MEMORY = 1536 * 1024 * 1024     # address space of each import child
SERVER_MEMORY = 3 * 1024 * 1024 * 1024
TIMEOUT = 60.0
CSRF = {"X-Nmem-CSRF": "1", "Content-Type": "application/json"}
DEEP = 5000                           # past Python's recursion limit, as the attacks used


# The child sets its own address-space limit, then becomes `python -m nmem ...` (exec keeps it):
# no preexec_fn, which is unsafe beside threads.
_LIMITED = ("import os, resource, sys; m = int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_AS, (m, m)); "
            "os.execv(sys.executable, [sys.executable, '-m', 'nmem', *sys.argv[2:]])")


def _argv(memory: int, *args: str) -> list[str]:
    return [sys.executable, "-c", _LIMITED, str(memory), *args]


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NMEM_")}
    env.update(NMEM_HOME=str(home), NMEM_FORMAT="json", **extra)
    return env


def _nmem(args: list[str], env: dict[str, str], *, stdin: Any = subprocess.DEVNULL,
          timeout: float = TIMEOUT) -> tuple[int | None, str, str]:
    """(exit code, stdout, stderr) of `nmem ARGS`; exit code None when it had to be killed."""
    try:
        done = subprocess.run(_argv(CHILD_MEMORY, *args), env=env, stdin=stdin, capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None, "", "timed out"
    return done.returncode, done.stdout, done.stderr


def _refused(result: tuple[int | None, str, str], codes: tuple[int, ...] = (2, 11)) -> bool:
    """A clear refusal: the expected exit code and one line, no traceback."""
    code, _, err = result
    return code in codes and "Traceback" not in err


def _memories(env: dict[str, str]) -> list[str]:
    code, out, _ = _nmem(["export", "--format", "jsonl"], env)
    if code != 0:
        return []
    return [json.loads(line)["content"] for line in out.splitlines()[1:] if line.strip()]


# -- files ---------------------------------------------------------------------------------------

def yaml_bomb(work: Path) -> Iterator[Row]:
    from attack import Row

    levels = "\n".join(f"l{i + 1}: &l{i + 1} [" + ", ".join([f"*l{i}"] * 9) + "]" for i in range(9))
    path = work / "bomb.yaml"
    path.write_text('l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n' + levels + "\n")
    result = _nmem(["import", str(path)], _env(work / "bomb-home"))
    ok = _refused(result) and "alias" in result[2]
    yield Row("input", "YAML alias bomb (9^10 nodes) through nmem import", 1, errors=0 if ok else 1,
              note="" if ok else f"exit {result[0]}: {result[2].strip()[-120:]}")


def non_regular(work: Path) -> Iterator[Row]:
    from attack import Row

    fifo = work / "memory.jsonl"
    os.mkfifo(fifo)
    env = _env(work / "fifo-home")
    tries = [["import", str(fifo)], ["import", "mcp-memory", str(fifo)], ["import", "--format", "jsonl", "/dev/zero"],
             ["import", "mcp-memory", "/dev/zero"], ["import", "claude-code", str(fifo)],
             ["import", "claude-mem", str(fifo)], ["import", "codex", str(fifo)]]
    bad = [" ".join(args[1:]) for args in tries if not _refused(_nmem(args, env))]
    yield Row("input", "FIFO and /dev/zero given to every importer", len(tries), errors=len(bad),
              note="; ".join(bad)[:200])


def oversized(work: Path) -> Iterator[Row]:
    from attack import Row

    env = _env(work / "big-home", NMEM_IMPORT_MAX_FILE=str(64 * 1024 * 1024))
    sparse = work / "huge.jsonl"
    with sparse.open("wb") as fh:
        fh.truncate(200 * 1024 * 1024)   # larger than the cap, costs no disk
    line = work / "long-line.jsonl"
    line.write_text(json.dumps({"content": "kept"}) + "\n" + '{"content": "' + "x" * (17 * 1024 * 1024) + '"}\n')
    bad = 0
    bad += not _refused(_nmem(["import", str(sparse)], env), (11,))
    bad += not _refused(_nmem(["import", "mcp-memory", str(sparse)], env), (11,))
    with open("/dev/zero", "rb") as zero:
        bad += not _refused(_nmem(["import", "--format", "jsonl", "-"], env, stdin=zero), (11,))
    code, _, err = _nmem(["import", str(line)], env)
    bad += not (code == 0 and "longer than import.max_line_bytes" in err)
    lost = 0 if "kept" in _memories(env) else 1
    yield Row("input", "files past import.max_file_bytes (file, mcp-memory, stdin) and a 17 MB line", 4,
              lost=lost, errors=bad)


def deep_nesting(work: Path, quick: bool) -> Iterator[Row]:
    """One record nested DEEP levels in each format beside a good one: the good one imported,
    the deep one skipped and reported (a whole JSON document too deep to parse: refused)."""
    from attack import Row

    deep = "[" * DEEP + "]" * DEEP
    files = {
        "deep.jsonl": json.dumps({"content": "good jsonl"}) + "\n" + '{"content": "bad", "tags": ' + deep + "}\n",
        "deep.json": '[{"content": "good json"}, {"content": "bad", "tags": ' + "[" * 500 + "]" * 500 + "}]",
        "deep.yaml": "- content: good yaml\n- content: bad\n  tags: " + "[" * 900 + "]" * 900 + "\n",
        "deep.md": ("<!-- nmem-export version=1 -->\n# nmem export\n\n<!-- nmem:memory -->\n## good\n\n```yaml\n"
                    "domain: user\n```\n\ngood markdown\n\n<!-- nmem:memory -->\n## bad\n\n```yaml\ntags: "
                    + "[" * 900 + "]" * 900 + "\n```\n\nbad\n"),
    }
    env = _env(work / "deep-home")
    bad = lost = 0
    for name, text in files.items():
        (work / name).write_text(text)
        code, _, err = _nmem(["import", str(work / name)], env)
        bad += not (code == 0 and "skipped" in err and "Traceback" not in err)
    whole = work / "whole.json"
    whole.write_text(deep)
    bad += not _refused(_nmem(["import", str(whole)], env))
    kept = _memories(env)
    lost += sum(1 for want in ("good jsonl", "good json", "good yaml", "good markdown") if want not in kept)
    # Claude Code: a directory of two transcripts, one with a line nested DEEP levels.
    root = work / "projects" / "-work-demo"
    root.mkdir(parents=True)
    for n, extra in enumerate(("", '{"type": "user", "message": ' + deep + "}\n")):
        sid = str(uuid.UUID(int=n + 1))
        lines = [{"type": "user", "sessionId": sid, "cwd": "/work/demo", "timestamp": f"2026-01-0{n + 1}T10:00:00Z",
                  "uuid": f"u{n}", "message": {"role": "user", "content": f"prompt of session {n}"}}]
        (root / f"{sid}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines) + extra)
    code, out, err = _nmem(["import", "claude-code", str(root.parent)], env)
    sessions = json.loads(out).get("imported_sessions", 0) if code == 0 else 0
    bad += code != 0 or "Traceback" in err
    lost += 2 - sessions
    yield Row("input", "deep nesting: jsonl, json, yaml, markdown, whole JSON doc, claude-code dir", 6,
              lost=lost, errors=bad)


def import_speed(work: Path, quick: bool) -> Iterator[Row]:
    from attack import Row

    count, same = (3000, 30_000) if quick else (3000, 300_000)
    notes = work / "notes.jsonl"
    notes.write_text("".join(json.dumps({"domain": "user", "namespace": "learnings",
                                         "content": f"hand-written note {i}"}) + "\n" for i in range(count)))
    repeated = work / "same.jsonl"
    repeated.write_text((json.dumps({"domain": "user", "content": "the same note"}) + "\n") * same)
    env = _env(work / "speed-home")
    figures, bad = [], 0
    for path, expect in ((notes, count), (repeated, 1)):
        began = time.monotonic()
        code, out, _ = _nmem(["import", str(path)], env, timeout=300)
        figures.append(f"{path.stat().st_size // 1024} KB in {time.monotonic() - began:.1f} s")
        added = json.loads(out)["imported"]["memories"]["added"] if code == 0 else -1
        bad += added != expect
    yield Row("input", f"import {count} hand-written memories, then {same} identical lines", 2, errors=bad,
              note="; ".join(figures))


# -- HTTP ----------------------------------------------------------------------------------------

def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _server(env: dict[str, str], host: str = "127.0.0.1") -> Iterator[str]:
    """`nmem serve --transport http` on a free loopback port; yields its base URL."""
    import httpx2

    port = _port()
    log = Path(env["NMEM_HOME"]).with_suffix(".serve.log")
    with log.open("wb") as out:
        proc = subprocess.Popen(_argv(SERVER_MEMORY, "serve", "--transport", "http", "--host", host, "--port",
                                      str(port)), env=env, stdout=subprocess.DEVNULL, stderr=out)
    base = f"http://{host}:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx2.get(f"{base}/health", timeout=10)
                break  # it answers (whatever it answers is the scenario's business)
            except httpx2.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"nmem serve did not start: {log.read_text()[-300:]}")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _body_routes() -> list[tuple[str, str]]:
    from nmem.adapters.http import openapi

    return [(e.method, e.openapi_path.replace("{", "").replace("}", "") if "{" in e.openapi_path else e.openapi_path)
            for e in openapi.endpoints() if e.body is not None or e.body_schema is not None]


def deep_bodies(work: Path) -> Iterator[Row]:
    import httpx2

    from attack import Row

    deep = "[" * 100_000 + "]" * 100_000
    routes = _body_routes()
    bad: list[str] = []
    with _server(_env(work / "body-home")) as base:
        for method, path in routes:
            for body in ('{"content": ' + deep + "}", deep):
                status = httpx2.request(method, base + path, content=body, headers=CSRF, timeout=30).status_code
                if status != 400:
                    bad.append(f"{method} {path}: {status}")
    yield Row("input", f"deeply nested JSON bodies on every body route ({len(routes)})", 2 * len(routes),
              errors=len(bad), note="; ".join(bad)[:200])


def loopback_host(work: Path) -> Iterator[Row]:
    import httpx2

    from attack import Row

    bad: list[str] = []
    with _server(_env(work / "host-home"), host="127.0.0.2") as base:
        port = base.rsplit(":", 1)[1]
        for host, want in ((f"127.0.0.2:{port}", 200), ("127.0.0.2", 200), (f"localhost:{port}", 200),
                           ("evil.example", 421)):
            status = httpx2.get(f"{base}/health", headers={"Host": host}, timeout=10).status_code
            if status != want:
                bad.append(f"Host {host}: {status}")
    yield Row("input", "server on 127.0.0.2: its own address and loopback names as Host", 4, errors=len(bad),
              note="; ".join(bad))


def websocket_cap(work: Path) -> Iterator[Row]:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    from attack import Row

    cap, tries = 4, 12
    opened, refused, bad = 0, 0, 0
    with _server(_env(work / "ws-home", NMEM_HTTP_MAX_CONNECTIONS=str(cap))) as base, ExitStack() as stack:
        url = base.replace("http://", "ws://") + "/ws"
        for _ in range(tries):
            try:
                stack.enter_context(connect(url, open_timeout=30))
                opened += 1
            except InvalidStatus as exc:
                refused += 1
                bad += exc.response.status_code != 503
            except (OSError, TimeoutError):
                bad += 1
        over = max(0, opened - cap)
    yield Row("input", f"{tries} WebSockets against http.max_connections={cap}", tries, errors=over + bad,
              note=f"{opened} open, {refused} refused with 503")


def postgres_restart(work: Path, quick: bool) -> Iterator[Row]:
    from attack import Row

    base = os.environ.get("NMEM_TEST_PG", "")
    if not base:
        yield Row("input", "PostgreSQL connections ended mid-run (skipped: NMEM_TEST_PG unset)", 0)
        return
    import httpx2
    import psycopg

    schema, app, url = _pg_schema(base)
    admin = psycopg.connect(base, autocommit=True)
    admin.execute(f"CREATE SCHEMA {schema}")
    requests = 60 if quick else 300
    acked: list[str] = []
    statuses: dict[int, int] = {}
    unclear = 0
    try:
        with _server(_env(work / "pg-home", NMEM_STORE_URL=url)) as base_url, \
                httpx2.Client(base_url=base_url, headers=CSRF, timeout=30) as client:
            for i in range(requests):
                if i % 5 == 2:
                    admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                  "WHERE application_name = %s", (app,))
                text = f"written through a dropped connection {i}"
                try:
                    response = client.post("/api/v1/memories", json={"content": text, "domain": "user"})
                except httpx2.TransportError:  # no answer at all (a hung or dropped request)
                    unclear += 1
                    statuses[0] = statuses.get(0, 0) + 1
                    continue
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                if response.status_code == 201:
                    acked.append(text)
                elif response.status_code != 503 or "retry-after" not in response.headers:
                    unclear += 1
                if i % 3 == 0:
                    try:
                        status = client.get("/api/v1/memories", params={"query": "dropped"}).status_code
                    except httpx2.TransportError:
                        status = 0
                    if status not in (200, 503):
                        unclear += 1
        stored = {row[0] for row in admin.execute(f"SELECT content FROM {schema}.memories")}
        lost = sum(1 for text in acked if text not in stored)
    finally:
        admin.execute(f"DROP SCHEMA {schema} CASCADE")
        admin.close()
    note = ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items()))
    if unclear:   # what the server said of its first failure, for whoever reads the table
        note += _first_error(work, "pg-home")
    yield Row("input", f"PostgreSQL backends ended under {requests} writes (pg_terminate_backend)", requests,
              lost=lost, errors=unclear, note=note)


def _pg_schema(base: str) -> tuple[str, str, str]:
    """A fresh schema's name, an application name for the nmem server's connections, and the URL
    that names both."""
    schema, app = f"nmem_attack_{uuid.uuid4().hex[:12]}", f"nmem-attack-{uuid.uuid4().hex[:8]}"
    options = quote(f"-csearch_path={schema}", safe="")
    return schema, app, f"{base}{'&' if '?' in base else '?'}options={options}&application_name={app}"


def _first_error(work: Path, home: str) -> str:
    """The server's first ERROR line, for whoever reads the table."""
    log = (work / home).with_suffix(".serve.log")
    said = [line for line in log.read_text(errors="replace").splitlines() if " ERROR " in line]
    return f"; server: {said[0][:300]}" if said else ""


class _Storm:
    """Writers and readers against a server while a thread ends its PostgreSQL backends at random
    moments (whatever each was doing: idle in the pool, mid-statement, in a transaction, under
    COMMIT, connecting, under the change watch's read), counting every answer."""

    def __init__(self, base_url: str, admin: Any, app: str) -> None:
        import threading

        self.base_url, self.admin, self.app = base_url, admin, app
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.statuses: dict[int, int] = {}
        self.acked: list[str] = []
        self.unclear = self.ended = 0

    def end_backends(self, seed: int) -> None:
        import random

        pick = random.Random(seed)
        while not self.stop.wait(pick.random() * 0.04):
            rows = self.admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                      "WHERE application_name = %s", (self.app,)).fetchall()
            self.ended += len(rows)

    def write_and_read(self, who: int) -> None:
        import httpx2

        with httpx2.Client(base_url=self.base_url, headers=CSRF, timeout=30) as client:
            i = 0
            while not self.stop.is_set():
                text = f"stormed {who} {i}"
                status = _post_memory(client, text)
                read = _get_status(client, "/api/v1/memories", {"query": "stormed"}) if i % 3 == 0 else 200
                with self.lock:
                    self.statuses[status] = self.statuses.get(status, 0) + 1
                    self.acked += [text] if status == 201 else []
                    self.unclear += status not in (201, 503)   # -503: no Retry-After; 0: no answer
                    self.unclear += read not in (200, 503)
                i += 1


def _post_memory(client: Any, text: str) -> int:
    """201, 503 when it came with Retry-After, -503 without; 0 when no answer came."""
    import httpx2

    try:
        response = client.post("/api/v1/memories", json={"content": text, "domain": "user"})
    except httpx2.TransportError:
        return 0
    if response.status_code == 503 and "retry-after" not in response.headers:
        return -503
    return int(response.status_code)


def _counts(statuses: dict[int, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items()))


def _get_status(client: Any, path: str, params: dict[str, str]) -> int:
    import httpx2

    try:
        return int(client.get(path, params=params).status_code)
    except httpx2.TransportError:
        return 0


def postgres_storm(work: Path, quick: bool) -> Iterator[Row]:
    """Backends ended at random moments from a thread while writers run, the change watch polling
    every 50 ms; then every write must be stored again at once: a server left broken (once in CI:
    48 writes answered 500 in a row) shows as errors after the storm."""
    import threading

    from attack import Row

    base = os.environ.get("NMEM_TEST_PG", "")
    if not base:
        yield Row("input", "PostgreSQL backends ended at random moments (skipped: NMEM_TEST_PG unset)", 0)
        return
    import httpx2
    import psycopg

    schema, app, url = _pg_schema(base)
    admin = psycopg.connect(base, autocommit=True)
    admin.execute(f"CREATE SCHEMA {schema}")
    seconds, writers, after = (3.0, 3, 20) if quick else (20.0, 6, 50)
    after_statuses: dict[int, int] = {}
    hogs: list[subprocess.Popen[bytes]] = []
    try:
        if not quick:   # a machine slowed as CI's under the whole suite: one spinning process a core
            hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
        with _server(_env(work / "storm-home", NMEM_STORE_URL=url, NMEM_MCP_POLL_MS="50")) as base_url:
            storm = _Storm(base_url, psycopg.connect(base, autocommit=True), app)
            threads = [threading.Thread(target=storm.write_and_read, args=(n,)) for n in range(writers)]
            threads.append(threading.Thread(target=storm.end_backends, args=(seconds,)))
            for thread in threads:
                thread.start()
            time.sleep(seconds)
            storm.stop.set()
            for thread in threads:
                thread.join(60)
            storm.admin.close()
            for hog in hogs:
                hog.kill()
            with httpx2.Client(base_url=base_url, headers=CSRF, timeout=30) as client:
                for i in range(after):   # the storm is over: every write is stored, from the first
                    status = _post_memory(client, f"after the storm {i}")
                    after_statuses[status] = after_statuses.get(status, 0) + 1
                    storm.acked += [f"after the storm {i}"] if status == 201 else []
        stored = [row[0] for row in admin.execute(f"SELECT content FROM {schema}.memories")]
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        admin.execute(f"DROP SCHEMA {schema} CASCADE")
        admin.close()
    lost = len(set(storm.acked) - set(stored))
    twice = len(stored) - len(set(stored))
    broken = after - after_statuses.get(201, 0)
    note = (f"{storm.ended} backends ended; during: {_counts(storm.statuses)}; after: {_counts(after_statuses)}; "
            f"stored twice: {twice}")
    if storm.unclear or broken or twice:
        note += _first_error(work, "storm-home")
    yield Row("input", f"PostgreSQL backends ended at random moments under {writers} writers, then {after} writes",
              sum(storm.statuses.values()) + after, lost=lost, errors=storm.unclear + broken + twice, note=note)


def scenarios(work: Path, quick: bool) -> Iterator[Row]:
    from attack import Row

    runs: list[Callable[[], Iterator[Row]]] = [
        lambda: yaml_bomb(work), lambda: non_regular(work), lambda: oversized(work),
        lambda: deep_nesting(work, quick), lambda: import_speed(work, quick), lambda: deep_bodies(work),
        lambda: loopback_host(work), lambda: websocket_cap(work), lambda: postgres_restart(work, quick),
        lambda: postgres_storm(work, quick),
    ]
    for number, run in enumerate(runs, start=1):
        try:
            yield from run()
        except Exception as exc:  # a scenario that broke down is an error row, not the end of the table
            yield Row("input", f"scenario {number} broke down", 1, errors=1, note=f"{type(exc).__name__}: {exc}"[:200])
