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

from conftest import hook_payload, record, run_nmem
from mcp_support import CWD, T0, child_env, free_port, seed
from nmem.config import load_settings
from nmem.context.block import build as build_context
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
    assert "src/auth.py" in trace and "/work/demo/src/auth.py" not in trace   # relative to the project root


def test_timeline_status_and_a_record(page: Any, server: Server) -> None:
    page.click("#nav >> text=Timeline")
    page.wait_for_selector("#timeline li[data-id]")
    assert "npm run login-e2e" in page.inner_text("#timeline")
    page.click("#timeline >> text=npm run login-e2e")
    page.wait_for_selector("main pre")
    assert "npm run login-e2e" in page.inner_text("main pre")
    with service_for(server) as service:
        record(service, "Stop", session_id="s1", cwd=CWD, last_assistant_message="Fixed: the token lives an hour.")
    page.click("#nav >> text=Status")
    page.wait_for_selector("#counts")
    with service_for(server) as service:
        status = service.status()
    assert status["agent_replies"] == 1
    counts = page.inner_text("#counts")
    for key in ("sessions", "prompts", "observations", "memories"):
        assert f"{status[key]}\n{key}" in counts
    written = (("agent_replies", "replies"), ("thinking", "thinking"), ("subagent_replies", "subagent answers"))
    for key, label in written:
        assert f"{status[key]}\n{label}" in counts   # what the agent wrote, apart from the user's prompts
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
    page.wait_for_selector(".hit")   # the list empties before the filtered results arrive
    assert page.locator(".hit").count() == 1


def test_create_edit_pin_and_forget_a_memory(page: Any, server: Server) -> None:
    page.click("#nav >> text=Memories")
    page.wait_for_selector("#new-memory")
    page.fill("#new-memory textarea[name=content]", "Deploys go out on Tuesdays only.")
    page.fill("#new-memory input[name=summary]", "Deploy day")
    page.fill("#new-memory input[name=tags]", "release, ops")
    page.select_option("#new-memory select[name=project]", "demo")
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


# -- issue 22: what users see ---------------------------------------------------------------------

def test_remember_asks_which_project(page: Any, server: Server) -> None:
    page.click("#nav >> text=Memories")
    picker = page.locator("#new-memory select[name=project]")
    picker.wait_for()
    options = picker.locator("option").all_inner_texts()
    assert "demo" in options and "other" in options  # the recorded projects, to pick from
    assert picker.input_value() == ""  # the server's start directory recorded nothing: it asks
    page.fill("#new-memory textarea[name=content]", "The other app ships from the release branch.")
    picker.select_option("")
    page.click("#new-memory button[type=submit]")
    page.locator("#toast.error", has_text="Choose the project").wait_for()
    with service_for(server) as service:
        assert service.recall("release branch", project="*") == []  # refused: nothing stored
    picker.select_option("other")
    page.click("#new-memory button[type=submit]")
    page.locator("li.memory", has_text="release branch").locator("a.chip.project", has_text="other").wait_for()
    with service_for(server) as service:
        [hit] = service.recall("release branch", project="*")
        assert hit.record.domain == "project:other"


def test_project_lists_and_project_links_on_search_hits(page: Any) -> None:
    page.wait_for_selector("#sessions")
    page.select_option("form.filters select[name=project]", "other")
    page.click("form.filters button[type=submit]")
    page.locator("#sessions", has_text="fix the flaky login").wait_for(state="detached")
    assert "style the login page" in page.inner_text("#sessions")
    page.click("#nav >> text=Search")
    assert page.locator("#search-form input[name=project]").count() == 0  # a list, not free text
    page.fill("input[name=query]", "login")
    page.click("#search-form button[type=submit]")
    page.wait_for_selector(".hit")
    badges = page.locator(".hit a.chip.project").all_inner_texts()
    assert {"demo", "other"} <= set(badges)
    page.locator(".hit", has_text="npm run login-e2e").locator("a.chip.project").click()
    page.wait_for_url("**#/sessions?project=other")
    page.locator("#sessions", has_text="style the login page").wait_for()
    page.click("#nav >> text=Search")
    page.fill("input[name=query]", "login")
    page.click("#search-form button[type=submit]")
    page.locator(".hit a.text", has_text="npm run login-e2e").click()  # the hit opens its record
    page.locator("main pre", has_text="npm run login-e2e").wait_for()


def _conversation(server: Server) -> None:
    with service_for(server) as service:
        record(service, "Stop", now=T0 + 100, session_id="s1", cwd=CWD,
               last_assistant_message="The ttl was too short; raised it to one hour.")
        service.store.add_prompt("s1", T0 + 102, "subagent:Explore", "Explored: the login flow lives in src/auth.py")
        service.store.add_prompt("s1", T0 + 103, "thinking", "pondering the ttl")
        record(service, "SessionEnd", now=T0 + 105, session_id="s1", cwd=CWD, reason="exit")


def test_timeline_shows_prompts_and_summaries_badged_by_kind(page: Any, server: Server) -> None:
    _conversation(server)
    page.goto(server.base + "/#/timeline")
    page.wait_for_selector("#timeline li[data-prompt]")
    kinds = {page.locator("#timeline li.prompt-row", has_text=text).locator(".chip").first.inner_text()
             for text in ("fix the flaky login", "raised it to one hour", "the login flow lives", "pondering")}
    assert kinds == {"user", "reply", "↳ Explore", "thinking"}
    page.locator("#timeline li.summary-row[data-session=s1] .chip.summary").wait_for()
    page.select_option("select[name=type]", "prompts")
    page.click("form.filters button[type=submit]")
    page.locator("#timeline li[data-id]").first.wait_for(state="detached")
    # the old rows leave before the filtered page arrives: wait for the new list, not a snapshot of the gap
    playwright_api.expect(page.locator("#timeline li.prompt-row")).to_have_count(5)
    assert page.locator("#timeline li[data-id]").count() == 0
    page.goto(server.base + "/#/sessions/s1")
    page.locator(".prompt .chip.prompt-reply", has_text="reply").wait_for()


def test_long_memory_collapsed_summary_not_repeated_edit_rederives(page: Any, server: Server) -> None:
    long_body = "Release checklist\n" + "\n".join(f"step {i}: check the thing number {i}" for i in range(30))
    with service_for(server) as service:
        derived = service.remember(long_body, namespace="conventions", project="demo")
        chosen = service.remember("Tabs are banned.\nUse four spaces.", summary="Indentation rule",
                                  namespace="conventions", project="demo")
    assert derived.summary == "Release checklist"
    page.click("#nav >> text=Memories")
    item = page.locator("li.memory", has_text="Release checklist")
    item.wait_for()
    body = item.locator(".content")
    assert not body.inner_text().startswith("Release checklist")  # the summary is not repeated as body
    assert "collapsed" in (body.get_attribute("class") or "")
    item.locator("button.more").click()
    assert "collapsed" not in (body.get_attribute("class") or "")
    page.goto(f"{server.base}/#/record/{chosen.urn}")
    page.locator("main pre", has_text="Tabs are banned.").wait_for()
    assert page.inner_text("main pre").startswith("Tabs are banned.")  # a written summary is not in the body
    page.goto(f"{server.base}/#/record/{derived.urn}")
    page.locator("main .summary", has_text="Release checklist").wait_for()
    assert page.inner_text("main pre").startswith("step 0")  # the derived one is not repeated
    page.click("#nav >> text=Memories")
    item.wait_for()
    item.locator("button", has_text="Edit").click()
    page.fill("#edit-memory textarea[name=content]", "Release list v2\nstep 1: tag")
    page.click("#edit-memory button[type=submit]")
    page.locator("li.memory .summary", has_text="Release list v2").wait_for()
    page.locator("li.memory", has_text="Indentation rule").locator("button", has_text="Edit").click()
    page.fill("#edit-memory textarea[name=content]", "Tabs are fine in Makefiles.")
    page.click("#edit-memory button[type=submit]")
    page.locator("li.memory", has_text="Tabs are fine").wait_for()
    with service_for(server) as service:
        assert service.get_memory(derived.id).summary == "Release list v2"  # derived: follows the content
        assert service.get_memory(chosen.id).summary == "Indentation rule"  # the user's: kept


def _settles(page: Any, expression: str) -> bool:
    """Poll `expression` (wait_for_function evaluates a string, which the page's CSP forbids)."""
    for _ in range(100):
        if page.evaluate(expression):
            return True
        page.wait_for_timeout(100)
    return False


def test_navigation_starts_at_the_top(page: Any, server: Server) -> None:
    with service_for(server) as service:
        for i in range(60):
            service.remember(f"filler memory {i}\n" + "line\n" * 5, namespace="context", project="demo")
    page.click("#nav >> text=Memories")
    page.wait_for_selector("li.memory >> nth=50")
    page.mouse.wheel(0, 5000)
    assert _settles(page, "window.scrollY > 500")
    page.click("#nav >> text=Status")
    page.wait_for_selector("#counts")
    assert _settles(page, "window.scrollY === 0")


def test_context_preview_settings_and_log(page: Any, server: Server, home: Path) -> None:
    page.click("#nav >> text=Context")
    page.select_option("#context-form select[name=project]", "demo")
    page.click("#context-form button[type=submit]")
    page.wait_for_url("**#/context?project=demo")
    block = page.locator("#context-block", has_text="Project demo")
    block.wait_for()
    shown = block.inner_text()
    with service_for(server) as service:
        expected = build_context(service, "demo", None, service.now()).text
    assert expected and "fix the flaky login redirect test" in shown
    assert shown.splitlines()[0] == expected.splitlines()[0]
    page.click("#nav >> text=Settings")
    page.locator("#settings td", has_text="store.url").wait_for()
    page.click("#nav >> text=Log")
    page.locator("#log", has_text="No log yet").wait_for()
    logs = home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "nmem.log").write_text("2026-11-28 10:00:00,000 WARNING hook input was not JSON\n"
                                   f"2026-11-28 10:00:01,000 ERROR {XSS}\n", encoding="utf-8")
    page.reload()
    page.locator("#log", has_text="hook input was not JSON").wait_for()
    assert XSS in page.inner_text("#log") and page.locator("main img").count() == 0
    assert page.evaluate("window.pwned") is None


def test_nmem_serve_prints_the_viewers_url_and_serves_it(browser: Any, home: Path, tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    port = free_port()
    env = {**child_env(home), "NMEM_STREAMING_POLL_MS": "50"}
    proc = subprocess.Popen([sys.executable, "-m", "nmem", "serve", "--transport", "http", "--port", str(port)],
                            env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert f"viewer at http://127.0.0.1:{port}/" in line, line
        context = browser.new_context()
        opened = context.new_page()
        opened.set_default_timeout(WAIT)
        deadline = time.monotonic() + 20
        while True:
            try:
                opened.goto(f"http://127.0.0.1:{port}/#/context")
                break
            except playwright_api.Error:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        opened.locator("main h1", has_text="Context preview").wait_for()
        context.close()
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()


def test_a_hook_written_prompt_appears_live_with_its_badge(page: Any, home: Path) -> None:
    page.click("#nav >> text=Timeline")
    page.wait_for_selector("#timeline li[data-prompt]")
    page.wait_for_selector("#live.on")
    payload = hook_payload("UserPromptSubmit", session_id="s1", prompt="rename the auth module")
    done = run_nmem(["record"], stdin=json.dumps(payload), env=child_env(home))
    assert done.returncode == 0, done.stderr
    row = page.locator("#timeline li.prompt-row.new", has_text="rename the auth module")
    row.wait_for()
    assert row.locator(".chip").first.inner_text() == "user"


def test_a_subagents_calls_are_marked_and_paths_are_relative_around_them(page: Any, server: Server,
                                                                        home: Path) -> None:
    """A subagent's tool call (recorded by a real `nmem record` with Claude Code's agent_id and
    agent_type) carries `↳ Explore` in the trace, the timeline around it, search and its record page;
    the timeline around it and the live panel show the edited file relative to the project root."""
    for fields in ({"tool_name": "Grep", "tool_input": {"pattern": "monthrange"}},
                   {"tool_name": "Edit", "tool_input": {"file_path": "/work/demo/src/dates.py", "old_string": "28",
                                                        "new_string": "29"}}):
        payload = hook_payload("PostToolUse", session_id="s1", agent_id="a77", agent_type="Explore", **fields)
        done = run_nmem(["record"], stdin=json.dumps(payload), env=child_env(home))
        assert done.returncode == 0, done.stderr
    with service_for(server) as service:
        grep = next(o for o in service.store.session_observations("s1", None, None) if o.obs_type == "search")

    page.goto(server.base + "/#/sessions/s1")
    row = page.locator(".actions li", has_text="monthrange")
    row.wait_for()
    assert "↳ Explore" in row.inner_text()
    page.goto(server.base + f"/#/timeline/{grep.id}")
    anchor = page.locator("main li.new")
    anchor.wait_for()
    around = page.inner_text("main")
    assert "↳ Explore" in anchor.inner_text()
    assert "src/dates.py" in around and "/work/demo/src/dates.py" not in around, around
    page.goto(server.base + "/#/search?query=monthrange&scope=observations")
    hit = page.locator(".hit", has_text="monthrange")
    hit.wait_for()
    assert "↳ Explore" in hit.inner_text()
    page.goto(server.base + f"/#/record/{grep.id}")
    page.wait_for_selector("h1:has-text('observation')")
    assert "↳ Explore" in page.inner_text("main .row")
    page.locator("#feed li", has_text="dates.py").wait_for()   # the live panel too, as the change arrived
    assert "/work/demo/src/dates.py" not in page.inner_text("#feed")
