"""Hook latency: a hook as a whole process, the way Claude Code runs it.

Builds a database of N observations (default 50,000) in a temporary NMEM_HOME, then runs
a hook with its payload on stdin for PostToolUse (Bash, Read, Edit and Grep calls in turn),
UserPromptSubmit, SessionStart (which renders the context block) and Stop (which reads the
turn from a transcript of a long turn, written by bench/cc_transcripts.py: 40 tool calls with
their output, 12 messages between them, thinking; ~0.5 MB after three earlier turns, each
Stop in a session of its own so it stores the whole turn), interleaved, R times each
(default 60), in two forms:
- the command `nmem install claude-code` writes (`<python> -S <nmem>/hook_entry.py record`),
  which is what Claude Code runs;
- the `nmem record` console script (what the plugin directory's hooks.json runs from PATH).
Each form records into sessions of its own, and both are checked against the targets.
It prints p50/p99 per event next to the bare-interpreter floor measured in the same run
(`python -c pass`, `python -S -c pass`) and the targets from DESIGN.md, and the median CPU
time (user + system) of each process, which other load on the machine barely moves.

    .venv/bin/python bench/hooks.py [--runs 60] [--observations 50000] [--json] [--check]
    .venv/bin/python bench/hooks.py --profile PostToolUse    # importtime + cProfile of one run
    .venv/bin/python bench/hooks.py --ir                     # instructions per event (callgrind)
    .venv/bin/python bench/hooks.py --encrypted raw          # the same on an SQLCipher database
    .venv/bin/python bench/hooks.py --agent codex            # Codex's payloads through its hook command

`--agent codex` sends the same events in Codex's shapes (its shell output as text, `apply_patch`
in place of Edit) through the command `nmem install codex` writes (`... record --agent codex`);
`--agent gemini` in Gemini CLI's (AfterTool with `run_shell_command`, `read_file`, `replace`,
`search_file_content`; BeforeAgent) through `nmem install gemini`'s; `--agent cursor` and
`--agent opencode` likewise (Cursor's afterShellExecution/afterFileEdit/beforeSubmitPrompt/
sessionStart; the events nmem's OpenCode plugin sends). SessionStart's context block is checked
for every agent but OpenCode, which takes none.

`--encrypted raw` builds the database encrypted with a raw 256-bit key (NMEM_KEY, 64 hex
digits: what docs/encryption.md recommends); `--encrypted passphrase` with a passphrase, to
show what SQLCipher's key derivation costs every hook.

`--ir` counts the instructions (callgrind's Ir) one run of the installed command executes per
event, each on a fresh copy of the same database after one earlier event of its session: a
count other load on the machine does not move, so two trees (or two commits) compare exactly
on a busy machine where wall times differ by more than the change. It needs valgrind, and
prints the modules each run imported beside it.

nmem's bytecode is compiled first (as `pip install` does), so a run measures an installed
nmem even when PYTHONDONTWRITEBYTECODE is set in the environment.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import random
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nmem
from measure import importtime_summary
from nmem.capture.claude_code import parse
from nmem.config import load_settings
from nmem.service.api import Service
from nmem.setup import codex, cursor, gemini, opencode
from nmem.setup.claude_code import hook_command

TARGETS_MS: dict[str, tuple[float, float | None]] = {   # event -> (p50, p99)
    "PostToolUse": (30.0, 60.0),
    "UserPromptSubmit": (30.0, 60.0),
    "SessionStart": (150.0, None),
    # Once per turn, not per tool call: it reads the turn from the transcript and closes the session.
    "Stop": (60.0, 120.0),
}
PROJECTS = ("billing-api", "ledger-ui", "auth-service", "data-pipeline", "infra", "docs-site")
BENCH_PROJECT = PROJECTS[0]
ROOT = "/home/dev/code"


# -- the database -------------------------------------------------------------------------------


def synthetic_events(n_observations: int, end: int, seed: int = 7) -> Iterator[tuple[dict[str, Any], int]]:
    """Hook payloads of plausible sessions, with event times spread over the ~90 days before `end`."""
    rng = random.Random(seed)
    step = max(1, 90 * 86400 // max(n_observations, 1))
    ts = end - n_observations * step
    produced = session = 0
    tools = ("Read", "Edit", "Bash", "Bash", "Grep", "Write", "Bash", "Read", "WebFetch", "mcp__github__get_issue")
    while produced < n_observations:
        session += 1
        project = rng.choice(PROJECTS)
        cwd = f"{ROOT}/{project}"
        sid = f"bench-{session:06d}"

        def ev(name: str, sid: str = sid, cwd: str = cwd, **fields: Any) -> dict[str, Any]:
            return {"session_id": sid, "cwd": cwd, "transcript_path": "", "hook_event_name": name, **fields}

        yield ev("SessionStart", source=rng.choice(("startup", "startup", "resume", "compact"))), ts
        produced += 1
        for turn in range(rng.randint(2, 6)):
            ts += step
            topic = rng.randint(0, 400)
            ask = f"turn {turn}: fix module_{topic} handling of case {rng.randint(0, 99)}"
            yield ev("UserPromptSubmit", prompt=ask), ts
            for _ in range(rng.randint(4, 12)):
                ts += step
                tool = rng.choice(tools)
                path = f"{cwd}/src/pkg_{topic % 20}/module_{rng.randint(0, 999)}.py"
                if tool == "Read":
                    payload = ev("PostToolUse", tool_name=tool, tool_input={"file_path": path})
                elif tool in ("Edit", "Write"):
                    payload = ev("PostToolUse", tool_name=tool,
                                 tool_input={"file_path": path, "old_string": "a = 1", "new_string": f"a = {ts}",
                                             "content": f"# generated {ts}\n" * 20})
                elif tool == "Grep":
                    payload = ev("PostToolUse", tool_name=tool, tool_input={"pattern": f"def handler_{ts % 997}"},
                                 tool_response={"numFiles": rng.randint(0, 9), "filenames": []})
                elif tool == "WebFetch":
                    payload = ev("PostToolUse", tool_name=tool,
                                 tool_input={"url": f"https://docs.example.com/page/{ts % 5000}", "prompt": "summary"},
                                 tool_response={"code": 200, "result": "ok"})
                elif tool.startswith("mcp__"):
                    payload = ev("PostToolUse", tool_name=tool, tool_input={"number": ts % 9000})
                elif rng.random() < 0.15:
                    payload = ev("PostToolUseFailure", tool_name="Bash",
                                 tool_input={"command": f"pytest tests/test_module_{topic}.py -q"},
                                 error=f"Exit code 1\nFAILED tests/test_module_{topic}.py::test_{ts % 50}\n1 failed")
                else:
                    payload = ev("PostToolUse", tool_name="Bash", tool_input={"command": f"make target-{ts % 1000}"},
                                 tool_response={"stdout": "done", "stderr": "", "interrupted": False})
                yield payload, ts
                produced += 1
            yield ev("Stop", last_assistant_message=f"Done with module_{topic}."), ts
        yield ev("SessionEnd", reason="other"), ts
        produced += 1


# The database key of an --encrypted run, as the hooks' environment carries it.
KEYS = {"raw": "5e" * 32, "passphrase": "a passphrase SQLCipher stretches on every open"}


def populate(home: Path, n_observations: int, key_env: dict[str, str] | None = None) -> dict[str, Any]:
    started = time.perf_counter()
    service = Service.open(load_settings({"NMEM_HOME": str(home), **(key_env or {})}))
    try:
        with service.store.transaction():
            for payload, ts in synthetic_events(n_observations, int(time.time()) - 60):
                service.record_event(parse(payload, now=ts))
        status = service.status()
    finally:
        service.close()
    return {"observations": status["observations"], "sessions": status["sessions"], "prompts": status["prompts"],
            "db_bytes": status["size_bytes"], "seconds": round(time.perf_counter() - started, 1)}


# -- measuring ----------------------------------------------------------------------------------


def nmem_script() -> str:
    beside = Path(sys.executable).parent / "nmem"
    found = str(beside) if beside.exists() else shutil.which("nmem")
    if not found:
        sys.exit("bench/hooks.py: no `nmem` console script beside this interpreter or on PATH")
    return found


def child_env(home: Path, key_env: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NMEM_")}
    env["NMEM_HOME"] = str(home)
    env.update(key_env or {})
    return env


def timed(argv: list[str], stdin: str, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Wall milliseconds of one run; its CPU milliseconds (user + system) go to `LAST_CPU_MS`."""
    global LAST_CPU_MS  # noqa: PLW0603  one run at a time: a module slot keeps the signature
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, check=False)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    LAST_CPU_MS = ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000
    return wall, done


# CPU time of the last `timed` run: unlike wall time, barely moved by other load on the machine.
LAST_CPU_MS = 0.0


def tool_call(i: int, cwd: str) -> tuple[str, dict[str, Any], Any]:
    """The i-th PostToolUse of the benchmark: Bash, Read, Edit and Grep calls in turn, each on
    its own file or pattern, so none is skipped as a repeat read or search."""
    path = f"{cwd}/src/billing/export_{i}.py"
    kind = i % 4
    if kind == 0:
        return "Bash", {"command": f"pytest -q tests/test_export.py -k case_{i}", "description": "Run export tests"}, \
            {"stdout": f"{i % 9 + 1} passed in 0.{i % 97:02d}s", "stderr": "", "interrupted": False, "isImage": False}
    if kind == 1:
        return "Read", {"file_path": path}, {"type": "text", "file": {"filePath": path, "numLines": 180}}
    if kind == 2:
        return "Edit", {"file_path": path, "old_string": "rows = list(query)",
                        "new_string": f"rows = iter(query)  # stream, don't buffer ({i})"}, {"filePath": path}
    return "Grep", {"pattern": f"def export_rows_{i}", "path": f"{cwd}/src"}, {"numFiles": i % 5, "filenames": []}


def long_turn_transcript(directory: Path) -> tuple[Path, str]:
    """A Claude Code transcript whose last turn is long: its path and the turn's last message."""
    from cc_transcripts import Projects

    cwd = f"{ROOT}/{BENCH_PROJECT}"
    s = Projects(directory, seed=3).session(cwd, start=time.time() - 3600)
    source = "\n".join(f"def export_rows_{n}(query):\n    return list(query)  # buffered\n" for n in range(120))
    for turn in range(4):
        s.prompt(f"turn {turn}: make the invoice export stream rows instead of buffering them")
        calls = 40 if turn == 3 else 6
        for n in range(calls):
            if n % 3 == 0:
                s.thinking(f"Step {n}: the export still buffers in export_{n}.py; check its callers first.")
            if n % 3 == 1:
                s.say(f"export_{n}.py buffers the whole query with list(); switching it to iter() keeps memory flat "
                      f"for the {n * 1000} row statements.", final=False)
            path = f"{cwd}/src/billing/export_{n}.py"
            if n % 4 == 0:
                s.read(path, source)
            elif n % 4 == 1:
                s.edit(path, "return list(query)", "return iter(query)")
            elif n % 4 == 2:
                s.bash(f"pytest -q tests/test_export_{n}.py",
                       stdout="." * 80 + f"\n{n + 20} passed in 0.{n:02d}s")
            else:
                s.tool("Grep", {"pattern": f"export_rows_{n}", "path": "src"}, result=f"src/billing/export_{n}.py",
                       tool_use_result={"mode": "files_with_matches", "filenames": [path], "numFiles": 1})
        s.say(f"Turn {turn} done: the export streams rows; every export test passes.")
    return s.save(), "Turn 3 done: the export streams rows; every export test passes."


def stop_sessions(home: Path, runs: int, warmup: int, forms: int, key_env: dict[str, str] | None) -> None:
    """The sessions the measured Stops close, each with its turn's prompt (a Stop of a session never
    seen is skipped, which would time nothing)."""
    cwd = f"{ROOT}/{BENCH_PROJECT}"
    service = Service.open(load_settings({"NMEM_HOME": str(home), **(key_env or {})}))
    try:
        with service.store.transaction():
            for i in range(-warmup, runs):
                for n in range(forms):
                    sid = f"bench-stop-{i}-{n}"
                    service.record_event(parse({"session_id": sid, "cwd": cwd, "hook_event_name": "SessionStart",
                                                "source": "startup"}))
                    service.record_event(parse({"session_id": sid, "cwd": cwd, "hook_event_name": "UserPromptSubmit",
                                                "prompt": "turn 3: make the invoice export stream rows"}))
    finally:
        service.close()


STOP_TRANSCRIPT: tuple[str, str] = ("", "")   # set by `measure`: the long turn's file and last message

AGENT = "claude-code"   # --agent: whose payloads and hook command are measured


def codex_payload(payload: dict[str, Any], i: int) -> dict[str, Any]:
    """A Claude Code payload in Codex's shape (tests/fixtures/codex_shapes.py has the sources)."""
    out = {**payload, "model": "gpt-5-codex", "turn_id": f"turn-{i}", "permission_mode": "default"}
    if payload.get("tool_name") == "Bash":
        out["tool_response"] = f"Exit code: 0\nWall time: 0.3 seconds\nOutput:\n{payload['tool_response']['stdout']}\n"
    elif payload.get("tool_name") == "Edit":
        path = payload["tool_input"]["file_path"]
        out["tool_name"] = "apply_patch"
        out["tool_input"] = {"command": f"*** Begin Patch\n*** Update File: {path}\n@@\n"
                                        f"-{payload['tool_input']['old_string']}\n"
                                        f"+{payload['tool_input']['new_string']}\n*** End Patch"}
        out["tool_response"] = f"Success. Updated the following files:\nM {path}\n"
    elif payload.get("tool_name") in ("Read", "Grep"):  # Codex reads and searches through its shell
        command = ("sed -n 1,200p " + payload["tool_input"]["file_path"] if payload["tool_name"] == "Read"
                   else f"rg -n '{payload['tool_input']['pattern']}' src")
        out["tool_name"], out["tool_input"] = "Bash", {"command": command}
        out["tool_response"] = "Exit code: 0\nWall time: 0.0 seconds\nOutput:\n..."
    return out


def payload_for(event: str, i: int, form: str = "") -> dict[str, Any]:
    """The i-th event; each hook form records into sessions of its own, so the same payload
    sent by the next form is not a repeat of the first form's."""
    if AGENT == "codex":
        return codex_payload(claude_payload(event, i, form), i)
    if AGENT == "gemini":
        return gemini_payload(claude_payload(event, i, form))
    if AGENT == "cursor":
        return cursor_payload(claude_payload(event, i, form))
    if AGENT == "opencode":
        return opencode_payload(claude_payload(event, i, form))
    return claude_payload(event, i, form)


def cursor_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """A Claude Code payload in Cursor's shape (tests/fixtures/cursor_shapes.py has the sources)."""
    out: dict[str, Any] = {"conversation_id": payload["session_id"], "generation_id": "gen-1",
                           "workspace_roots": [payload["cwd"]], "cursor_version": "2.0.77"}
    tool = payload.get("tool_name")
    if payload["hook_event_name"] == "SessionStart":
        out["hook_event_name"] = "sessionStart"
    elif payload["hook_event_name"] == "UserPromptSubmit":
        out.update(hook_event_name="beforeSubmitPrompt", prompt=payload["prompt"])
    elif tool == "Edit":
        out.update(hook_event_name="afterFileEdit", file_path=payload["tool_input"]["file_path"],
                   edits=[{"old_string": payload["tool_input"]["old_string"],
                           "new_string": payload["tool_input"]["new_string"]}])
    else:  # Cursor reports reads and searches as the shell commands its agent ran
        command = payload["tool_input"].get("command") or f"cat {payload['tool_input'].get('file_path', 'README')}"
        out.update(hook_event_name="afterShellExecution", command=command, cwd=payload["cwd"], output="ok",
                   duration=40)
    return out


OPENCODE_TOOLS = {"Bash": "bash", "Read": "read", "Edit": "edit", "Grep": "grep"}


def opencode_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """A Claude Code payload as nmem's OpenCode plugin sends it (nmem/capture/opencode.py)."""
    base = {"session_id": payload["session_id"], "cwd": payload["cwd"]}
    if payload["hook_event_name"] == "SessionStart":
        return {**base, "hook_event_name": "session.created"}
    if payload["hook_event_name"] == "UserPromptSubmit":
        return {**base, "hook_event_name": "chat.message", "prompt": payload["prompt"]}
    renames = {"file_path": "filePath", "old_string": "oldString", "new_string": "newString"}
    args = {renames.get(k, k): v for k, v in payload["tool_input"].items()}
    return {**base, "hook_event_name": "tool.execute.after", "tool": OPENCODE_TOOLS[payload["tool_name"]],
            "args": args, "output": "ok", "metadata": {"exit": 0} if payload["tool_name"] == "Bash" else {}}


GEMINI_TOOLS = {"Bash": "run_shell_command", "Read": "read_file", "Edit": "replace", "Grep": "search_file_content"}
GEMINI_EVENTS = {"PostToolUse": "AfterTool", "UserPromptSubmit": "BeforeAgent", "SessionStart": "SessionStart"}


def gemini_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """A Claude Code payload in Gemini CLI's shape (tests/fixtures/gemini_shapes.py has the sources)."""
    out = {**payload, "hook_event_name": GEMINI_EVENTS[payload["hook_event_name"]],
           "timestamp": "2025-12-01T10:30:00Z"}
    if "tool_name" in payload:
        out["tool_name"] = GEMINI_TOOLS[payload["tool_name"]]
        text = (f"Command: {payload['tool_input']['command']}\nDirectory: (root)\nOutput: "
                f"{payload['tool_response']['stdout']}\nError: (none)\nExit Code: 0"
                if payload["tool_name"] == "Bash" else "ok")
        out["tool_response"] = {"llmContent": text, "returnDisplay": text}
    return out


def claude_payload(event: str, i: int, form: str = "") -> dict[str, Any]:
    cwd = f"{ROOT}/{BENCH_PROJECT}"
    if event == "PostToolUse":
        tool, tool_input, response = tool_call(i, cwd)
        return {"session_id": f"bench-post{form}", "cwd": cwd, "transcript_path": "", "hook_event_name": event,
                "tool_name": tool, "tool_use_id": f"toolu_{i}", "tool_input": tool_input, "tool_response": response}
    if event == "Stop":
        path, last = STOP_TRANSCRIPT
        return {"session_id": f"bench-stop-{i}{form}", "cwd": cwd, "transcript_path": path, "hook_event_name": event,
                "stop_hook_active": False, "last_assistant_message": last}
    if event == "UserPromptSubmit":
        return {"session_id": f"bench-prompt{form}", "cwd": cwd, "transcript_path": "", "hook_event_name": event,
                "prompt": f"run {i}: make the invoice export stream rows instead of buffering them"}
    return {"session_id": f"bench-start-{i}{form}", "cwd": cwd, "transcript_path": "", "hook_event_name": event,
            "source": "startup"}


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    rank = max(1, round(pct / 100 * len(ordered)))  # nearest rank
    return ordered[min(rank, len(ordered)) - 1]


def summary(values: list[float], cpu: list[float] | None = None) -> dict[str, float]:
    out = {"p50": round(statistics.median(values), 1), "p99": round(percentile(values, 99), 1),
           "mean": round(statistics.fmean(values), 1), "min": round(min(values), 1), "max": round(max(values), 1)}
    if cpu:
        out["cpu_p50"] = round(statistics.median(cpu), 1)
    return out


# The forms a hook is run in: what `nmem install claude-code` writes, and the console script
# on PATH that the plugin directory's hooks.json runs.
INSTALLED = "installed hook command"
CONSOLE = "nmem record (console script)"


def hook_forms() -> dict[str, list[str]]:
    if AGENT == "opencode":
        return {INSTALLED: opencode.hook_argv(), CONSOLE: [nmem_script(), "record", "--agent", AGENT]}
    if AGENT != "claude-code":
        module = {"codex": codex, "gemini": gemini, "cursor": cursor}[AGENT]
        return {INSTALLED: shlex.split(module.hook_command()), CONSOLE: [nmem_script(), "record", "--agent", AGENT]}
    return {INSTALLED: shlex.split(hook_command()), CONSOLE: [nmem_script(), "record"]}


def measured_events() -> list[str]:
    """The events of this run: Stop (which reads a Claude Code transcript) for Claude Code only."""
    return [event for event in TARGETS_MS if event != "Stop" or AGENT == "claude-code"]


def measure(home: Path, runs: int, warmup: int = 3, key_env: dict[str, str] | None = None) -> dict[str, Any]:
    global STOP_TRANSCRIPT  # noqa: PLW0603  `payload_for` reads it, as the profiler does
    env = child_env(home, key_env)
    forms = hook_forms()
    events = measured_events()
    if "Stop" in events:
        path, last = long_turn_transcript(home.parent / "claude-projects")
        STOP_TRANSCRIPT = (str(path), last)
        stop_sessions(home, runs, warmup, len(forms), key_env)
    floors = {"python -c pass": [sys.executable, "-c", "pass"],
              "python -S -c pass": [sys.executable, "-S", "-c", "pass"]}
    samples: dict[str, list[float]] = {name: [] for name in floors}
    for form in forms:
        samples.update({f"{form}|{event}": [] for event in events})
    cpu: dict[str, list[float]] = {name: [] for name in samples}
    context_chars: list[int] = []
    for i in range(-warmup, runs):
        for name, argv in floors.items():
            ms, _ = timed(argv, "", env)
            if i >= 0:
                samples[name].append(ms)
                cpu[name].append(LAST_CPU_MS)
        for n, (form, argv) in enumerate(forms.items()):
            for event in events:
                ms, done = timed(argv, json.dumps(payload_for(event, i, f"-{n}")), env)
                if done.returncode != 0 or done.stderr:
                    sys.exit(f"bench/hooks.py: {form} {event} failed ({done.returncode}): {done.stderr.strip()}")
                if event == "SessionStart" and AGENT != "opencode":
                    if "<nmem-context>" not in done.stdout:
                        sys.exit("bench/hooks.py: SessionStart printed no context block")
                    context_chars.append(len(done.stdout))
                if i >= 0:
                    samples[f"{form}|{event}"].append(ms)
                    cpu[f"{form}|{event}"].append(LAST_CPU_MS)
    results: dict[str, Any] = {"floor": {name: summary(samples[name], cpu[name]) for name in floors}, "events": {},
                               "console_script": {}, "installed_command": " ".join(forms[INSTALLED])}
    for event in events:
        t50, t99 = TARGETS_MS[event]
        for key, form in (("events", INSTALLED), ("console_script", CONSOLE)):
            stats = summary(samples[f"{form}|{event}"], cpu[f"{form}|{event}"])
            ok = stats["p50"] <= t50 and (t99 is None or stats["p99"] <= t99)
            results[key][event] = {**stats, "target_p50": t50, "target_p99": t99, "ok": ok}
    results["context_chars"] = max(context_chars, default=0)
    if "Stop" in events:
        results["stop_transcript_bytes"] = Path(STOP_TRANSCRIPT[0]).stat().st_size
        service = Service.open(load_settings({"NMEM_HOME": str(home), **(key_env or {})}))
        try:   # what one measured Stop stored: the turn's messages and thoughts, as agent prompts
            results["stop_agent_prompts"] = sum(p.source == "agent" for p in
                                                service.store.session_prompts("bench-stop-0-0", None, None))
        finally:
            service.close()
    results["imports"] = hook_imports(env, forms[INSTALLED], events)
    return results


def hook_imports(env: dict[str, str], argv: list[str], events: list[str]) -> dict[str, dict[str, Any]]:
    """What one run of the installed command imports per event (`-X importtime`): modules and
    self time, all and nmem's own, so the next change to the hook path can be compared."""
    python, *args = argv
    out = {}
    for n, event in enumerate(events):
        # A Stop again closes the first measured session (a Stop of a session never seen does nothing).
        payload = payload_for(event, 0, "-0") if event == "Stop" else payload_for(event, 90_000 + n, "-imp")
        done = subprocess.run([python, "-X", "importtime", *args], input=json.dumps(payload),
                              capture_output=True, text=True, env=env, check=False)
        summary = importtime_summary(done.stderr)
        del summary["names"]
        out[event] = summary
    return out


# -- instruction counts -------------------------------------------------------------------------


def instructions(home: Path) -> dict[str, dict[str, Any]]:
    """Ir (callgrind) of one run of the installed command per event, each on a copy of `home`
    taken after an earlier event of the same session, so every event meets the same database;
    and the nmem modules the same run imports (`-X importtime`, on another such copy)."""
    global STOP_TRANSCRIPT  # noqa: PLW0603  `payload_for` reads it
    if not shutil.which("valgrind"):
        sys.exit("bench/hooks.py: --ir needs valgrind (apt-get install valgrind)")
    python, *args = hook_forms()[INSTALLED]
    events = measured_events()
    if "Stop" in events:
        path, last = long_turn_transcript(home.parent / "claude-projects")
        STOP_TRANSCRIPT = (str(path), last)
        stop_sessions(home, 1, 0, 1, None)
    out: dict[str, dict[str, Any]] = {}
    for event in events:
        stdin = json.dumps(payload_for(event, 0, "-0"))
        with _scratch_home(home, event) as scratch:
            counted = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", python,
                                      *args], input=stdin, capture_output=True, text=True, env=child_env(scratch),
                                     check=False)
        with _scratch_home(home, event) as scratch:
            imports = subprocess.run([python, "-X", "importtime", *args], input=stdin, capture_output=True,
                                     text=True, env=child_env(scratch), check=False)
        out[event] = {"ir_millions": _collected(counted, event),
                      "nmem_modules": importtime_summary(imports.stderr)["nmem_modules"]}
    floor = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", python, "-S", "-c",
                            "pass"], capture_output=True, text=True, check=False)
    out["python -S -c pass"] = {"ir_millions": _collected(floor, "the floor"), "nmem_modules": 0}
    return out


@contextmanager
def _scratch_home(home: Path, event: str) -> Iterator[Path]:
    """A copy of `home` after the event's session had one earlier event (a Stop's was opened by
    `stop_sessions`), removed afterwards."""
    scratch = home.parent / f"ir-{event}"
    shutil.copytree(home, scratch)
    try:
        if event != "Stop":
            timed(hook_forms()[INSTALLED], json.dumps(payload_for(event, -1, "-0")), child_env(scratch))
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _collected(done: subprocess.CompletedProcess[str], what: str) -> float:
    found = [line for line in done.stderr.splitlines() if "Collected :" in line]
    if done.returncode != 0 or not found:
        sys.exit(f"bench/hooks.py: --ir {what} failed: {done.stderr.strip()[-500:]}")
    return round(int(found[-1].rsplit(":", 1)[1]) / 1e6, 2)


def ir_report(db: dict[str, Any], counts: dict[str, dict[str, Any]]) -> str:
    lines = [f"nmem hook instructions ({AGENT}, installed command, callgrind Ir): {db['observations']:,} "
             f"observations, {db['sessions']:,} sessions", "",
             f"{'event':24} {'Ir (M)':>9} {'nmem modules':>13}"]
    lines += [f"{name:24} {c['ir_millions']:9.2f} {c['nmem_modules']:13d}" for name, c in counts.items()]
    return "\n".join(lines)


# -- profiling ----------------------------------------------------------------------------------


def profile(home: Path, event: str, key_env: dict[str, str] | None = None) -> str:
    """Where one hook run spends its time: the slowest imports and the hottest functions."""
    env = child_env(home, key_env)
    stdin = json.dumps(payload_for(event, 10_000))
    python, *args = hook_forms()[INSTALLED]
    done = subprocess.run([python, "-X", "importtime", *args], input=stdin,
                          capture_output=True, text=True, env=env, check=False)
    imports = []  # (cumulative us, self us, name, depth in the import tree)
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        self_us, cumulative, name = line[len("import time:"):].split("|")
        depth = (len(name) - len(name.lstrip()) - 1) // 2
        imports.append((int(cumulative), int(self_us), name.strip(), depth))
    out = ["importtime, modules imported directly by the entry point, by cumulative time (ms):"]
    out += [f"  {c / 1000:7.1f}  {n}" for c, _, n, d in sorted(imports, reverse=True) if d == 0][:12]
    out.append("nmem modules by self time (ms):")
    out += [f"  {s / 1000:7.1f}  {n}" for _, s, n, _ in sorted(imports, key=lambda r: -r[1])
            if n.startswith("nmem")][:10]
    nmem_self = sum(s for _, s, n, _ in imports if n.startswith("nmem"))
    total = sum(s for _, s, _, _ in imports)
    out.append(f"  all imports {total / 1000:.1f} ms, of which nmem's own modules {nmem_self / 1000:.1f} ms")

    code = ("import cProfile, io, pstats, sys\n"
            "from nmem.adapters.hooks import run as hooks\n"
            "p = cProfile.Profile(); p.enable()\n"
            f"hooks.run(['record'], io.StringIO({stdin!r}), io.StringIO(), sys.stderr)\n"
            "p.disable(); s = io.StringIO(); pstats.Stats(p, stream=s).sort_stats('cumulative').print_stats(18)\n"
            "print(s.getvalue())\n")
    prof = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    out.append(f"cProfile of one {event} after imports (cumulative):")
    out += ["  " + line for line in prof.stdout.splitlines() if line.strip()][:40]
    return "\n".join(out)


# -- output -------------------------------------------------------------------------------------


def text_report(db: dict[str, Any], results: dict[str, Any], runs: int) -> str:
    encrypted = f"SQLCipher-encrypted ({db['encrypted']} key) " if db.get("encrypted") else ""
    lines = [f"nmem hook benchmark ({AGENT}): {encrypted}{db['observations']:,} observations, "
             f"{db['sessions']:,} sessions ({db['db_bytes'] / 1e6:.0f} MB, built in {db['seconds']} s); "
             f"{runs} runs per event; python {sys.version.split()[0]}; load average {os.getloadavg()[0]:.1f} "
             f"on {os.cpu_count()} cores",
             "",
             f"{'process':34} {'p50 ms':>8} {'p99 ms':>8} {'min':>7} {'max':>7} {'cpu p50':>8}   target (p50/p99)"]
    for name, s in results["floor"].items():
        lines.append(f"{name:34} {s['p50']:8.1f} {s['p99']:8.1f} {s['min']:7.1f} {s['max']:7.1f} "
                     f"{s['cpu_p50']:8.1f}   (floor)")
    for key, label in (("events", "hook "), ("console_script", "nmem record ")):
        for name, s in results[key].items():
            target = f"{s['target_p50']:.0f}" + (f"/{s['target_p99']:.0f}" if s["target_p99"] else "")
            verdict = "ok" if s["ok"] else "MISSED"
            lines.append(f"{label + name:34} {s['p50']:8.1f} {s['p99']:8.1f} {s['min']:7.1f} {s['max']:7.1f} "
                         f"{s['cpu_p50']:8.1f}   {target:>9} ms  {verdict}")
    floor = results["floor"]["python -c pass"]["p50"]
    floor_s = results["floor"]["python -S -c pass"]["p50"]
    lines.append("")
    lines.append(f"hook = the installed command: {results['installed_command']}")
    lines.append("above the `python -S -c pass` floor (p50): " + ", ".join(
        f"{name} +{s['p50'] - floor_s:.1f} ms" for name, s in results["events"].items()))
    lines.append("console script above the `python -c pass` floor (p50): " + ", ".join(
        f"{name} +{s['p50'] - floor:.1f} ms" for name, s in results["console_script"].items()))
    lines.append("imports of one run (-X importtime, installed command): " + "; ".join(
        f"{name} {i['modules']} modules ({i['nmem_modules']} nmem), {i['self_ms']:.1f} ms self "
        f"({i['nmem_self_ms']:.1f} nmem)" for name, i in results["imports"].items()))
    lines.append(f"largest SessionStart output: {results['context_chars']:,} characters (Claude Code caps at 10,000)")
    if "stop_agent_prompts" in results:
        lines.append(f"Stop: a transcript of {results['stop_transcript_bytes'] / 1e6:.2f} MB whose last turn has 40 "
                     f"tool calls; one Stop stored {results['stop_agent_prompts']} agent prompts")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=60, help="measured runs per event (default 60)")
    parser.add_argument("--observations", type=int, default=50_000, help="database size (default 50000)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--profile", choices=sorted(set(TARGETS_MS) - {"Stop"}),
                        help="profile one event instead of timing")
    parser.add_argument("--ir", action="store_true",
                        help="count instructions per event under callgrind instead of timing (needs valgrind)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary NMEM_HOME")
    parser.add_argument("--encrypted", choices=sorted(KEYS),
                        help="build and measure an SQLCipher-encrypted database (raw key or passphrase)")
    parser.add_argument("--agent", choices=("claude-code", "codex", "gemini", "cursor", "opencode"),
                        default="claude-code",
                        help="whose payloads and installed hook command to measure (default claude-code)")
    args = parser.parse_args(argv)
    global AGENT  # noqa: PLW0603 - one run measures one agent; every helper reads it
    AGENT = args.agent
    key_env = {"NMEM_KEY": KEYS[args.encrypted]} if args.encrypted else None

    compileall.compile_dir(str(Path(nmem.__file__).parent), quiet=1)
    home = Path(tempfile.mkdtemp(prefix="nmem-bench-")) / "home"
    try:
        db = populate(home, args.observations, key_env)
        db["encrypted"] = args.encrypted
        if args.encrypted and (home / "nmem.db").read_bytes()[:16] == b"SQLite format 3\x00":
            sys.exit("bench/hooks.py: --encrypted built a plain database")
        if args.profile:
            print(profile(home, args.profile, key_env))
            return 0
        if args.ir:
            counts = instructions(home)
            print(json.dumps({"agent": AGENT, "database": db, "ir": counts}, indent=2) if args.json
                  else ir_report(db, counts))
            return 0
        results = measure(home, args.runs, key_env=key_env)
    finally:
        if args.keep:
            print(f"kept {home}", file=sys.stderr)
        else:
            shutil.rmtree(home.parent, ignore_errors=True)
    if args.json:
        print(json.dumps({"agent": AGENT, "database": db, "runs": args.runs, "python": sys.version.split()[0],
                          **results}, indent=2))
    else:
        print(text_report(db, results, args.runs))
    missed = [name for key in ("events", "console_script") for name, s in results[key].items() if not s["ok"]]
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
