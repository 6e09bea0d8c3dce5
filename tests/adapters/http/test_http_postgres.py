"""A real `nmem serve --transport http` on a PostgreSQL store: what one search costs the database,
read back from the server's own `/metrics` (the connections its store took from its pool: one
for each statement a search sends, every statement of a search running outside a transaction)."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import record
from mcp_support import http_server
from nmem.config import load_settings
from nmem.service.api import Service

T0 = 1_790_000_000
QUERY = "why does the billing export retry forever"
QUIET = {"NMEM_MCP_POLL_MS": "600000", "NMEM_SERVER_DRAIN_MS": "0"}   # no reads of the server's own meanwhile


def get(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as response:
        body = response.read().decode()
    return json.loads(body) if path.startswith("/api/") else body


def pool(port: int) -> dict[str, float]:
    """The store pool's samples of one scrape of `/metrics`."""
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(get(port, "/metrics")):
        for sample in family.samples:
            if sample.name.startswith("nmem_store_pool_"):
                found[sample.name + "".join(f":{v}" for v in sample.labels.values())] = sample.value
    return found


def taken(port: int) -> int:
    return int(pool(port)["nmem_store_pool_requests_total:taken"])


def seed(home: Path, url: str) -> None:
    """Sessions in projects billing and web that answer QUERY, and an org memory that does."""
    service = Service.open(load_settings({"NMEM_HOME": str(home), "NMEM_STORE_URL": url}))
    try:
        for n, (sid, cwd) in enumerate((("s1", "/work/billing"), ("s2", "/work/web"), ("s3", "/work/billing"))):
            t = T0 + 100 * n
            record(service, "UserPromptSubmit", now=t, session_id=sid, cwd=cwd,
                   prompt="the billing export keeps retrying forever, why?")
            record(service, "PostToolUse", now=t + 10, session_id=sid, cwd=cwd, tool_name="Bash",
                   tool_input={"command": "python export.py --billing"},
                   tool_response={"stdout": "billing export failed, retry 12 of forever", "exit_code": 1})
        service.remember("The billing export retries forever because the queue never acks a timeout.",
                         summary="billing export retry loop", namespace="decisions", domain="org", at=T0 + 500)
    finally:
        service.close()


def statements(port: int, path: str, scrape: int) -> tuple[int, Any]:
    """Connections the store took for one request (the scrape's own taken away), and its answer."""
    before = taken(port)
    answer = get(port, path)
    return taken(port) - before - scrape, answer


@pytest.mark.postgres
def test_a_search_for_the_servers_project_without_sessions_reads_no_more_than_one_of_every_project(
        tmp_path: Path, pg_url: str) -> None:
    """The server's own project (its working directory's, here `home`) has no session: a search
    that names no project puts that project's hits first, and reads for them only the memories it
    may have (its own, the user's, the org's) after one look for a session, not every scope
    filtered to a project that holds none (17 statements against 9 for the same question on
    100k rows, before)."""
    home = tmp_path / "home"
    home.mkdir()
    seed(home, pg_url)
    with http_server(home, env={"NMEM_STORE_URL": pg_url, **QUIET}) as server:
        port = server.port
        everywhere = get(port, f"/api/v1/search?query={QUERY.replace(' ', '+')}&project=*")   # warm: plans, counts
        first = get(port, f"/api/v1/search?query={QUERY.replace(' ', '+')}")
        a, b, c = taken(port), taken(port), taken(port)
        scrape = b - a
        assert c - b == scrape, "the server reads nothing of its own between scrapes"
        n_all, again = statements(port, f"/api/v1/search?query={QUERY.replace(' ', '+')}&project=*", scrape)
        n_first, own_first = statements(port, f"/api/v1/search?query={QUERY.replace(' ', '+')}", scrape)
        assert again == everywhere and own_first == first
        kinds = [(r["kind"], r["id"]) for r in own_first["results"]]
        assert kinds[0][0] == "memory", "the org memory belongs to every project: the server's project's first hit"
        assert sorted(kinds) == sorted((r["kind"], r["id"]) for r in everywhere["results"])
        assert n_all > 0
        assert n_first <= n_all + 2, (n_first, n_all)   # one look for a session, one for the memories
        gauges = pool(port)
        assert gauges["nmem_store_pool_connections:max"] >= gauges["nmem_store_pool_connections:open"] >= 1
        assert gauges["nmem_store_pool_connections:waiting"] == 0


@pytest.mark.postgres
def test_the_read_threads_and_the_writer_have_their_connections_before_the_first_request(
        tmp_path: Path, pg_url: str) -> None:
    """A server just started opens a pooled connection for each read thread and the writer at
    once, in the background: the first burst of requests neither waits while the pool opens them
    one at a time nor pays for their backends' start (before, the pool held one until asked)."""
    home = tmp_path / "home"
    home.mkdir()
    with http_server(home, env={"NMEM_STORE_URL": pg_url, "NMEM_HTTP_THREADS": "3", **QUIET}) as server:
        deadline = time.monotonic() + 30
        gauges = pool(server.port)
        while gauges["nmem_store_pool_connections:idle"] < 3 + 1 and time.monotonic() < deadline:
            time.sleep(0.1)
            gauges = pool(server.port)
        assert gauges["nmem_store_pool_connections:idle"] >= 3 + 1, gauges


def taken_at_start(home: Path, url: str, threads: int) -> int:
    """Connections a server just started took from its pool before its first request's."""
    with http_server(home, env={"NMEM_STORE_URL": url, "NMEM_HTTP_THREADS": str(threads), **QUIET}) as server:
        deadline = time.monotonic() + 30
        while True:
            try:
                return taken(server.port)
            except OSError:
                assert time.monotonic() < deadline, "the server did not answer"
                time.sleep(0.05)


@pytest.mark.postgres
def test_every_read_thread_has_searched_before_the_first_request(tmp_path: Path, pg_url: str) -> None:
    """A server warms each read thread with a search before it answers (`StoreThreads.warm`): the
    first burst of requests does not meet every thread, connection and backend cold at once. Four
    read threads take at least three searches' more connections than one thread does.

    A search sends one statement at least; how many more depends on what a concurrent search
    on another thread has just read (the store's sizes, its statistics), so the bound counts one
    a search. The store's first server also takes connections once for the store itself (~4 of
    24 here): a first start settles it, and the two starts compared both come after it."""
    home = tmp_path / "home"
    home.mkdir()
    seed(home, pg_url)
    taken_at_start(home, pg_url, 1)
    one = taken_at_start(home, pg_url, 1)
    four = taken_at_start(home, pg_url, 4)
    assert four - one >= 3, (one, four)
