"""`make attack --area secrets`: secrets placed in every field of every way in, then searched for on disk.

The secrets come from the privacy corpus (tests/reliability/secret_corpus.py: every format the
filter knows, in the contexts an agent meets) plus passwords given in prose ("the db password is
X", "pw X", "creds admin / X", "login with X"). Each is placed in one field and sent through a
real surface: `nmem record` processes with Claude Code payloads (stored, and spooled while the
database is locked), `nmem remember` on the command line, the MCP `remember` tool through the
official client, the HTTP API, and `nmem import` of an export and of an MCP memory graph. Then
the raw bytes of the database, its WAL, the spool and the log are searched for any 12-character
piece of any secret (lower-cased too: the full-text index keeps lower-case tokens).

A row per surface: `tried` is placements, `leaked` placements whose secret was found on disk,
`errors` runs that crashed or were refused for no reason of theirs (a refusal with a clear
message, such as a summary over 100 characters, is not one), plus one when a surface stored
nothing at all (the note gives the rows stored). The last row measures false positives: `tried` is lines of real text
that hold no secret (this repository's git log with full SHAs, the sha256 digests of the
RECORD files of .venv's packages, UUIDs, the repository's lock-file and source lines), and
`errors` counts those the filter changed among the hash-like lines (SHAs, digests, UUIDs),
which must be none; the note gives the changed source lines too.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CWD = "/home/dev/code/billing-api"
T0 = 1_790_000_000


Pool = list[tuple[str, tuple[str, ...]]]  # (a text holding secrets, the secrets)


class Placement:
    """One secret text in one field of one surface; `values` must not reach disk."""

    def __init__(self, surface: str, field: str, text: str, values: tuple[str, ...]) -> None:
        self.surface, self.field, self.text, self.values = surface, field, text, values

    def pieces(self) -> set[str]:
        out: set[str] = set()
        for value in self.values:
            v = value.replace("\n", "")
            out |= {v} if len(v) <= 12 else {v[i:i + 12] for i in range(len(v) - 11)}
        return out


PROSE = (
    ("the db password is {p}", "Tr5wQ8zNm3Kp"), ("pw {p}", "hunterblue"), ("creds admin / {p}", "Hj4kLm9PqR2s"),
    ("login with {p}", "Zq8!mK2#vT5w"), ("the password for db.internal is {p}.", "bluemoon42"),
    ("sign in as deploy / {p}", "Vx7nB2qP9kLm"),
)


def secrets(quick: bool) -> list[tuple[str, tuple[str, ...]]]:
    """(text, values) pairs: every corpus case (one per format when quick) and the prose passwords."""
    sys.path.insert(0, str(REPO / "tests"))
    from reliability.secret_corpus import SECRET_CASES

    cases = list(SECRET_CASES)
    if quick:
        seen: set[str] = set()
        cases = [c for c in cases if not (c.fmt in seen or seen.add(c.fmt))][::5]  # type: ignore[func-returns-value]
    out = [(c.text, c.values) for c in cases]
    out += [(template.format(p=p), (p,)) for template, p in PROSE]
    return out


# -- hooks -----------------------------------------------------------------------------------------------


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NMEM_")}
    env.update(NMEM_HOME=str(home), **extra)
    return env


def _hook(home: Path, payload: dict[str, Any], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nmem", "record"], input=json.dumps(payload), text=True,
                          capture_output=True, env=_env(home, **env), timeout=60, check=False)


def _event(name: str, session: str, **fields: Any) -> dict[str, Any]:
    return {"session_id": session, "transcript_path": "", "cwd": CWD, "hook_event_name": name, **fields}


def hook_events(pool: Pool, start: int, session: str
                ) -> tuple[list[dict[str, Any]], list[Placement]]:
    """The events of one round: each field gets the next secret of the pool."""
    placements: list[Placement] = []
    at = [start]

    def take(field: str, wrap: Any = None) -> str:
        text, values = pool[at[0] % len(pool)]
        at[0] += 1
        placements.append(Placement("hook", field, text, values))
        return wrap(text) if wrap else text

    def quoted(text: str) -> str:
        return urllib.parse.quote(text, safe="")

    events = [
        _event("UserPromptSubmit", session, prompt=take("prompt")),
        _event("PostToolUse", session, tool_name="Bash",
               tool_input={"command": take("bash.command"), "description": take("bash.description")},
               tool_response={"stdout": take("bash.stdout"), "stderr": "", "interrupted": False}),
        _event("PostToolUseFailure", session, tool_name="Bash", tool_input={"command": "./deploy.sh"},
               error="Exit code 1\n" + take("bash.error")),
        _event("PostToolUse", session, tool_name="Read",
               tool_input={"file_path": f"{CWD}/notes/" + take("read.path")}),
        _event("PostToolUse", session, tool_name="Write",
               tool_input={"file_path": f"{CWD}/" + take("write.path"), "content": take("write.content")}),
        _event("PostToolUse", session, tool_name="Edit",
               tool_input={"file_path": f"{CWD}/config.py", "old_string": "x = 1", "new_string": take("edit.new")}),
        _event("PostToolUse", session, tool_name="Grep",
               tool_input={"pattern": take("grep.pattern"), "path": f"{CWD}/" + take("grep.path"),
                           "glob": take("grep.glob")}, tool_response={"numFiles": 1}),
        _event("PostToolUse", session, tool_name="WebFetch",
               tool_input={"url": "https://api.acme.dev/v1/" + take("webfetch.url-path", quoted) + "?q="
                           + take("webfetch.url-query", quoted) + "&page=2", "prompt": take("webfetch.prompt")},
               tool_response={"code": 200, "result": take("webfetch.result")}),
        _event("PostToolUse", session, tool_name="WebSearch", tool_input={"query": take("websearch.query")}),
        _event("PostToolUse", session, tool_name="mcp__vault__put",
               tool_input={"path": "kv/prod", "value": take("mcp.input")}, tool_response=take("mcp.response")),
        _event("PostToolUse", session, tool_name="Agent",
               tool_input={"description": "rotate keys", "prompt": take("agent.prompt")}),
        _event("Stop", session, last_assistant_message=take("stop.message")),
    ]
    return events, placements


def run_hooks(home: Path, pool: Pool, rounds: int) -> tuple[list[Placement], int]:
    placements: list[Placement] = []
    errors = 0
    at = 0
    for r in range(rounds):
        events, placed = hook_events(pool, at, f"attack-{r}")
        at += len(placed)
        placements += placed
        for payload in [_event("SessionStart", f"attack-{r}", source="startup"), *events]:
            done = _hook(home, payload)
            errors += done.returncode != 0 or "Traceback" in done.stderr
    return placements, errors


def run_spooled(home: Path, pool: Pool) -> tuple[list[Placement], int, bytes]:
    """Events sent while another process holds the database's write lock: they wait in the spool."""
    events, placements = hook_events(pool, 0, "attack-spool")
    for p in placements:
        p.surface = "hook spool"
    _hook(home, _event("SessionStart", "attack-spool", source="startup"))
    conn = sqlite3.connect(home / "nmem.db", isolation_level=None, timeout=5)
    conn.execute("BEGIN IMMEDIATE")
    errors = 0
    try:
        for payload in events:
            done = _hook(home, payload, NMEM_BUSY_BUDGET_MS="50")
            errors += done.returncode != 0 or "Traceback" in done.stderr
        spooled = files_bytes(home / "spool")
    finally:
        conn.rollback()
        conn.close()
    if not spooled:
        errors += 1  # nothing was spooled: the scenario proved nothing
    _hook(home, _event("SessionStart", "attack-spool-2", source="clear"))  # drains the spool
    return placements, errors, spooled


# -- memories ----------------------------------------------------------------------------------------------


def _nmem(home: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nmem", *args], input=stdin, text=True, capture_output=True,
                          env=_env(home), timeout=60, check=False, cwd=str(home))


def _crashed(done: subprocess.CompletedProcess[str]) -> bool:
    return done.returncode not in (0, 1, 2) or "Traceback" in done.stderr


MEMORY_FIELDS = ("content", "summary", "tags", "relates_to")


PLAIN: dict[str, Any] = {"content": "deploy notes for the billing service", "summary": "deploy notes",
                         "tags": ["ci"], "relates_to": []}


def memory_rounds(surface: str, pool: Pool, field: str) -> Iterator[tuple[dict[str, Any], Placement]]:
    """Memories with one secret each, in `field`; the other fields plain."""
    for text, values in pool:
        fields: dict[str, Any] = dict(PLAIN)
        fields[field] = {"content": f"deploy notes\n{text}", "summary": text[:100], "tags": [text[:200], "ci"],
                         "relates_to": [text]}[field]
        yield fields, Placement(surface, field, text, values)


def _remember(home: Path, fields: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    args = ["remember", fields["content"], "--summary", fields["summary"],
            "--tags", ",".join(t.replace(",", " ") for t in fields["tags"])]
    if fields["relates_to"]:
        args += ["--relates-to", fields["relates_to"][0].replace(",", " ")]
    return _nmem(home, *args)


def run_cli(home: Path, pool: Pool, field: str) -> tuple[list[Placement], int]:
    """Each `nmem remember` process carries four secrets, one a field, rather than one (a process
    costs ~0.2 s of CPU): the database of `field` gets every secret of the pool once, secret i in
    field (i + k) % 4 where `field` is the k-th of MEMORY_FIELDS, so over the four databases every
    secret goes through every field, as when each went alone, and a leak is still counted in the
    field it was placed in. A memory the command refuses (stored nothing) is sent again one secret
    at a time, the other fields plain, so no placement goes unstored behind another's refusal."""
    shift = MEMORY_FIELDS.index(field)
    by_field: dict[str, list[tuple[dict[str, Any], Placement]]] = {f: [] for f in MEMORY_FIELDS}
    for at, (text, values) in enumerate(pool):
        placed_in = MEMORY_FIELDS[(at + shift) % len(MEMORY_FIELDS)]
        by_field[placed_in].append(next(memory_rounds("cli remember", [(text, values)], placed_in)))
    placements, errors = [], 0
    for call in range(max(map(len, by_field.values()))):
        alone = [by_field[f][call] for f in MEMORY_FIELDS if call < len(by_field[f])]
        fields = {f: by_field[f][call][0][f] if call < len(by_field[f]) else PLAIN[f] for f in MEMORY_FIELDS}
        done = _remember(home, fields)
        errors += _crashed(done)
        if done.returncode != 0 and not _crashed(done):
            for one, _ in alone:
                errors += _crashed(_remember(home, one))
        placements += [placed for _, placed in alone]
    return placements, errors


def run_mcp(home: Path, pool: Pool, field: str) -> tuple[list[Placement], int]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    placements: list[Placement] = []
    errors = 0

    async def session() -> None:
        nonlocal errors
        params = StdioServerParameters(command=sys.executable, args=["-m", "nmem", "serve"], env=_env(home),
                                       cwd=str(home))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            for fields, placed in memory_rounds("mcp remember", pool, field):
                result = await client.call_tool("remember", fields)
                text = " ".join(getattr(c, "text", "") for c in result.content)
                errors += "Traceback" in text or "internal error" in text.lower()
                placements.append(placed)

    asyncio.run(session())
    return placements, errors


def run_http(home: Path, pool: Pool, field: str) -> tuple[list[Placement], int]:
    import httpx2

    from nmem.adapters.http.app import create_app
    from nmem.config import load_settings
    from nmem.service.api import Service

    placements: list[Placement] = []
    errors = 0
    os.environ["NMEM_HOME"] = str(home)
    settings = load_settings()
    service = Service.open(settings)

    async def send() -> None:
        nonlocal errors
        app = create_app(settings, service=service, project="billing-api")
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1",
                                      headers={"X-Nmem-CSRF": "1"}) as c:
            for fields, placed in memory_rounds("http", pool, field):
                response = await c.post("/api/v1/memories", json=fields)
                errors += response.status_code not in (201, 400, 422)  # stored, or refused with a reason
                placements.append(placed)

    try:
        asyncio.run(send())
    finally:
        service.close()
        os.environ.pop("NMEM_HOME", None)
    return placements, errors


IMPORT_FIELDS = (*MEMORY_FIELDS, "source", "mcp-memory.observation")


def run_import(home: Path, pool: Pool, field: str) -> tuple[list[Placement], int]:
    """`nmem import` of an export whose memories hold a secret in `field`, or of an MCP memory graph."""
    if field == "mcp-memory.observation":
        graph = home / "memory.jsonl"
        graph.write_text("\n".join(json.dumps({"type": "entity", "name": f"service-{i}", "entityType": "service",
                                               "observations": [text]}) for i, (text, _) in enumerate(pool)) + "\n",
                         encoding="utf-8")
        placements = [Placement("import", field, text, values) for text, values in pool]
        return placements, int(_crashed(_nmem(home, "import", "mcp-memory", str(graph))))
    lines = [json.dumps({"kind": "nmem_export", "version": 1})]
    placements = []
    as_source = field == "source"
    for shown, found in memory_rounds("import", pool, "content" if as_source else field):
        fields = {**shown, "content": "deploy notes for the billing service"} if as_source else shown
        placed = Placement("import", "source", found.text, found.values) if as_source else found
        lines.append(json.dumps({
            "kind": "memory", "uid": "", "domain": "project:billing-api", "namespace": "context",
            "summary": fields["summary"], "content": fields["content"], "tags": fields["tags"],
            "source": placed.text if as_source else "import", "relates_to": fields["relates_to"],
            "tier": "warm", "is_pinned": False, "created_at": T0, "updated_at": T0, "accessed_at": None,
            "access_count": 0, "deleted_at": None}))
        placements.append(placed)
    export = home / "export.jsonl"
    export.write_text("\n".join(lines) + "\n", encoding="utf-8")
    errors = int(_crashed(_nmem(home, "import", str(export))))
    export.unlink()
    return placements, errors


# -- the search ----------------------------------------------------------------------------------------------


def files_bytes(*paths: Path) -> bytes:
    chunks: list[bytes] = []
    for path in paths:
        if path.is_dir():
            chunks += [p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()]
        elif path.exists():
            chunks.append(path.read_bytes())
    return b"\n".join(chunks)


def on_disk(home: Path) -> bytes:
    return files_bytes(home / "nmem.db", home / "nmem.db-wal", home / "spool", home / "logs")


def leaks(placements: list[Placement], blob: bytes) -> list[Placement]:
    lowered = blob.lower()
    return [p for p in placements if any(x.encode() in blob or x.lower().encode() in lowered for x in p.pieces())]


def stored_rows(home: Path) -> int:
    """Memories, observations and prompts in the database: a surface that stored nothing proved nothing."""
    if not (home / "nmem.db").exists():
        return 0
    conn = sqlite3.connect(home / "nmem.db")
    try:
        return sum(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                   for table in ("memories", "observations", "prompts"))
    finally:
        conn.close()


def _row(surface: str, placements: list[Placement], errors: int, leaked: list[Placement], stored: int) -> Any:
    from attack import Row

    fields = sorted({p.field for p in leaked})
    note = (f"{len({p.field for p in placements})} fields, {stored} rows stored"
            + (f"; leaked in {', '.join(fields)}" if fields else ""))
    errors += stored == 0
    return Row("secrets", surface, tried=len(placements), leaked=len(leaked), errors=errors, note=note)


# -- false positives ----------------------------------------------------------------------------------------


def real_text() -> dict[str, list[str]]:
    """Lines of real text without secrets, by kind; the hash-like kinds must come through unchanged."""
    log = subprocess.run(["git", "-C", str(REPO), "log", "-n", "2000", "--format=%H %h %s"], capture_output=True,
                         text=True, check=False).stdout.splitlines()
    records = []
    for record in sorted(Path(sys.prefix).glob("lib/python*/site-packages/*.dist-info/RECORD")):
        records += [line for line in record.read_text(encoding="utf-8", errors="replace").splitlines()
                    if "sha256=" in line]
    uuids = [f"request {uuid.uuid4()} done; trace {uuid.uuid4().hex}" for _ in range(2000)]
    source = []
    for path in sorted([*REPO.glob("src/**/*.py"), *REPO.glob("tests/fixtures/*.json*"), *REPO.glob("docs/*.md")]):
        if path.name not in ("secret_formats.py", "privacy.py"):
            source += path.read_text(encoding="utf-8", errors="replace").splitlines()
    return {"git log": log, "RECORD digests": records, "UUIDs": uuids, "source, fixtures, docs": source}


def false_positives(quick: bool) -> Any:
    from attack import Row
    from nmem.capture.privacy import scrub

    counts: dict[str, tuple[int, int]] = {}
    for kind, every_line in real_text().items():
        lines = every_line[:400] if quick else every_line
        counts[kind] = (len(lines), sum(scrub(line) != line for line in lines))
    hashes = sum(changed for kind, (_, changed) in counts.items() if kind != "source, fixtures, docs")
    note = "; ".join(f"{kind}: {changed}/{n} changed" for kind, (n, changed) in counts.items())
    return Row("secrets", "false positives (errors = hash-like lines changed)",
               tried=sum(n for n, _ in counts.values()), errors=hashes, note=note)


def scenarios(work: Path, quick: bool) -> Iterator[Any]:
    """Every placement of a secret goes to a database where no other placement holds that secret,
    so a leak is counted once, in the field it was placed in."""
    pool = secrets(quick)
    home = work / "hook"
    home.mkdir(parents=True)
    hooked, errors = run_hooks(home, pool, rounds=max(1, len(pool) // 21))
    yield _row("hook (nmem record)", hooked, errors, leaks(hooked, on_disk(home)), stored_rows(home))
    home = work / "spool"
    home.mkdir()
    spooled, errors, spool_bytes = run_spooled(home, pool)
    yield _row("hook spool (database locked)", spooled, errors, leaks(spooled, spool_bytes + b"\n" + on_disk(home)),
               stored_rows(home))
    surfaces = (("cli remember", run_cli, MEMORY_FIELDS), ("mcp remember (official client)", run_mcp, MEMORY_FIELDS),
                ("http POST /api/v1/memories", run_http, MEMORY_FIELDS),
                ("nmem import (export, mcp-memory)", run_import, IMPORT_FIELDS))
    for surface, run, fields in surfaces:
        placements: list[Placement] = []
        leaked: list[Placement] = []
        errors = stored = 0
        for field in fields:
            home = work / f"{surface.split()[0]}-{field}"
            home.mkdir()
            placed, failed = run(home, pool, field)
            placements += placed
            leaked += leaks(placed, on_disk(home))
            errors += failed
            stored += stored_rows(home)
        yield _row(surface, placements, errors, leaked, stored)
    yield false_positives(quick)
