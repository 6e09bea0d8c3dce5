"""Subscriptions: changes written by other processes (hooks, the CLI) reach subscribed MCP clients.

The server runs in this process with its change watcher; the writers are real `nmem record`,
`nmem remember` and `nmem update` processes on the same NMEM_HOME. Both protocol eras:
2025-11-25 (`resources/subscribe`, what Claude Code speaks) and 2026-07-28 (`subscriptions/listen`).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from mcp import Client, MCPError
from mcp.client.subscriptions import Subscription
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated, ServerEvent

from mcp_support import CWD, PROJECT, Inbox, Seeded, record_process, run_nmem_async
from nmem.adapters.mcp.resources import as_uri
from nmem.adapters.mcp.server import NmemServer
from nmem.changes import ChangeSet
from nmem.service.api import Service

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

OBSERVATIONS = f"nmem://project:{PROJECT}/observations"
DOMAIN = f"nmem://project:{PROJECT}"
POLL = 0.1  # seconds between the server's change checks
WAIT = 5.0  # generous: a child process start costs ~0.3 s, more on a loaded 2-core box


@pytest.fixture
async def app(service: Service, seeded: Seeded) -> AsyncIterator[NmemServer]:
    server = NmemServer(service, project=PROJECT, poll_interval=POLL)
    async with server.running():
        yield server


async def subscribe(client: Client, *uris: str) -> None:
    with warnings.catch_warnings():  # resources/subscribe is deprecated in 2026-07-28; this is 2025-11-25
        warnings.simplefilter("ignore")
        for uri in uris:
            await client.subscribe_resource(uri)


async def unsubscribe(client: Client, *uris: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for uri in uris:
            await client.unsubscribe_resource(uri)


async def hook_bash(home: Path, command: str, session_id: str = "s1") -> None:
    await record_process(home, "PostToolUse", session_id=session_id, cwd=CWD, tool_name="Bash",
                         tool_input={"command": command}, tool_response={"stdout": "", "exit_code": 0})


# -- 2025-11-25: resources/subscribe ------------------------------------------------------------------


async def test_a_hook_in_another_process_notifies_the_namespace_subscriber(
        app: NmemServer, nmem_home: Path, seeded: Seeded) -> None:
    inbox = Inbox()
    async with Client(app.server, mode="legacy", message_handler=inbox) as client:
        assert client.protocol_version == "2025-11-25"
        await subscribe(client, seeded.memory_urn, OBSERVATIONS)
        await hook_bash(nmem_home, "cargo test --workspace")
        await inbox.wait_updated(OBSERVATIONS, WAIT)
        # only what was subscribed to: not the memory (unchanged), not the domain or the new observation's URN
        assert set(inbox.updated()) == {OBSERVATIONS}
        assert inbox.list_changed() == 0  # an observation is not a listed resource
        assert inbox.errors() == []
        listing = json.loads((await client.read_resource(OBSERVATIONS)).contents[0].text)  # type: ignore[union-attr]
        assert listing["items"][0]["content_preview"] == "cargo test --workspace"


async def test_a_memory_added_by_the_cli_sends_list_changed_and_an_update_notifies_its_urn(
        app: NmemServer, nmem_home: Path, seeded: Seeded) -> None:
    inbox = Inbox()
    async with Client(app.server, mode="legacy", message_handler=inbox) as client:
        await subscribe(client, seeded.memory_urn)
        before = {str(r.uri) for r in (await client.list_resources()).resources}
        out = await run_nmem_async(nmem_home, ["remember", "--format", "json", "--project", PROJECT,
                                               "-n", "gotchas", "Never run migrations twice in CI."])
        await inbox.wait_list_changed(1, WAIT)
        added = json.loads(out)["urn"]
        after = {str(r.uri) for r in (await client.list_resources(cache_mode="bypass")).resources}
        assert after == before | {as_uri(added)}
        assert inbox.updated() == []  # the subscribed memory did not change

        await run_nmem_async(nmem_home, ["update", seeded.memory_id, "--content", "JWT, 30 minute ttl."])
        await inbox.wait_updated(seeded.memory_urn, WAIT)
        memory = json.loads((await client.read_resource(seeded.memory_urn)).contents[0].text)  # type: ignore[union-attr]
        assert memory["content"] == "JWT, 30 minute ttl."


async def test_an_unexpected_failure_of_the_change_watch_does_not_stop_it(
        app: NmemServer, nmem_home: Path, seeded: Seeded) -> None:
    """One poll that fails with something other than an nmem error (a bug, a driver's own error)
    is logged and the watch goes on: it must not end the server's lifespan while requests go on."""
    poll, failed = app.watcher.poll, []

    def failing_once() -> ChangeSet:
        if not failed:
            failed.append(True)
            raise RuntimeError("injected: the watch's first poll fails")
        return poll()

    app.watcher.poll = failing_once  # type: ignore[method-assign]
    inbox = Inbox()
    async with Client(app.server, mode="legacy", message_handler=inbox) as client:
        await subscribe(client, OBSERVATIONS)
        await hook_bash(nmem_home, "cargo build --release")
        await inbox.wait_updated(OBSERVATIONS, WAIT)
    assert failed == [True]


async def test_forgetting_in_another_process_notifies_and_changes_the_list(
        app: NmemServer, nmem_home: Path, seeded: Seeded) -> None:
    inbox = Inbox()
    async with Client(app.server, mode="legacy", message_handler=inbox) as client:
        await subscribe(client, seeded.memory_urn)
        await run_nmem_async(nmem_home, ["forget", seeded.memory_urn])
        await inbox.wait_updated(seeded.memory_urn, WAIT)
        await inbox.wait_list_changed(1, WAIT)
        with pytest.raises(MCPError) as err:
            await client.read_resource(seeded.memory_urn)
        assert err.value.code == -32002


async def test_unsubscribe_stops_notifications(app: NmemServer, nmem_home: Path) -> None:
    inbox = Inbox()
    async with Client(app.server, mode="legacy", message_handler=inbox) as client:
        await subscribe(client, OBSERVATIONS, DOMAIN)
        await hook_bash(nmem_home, "make first")
        await inbox.wait_updated(OBSERVATIONS, WAIT)
        await inbox.wait_updated(DOMAIN, WAIT)
        await unsubscribe(client, OBSERVATIONS)
        seen = inbox.updated().count(OBSERVATIONS)
        domain_seen = inbox.updated().count(DOMAIN)

        await hook_bash(nmem_home, "make second")
        # the domain subscription is the witness that the second write was seen and dispatched
        await inbox.wait_updated_count(DOMAIN, domain_seen + 1, WAIT)
        await anyio.sleep(2 * POLL)
        assert inbox.updated().count(OBSERVATIONS) == seen


async def test_only_the_subscribed_client_is_notified_but_every_client_hears_list_changed(
        app: NmemServer, nmem_home: Path) -> None:
    watching, idle = Inbox(), Inbox()
    async with Client(app.server, mode="legacy", message_handler=watching) as a, \
            Client(app.server, mode="legacy", message_handler=idle) as b:
        await subscribe(a, OBSERVATIONS)
        await b.list_tools()
        await hook_bash(nmem_home, "npm test")
        await watching.wait_updated(OBSERVATIONS, WAIT)
        await run_nmem_async(nmem_home, ["remember", "--project", PROJECT, "Node 22 is required."])
        await watching.wait_list_changed(1, WAIT)
        await idle.wait_list_changed(1, WAIT)
        assert idle.updated() == []


async def test_subscribing_to_something_that_is_not_an_nmem_urn_is_invalid_params(app: NmemServer) -> None:
    async with Client(app.server, mode="legacy") as client:
        with pytest.raises(MCPError) as err:
            await subscribe(client, "file:///etc/passwd")
        assert err.value.code == -32602


async def test_a_remember_tool_call_notifies_the_calling_client_too(app: NmemServer, seeded: Seeded) -> None:
    inbox = Inbox()
    async with Client(app.server, mode="legacy", message_handler=inbox) as client:
        await subscribe(client, "nmem://project:demo/decisions")
        result = await client.call_tool("remember", {"content": "Pin uvicorn below 1.0.", "namespace": "decisions"})
        assert not result.is_error
        await inbox.wait_updated("nmem://project:demo/decisions", WAIT)
        await inbox.wait_list_changed(1, WAIT)


@pytest.mark.parametrize(("uri", "event", "fields"), [
    # a new prompt changes the prompts listing and its session's trace
    (f"nmem://project:{PROJECT}/prompts", "UserPromptSubmit", {"session_id": "s1", "prompt": "now fix the logout"}),
    (f"nmem://project:{PROJECT}/sessions/s1", "UserPromptSubmit", {"session_id": "s1", "prompt": "and the logout"}),
    # a new session changes the sessions listing
    (f"nmem://project:{PROJECT}/sessions", "SessionStart", {"session_id": "s-new", "source": "startup"}),
])
async def test_prompt_and_session_namespaces_are_notified_too(
        app: NmemServer, nmem_home: Path, uri: str, event: str, fields: dict[str, str]) -> None:
    inbox = Inbox()
    async with Client(app.server, mode="legacy", message_handler=inbox) as client:
        before = (await client.read_resource(uri)).contents[0].text  # type: ignore[union-attr]
        await subscribe(client, uri)
        await record_process(nmem_home, event, cwd=CWD, **fields)
        assert (await client.read_resource(uri)).contents[0].text != before  # type: ignore[union-attr]
        await inbox.wait_updated(uri, WAIT)


async def test_two_changes_to_a_memory_within_one_second_both_notify(
        app: NmemServer, service: Service, seeded: Seeded) -> None:
    inbox = Inbox()
    service.clock = lambda: 1_800_000_000.0  # both updates land in the same second
    async with Client(app.server, mode="legacy", message_handler=inbox) as client:
        await subscribe(client, seeded.memory_urn)
        service.update(seeded.memory_urn, content="first revision")
        await inbox.wait_updated_count(seeded.memory_urn, 1, WAIT)
        service.update(seeded.memory_urn, content="second revision")
        await inbox.wait_updated_count(seeded.memory_urn, 2, WAIT)


# -- 2026-07-28: subscriptions/listen -----------------------------------------------------------------


async def next_matching(sub: Subscription, wanted: ServerEvent, timeout: float = WAIT) -> list[ServerEvent]:
    """Events up to and including `wanted`."""
    events: list[ServerEvent] = []
    with anyio.fail_after(timeout):
        async for event in sub:
            events.append(event)
            if event == wanted:
                return events
    raise AssertionError(f"subscription ended before {wanted}: {events}")


async def test_modern_listen_gets_updates_and_list_changed_from_other_processes(
        app: NmemServer, nmem_home: Path, seeded: Seeded) -> None:
    async with Client(app.server) as client:
        assert client.protocol_version == "2026-07-28"
        async with client.listen(resource_subscriptions=[OBSERVATIONS, seeded.memory_urn],
                                 resources_list_changed=True) as sub:
            assert set(sub.honored.resource_subscriptions or ()) == {OBSERVATIONS, seeded.memory_urn}
            await hook_bash(nmem_home, "go test ./...")
            events = await next_matching(sub, ResourceUpdated(uri=OBSERVATIONS))
            assert all(isinstance(e, ResourceUpdated) and e.uri in (OBSERVATIONS, seeded.memory_urn)
                       for e in events)
            await run_nmem_async(nmem_home, ["remember", "--project", PROJECT, "Use go 1.23."])
            await next_matching(sub, ResourcesListChanged())
            await run_nmem_async(nmem_home, ["update", seeded.memory_id, "--summary", "JWT sessions"])
            await next_matching(sub, ResourceUpdated(uri=seeded.memory_urn))


async def test_the_rfc3986_form_of_a_urn_is_subscribed_and_notified_as_written(
        app: NmemServer, nmem_home: Path, seeded: Seeded) -> None:
    encoded = OBSERVATIONS.replace("project:", "project%3A")
    inbox = Inbox()
    async with Client(app.server, mode="legacy", message_handler=inbox) as legacy:
        await subscribe(legacy, encoded)
        async with Client(app.server) as modern, modern.listen(resource_subscriptions=[encoded]) as sub:
            await hook_bash(nmem_home, "npm test")
            await next_matching(sub, ResourceUpdated(uri=encoded))
            await inbox.wait_updated(encoded, WAIT)
        assert set(inbox.updated()) == {encoded}
        await unsubscribe(legacy, OBSERVATIONS)  # either form undoes the subscription
        assert all(not subscribers for subscribers in app.subscriptions.values())


async def test_a_urn_that_cannot_be_split_again_does_not_cost_the_other_notifications(
        app: NmemServer, seeded: Seeded) -> None:
    inbox = Inbox()
    async with Client(app.server, mode="legacy", message_handler=inbox) as client:
        await subscribe(client, OBSERVATIONS)
        # a project named "acme/web": its URN has four parts; it sorts before the subscribed one
        await app.notify(ChangeSet(updated={"nmem://project:acme/web/decisions/01ANY", OBSERVATIONS}))
        await inbox.wait_updated(OBSERVATIONS, WAIT)
