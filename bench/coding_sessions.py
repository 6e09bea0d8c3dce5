"""Coding-session retrieval benchmark: does `nmem search` find the turn a question is about?

    .venv/bin/python bench/coding_sessions.py                  # seed 1, 60 sessions (make bench-coding)
    .venv/bin/python bench/coding_sessions.py --seed 7 --sessions 40 --json

Claude Code transcripts are generated in their real JSONL shapes (bench/cc_transcripts.py) in
the shape of real coding sessions, seeded: decisions explained mid-turn between tool calls,
failures whose root cause the agent states before fixing them, preferences the user states,
facts stated once and updated in a later session (only the newer statement counts), and facts
only a command's output holds (an installed version, a pull request's number). Fillers read,
grep, edit and run tests around them and mention the same libraries in passing. Every fact's
wording and every question's wording is drawn from several templates, with the question often
paraphrasing the subject, so no one phrasing is rewarded.

The transcripts are imported with the real importer (`nmem.portable.sources.transcripts`) into a
throw-away NMEM_HOME, and each question is asked through `Service.search(question, scope="all",
limit=10)`: a hit counts when it lies in the question's evidence turn (same session, time within
the turn). Beside it, plain BM25: SQLite FTS5 `bm25()` over whole turns (prompt, every assistant
message, thinking, tool inputs and outputs, subagents' lines), the question's words OR'd.
recall@k is the share of questions whose evidence turn is among the first k hits (nmem) or
turns (BM25); nmem answer@10 counts only a hit that holds the answer itself (the version, the
number, the cause, the chosen library's reason, the new value), which a BM25 turn always does.
Run it against another checkout to compare capture changes:
`PYTHONPATH=<checkout>/src .venv/bin/python bench/coding_sessions.py`.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import tempfile
import time
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cc_transcripts import Projects, Session
from measure import emit, loadavg, machine
from nmem.config import load_settings
from nmem.portable.sources.transcripts import find_transcripts, import_transcripts
from nmem.service.api import Service

START = 1_788_220_800  # 2026-09-01 UTC
DAY = 86400
KS = (5, 10)
KINDS = ("decision", "root_cause", "preference", "update", "output")
PROJECTS = (("/home/dev/code/billing-api", "billing", "acme/billing-api"),
            ("/home/dev/code/ledger-ui", "ledger", "acme/ledger-ui"))
STOP_WORDS = frozenset(
    "a an the and or but if of to in on at by for with from as is are was were be been do does did "
    "what which who whom why how when where we i you it its this that these those our us my me "
    "there their them they he she his her not no yes can could should would will shall may might "
    "now any all some did have has had about after before into over again then than so".split())

# (subject as the agent says it, as a question says it, chosen, version, alternative, reasons, feature asked for)
DECISIONS = (
    ("cron schedules", "recurring job timing", "croniter", "1.3.8", "dateutil.rrule",
     ("it parses the crontab strings ops already write", "rrule would need every rule rebuilt by hand"),
     "add the nightly invoice reminder job"),
    ("HTTP calls to the payment provider", "talking to the payments API", "httpx", "0.27.2", "requests",
     ("it has real timeouts and an async client", "requests has no HTTP/2 and we want connection pooling"),
     "wire the refund endpoint to the provider"),
    ("retrying flaky network calls", "backoff on transient failures", "tenacity", "8.2.3", "a hand-written loop",
     ("jittered exponential backoff is one decorator", "the loop we had never capped its wait"),
     "make the webhook sender survive provider hiccups"),
    ("password hashing", "storing user passwords", "argon2-cffi", "23.1.0", "bcrypt",
     ("argon2id is memory-hard", "bcrypt truncates passwords at 72 bytes"), "add password login"),
    ("background jobs", "the task queue", "rq", "1.16.1", "celery",
     ("we already run redis and need nothing else", "celery's config surface is far more than we use"),
     "move the statement export off the request thread"),
    ("PDF invoices", "rendering invoice documents", "weasyprint", "62.3", "reportlab",
     ("it renders the HTML templates we already have", "reportlab means drawing every table by hand"),
     "generate PDF invoices"),
    ("webhook payload checks", "validating incoming webhooks", "jsonschema", "4.23.0", "marshmallow",
     ("the provider publishes JSON Schemas we can load as is", "marshmallow would duplicate their schema"),
     "validate the payment webhooks"),
    ("image thumbnails", "resizing uploaded pictures", "pillow", "10.4.0", "wand",
     ("it needs no ImageMagick on the servers", "wand segfaulted on CMYK JPEGs in the spike"),
     "show thumbnails of receipts"),
    ("config loading", "reading settings from the environment", "pydantic-settings", "2.4.0", "python-decouple",
     ("settings get validated types at start-up", "decouple returns strings we cast by hand"),
     "clean up how settings are read"),
    ("feature flags", "turning features on per tenant", "a flags table in postgres", "", "LaunchDarkly",
     ("it costs nothing and flags live next to the tenants", "the SaaS needs a vendor review first"),
     "let support enable beta exports per tenant"),
)
DECISION_SAID = (
    "Going with {chosen} {ver} for {subject} rather than {alt}: {reason}.",
    "For {subject} I'll use {chosen} {ver} instead of {alt}, since {reason}.",
    "Decision: {chosen} over {alt} for {subject}. Main reason: {reason}.",
    "I picked {chosen} ({ver}) for {subject}; {alt} was the other option, but {reason2}.",
)
DECISION_ASKED = (
    "Which library did we choose for {qsubject}?",
    "Why did we pick {chosen} and not {alt}?",
    "What did we settle on for {qsubject}, and why?",
    "Did we end up using {alt} for {qsubject}?",
    "What was the reasoning behind the {qsubject} choice?",
)

# (symptom as said, as asked, test file, cause)
ROOT_CAUSES = (
    ("leap-year balance test", "February balance bug", "tests/test_balance.py",
     "the fixture hard-coded 28 days for February"),
    ("duplicate reminder emails", "customers getting the reminder twice", "tests/test_reminders.py",
     "the job lock expired before the mailer finished"),
    ("tenant data showing up in another tenant's cache", "cross-tenant cache leak", "tests/test_cache.py",
     "the cache key ignored the tenant id"),
    ("timezone test failing at midnight", "midnight timezone failure", "tests/test_schedule.py",
     "naive datetimes were compared with aware ones"),
    ("pagination skipping a row", "rows missing between pages", "tests/test_pagination.py",
     "the offset was computed from the page number without subtracting one"),
    ("webhook retries never stopping", "webhooks retried forever", "tests/test_webhooks.py",
     "the retry loop swallowed the last exception instead of re-raising it"),
    ("migration failing on a fresh database", "new database setup breaking", "tests/test_migrations.py",
     "the currency migration ran before the seed data existed"),
    ("statement export timing out", "CSV export timeouts", "tests/test_export.py",
     "the query loaded every row into memory instead of streaming"),
    ("broken 2.3 release", "the failed release", "tests/test_version.py",
     "the version file was not bumped before the tag was pushed"),
    ("refund totals off by a cent", "refund rounding error", "tests/test_refunds.py",
     "float arithmetic was used instead of Decimal with ROUND_HALF_UP"),
)
CAUSE_SAID = (
    "Found it: {cause}.",
    "The root cause is that {cause}; fixing that now.",
    "So the {symptom} comes from this: {cause}.",
    "Got it. {Cause}, which explains the {symptom}.",
)
CAUSE_ASKED = (
    "What was the root cause of the {qsymptom}?",
    "Why did the {qsymptom} happen?",
    "What turned out to be behind the {qsymptom}?",
    "Remind me what caused the {symptom}?",
)

# (what the user asks for, how a question asks about it)
PREFERENCES = (
    ("use pytest fixtures instead of unittest setUp methods", "How does the user want test setup written?"),
    ("keep commit messages in the imperative mood and under 72 characters",
     "What style should commit messages follow?"),
    ("run ruff instead of flake8 and black", "Which linter does the user prefer?"),
    ("never push straight to main; always open a pull request", "Am I allowed to push directly to main?"),
    ("add type hints to every new public function", "What is the rule on type annotations?"),
    ("log with structlog key-value pairs, not f-strings", "How should log messages be written?"),
    ("pin dependencies to exact versions in requirements.txt", "How should dependencies be pinned?"),
    ("write docstrings in Google style", "Which docstring format should I use?"),
    ("keep SQL in .sql files, not inline strings", "Where should SQL queries live?"),
)
PREFERENCE_SAID = ("One more thing: {pref}.", "Please {pref} from now on.", "Going forward, {pref}.",
                   "Quick preference: {pref}. Then carry on.")

# (subject as asked, statement with {v}, values)
UPDATES = (
    ("port of the staging database", "The staging database listens on port {v}.", ("5433", "6543", "15432", "5532")),
    ("public API rate limit", "The public API allows {v} requests per minute per key.", ("60", "120", "300", "600")),
    ("production deploy region", "Production deploys go to {v}.", ("eu-west-1", "eu-central-1", "us-east-2")),
    ("outbound request timeout", "Outbound HTTP calls time out after {v} seconds.", ("10", "15", "30", "45")),
    ("maximum upload size", "Uploads are capped at {v} MB.", ("10", "25", "50", "100")),
    ("Python version on CI", "CI runs the test suite on Python {v}.", ("3.11", "3.12", "3.13")),
    ("alerts channel", "Billing alerts go to the {v} Slack channel.", ("#ops-alerts", "#billing-oncall", "#incidents")),
)
UPDATE_OLD = ("FYI: {fact}", "Noting for later: {fact}", "{fact} Keep that in mind for the config.")
UPDATE_NEW = ("Heads up, this changed: {fact}", "Updated: {fact} The old value is gone.",
              "As of today {fact_lower}")
UPDATE_ASKED = ("What is the {subject} now?", "Which {subject} do we use currently?",
                "What's the latest {subject}?", "Has the {subject} changed, and to what?")

# (package, version, what a question calls it)
INSTALLED = (("sqlalchemy", "2.0.31", "SQLAlchemy"), ("alembic", "1.13.2", "Alembic"),
             ("redis", "5.0.7", "the redis client"),
             ("stripe", "10.5.0", "the Stripe SDK"), ("boto3", "1.34.144", "boto3"), ("fastapi", "0.111.1", "FastAPI"))
VERSION_ASKED = ("Which version of {name} is installed?", "What {name} version are we on?",
                 "Which release of {name} did pip report?")
PR_ASKED = ("What's the PR number for {feature}?", "Which pull request was opened to {feature}?",
            "Link to the PR that does {feature}?")
PR_FEATURES = ("add CSV statement downloads", "fix the dunning email schedule", "support partial refunds",
               "show invoice history per customer", "retry failed card charges", "export ledger entries to S3")

FILLER_ASKS = ("why is {module} so slow?", "add a test for {func} in {module}", "refactor {module} to drop the "
               "global session", "clean up the imports in {module}", "rename {func} to something clearer",
               "does {module} handle empty input?", "look at the warning in {module}")
FILLER_SAID = ("Let me read {module} first.", "I'll check the tests around {func}.",
               "{module} looks fine; the loop in {func} is the slow part.",
               "The tests pass locally; {func} just needed a guard for empty input.",
               "{alt} is still imported in {module} but nothing calls it.",
               "Renamed {func}; callers updated.", "The warning comes from a deprecated argument in {func}.")
MODULES = ("src/{p}/invoices.py", "src/{p}/payments.py", "src/{p}/customers.py", "src/{p}/reports.py",
           "src/{p}/jobs.py", "src/{p}/api.py", "src/{p}/models.py", "src/{p}/settings.py")
FUNCS = ("build_statement", "charge_card", "apply_discount", "load_rates", "send_reminder", "paginate",
         "export_rows", "refund", "close_period", "parse_amount")


@dataclass
class Question:
    kind: str
    text: str
    session: str
    turn: int
    answer: str = ""   # words the evidence itself holds (a version, a number, the cause)
    fact: tuple[str, int] = ("", -1)   # what it asks about: the same fact stated in another turn answers it too
    evidence: dict[tuple[str, int], str] = field(default_factory=dict)   # every turn stating it -> its answer


@dataclass
class Corpus:
    root: Path
    questions: list[Question] = field(default_factory=list)
    turns: dict[str, list[int]] = field(default_factory=dict)   # session -> start second of each turn

    def turn_of(self, session: str, ts: int) -> int | None:
        starts = self.turns.get(session)
        if not starts or ts < starts[0]:
            return None
        return bisect_right(starts, ts) - 1


class Script:
    """Writes the sessions of one seeded run and the questions about them."""

    def __init__(self, root: Path, seed: int) -> None:
        self.rng = random.Random(seed)
        self.tree = Projects(root, seed=seed)
        self.corpus = Corpus(root)
        self.now = START
        self.stated: dict[tuple[str, int], dict[tuple[str, int], str]] = {}

    def pick(self, options: tuple[Any, ...]) -> Any:
        return self.rng.choice(options)

    def turn(self, s: Session, prompt: str) -> int:
        s.prompt(prompt)
        starts = self.corpus.turns.setdefault(s.session_id, [])
        starts.append(int(s.now))
        return len(starts) - 1

    def ask(self, kind: str, text: str, s: Session, turn: int, answer: str = "", fact: int = -1) -> None:
        """A question about the fact `fact` of its kind stated in `turn`. Facts repeat across
        sessions (ten templates a kind, about thirty statements), and a turn stating the same
        fact answers the question as well: each is its evidence (`Question.evidence`)."""
        key = (kind, fact) if fact >= 0 else (kind, -1 - len(self.corpus.questions))
        self.corpus.questions.append(Question(kind, text, s.session_id, turn, answer, key))
        self.stated.setdefault(key, {})[(s.session_id, turn)] = answer

    # -- what a turn can be ----------------------------------------------------------------------

    def filler(self, s: Session, slug: str) -> None:
        module, func = self.pick(MODULES).format(p=slug), self.pick(FUNCS)
        alt = self.pick(DECISIONS)[4]
        self.turn(s, self.pick(FILLER_ASKS).format(module=module, func=func))
        s.thinking(f"Start from {module}.")
        s.read(module, f"def {func}(rows):\n    return [r for r in rows if r]\n")
        s.say(self.pick(FILLER_SAID).format(module=module, func=func, alt=alt), final=False)
        if self.rng.random() < 0.5:
            s.tool("Grep", {"pattern": func, "path": "src"}, result=f"{module}\ntests/test_{func}.py",
                   tool_use_result={"mode": "files_with_matches", "filenames": [module], "numFiles": 2})
        s.edit(module, "return [r for r in rows if r]", "return [r for r in rows if r is not None]")
        n = self.rng.randint(8, 140)
        s.bash(f"pytest -q tests/test_{func}.py", stdout=f"{'.' * min(n, 40)}\n{n} passed in 0.{n % 90 + 10}s")
        s.say(self.pick(("Done.", f"Done: {func} handles empty input now.", "All green.",
                         f"Updated {module}; tests pass.")))

    def decision(self, s: Session, slug: str, used: set[int]) -> None:
        i = self._fresh(len(DECISIONS), used)
        subject, qsubject, chosen, ver, alt, reasons, feature = DECISIONS[i]
        turn = self.turn(s, f"please {feature}")
        s.thinking(f"Two candidates for {subject}: {chosen} and {alt}.")
        s.tool("Grep", {"pattern": alt.split()[0], "path": "src"}, result="No files found",
               tool_use_result={"mode": "files_with_matches", "filenames": [], "numFiles": 0})
        said_form = self.pick(DECISION_SAID)
        said = said_form.format(chosen=chosen, ver=ver, subject=subject, alt=alt,
                                               reason=reasons[0], reason2=reasons[1]).replace("  ", " ")
        mid_turn = self.rng.random() < 0.7
        if mid_turn:   # explained between tool calls: the final message only says what was done
            s.say(said, final=False)
        pkg = chosen.split()[0]
        s.bash(f"pip install {pkg}", stdout=f"Collecting {pkg}\nInstalling collected packages: {pkg}\n"
                                            f"Successfully installed {pkg}-{ver or '1.0'}")
        module = self.pick(MODULES).format(p=slug)
        s.edit(module, "# TODO", f"import {pkg.replace('-', '_')}")
        s.bash("pytest -q", stdout=f"{self.rng.randint(40, 300)} passed in 2.{self.rng.randint(10, 99)}s")
        s.say(f"Done: {feature}. Tests pass." if mid_turn else said + " Tests pass.")
        q = self.pick(DECISION_ASKED).format(qsubject=self.pick((subject, qsubject)), chosen=chosen, alt=alt)
        self.ask("decision", q, s, turn, reasons[0] if "{reason}" in said_form else reasons[1], i)

    def root_cause(self, s: Session, slug: str, used: set[int]) -> None:
        i = self._fresh(len(ROOT_CAUSES), used)
        symptom, qsymptom, test, cause = ROOT_CAUSES[i]
        turn = self.turn(s, self.pick((f"the {symptom} is back, can you fix it?", f"{test} fails, please look",
                                       f"users report the {symptom}; investigate")))
        s.bash(f"pytest -q {test}", exit_code=1,
               stdout=f"F.\nFAILED {test}::test_{i} - AssertionError: assert 28 == 29\n1 failed, 1 passed in 0.31s")
        module = self.pick(MODULES).format(p=slug)
        s.read(module, "def compute(x):\n    return x\n")
        s.say(self.pick(CAUSE_SAID).format(cause=cause, Cause=cause[0].upper() + cause[1:], symptom=symptom),
              final=False)
        s.edit(module, "return x", "return fixed(x)")
        s.bash(f"pytest -q {test}", stdout="..\n2 passed in 0.28s")
        s.say(self.pick((f"Fixed the {symptom}; tests pass.", "Fixed; both tests pass now.",
                         f"The {symptom} is fixed and covered by {test}.")))
        q = self.pick(CAUSE_ASKED).format(qsymptom=qsymptom, symptom=symptom)
        self.ask("root_cause", q, s, turn, cause[1:], i)

    def preference(self, s: Session, slug: str, used: set[int]) -> None:
        i = self._fresh(len(PREFERENCES), used)
        pref, asked = PREFERENCES[i]
        turn = self.turn(s, self.pick(PREFERENCE_SAID).format(pref=pref))
        s.say(self.pick(("Noted.", "Got it, will do.", "Understood.")))
        self.ask("preference", asked, s, turn, fact=i)

    def update_old(self, s: Session, fact_i: int, value: str) -> None:
        statement = UPDATES[fact_i][1]
        module = self.pick(MODULES).format(p="billing")
        self.turn(s, f"check the settings used by {module}")
        s.read(module, "SETTINGS = {}\n")
        s.say(self.pick(UPDATE_OLD).format(fact=statement.format(v=value)), final=False)
        s.say("Settings look consistent.")

    def update_new(self, s: Session, fact_i: int, value: str) -> None:
        subject, statement, _ = UPDATES[fact_i]
        turn = self.turn(s, self.pick(("ops changed some infrastructure, update the config",
                                       "sync the settings module with the new infra",
                                       "the deploy notes changed; adjust our defaults")))
        s.read("deploy/NOTES.md", "see the ops channel\n")
        fact = statement.format(v=value)
        s.say(self.pick(UPDATE_NEW).format(fact=fact, fact_lower=fact[0].lower() + fact[1:]), final=False)
        s.edit("src/billing/settings.py", "OLD = 1", "NEW = 1")
        s.say("Config updated.")
        q = self.pick(UPDATE_ASKED).format(subject=subject)
        self.ask("update", q, s, turn, value)

    def output(self, s: Session, slug: str, repo: str, used: set[int]) -> None:
        if self.rng.random() < 0.5:
            i = self._fresh(len(INSTALLED), used)
            package, version, name = INSTALLED[i]
            turn = self.turn(s, self.pick((f"is {package} up to date?", "check what we have installed",
                                           f"which {package} do we run?")))
            s.bash(f"pip show {package}", stdout=f"Name: {package}\nVersion: {version}\nSummary: {name} for Python\n"
                                                  f"Home-page: https://pypi.org/project/{package}\n"
                                                  f"Location: /home/dev/.venv/lib/python3.12/site-packages\n"
                                                  f"Requires: \nRequired-by: {slug}")
            s.say(self.pick(("Checked the installed package; nothing to upgrade right now.",
                             "That's what pip reports; it is fine for us.")))
            self.ask("output", self.pick(VERSION_ASKED).format(name=name), s, turn, version, i)
            return
        i = self._fresh(len(PR_FEATURES), used | {100 + u for u in used})
        feature = PR_FEATURES[i]
        number = self.rng.randint(120, 980)
        turn = self.turn(s, f"open a PR to {feature}")
        s.bash("git push -u origin HEAD", stdout="", stderr="branch 'feature' set up to track 'origin/feature'.")
        s.bash(f'gh pr create --title "{feature.capitalize()}" --body "See the linked issue."',
               stdout=f"https://github.com/{repo}/pull/{number}\n",
               stderr=f"Creating pull request for feature into main in {repo}\n")
        s.say("Opened the pull request.")
        self.ask("output", self.pick(PR_ASKED).format(feature=feature), s, turn, str(number), 100 + i)

    def _fresh(self, n: int, used: set[int]) -> int:
        free = [i for i in range(n) if i not in used] or list(range(n))
        i = self.rng.choice(free)
        used.add(i)
        return i

    # -- the run ---------------------------------------------------------------------------------

    def write(self, sessions: int) -> Corpus:
        used: dict[str, set[int]] = {kind: set() for kind in KINDS}
        # each updated fact: stated in one session, changed in a later one
        updates = self.rng.sample(range(len(UPDATES)), min(len(UPDATES), max(1, sessions // 4)))
        plan: dict[int, list[tuple[str, int, str]]] = {}
        for fact in updates:
            first = self.rng.randrange(0, max(1, sessions - 1))
            later = self.rng.randrange(first + 1, sessions) if first + 1 < sessions else first
            old, new = self.rng.sample(UPDATES[fact][2], 2)
            plan.setdefault(first, []).append(("old", fact, old))
            plan.setdefault(later, []).append(("new", fact, new))
        for n in range(sessions):
            cwd, slug, repo = PROJECTS[n % len(PROJECTS)]
            self.now += self.rng.randint(DAY // 2, 3 * DAY)
            s = self.tree.session(cwd, start=self.now)
            steps: list[tuple[str, int, str]] = [("filler", 0, "")] * self.rng.randint(1, 3)
            steps += [(kind, 0, "") for kind in self.rng.sample(("decision", "root_cause", "preference", "output"),
                                                                self.rng.randint(1, 3))]
            steps += plan.get(n, [])
            self.rng.shuffle(steps)
            for kind, fact, value in steps:
                if kind == "old":
                    self.update_old(s, fact, value)
                elif kind == "new":
                    self.update_new(s, fact, value)
                elif kind == "filler":
                    self.filler(s, slug)
                else:
                    self._fact(kind, s, slug, repo, used[kind])
            s.end()
            s.save()
            self.now = int(s.now)
        for q in self.corpus.questions:
            q.evidence = self.stated[q.fact]
        return self.corpus

    def _fact(self, kind: str, s: Session, slug: str, repo: str, used: set[int]) -> None:
        if kind == "decision":
            self.decision(s, slug, used)
        elif kind == "root_cause":
            self.root_cause(s, slug, used)
        elif kind == "preference":
            self.preference(s, slug, used)
        else:
            self.output(s, slug, repo, used)


# -- plain BM25 over whole turns ---------------------------------------------------------------------


def _line_text(line: dict[str, Any]) -> str:
    message = line.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    parts: list[str] = []
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        for key in ("text", "thinking"):
            if isinstance(block.get(key), str):
                parts.append(block[key])
        if block.get("type") == "tool_use":
            parts.append(json.dumps(block.get("input"), ensure_ascii=False))
        if block.get("type") == "tool_result":
            result = block.get("content")
            parts.append(result if isinstance(result, str) else json.dumps(result, ensure_ascii=False))
    result = line.get("toolUseResult")
    if isinstance(result, dict):
        parts += [str(result[k]) for k in ("stdout", "stderr") if result.get(k)]
    return "\n".join(parts)


def turn_documents(corpus: Corpus) -> dict[tuple[str, int], str]:
    """Every turn's whole text, read back from the transcript files."""
    from nmem.capture.transcript import _epoch  # the importer's reading of a line's time

    docs: dict[tuple[str, int], list[str]] = {}
    for path in corpus.root.rglob("*.jsonl"):
        for raw in path.read_text(encoding="utf-8").splitlines():
            line = json.loads(raw)
            sid = line.get("sessionId")
            if not isinstance(sid, str) or line.get("type") not in ("user", "assistant"):
                continue
            turn = corpus.turn_of(sid, _epoch(line.get("timestamp"), 0))
            if turn is not None:
                docs.setdefault((sid, turn), []).append(_line_text(line))
    return {key: "\n".join(parts) for key, parts in docs.items()}


def words(text: str) -> list[str]:
    out, word = [], []
    for c in text.lower() + " ":
        if c.isalnum():
            word.append(c)
        elif word:
            out.append("".join(word))
            word = []
    return [w for w in out if w not in STOP_WORDS]


class Bm25:
    def __init__(self, docs: dict[tuple[str, int], str]) -> None:
        self.keys = list(docs)
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE turns USING fts5(body, tokenize='porter unicode61')")
        self.db.executemany("INSERT INTO turns(rowid, body) VALUES (?, ?)",
                            [(i, docs[k]) for i, k in enumerate(self.keys)])

    def search(self, question: str, limit: int) -> list[tuple[str, int]]:
        terms = sorted(set(words(question)))
        if not terms:
            return []
        match = " OR ".join(f'"{t}"' for t in terms)
        rows = self.db.execute("SELECT rowid FROM turns WHERE turns MATCH ? ORDER BY bm25(turns) LIMIT ?",
                               (match, limit)).fetchall()
        return [self.keys[r[0]] for r in rows]


# -- running --------------------------------------------------------------------------------------------


def nmem_turns(service: Service, corpus: Corpus, question: Question, limit: int) -> list[tuple[str, int] | None]:
    """The turn of each hit, in rank order (None for a hit outside any turn: a session, a memory);
    `(session, -1 - turn)` for a hit in an evidence turn that also holds that turn's answer."""
    found = service.search(question.text, scope="all", limit=limit)
    out: list[tuple[str, int] | None] = []
    for hit in found.hits:
        record = hit.record
        sid, ts = getattr(record, "session_id", None), getattr(record, "timestamp", None)
        turn = corpus.turn_of(sid, ts) if isinstance(sid, str) and isinstance(ts, int) else None
        if hit.kind not in ("observation", "prompt") or turn is None:
            out.append(None)
            continue
        answer = question.evidence.get((sid, turn), question.answer)
        held = answer and answer.lower() in str(getattr(record, "content", "")).lower()
        out.append((sid, -1 - turn) if held else (sid, turn))
    return out


def wanted(question: Question, *, strict: bool = False) -> set[tuple[str, int]]:
    """The turns a question's hit may lie in: the one it was asked about (`strict`), or every
    turn stating the same fact."""
    return {(question.session, question.turn)} if strict else set(question.evidence) | {
        (question.session, question.turn)}


def in_turn(found: list[Any], turns: set[tuple[str, int]], k: int, *, holding: bool = False) -> bool:
    allowed = {(sid, -1 - turn) for sid, turn in turns}
    if not holding:
        allowed |= turns
    return any(f in allowed for f in found[:k])


def recall(ranked: list[list[Any]], answers: list[set[tuple[str, int]]], k: int, *, holding: bool = False) -> float:
    hits = sum(1 for found, answer in zip(ranked, answers, strict=True) if in_turn(found, answer, k, holding=holding))
    return round(hits / len(answers), 3) if answers else 0.0


def run(seed: int = 1, sessions: int = 60, knobs: list[str] | None = None,
        embeddings: str = "none", weight: float = 0.2) -> dict[str, Any]:
    import nmem

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="nmem-coding-") as tmp:
        corpus = Script(Path(tmp) / "projects", seed).write(sessions)
        env = {"NMEM_HOME": str(Path(tmp) / "home")}
        if embeddings != "none":   # BM25 fused with this backend's vectors (search.fusion weighted)
            env |= {"NMEM_EMBEDDINGS": embeddings, "NMEM_HYBRID_WEIGHT": str(weight)}
        service = Service.open(load_settings(env))
        if knobs:   # bench/locomo.py's reading of KNOB=VALUE (imported by name, as when run from bench/)
            from locomo import with_settings
            from nmem.search.rank import Ranking

            service.ranking = with_settings(Ranking(), knobs)
        try:
            report = import_transcripts(service, find_transcripts(corpus.root))
            if embeddings != "none":
                from nmem.search.embedders import active_embedder
                from nmem.service.indexer import build_index

                embedder = active_embedder(service.settings)
                if embedder is None:
                    raise SystemExit(f"embeddings {embeddings!r} unavailable")
                build_index(service.store, embedder)
            status = service.status()
            answers = [wanted(q) for q in corpus.questions]
            strict = [wanted(q, strict=True) for q in corpus.questions]
            ours = [nmem_turns(service, corpus, q, max(KS)) for q in corpus.questions]
        finally:
            service.close()   # folds the WAL back: the file is the whole database
        db_bytes = (Path(tmp) / "home" / "nmem.db").stat().st_size
        bm25 = Bm25(turn_documents(corpus))
        plain = [bm25.search(q.text, max(KS)) for q in corpus.questions]
    result: dict[str, Any] = {
        "machine": machine(nmem=str(Path(nmem.__file__).parent)), "seed": seed, "sessions": sessions,
        "turns": sum(len(t) for t in corpus.turns.values()), "questions": len(corpus.questions),
        "imported_events": report.events, "prompts": status["prompts"], "observations": status["observations"],
        "db_bytes": db_bytes, "embeddings": embeddings, "hybrid_weight": weight if embeddings != "none" else None,
        "repeated": sum(1 for q in corpus.questions if len(q.evidence) > 1),
        "by_kind": {},
    }
    for kind in ("all", *KINDS):
        picked = [i for i, q in enumerate(corpus.questions) if kind in ("all", q.kind)]
        if not picked:
            continue
        sub, only = [answers[i] for i in picked], [strict[i] for i in picked]
        result["by_kind"][kind] = {"n": len(picked), **{
            f"{name}{tag}@{k}": recall([source[i] for i in picked], turns, k)
            for tag, turns in (("", sub), ("_strict", only))
            for name, source in (("nmem", ours), ("bm25", plain)) for k in KS}}
        with_answer = [i for i in picked if corpus.questions[i].answer]
        if with_answer:   # a hit of the turn that holds the answer itself (BM25's turns always do)
            result["by_kind"][kind]["nmem_answer@10"] = recall(
                [ours[i] for i in with_answer], [answers[i] for i in with_answer], max(KS), holding=True)
    result["wall_seconds"] = round(time.perf_counter() - started, 1)
    result["loadavg_end"] = loadavg()
    return result


def render(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [f"coding-session benchmark: seed {result['seed']}, {result['sessions']} sessions, "
             f"{result['turns']} turns, "
             f"{result['questions']} questions; imported {result['imported_events']} events "
             f"({result['prompts']} prompts, {result['observations']} observations; "
             f"{result['db_bytes'] / 1e6:.2f} MB)",
             f"nmem from {m['nmem']}; load {m['loadavg_start']} -> {result['loadavg_end']} on {m['cores']} cores",
             f"{result['repeated']} questions ask about a fact stated in several turns: each of those turns "
             "is evidence (strict: only the turn asked about)",
             "",
             f"{'questions':12} {'n':>4} {'nmem@5':>8} {'nmem@10':>8} {'bm25@5':>8} {'bm25@10':>8}"
             f"  {'nmem answer@10':>14}   strict: {'nmem@5':>7} {'nmem@10':>8} {'bm25@5':>7} {'bm25@10':>8}"]
    for kind, row in result["by_kind"].items():
        lines.append(f"{kind:12} {row['n']:4} {row['nmem@5']:8.3f} {row['nmem@10']:8.3f} "
                     f"{row['bm25@5']:8.3f} {row['bm25@10']:8.3f}  "
                     + (f"{row['nmem_answer@10']:14.3f}" if "nmem_answer@10" in row else f"{'-':>14}")
                     + f"   {'':7} {row['nmem_strict@5']:7.3f} {row['nmem_strict@10']:8.3f} "
                       f"{row['bm25_strict@5']:7.3f} {row['bm25_strict@10']:8.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sessions", type=int, default=60)
    parser.add_argument("--set", action="append", default=[], metavar="KNOB=VALUE",
                        help="override one field of nmem.search.rank.Ranking (repeatable), as bench/locomo.py")
    parser.add_argument("--embeddings", default="none", help="fuse BM25 with this backend's vectors "
                        "(wordllama, minilm, hashing; indexed after the import)")
    parser.add_argument("--weight", type=float, default=0.2, help="search.hybrid_weight with --embeddings")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    emit(run(args.seed, args.sessions, args.set, args.embeddings, args.weight), render, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
