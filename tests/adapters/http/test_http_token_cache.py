"""A team server keeps a live token's check (`http.token_cache_ms`), and a revocation still
refuses the token from the next request: through the server on any of its workers, or by
`nmem token revoke` on the server's home. The kept time is set to ten minutes here, so a refusal
can only come from the revocation reaching every worker (the home's stamp), never from a kept
check running out. On SQLite and on PostgreSQL, with `--workers 2`; which worker served a
connection is read from the kernel, so every worker is seen to refuse."""

from __future__ import annotations

import http.client
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_http_workers import serving_pid, wait_healthy, workers_of

from conftest import run_nmem
from mcp_support import HttpServer, child_env, http_server
from nmem.adapters.http.team import TeamAuth
from nmem.store import open_store
from nmem.team import accounts, stamp
from store_engines import both_engines

__all__ = ["both_engines"]
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find the worker")]
KEPT_MS = "600000"


@dataclass
class Team:
    server: HttpServer
    pids: list[int]
    admin: str
    spare: str      # carol's token that the tests revoke
    other: str      # carol's other token: never revoked
    spare_id: int


def cli(home: Path, store_url: str, *args: str) -> str:
    done = run_nmem(list(args), env=child_env(home, NMEM_STORE_URL=store_url))
    assert done.returncode == 0, done.stderr
    return done.stdout


def call(port: int, token: str, method: str, path: str) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, headers={"Authorization": f"Bearer {token}"})
        response = conn.getresponse()
        body = response.read()
        return response.status, json.loads(body) if body else None
    finally:
        conn.close()


def on_every_worker(team: Team, token: str) -> dict[int, set[int]]:
    """`GET /api/v1/status` with `token` on new connections until every worker answered twice:
    the statuses each worker gave."""
    port = team.server.port
    seen: dict[int, list[int]] = {pid: [] for pid in team.pids}
    for _ in range(200):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            conn.connect()   # which worker took it, before a refusal closes it
            pid = serving_pid(conn.sock, port, team.pids)
            conn.request("GET", "/api/v1/status", headers={"Authorization": f"Bearer {token}"})
            response = conn.getresponse()
            response.read()
            seen[pid].append(response.status)
        finally:
            conn.close()
        if all(len(statuses) >= 2 for statuses in seen.values()):
            return {pid: set(statuses) for pid, statuses in seen.items()}
    raise AssertionError(f"200 connections never reached every worker twice: {seen}")


@pytest.fixture
def team(tmp_path: Path, store_url: str) -> Iterator[Team]:
    home = tmp_path / "home"
    home.mkdir()
    cli(home, store_url, "user", "add", "alice", "--admin")
    cli(home, store_url, "user", "add", "carol")
    admin = cli(home, store_url, "token", "create", "alice").strip()
    spare = cli(home, store_url, "token", "create", "carol").strip()
    other = cli(home, store_url, "token", "create", "carol").strip()
    listed = json.loads(cli(home, store_url, "token", "list", "--user", "carol", "--format", "json"))["tokens"]
    spare_id = min(t["id"] for t in listed)
    with http_server(home, "--workers", "2",
                     env={"NMEM_STORE_URL": store_url, "NMEM_HTTP_TOKEN_CACHE_MS": KEPT_MS}) as server:
        pids = workers_of(server, 2)
        wait_healthy(server.port)
        team = Team(server, pids, admin, spare, other, spare_id)
        assert on_every_worker(team, spare) == {pid: {200} for pid in pids}   # every worker keeps its check
        yield team


def test_a_token_revoked_through_one_worker_is_refused_by_every_worker_from_the_next_request(team: Team) -> None:
    status, body = call(team.server.port, team.admin, "DELETE", f"/api/v1/tokens/{team.spare_id}")
    assert status == 200 and body == {"revoked": 1}, body
    assert on_every_worker(team, team.spare) == {pid: {401} for pid in team.pids}
    assert on_every_worker(team, team.other) == {pid: {200} for pid in team.pids}   # her other token lives


def test_a_token_revoked_by_the_cli_on_the_servers_home_is_refused_by_every_worker_at_once(
        team: Team, store_url: str) -> None:
    cli(team.server.home, store_url, "token", "revoke", str(team.spare_id))
    assert on_every_worker(team, team.spare) == {pid: {401} for pid in team.pids}
    assert on_every_worker(team, team.other) == {pid: {200} for pid in team.pids}


def test_a_kept_check_answers_without_the_store_until_a_revocation_or_its_time(
        tmp_path: Path, store_url: str) -> None:
    """TeamAuth on a real store: a kept check is answered with no read; a revocation made by
    another process on the same home (its own TeamAuth and store) voids it; an unknown or revoked
    token is never kept; with no time to keep, nothing is."""
    home = str(tmp_path / "home")
    store, other = open_store(store_url), open_store(store_url)
    try:
        accounts.team_store(store).add_user("dave", False, 1)
        token = accounts.create_token(store, "dave", 2)
        headers = {"authorization": f"Bearer {token['token']}"}
        auth = TeamAuth(store, 600.0, home)
        assert auth.cached(headers) == (None, False)                   # nothing kept yet
        found = auth.viewer(headers)
        assert found is not None and found.name == "dave"
        assert auth.cached(headers)[0] == found                        # kept: answered without a read
        assert auth.cached({"authorization": "Bearer nmem_unknown"})[0] is None
        assert auth.viewer({"authorization": "Bearer nmem_unknown"}) is None
        assert auth.cached({"authorization": "Bearer nmem_unknown"})[0] is None   # a refusal is never kept

        accounts.revoke(other, str(token["id"]), 3)    # another process revokes it, on the same home...
        assert stamp.bump(home)                        # ...and rewrites the stamp, as `nmem token revoke` does
        assert auth.cached(headers) == (None, False)
        assert auth.viewer(headers) is None
        assert auth.cached(headers) == (None, False)

        fresh = accounts.create_token(store, "dave", 4)
        never = TeamAuth(store, 0.0, home)            # http.token_cache_ms = 0: every request reads
        assert never.viewer({"authorization": f"Bearer {fresh['token']}"}) is not None
        assert never.cached({"authorization": f"Bearer {fresh['token']}"}) == (None, False)
    finally:
        store.close()
        other.close()


def test_checks_queued_behind_the_first_read_of_a_token_take_its_answer(tmp_path: Path, store_url: str) -> None:
    """A server just started has nothing kept: every request of a burst queues a check on the
    token-check threads. The first read answers the ones behind it (a kept check younger than
    half its time), not a read each; the renewal `cached` asks for past half its time, and a
    stream's check on each message, read again."""
    home = str(tmp_path / "home")
    store, other = open_store(store_url), open_store(store_url)
    try:
        accounts.team_store(store).add_user("dave", False, 1)
        token = accounts.create_token(store, "dave", 2)
        headers = {"authorization": f"Bearer {token['token']}"}
        auth = TeamAuth(store, 600.0, home)
        found = auth.viewer(headers)
        assert found is not None and found.name == "dave"
        accounts.revoke(other, str(token["id"]), 3)   # elsewhere, the stamp left alone: seen by a read only
        assert auth.viewer(headers) == found                      # the kept answer, no read
        assert auth.viewer(headers, reuse=False) is None          # a stream's check reads
        assert auth.viewer(headers) is None                       # a refusal is never kept
        fresh = accounts.create_token(store, "dave", 4)
        headers = {"authorization": f"Bearer {fresh['token']}"}
        assert auth.viewer(headers) is not None
        digest, (viewer, read_at, kept_stamp) = next(iter(auth._kept.items()))
        auth._kept[digest] = (viewer, read_at - 301.0, kept_stamp)   # past half its time: renewed by a read
        accounts.revoke(other, str(fresh["id"]), 5)
        assert auth.viewer(headers) is None
    finally:
        auth.close()
        store.close()
        other.close()
