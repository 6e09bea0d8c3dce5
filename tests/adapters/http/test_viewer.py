"""The web viewer in a real browser: Debian's chromium driven by Playwright, against a real
server on loopback; writers are the viewer itself, the service and real `nmem record` processes."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import hook_payload, run_nmem
from mcp_support import child_env, seed
from nmem.config import load_settings
from nmem.service.api import Service
from stream_support import Server, running_server

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (make setup)")

CHROMIUM = os.environ.get("NMEM_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                 reason=f"no chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)")]
XSS = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'
WAIT = 15_000  # ms: generous for a loaded 2-core machine


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield launched
        launched.close()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "nmem-home"


@pytest.fixture
def server(home: Path) -> Iterator[Server]:
    settings = load_settings({"NMEM_HOME": str(home), "NMEM_STREAMING_POLL_MS": "50"})
    with Service.open(settings) as service:
        seed(service)
        service.remember(f"{XSS} stored in a memory", summary=f"<b>{XSS}</b>", namespace="gotchas", project="demo")
    with running_server(settings) as running:
        yield running


@pytest.fixture
def page(browser: Any, server: Server) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    opened.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    opened.set_default_timeout(WAIT)
    opened.goto(server.base + "/")
    yield opened
    context.close()
    assert errors == []


def service_for(server: Server) -> Service:
    return Service.open(server.settings)


def test_sessions_and_a_trace_show_the_recorded_data(page: Any, server: Server) -> None:
    page.wait_for_selector("#sessions")
    assert "fix the flaky login redirect test" in page.inner_text("#sessions")
    page.click("text=fix the flaky login redirect test")
    page.wait_for_selector(".prompt")
    trace = page.inner_text("main")
    assert "pytest tests/test_login.py" in trace and "AssertionError: login redirect token expired" in trace
    assert "/work/demo/src/auth.py" in trace


def test_timeline_status_and_a_record(page: Any, server: Server) -> None:
    page.click("#nav >> text=Timeline")
    page.wait_for_selector("#timeline li[data-id]")
    assert "npm run login-e2e" in page.inner_text("#timeline")
    page.click("#timeline >> text=npm run login-e2e")
    page.wait_for_selector("main pre")
    assert "npm run login-e2e" in page.inner_text("main pre")
    page.click("#nav >> text=Status")
    page.wait_for_selector("#counts")
    with service_for(server) as service:
        status = service.status()
    counts = page.inner_text("#counts")
    for key in ("sessions", "prompts", "observations", "memories"):
        assert f"{status[key]}\n{key}" in counts
    assert page.locator("svg.chart").count() == 4
    assert page.locator("svg.chart rect").count() >= len(status["by_obs_type"]) + len(status["by_project"])


def test_search_filters_and_index_then_full(page: Any) -> None:
    page.click("#nav >> text=Search")
    page.fill("input[name=query]", "login")
    page.select_option("select[name=scope]", "observations")
    page.click("#search-form button[type=submit]")
    page.wait_for_selector(".hit")
    hits = page.inner_text("#results")
    assert "npm run login-e2e" in hits and "observation" in hits and "memory" not in hits
    error_hit = page.locator(".hit", has_text="AssertionError")
    error_hit.locator("button", has_text="full").click()
    error_hit.locator("pre").first.wait_for()
    assert "exit_code" in error_hit.inner_text()  # the full record: its metadata too
    page.select_option("select[name=obs_type]", "command_error")
    page.click("#search-form button[type=submit]")
    page.locator(".hit", has_text="npm run").wait_for(state="detached")
    assert page.locator(".hit").count() == 1


def test_create_edit_pin_and_forget_a_memory(page: Any, server: Server) -> None:
    page.click("#nav >> text=Memories")
    page.wait_for_selector("#new-memory")
    page.fill("#new-memory textarea[name=content]", "Deploys go out on Tuesdays only.")
    page.fill("#new-memory input[name=summary]", "Deploy day")
    page.fill("#new-memory input[name=tags]", "release, ops")
    page.click("#new-memory button[type=submit]")
    item = page.locator("li.memory", has_text="Deploy day")
    item.wait_for()
    with service_for(server) as service:
        [hit] = service.recall("Tuesdays", project="*")
        memory_id = hit.record.id
        assert hit.record.tags == ["release", "ops"]
    item.locator("button", has_text="Edit").click()
    page.fill("#edit-memory textarea[name=content]", "Deploys go out on Wednesdays now.")
    page.click("#edit-memory button[type=submit]")
    page.locator("li.memory", has_text="Wednesdays").wait_for()
    page.locator("li.memory", has_text="Deploy day").locator("button", has_text="Pin").click()
    page.locator("li.memory", has_text="Deploy day").locator(".chip.pinned").wait_for()
    with service_for(server) as service:
        stored = service.get_memory(memory_id)
        assert stored.content == "Deploys go out on Wednesdays now." and stored.is_pinned
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("li.memory", has_text="Deploy day").locator("button", has_text="Forget").click()
    page.locator("li.memory", has_text="Deploy day").wait_for(state="detached")
    with service_for(server) as service:
        assert service.store.get_memory(memory_id).deleted_at is not None


def test_a_hook_written_observation_appears_live(page: Any, home: Path) -> None:
    page.click("#nav >> text=Timeline")
    page.wait_for_selector("#timeline li[data-id]")
    page.wait_for_selector("#live.on")
    payload = hook_payload("PostToolUse", session_id="s1", tool_name="Bash",
                           tool_input={"command": "make release-notes"},
                           tool_response={"stdout": "written", "exit_code": 0})
    done = run_nmem(["record"], stdin=json.dumps(payload), env=child_env(home))
    assert done.returncode == 0, done.stderr
    page.locator("#timeline li.new", has_text="make release-notes").wait_for()
    page.locator("#feed li", has_text="make release-notes").wait_for()
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1  # no reload


def test_hostile_stored_text_is_shown_as_text(page: Any, home: Path) -> None:
    payload = hook_payload("PostToolUse", session_id="s1", tool_name="Bash", tool_input={"command": f"echo '{XSS}'"},
                           tool_response={"stdout": "", "exit_code": 0})
    assert run_nmem(["record"], stdin=json.dumps(payload), env=child_env(home)).returncode == 0
    for route in ("#/memories", "#/timeline", "#/search?query=pwned&scope=all", "#/sessions/s1"):
        page.goto(page.url.split("#")[0] + route)
        page.locator("main", has_text=XSS[:20]).wait_for()
        assert page.locator("main img").count() == 0 and page.locator("main script").count() == 0
        assert page.evaluate("window.pwned") is None
    page.goto(page.url.split("#")[0] + "#/memories")
    page.locator("li.memory .summary", has_text=f"<b>{XSS}</b>").wait_for()


def test_light_and_dark_themes(page: Any, tmp_path: Path) -> None:
    page.click("#nav >> text=Status")
    page.wait_for_selector("svg.chart")
    before = page.evaluate("getComputedStyle(document.body).backgroundColor")
    page.screenshot(path=str(tmp_path / "light.png"))
    start = page.evaluate("document.documentElement.dataset.theme")
    page.click("#theme")
    after = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert page.evaluate("document.documentElement.dataset.theme") != start and after != before
    page.screenshot(path=str(tmp_path / "dark.png"))
    page.reload()
    page.wait_for_selector("svg.chart")
    assert page.evaluate("document.documentElement.dataset.theme") != start  # remembered


def test_viewer_files_and_nothing_else(server: Server) -> None:
    import http.client
    for path, status in (("/", 200), ("/viewer/app.js", 200), ("/viewer/style.css", 200),
                         ("/viewer/../app.py", 404), ("/viewer/__init__.py", 404), ("/viewer/index.html", 404)):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        conn.close()
        assert response.status == status, path
        if status == 200:
            assert "script-src 'self'" in (response.getheader("content-security-policy") or "")
