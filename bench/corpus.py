"""A deterministic synthetic corpus of coding-agent sessions, as Claude Code hook payloads.

Each session belongs to one of a few projects (Python, Rust, TypeScript, Go), opens with
SessionStart, works through a handful of user prompts ("fix the flaky auth test") with the
tool calls an agent makes for them (Grep/Glob, Read, Edit/Write, Bash test runs that fail
and then pass, lint, git commit/push, WebFetch, mcp__ calls, Task), answers each prompt
with a Stop carrying `last_assistant_message`, and usually ends with SessionEnd.

Payloads are plain dicts shaped like the JSON Claude Code writes on a hook's stdin, plus
one extra key, `_ts` (epoch seconds of the event), which `parse` ignores; pass it on as
`parse(payload, now=payload["_ts"])`. Everything comes from one `random.Random(seed)`,
so the same seed gives the same payloads, and `generate(n)` is a prefix of
`generate(m)` for n < m. Time advances at a fixed pace (about 500 observations a day of
heavy use), so 10k observations cover about three weeks and 100k about half a year.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

TS_KEY = "_ts"
START = 1_735_689_600          # 2025-01-01T00:00:00Z
HOME = "/home/dev/code"
DEDUP_GUARD = 400              # nmem collapses a repeated read/search within 300 s; stay clear

# Hook events that store an observation (a Stop or a prompt stores a prompt row instead).
OBSERVATION_EVENTS = frozenset({"SessionStart", "PostToolUse", "PostToolUseFailure", "SessionEnd"})


@dataclass(frozen=True)
class Module:
    topic: str                 # "http_client"
    source: str                # path relative to the project root
    test: str
    symbols: tuple[str, ...]
    tests: tuple[str, ...]     # test ids as the runner prints them


@dataclass(frozen=True)
class Project:
    name: str
    lang: str                  # python | rust | ts | go
    weight: float
    modules: tuple[Module, ...]
    configs: tuple[str, ...]
    deps: tuple[str, ...]
    docs: tuple[str, ...]

    @property
    def root(self) -> str:
        return f"{HOME}/{self.name}"


OUTCOMES = ("returns_401_when_expired", "handles_empty_payload", "retries_on_503", "is_idempotent",
            "rejects_invalid_signature", "uses_utc", "paginates_results", "times_out",
            "rounds_half_even", "skips_duplicates", "preserves_order", "logs_warning")


def _snake(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i:
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _python(name: str, pkg: str, weight: float, spec: dict[str, tuple[str, ...]], configs: tuple[str, ...],
            deps: tuple[str, ...], docs: tuple[str, ...]) -> Project:
    mods = []
    for t, (topic, symbols) in enumerate(spec.items()):
        tests = tuple(f"tests/test_{topic}.py::test_{_snake(s)}_{OUTCOMES[(t + i) % len(OUTCOMES)]}"
                      for i, s in enumerate(symbols))
        mods.append(Module(topic, f"src/{pkg}/{topic}.py", f"tests/test_{topic}.py", symbols, tests))
    return Project(name, "python", weight, tuple(mods), configs, deps, docs)


def _rust(name: str, weight: float, spec: dict[str, tuple[str, ...]]) -> Project:
    mods = []
    for t, (topic, symbols) in enumerate(spec.items()):
        tests = tuple(f"{topic}::tests::{_snake(s)}_{OUTCOMES[(t + i) % len(OUTCOMES)]}"
                      for i, s in enumerate(symbols))
        mods.append(Module(topic, f"src/{topic}.rs", f"tests/{topic}_test.rs", symbols, tests))
    return Project(name, "rust", weight, tuple(mods),
                   ("Cargo.toml", "Cargo.lock", "README.md", ".github/workflows/ci.yml", "rustfmt.toml",
                    "benches/throughput.rs", "CHANGELOG.md"),
                   ("serde", "tokio", "clap", "chrono", "thiserror", "anyhow", "rust_decimal", "nom"),
                   ("https://docs.rs/tokio/latest/tokio/time/fn.timeout.html",
                    "https://docs.rs/rust_decimal/latest/rust_decimal/struct.Decimal.html",
                    "https://doc.rust-lang.org/book/ch04-02-references-and-borrowing.html",
                    "https://docs.rs/clap/latest/clap/_derive/index.html",
                    "https://docs.rs/nom/latest/nom/combinator/index.html"))


def _typescript(name: str, weight: float, spec: dict[str, tuple[str, ...]]) -> Project:
    mods = []
    for t, (path, symbols) in enumerate(spec.items()):
        stem, ext = path.rsplit(".", 1)
        topic = stem.rsplit("/", 1)[1]
        tests = tuple(f"{topic} > {_snake(s).replace('_', ' ')} {OUTCOMES[(t + i) % len(OUTCOMES)].replace('_', ' ')}"
                      for i, s in enumerate(symbols))
        mods.append(Module(topic, path, f"{stem}.test.{ext}", symbols, tests))
    return Project(name, "ts", weight, tuple(mods),
                   ("package.json", "package-lock.json", "tsconfig.json", "vite.config.ts", ".eslintrc.cjs",
                    "README.md", ".github/workflows/ci.yml", "playwright.config.ts", ".env.example"),
                   ("react", "vite", "zod", "axios", "eslint", "vitest", "@tanstack/react-query",
                    "react-router-dom", "typescript"),
                   ("https://react.dev/reference/react/useEffect",
                    "https://tanstack.com/query/latest/docs/framework/react/guides/mutations",
                    "https://zod.dev/?id=basic-usage",
                    "https://vitest.dev/api/vi.html#vi-usefaketimers",
                    "https://developer.mozilla.org/en-US/docs/Web/API/AbortController"))


def _go(name: str, weight: float, spec: dict[str, tuple[str, ...]]) -> Project:
    mods = []
    for path, symbols in spec.items():
        stem = path[:-3]
        topic = stem.rsplit("/", 1)[1]
        tests = tuple(f"Test{_camel(s)}" for s in symbols)
        mods.append(Module(topic, path, f"{stem}_test.go", symbols, tests))
    return Project(name, "go", weight, tuple(mods),
                   ("go.mod", "go.sum", "Makefile", "README.md", "Dockerfile", ".golangci.yml",
                    "deploy/values.yaml", ".github/workflows/release.yml"),
                   ("cobra", "client-go", "zap", "viper", "testify", "grpc", "vault/api"),
                   ("https://pkg.go.dev/context#WithTimeout",
                    "https://pkg.go.dev/k8s.io/client-go/kubernetes",
                    "https://go.dev/blog/error-handling-and-go",
                    "https://pkg.go.dev/github.com/spf13/cobra#Command",
                    "https://developer.hashicorp.com/vault/api-docs/secret/kv/kv-v2"))


PROJECTS: tuple[Project, ...] = (
    _python("acme-api", "acme_api", 3.0, {
        "auth": ("refresh_token", "verify_jwt", "login", "logout", "TokenExpiredError", "hash_password"),
        "http_client": ("HttpClient", "send_request", "backoff_delay", "RetryPolicy", "set_timeout"),
        "rate_limit": ("TokenBucket", "acquire", "limit_exceeded", "sliding_window"),
        "db": ("get_session", "run_migrations", "connection_pool", "with_transaction"),
        "billing": ("create_invoice", "apply_discount", "charge_card", "InvoiceStatus", "prorate"),
        "webhooks": ("sign_payload", "deliver_webhook", "verify_signature", "WebhookEvent"),
        "cache": ("RedisCache", "invalidate", "cache_key", "ttl_for"),
        "routes": ("create_order", "list_orders", "health_check", "get_user"),
        "settings": ("Settings", "load_env", "database_url"),
        "email": ("send_email", "render_template", "EmailBackend"),
    }, ("pyproject.toml", "requirements.txt", "alembic.ini", "docker-compose.yml", "Dockerfile",
        ".github/workflows/ci.yml", "README.md", "Makefile", ".env.example", "conftest.py"),
        ("httpx", "pydantic", "sqlalchemy", "fastapi", "celery", "redis", "alembic", "stripe"),
        ("https://www.python-httpx.org/advanced/timeouts/",
         "https://docs.sqlalchemy.org/en/20/orm/session_transaction.html",
         "https://fastapi.tiangolo.com/tutorial/dependencies/",
         "https://docs.pydantic.dev/latest/concepts/validators/",
         "https://docs.python.org/3/library/asyncio-task.html#timeouts",
         "https://stripe.com/docs/api/invoices/create")),
    _rust("ledger-rs", 1.5, {
        "ledger": ("Ledger", "post_entry", "balance_of", "close_period"),
        "parser": ("parse_amount", "parse_date", "Posting", "parse_journal"),
        "lexer": ("Token", "next_token", "skip_comment"),
        "account": ("Account", "AccountTree", "normalize_name"),
        "currency": ("Currency", "convert", "ExchangeRate", "round_half_even"),
        "report": ("balance_sheet", "income_statement", "render_table"),
        "error": ("LedgerError", "ParseError", "unbalanced"),
        "cli": ("Cli", "run", "Command"),
    }),
    _typescript("storefront", 2.0, {
        "src/components/Cart.tsx": ("Cart", "CartItem", "removeItem", "totalPrice"),
        "src/components/Checkout.tsx": ("Checkout", "submitOrder", "PaymentForm", "validateAddress"),
        "src/components/ProductList.tsx": ("ProductList", "ProductCard", "useInfiniteScroll"),
        "src/components/LoginForm.tsx": ("LoginForm", "handleSubmit", "passwordError"),
        "src/hooks/useAuth.ts": ("useAuth", "refreshSession", "AuthContext"),
        "src/hooks/useCart.ts": ("useCart", "addToCart", "clearCart"),
        "src/api/client.ts": ("apiClient", "withRetry", "ApiError", "fetchJson"),
        "src/api/orders.ts": ("createOrder", "fetchOrders", "OrderSchema"),
        "src/store/cartSlice.ts": ("cartSlice", "selectCartTotal", "hydrateCart"),
        "src/utils/currency.ts": ("formatPrice", "parsePrice", "toCents"),
    }),
    _go("deployer", 1.5, {
        "cmd/deployer/main.go": ("main", "rootCmd", "parseFlags"),
        "internal/k8s/client.go": ("NewClient", "ApplyManifest", "WaitForRollout", "retryBackoff"),
        "internal/rollout/strategy.go": ("CanaryStrategy", "BlueGreen", "NextStep", "ScaleReplicas"),
        "internal/health/probe.go": ("Probe", "CheckHTTP", "ReadinessGate"),
        "internal/config/loader.go": ("LoadConfig", "Environment", "validateRegion"),
        "internal/secrets/vault.go": ("VaultClient", "ReadSecret", "RenewToken"),
    }),
    _python("etl-pipeline", "etl", 1.5, {
        "extract": ("S3Reader", "list_partitions", "read_parquet", "checkpoint"),
        "transform": ("normalize_rows", "dedupe_events", "cast_schema", "explode_items"),
        "load": ("PostgresWriter", "copy_rows", "upsert_batch", "vacuum_table"),
        "schema": ("EventSchema", "validate_record", "SchemaDrift"),
        "scheduler": ("schedule_dag", "backfill", "retry_task", "Watermark"),
    }, ("pyproject.toml", "dags/daily_events.py", "docker-compose.yml", "README.md",
        "config/pipeline.yaml", ".github/workflows/ci.yml", "Makefile"),
        ("pandas", "pyarrow", "boto3", "psycopg", "airflow", "great-expectations"),
        ("https://arrow.apache.org/docs/python/parquet.html",
         "https://www.psycopg.org/psycopg3/docs/basic/copy.html",
         "https://boto3.amazonaws.com/v1/documentation/api/latest/reference/services/s3.html",
         "https://airflow.apache.org/docs/apache-airflow/stable/core-concepts/dags.html")),
    _python("ml-experiments", "mlx", 1.0, {
        "train": ("train_epoch", "Trainer", "clip_gradients", "save_checkpoint"),
        "dataset": ("TokenDataset", "collate_batch", "shuffle_shards"),
        "model": ("TransformerBlock", "attention_mask", "init_weights"),
        "evaluate": ("compute_perplexity", "evaluate_model", "confusion_matrix"),
    }, ("pyproject.toml", "configs/base.yaml", "configs/sweep.yaml", "README.md", "notebooks/explore.ipynb"),
        ("torch", "numpy", "wandb", "hydra-core", "transformers", "datasets"),
        ("https://pytorch.org/docs/stable/amp.html",
         "https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader",
         "https://huggingface.co/docs/transformers/main_classes/trainer")),
)

PROMPTS = (
    "fix the flaky {topic} test",
    "add retry with exponential backoff to the {topic} client",
    "why does {test} fail on CI but pass locally?",
    "refactor {symbol} in {source} so it is easier to test",
    "the {topic} endpoint returns 500 when the payload is empty, can you fix it",
    "write tests for {symbol}",
    "bump {dep} to the latest version and fix whatever breaks",
    "add structured logging around {symbol}",
    "rename {symbol} to something clearer everywhere",
    "investigate the memory leak in {topic}, RSS grows every hour",
    "update the README with the new {topic} configuration",
    "add a --dry-run flag to the {topic} command",
    "make {topic} handle timezone-aware datetimes",
    "review the last commit and tighten error handling in {topic}",
    "set up CI caching for {dep}",
    "profile {symbol}, it is slow with large inputs",
    "{symbol} sometimes returns stale data, look into the cache invalidation",
    "can you explain how {topic} works and where {symbol} is called from",
    "the lint job is red after my {topic} change, please fix it",
    "add input validation to {symbol} and return a clear error",
    "port {symbol} to the new {dep} API",
    "there's a race condition in {topic} when two requests arrive at once",
    "clean up the dead code in {source}",
    "add a regression test for the {topic} bug we fixed yesterday",
)

ANSWERS = (
    "I fixed the flaky {topic} test: {symbol} depended on the wall clock, so the test now freezes time. "
    "All tests pass.",
    "Done. {symbol} now retries up to 3 times with exponential backoff and jitter; added tests for the 503 path.",
    "The CI failure came from test ordering: {test} relied on state left by another test. I isolated the fixture.",
    "Refactored {symbol} into smaller functions in {source}; behaviour is unchanged and the suite is green.",
    "The 500 was an unhandled None in {symbol}. It now returns 422 with a validation message.",
    "Added tests covering {symbol}: the empty input, the timeout and the happy path.",
    "Upgraded {dep}; two call sites in {source} needed the new signature. Lint and tests pass.",
    "{symbol} now logs request id, duration and outcome at info level, errors at warning.",
    "I could not reproduce the leak locally; {symbol} keeps a growing dict, which I bounded with an LRU.",
    "Updated the README section on {topic} configuration and the example env file.",
    "Committed the change to {topic} and pushed the branch; the pull request is ready for review.",
)

def _wchoice(rng: random.Random, table: tuple[tuple[str, int], ...]) -> str:
    return rng.choices([k for k, _ in table], weights=[w for _, w in table])[0]


# -- per-language commands, outputs and errors ------------------------------------------------

def _test_command(rng: random.Random, p: Project, m: Module) -> str:
    if p.lang == "python":
        return rng.choice((f"pytest -x {m.test}", f"pytest -x -q {rng.choice(m.tests)}",
                           f"pytest -k {m.topic} -q", "pytest -n 2 -q", f"python -m pytest {m.test} -vv"))
    if p.lang == "rust":
        return rng.choice((f"cargo test {m.topic}::tests", "cargo test --all-features",
                           f"cargo test --test {m.topic}_test", "cargo nextest run"))
    if p.lang == "ts":
        return rng.choice((f"npx vitest run {m.test}", "npm test -- --run", f"npm test -- {m.topic}",
                           "npx playwright test e2e/checkout.spec.ts"))
    pkg = m.source.rsplit("/", 1)[0]
    return rng.choice((f"go test ./{pkg}/...", "go test -race ./...", f"go test -run {rng.choice(m.tests)} ./{pkg}"))


def _lint_command(rng: random.Random, p: Project) -> str:
    return rng.choice({
        "python": ("ruff check src tests", "ruff format --check .", "mypy src", "make lint"),
        "rust": ("cargo clippy -- -D warnings", "cargo fmt --check", "cargo build --release"),
        "ts": ("npm run lint", "npx tsc --noEmit", "npm run build", "npx prettier --check src"),
        "go": ("go vet ./...", "golangci-lint run", "go build ./...", "make build"),
    }[p.lang])


def _passing_output(rng: random.Random, p: Project, m: Module) -> str:
    n = rng.randint(8, 400)
    secs = rng.uniform(0.3, 40)
    if p.lang == "python":
        return f"{'.' * min(n, 60)}\n{n} passed, {rng.randint(0, 3)} skipped in {secs:.2f}s"
    if p.lang == "rust":
        return (f"   Compiling {p.name} v0.{rng.randint(1, 9)}.0 ({p.root})\n    Finished test [unoptimized + "
                f"debuginfo] target(s) in {secs:.2f}s\ntest result: ok. {n} passed; 0 failed; 0 ignored")
    if p.lang == "ts":
        return (f" ✓ {m.test} ({rng.randint(2, 30)} tests) {int(secs * 100)}ms\n"
                f" Test Files  {rng.randint(1, 40)} passed\n      Tests  {n} passed")
    return f"ok  \tgithub.com/acme/{p.name}/{m.source.rsplit('/', 1)[0]}\t{secs:.3f}s"


def _failure(rng: random.Random, p: Project, m: Module) -> str:
    sym = rng.choice(m.symbols)
    test = rng.choice(m.tests)
    line = rng.randint(12, 480)
    if p.lang == "python":
        cause = rng.choice((
            "AssertionError: assert 401 == 200",
            f"KeyError: '{rng.choice(('user_id', 'invoice_id', 'partition', 'access_token', 'batch_size'))}'",
            f"TypeError: {sym}() got an unexpected keyword argument 'timeout'",
            f"sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) no such table: {m.topic}",
            "ModuleNotFoundError: No module named 'httpx'",
            "ConnectionRefusedError: [Errno 111] Connection refused",
            f"pydantic_core._pydantic_core.ValidationError: 1 validation error for {_camel(m.topic)}Payload",
            "TimeoutError: timed out after 5.0 seconds",
            "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "AttributeError: 'NoneType' object has no attribute 'get'",
        ))
        return (f"Exit code 1\n{'.' * rng.randint(3, 30)}F\n=================================== FAILURES "
                f"===================================\n_____ {test.rsplit('::', 1)[-1]} _____\n"
                f"{m.source}:{line}: in {sym}\nE   {cause}\n=========================== short test summary "
                f"info ============================\nFAILED {test} - {cause}\n"
                f"1 failed, {rng.randint(5, 300)} passed in {rng.uniform(0.5, 30):.2f}s")
    if p.lang == "rust":
        return rng.choice((
            f"Exit code 101\nerror[E0382]: borrow of moved value: `{_snake(sym)}`\n  --> {m.source}:{line}:17\n"
            f"   |\n   = note: move occurs because value has type `Vec<Posting>`, which does not implement the "
            f"`Copy` trait\nerror: could not compile `{p.name}` due to previous error",
            f"Exit code 101\nerror[E0308]: mismatched types\n  --> {m.source}:{line}:9\n   |\n   = note: expected "
            f"enum `Result<Decimal, LedgerError>`\n              found enum `Option<Decimal>`",
            f"Exit code 101\ntest {test} ... FAILED\n\nthread '{test}' panicked at {m.source}:{line}:9:\n"
            f"assertion `left == right` failed\n  left: -12.50\n right: 12.50\n\nfailures:\n    {test}\n"
            f"test result: FAILED. {rng.randint(5, 90)} passed; 1 failed",
            f"Exit code 101\nwarning: unused variable: `{_snake(sym)}`\nerror: this `if` has identical blocks\n"
            f"  --> {m.source}:{line}:5\nerror: could not compile `{p.name}` (lib) due to 2 previous errors",
        ))
    if p.lang == "ts":
        return rng.choice((
            f"Exit code 2\n{m.source}({line},7): error TS2322: Type 'string | undefined' is not assignable to "
            "type 'string'.\nFound 1 error in 1 file.",
            f"Exit code 1\n FAIL  {m.test} > {test}\nAssertionError: expected [ …(2) ] to have a length of 1 "
            f"but got 2\n ❯ {m.test}:{line}:22\n Test Files  1 failed | {rng.randint(3, 40)} passed",
            f"Exit code 1\n{p.root}/{m.source}\n  {line}:5  error  '{sym}' is assigned a value but never used  "
            "@typescript-eslint/no-unused-vars\n\n✖ 1 problem (1 error, 0 warnings)",
            "Exit code 1\nnpm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree\n"
            "npm ERR! peer react@\"^17.0.0\" from @testing-library/react-hooks@8.0.1",
            f"Exit code 1\nTypeError: Cannot read properties of undefined (reading 'map')\n    at {sym} "
            f"({m.source}:{line}:18)",
        ))
    pkg = m.source.rsplit("/", 1)[0]
    return rng.choice((
        f"Exit code 1\n--- FAIL: {test} (0.0{rng.randint(1, 9)}s)\n    {m.test.rsplit('/', 1)[1]}:{line}: "
        f"expected 3 replicas, got 2\nFAIL\nFAIL\tgithub.com/acme/{p.name}/{pkg}\t0.214s",
        f"Exit code 1\n# github.com/acme/{p.name}/{pkg}\n./{m.source}:{line}:2: undefined: {sym}Backoff",
        f"Exit code 2\npanic: runtime error: invalid memory address or nil pointer dereference\n"
        f"[signal SIGSEGV: segmentation violation]\ngoroutine 1 [running]:\n{p.name}/{pkg}.{sym}(...)\n"
        f"\t{m.source}:{line} +0x1c",
        f"Exit code 1\n{m.source}:{line}:6: Error return value of `{sym}` is not checked (errcheck)",
        f"Exit code 1\n--- FAIL: {test} (5.00s)\n    context deadline exceeded while waiting for rollout",
    ))


GENERIC_FAILURES = (
    "Exit code 127\nbash: line 1: {tool}: command not found",
    "Exit code 1\nError: connect ECONNREFUSED 127.0.0.1:5432",
    "Exit code 1\nerror: Your local changes to the following files would be overwritten by checkout:\n\t{path}",
    "Exit code 1\nCONFLICT (content): Merge conflict in {path}\nAutomatic merge failed; fix conflicts and then "
    "commit the result.",
    "Exit code 137\nKilled (out of memory)",
    "Exit code 1\ncurl: (7) Failed to connect to localhost port 8000 after 0 ms: Connection refused",
    "Exit code 1\nError response from daemon: driver failed programming external connectivity: "
    "Bind for 0.0.0.0:6379 failed: port is already allocated",
)

COMMIT_KINDS = ("fix", "feat", "refactor", "test", "chore", "docs", "perf")
COMMIT_TEXT = ("handle empty payload in {symbol}", "retry on 503 in {topic}", "freeze clock in {topic} tests",
               "add {symbol} validation", "bump {dep}", "document {topic} settings", "speed up {symbol}",
               "remove dead code from {topic}", "log {symbol} failures", "make {topic} timezone aware")

SEARCH_QUERIES = ("pytest freezegun vs time-machine monkeypatch datetime", "exponential backoff jitter best practice",
                  "sqlite database is locked busy_timeout WAL", "rust borrow checker moved value in loop",
                  "react useEffect cleanup abort fetch", "kubernetes rollout status timeout",
                  "postgres COPY vs executemany performance", "github actions cache pip dependencies",
                  "typescript narrow union undefined strict", "go context deadline exceeded grpc retry",
                  "pytorch cuda out of memory gradient checkpointing", "stripe idempotency key retries")

MCP_CALLS = (
    ("mcp__github__get_issue", lambda r, p, m: {"owner": "acme", "repo": p.name, "issue_number": r.randint(10, 900)}),
    ("mcp__github__create_pull_request", lambda r, p, m: {
        "owner": "acme", "repo": p.name, "title": f"Fix {m.topic} {r.choice(m.symbols)}", "head": f"fix/{m.topic}",
        "base": "main"}),
    ("mcp__github__list_pull_requests", lambda r, p, m: {"owner": "acme", "repo": p.name, "state": "open"}),
    ("mcp__context7__get-library-docs", lambda r, p, m: {
        "context7CompatibleLibraryID": f"/{r.choice(p.deps)}", "topic": m.topic.replace("_", " ")}),
    ("mcp__postgres__query", lambda r, p, m: {
        "sql": f"SELECT count(*) FROM {m.topic} WHERE created_at > now() - interval '1 day'"}),
    ("mcp__sentry__get_issue_details", lambda r, p, m: {
        "issue_id": f"{p.name.upper()}-{r.randint(100, 999):X}"}),
    ("mcp__playwright__browser_navigate", lambda r, p, m: {"url": f"http://localhost:5173/{m.topic.lower()}"}),
)


# -- the stream ---------------------------------------------------------------------------------

class _Session:
    """Builds one session's events; time and dedup state live here."""

    def __init__(self, rng: random.Random, project: Project, now: int) -> None:
        self.rng = rng
        self.p = project
        self.now = now
        self.sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        self.transcript = f"/home/dev/.claude/projects/-home-dev-code-{project.name}/{self.sid}.jsonl"
        self.seen: dict[tuple[str, str], int] = {}
        self.out: list[tuple[dict[str, Any], bool]] = []
        self.mode = rng.choice(("default", "default", "acceptEdits", "plan"))

    def _emit(self, event: str, is_obs: bool, **fields: object) -> None:
        payload: dict[str, Any] = {
            "session_id": self.sid, "transcript_path": self.transcript, "cwd": self.p.root,
            "hook_event_name": event, **fields, TS_KEY: self.now,
        }
        if event in ("PostToolUse", "PostToolUseFailure", "UserPromptSubmit"):
            payload["permission_mode"] = self.mode
        self.out.append((payload, is_obs))

    def _tick(self, low: int = 2, high: int = 75) -> None:
        self.now += self.rng.randint(low, high)

    def _tool_id(self) -> str:
        return "toolu_01" + "".join(self.rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz123456789")
                                    for _ in range(22))

    def _fresh(self, kind: str, key: str) -> bool:
        """False when nmem would collapse this read/search as a repeat; otherwise remember it.

        Checked before the event's own tick (at most 75 s), hence the margin in DEDUP_GUARD.
        """
        last = self.seen.get((kind, key))
        if last is not None and self.now - last < DEDUP_GUARD:
            return False
        self.seen[(kind, key)] = self.now
        return True

    def tool(self, name: str, tool_input: dict[str, Any], response: object = None,
             error: str | None = None) -> None:
        self._tick()
        if error is None:
            self._emit("PostToolUse", True, tool_name=name, tool_input=tool_input,
                       tool_response=response if response is not None else {}, tool_use_id=self._tool_id())
        else:
            self._emit("PostToolUseFailure", True, tool_name=name, tool_input=tool_input,
                       tool_use_id=self._tool_id(), error=error, is_interrupt=False)

    # -- tools -----------------------------------------------------------------------------

    def read(self, rel: str) -> None:
        path = f"{self.p.root}/{rel}"
        if not self._fresh("read", path):
            return
        lines = self.rng.randint(20, 900)
        tool_input: dict[str, Any] = {"file_path": path}
        if lines > 600 and self.rng.random() < 0.5:
            tool_input.update(offset=self.rng.randint(1, lines - 200), limit=200)
        self.tool("Read", tool_input, {"type": "text", "file": {"filePath": path, "numLines": min(lines, 200),
                                                                "startLine": 1, "totalLines": lines}})

    def edit(self, m: Module, rel: str | None = None) -> None:
        rel = rel or m.source
        path = f"{self.p.root}/{rel}"
        sym = self.rng.choice(m.symbols)
        old, new = self._snippet(sym)
        if self.rng.random() < 0.03:
            self.tool("Edit", {"file_path": path, "old_string": old, "new_string": new},
                      error="String to replace not found in file.\nString: " + old)
            return
        self.tool("Edit", {"file_path": path, "old_string": old, "new_string": new, "replace_all": False},
                  {"filePath": path, "oldString": old, "newString": new, "structuredPatch": []})

    def _snippet(self, sym: str) -> tuple[str, str]:
        lang, rng = self.p.lang, self.rng
        if lang == "python":
            return rng.choice((
                (f"    return {sym}(payload)", f"    return {sym}(payload, timeout=timeout)"),
                (f"def {sym}(self, request):", f"def {sym}(self, request, *, retries: int = 3):"),
                ("    except Exception:\n        pass", f"    except httpx.HTTPError as exc:\n        log.warning("
                 f"\"{sym} failed: %s\", exc)\n        raise"),
                ("now = datetime.utcnow()", "now = datetime.now(tz=UTC)"),
            ))
        if lang == "rust":
            return rng.choice((
                (f"let total = {sym}(entries);", f"let total = {sym}(&entries)?;"),
                (f"pub fn {sym}(&self) -> Decimal {{", f"pub fn {sym}(&self) -> Result<Decimal, LedgerError> {{"),
                (".unwrap()", ".map_err(|e| LedgerError::Parse(e.to_string()))?"),
            ))
        if lang == "ts":
            return rng.choice((
                (f"const {sym} = (items) => {{", f"const {sym} = (items: CartItem[]): number => {{"),
                ("useEffect(() => {\n    fetchData();", "useEffect(() => {\n    const ctrl = new AbortController();"
                 "\n    fetchData(ctrl.signal);"),
                (f"await {sym}(payload)", f"await withRetry(() => {sym}(payload), {{ retries: 3 }})"),
            ))
        return rng.choice((
            (f"func {sym}(ctx context.Context) error {{", f"func {sym}(ctx context.Context, opts Options) error {{"),
            (f"resp, _ := {sym}(ctx)", f"resp, err := {sym}(ctx)\n\tif err != nil {{\n\t\treturn fmt.Errorf("
             f"\"{sym}: %w\", err)\n\t}}"),
            ("time.Sleep(2 * time.Second)", "time.Sleep(retryBackoff(attempt))"),
        ))

    def write(self, m: Module) -> None:
        rel = m.test if self.rng.random() < 0.6 else m.source.replace(m.topic, f"{m.topic}_helpers", 1)
        path = f"{self.p.root}/{rel}"
        sym = self.rng.choice(m.symbols)
        body = "\n".join(f"# {m.topic}: case {i} for {sym}" for i in range(self.rng.randint(5, 40))) + "\n"
        self.tool("Write", {"file_path": path, "content": body}, {"type": "create", "filePath": path})

    def bash(self, command: str, description: str, stdout: str = "", error: str | None = None) -> None:
        tool_input = {"command": command, "description": description}
        if error is not None:
            self.tool("Bash", tool_input, error=error)
        else:
            self.tool("Bash", tool_input, {"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False})

    def grep(self, m: Module) -> None:
        sym = self.rng.choice(m.symbols)
        pattern = self.rng.choice((sym, f"def {sym}|class {sym}", f"{sym}\\(", "TODO|FIXME", f"import .*{m.topic}"))
        tool_input: dict[str, Any] = {"pattern": pattern, "output_mode": "files_with_matches"}
        if self.rng.random() < 0.5:
            tool_input["path"] = f"{self.p.root}/{m.source.rsplit('/', 1)[0]}"
        key = pattern + str(tool_input.get("path", ""))
        if not self._fresh("search", key):
            return
        n = self.rng.randint(0, 14)
        self.tool("Grep", tool_input, {"mode": "files_with_matches", "numFiles": n,
                                       "filenames": [f"{self.p.root}/{m.source}"] * min(n, 3)})

    def glob(self, m: Module) -> None:
        ext = m.source.rsplit(".", 1)[1]
        pattern = self.rng.choice((f"**/*{m.topic}*.{ext}", f"**/*.{ext}", f"{m.source.rsplit('/', 1)[0]}/**"))
        if not self._fresh("search", pattern):
            return
        n = self.rng.randint(1, 60)
        self.tool("Glob", {"pattern": pattern}, {"filenames": [f"{self.p.root}/{m.source}"], "numFiles": n,
                                                  "durationMs": self.rng.randint(3, 90), "truncated": False})

    # -- a session -------------------------------------------------------------------------

    def run(self, prompts: int) -> list[tuple[dict[str, Any], bool]]:
        rng = self.rng
        self._emit("SessionStart", True, source=_wchoice(rng, (("startup", 80), ("resume", 12), ("clear", 4),
                                                               ("compact", 4))))
        for _ in range(prompts):
            self.now += rng.randint(20, 600)
            self.task()
            if rng.random() < 0.04:
                self._emit("PreCompact", False, trigger=rng.choice(("auto", "manual")), custom_instructions="")
        if rng.random() < 0.75:
            self.now += rng.randint(5, 900)
            self._emit("SessionEnd", True, reason=rng.choice(("prompt_input_exit", "logout", "clear", "other")))
        return self.out

    def task(self) -> None:
        rng, p = self.rng, self.p
        m = rng.choice(p.modules)
        related = rng.choice(p.modules)
        fill = {"topic": m.topic.replace("_", " "), "symbol": rng.choice(m.symbols), "test": rng.choice(m.tests),
                "source": m.source, "dep": rng.choice(p.deps)}
        self._emit("UserPromptSubmit", False, prompt=rng.choice(PROMPTS).format(**fill))
        # Explore.
        for _ in range(rng.randint(0, 2)):
            self.grep(rng.choice((m, m, related)))
        if rng.random() < 0.2:
            self.glob(m)
        if rng.random() < 0.1:
            desc = f"Find callers of {fill['symbol']}"
            self.tool("Task", {"description": desc, "subagent_type": "Explore",
                               "prompt": f"Search {p.name} for every call site of {fill['symbol']} and summarise "
                                         f"how {fill['topic']} is used."},
                      {"status": "completed", "totalDurationMs": rng.randint(4000, 60000)})
        self.read(m.source)
        if rng.random() < 0.7:
            self.read(m.test)
        if rng.random() < 0.35:
            self.read(rng.choice(p.configs))
        for _ in range(rng.choice((0, 1, 1, 2, 3))):
            other = rng.choice(p.modules)
            self.read(rng.choice((other.source, other.source, other.test)))
        if rng.random() < 0.15:
            self.tool("TodoWrite", {"todos": [
                {"content": f"Reproduce the {fill['topic']} failure", "status": "completed"},
                {"content": f"Fix {fill['symbol']}", "status": "in_progress"},
                {"content": "Run the full test suite", "status": "pending"}]}, {"oldTodos": [], "newTodos": []})
        if rng.random() < 0.12:
            url = rng.choice(p.docs)
            self.tool("WebFetch", {"url": url, "prompt": f"How do I configure {fill['topic']}?"},
                      {"code": 200, "codeText": "OK", "bytes": rng.randint(8000, 90000), "result": "…"})
        if rng.random() < 0.07:
            query = rng.choice(SEARCH_QUERIES)
            if self._fresh("web_search", query):
                self.tool("WebSearch", {"query": query}, {"results": [], "durationSeconds": 2.1})
        if rng.random() < 0.12:
            name, args = rng.choice(MCP_CALLS)
            self.tool(name, args(rng, p, m), {"content": [{"type": "text", "text": "ok"}]})
        # Change, test, repeat.
        for _attempt in range(rng.choice((1, 1, 2, 3))):
            for _ in range(rng.choice((1, 1, 2))):
                self.edit(m, rng.choice((m.source, m.source, m.test)))
            if rng.random() < 0.08:
                self.write(m)
            command = _test_command(rng, p, m)
            if rng.random() < 0.35:
                self.bash(command, f"Run the {fill['topic']} tests", error=_failure(rng, p, m))
                self.read(rng.choice((m.test, related.source, related.test)))
                self.edit(m)
            self.bash(command, f"Run the {fill['topic']} tests", stdout=_passing_output(rng, p, m))
        if rng.random() < 0.5:
            lint = _lint_command(rng, p)
            if rng.random() < 0.2:
                self.bash(lint, "Lint", error=_failure(rng, p, m))
                self.edit(m)
            self.bash(lint, "Lint", stdout="All checks passed!")
        if rng.random() < 0.04:
            template = rng.choice(GENERIC_FAILURES)
            self.bash(rng.choice(("docker compose up -d db redis", "curl -s localhost:8000/health",
                                  "git pull --rebase", "make dev")), "Environment",
                      error=template.format(tool=rng.choice(("ruff", "cargo-nextest", "golangci-lint", "pnpm")),
                                            path=m.source))
        self._git(m, fill)
        self.now += rng.randint(3, 60)
        self._emit("Stop", False, stop_hook_active=False,
                   last_assistant_message=rng.choice(ANSWERS).format(**fill))

    def _git(self, m: Module, fill: dict[str, str]) -> None:
        rng = self.rng
        if rng.random() < 0.6:
            self.bash(rng.choice(("git status --short", "git diff --stat", f"git diff {m.source}",
                                  "git log --oneline -5")), "Inspect changes",
                      stdout=f" M {m.source}\n M {m.test}")
        if rng.random() < 0.4:
            message = f"{rng.choice(COMMIT_KINDS)}({m.topic}): {rng.choice(COMMIT_TEXT).format(**fill)}"
            sha = f"{rng.getrandbits(28):07x}"
            branch = rng.choice(("main", f"fix/{m.topic}", f"feat/{m.topic}-{rng.randint(2, 99)}"))
            self.bash(f"git add {m.source} {m.test} && git commit -m \"{message}\"", "Commit",
                      stdout=f"[{branch} {sha}] {message}\n 2 files changed, {rng.randint(1, 80)} insertions(+), "
                             f"{rng.randint(0, 40)} deletions(-)")
            if rng.random() < 0.4:
                new = f"{rng.getrandbits(28):07x}"
                self.tool("Bash", {"command": f"git push origin {branch}", "description": "Push"},
                          {"stdout": "", "stderr": f"To github.com:acme/{self.p.name}.git\n   {sha}..{new}  "
                                                   f"{branch} -> {branch}", "interrupted": False, "isImage": False})


class Corpus:
    """One endless, deterministic stream of sessions; `take(n)` hands out the next n observations' events."""

    def __init__(self, seed: int = 0, start: int = START) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.now = start
        self.files: dict[str, int] = {}        # absolute path -> Read/Edit/Write count
        self.observations = 0
        self.events = 0
        self.sessions = 0
        self.prompts = 0
        self.last_timestamp = start
        self._stream = self._run()

    def _run(self) -> Iterator[tuple[dict[str, Any], bool]]:
        weights = [p.weight for p in PROJECTS]
        while True:
            project = self.rng.choices(PROJECTS, weights=weights)[0]
            session = _Session(self.rng, project, self.now)
            events = session.run(prompts=self.rng.choice((1, 1, 2, 2, 3, 3, 4, 5, 7)))
            # ~11 sessions a day whatever the size: sessions don't overlap, time never goes back.
            self.now = session.now + 60 + int(self.rng.expovariate(1 / 5400))
            yield from events

    def take(self, n_observations: int) -> Iterator[dict[str, Any]]:
        emitted = 0
        while emitted < n_observations:
            payload, is_obs = next(self._stream)
            self.events += 1
            self.last_timestamp = payload[TS_KEY]
            name = payload["hook_event_name"]
            if name == "SessionStart":
                self.sessions += 1
            elif name == "UserPromptSubmit":
                self.prompts += 1
            elif payload.get("tool_name") in ("Read", "Edit", "Write"):
                path = payload["tool_input"]["file_path"]
                self.files[path] = self.files.get(path, 0) + 1
            if is_obs:
                emitted += 1
                self.observations += 1
            yield payload


def generate(n_observations: int, seed: int = 0) -> Iterator[dict[str, Any]]:
    """Hook payloads whose recording stores exactly `n_observations` observations."""
    return Corpus(seed).take(n_observations)


def project_names() -> list[str]:
    return [p.name for p in PROJECTS]


def file_paths(corpus: Corpus, k: int, seed: int = 0) -> list[str]:
    """k absolute paths (with repeats, busy files more often) that the corpus has touched so far."""
    if not corpus.files:
        raise ValueError("the corpus has not touched any file yet")
    paths = sorted(corpus.files)
    return random.Random(seed).choices(paths, weights=[corpus.files[p] for p in paths], k=k)


# -- queries --------------------------------------------------------------------------------

PLAIN_TEMPLATES = (
    "{topic} test failure", "flaky {topic} test", "fix {symbol}", "where is {symbol} defined",
    "why did the {topic} tests fail", "{symbol} error", "retry {topic} timeout", "how did we fix {topic}",
    "{topic} {dep}", "commit {topic}", "{word} in {topic}", "{word}", "{word} {word2}",
    "what changed in {source}", "lint errors after the {topic} change", "{symbol} {word}",
)
WORDS = ("AssertionError", "connection refused", "timeout", "borrow moved value", "mismatched types",
         "no such table", "ModuleNotFoundError", "KeyError", "nil pointer dereference", "ERESOLVE",
         "not assignable", "panicked", "deadline exceeded", "out of memory", "clippy", "eslint", "ruff",
         "pytest", "vitest", "cargo build", "git push", "docker compose", "migration", "webhook signature",
         "invoice", "checkout", "rollout replicas", "parquet", "cache invalidation", "rate limit", "jwt",
         "retry backoff", "unused variable", "merge conflict", "pull request", "sentry issue", "postgres query")


def project_queries(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """(project, question) pairs: questions in people's words about that project's work.

    Built from the corpus vocabulary; some words of a question won't occur in any record,
    as with real questions, so some searches fall back from AND to OR.
    """
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        p = rng.choices(PROJECTS, weights=[p.weight for p in PROJECTS])[0]
        m = rng.choice(p.modules)
        out.append((p.name, rng.choice(PLAIN_TEMPLATES).format(
            topic=m.topic.replace("_", " "), symbol=rng.choice(m.symbols), dep=rng.choice(p.deps),
            source=m.source.rsplit("/", 1)[-1], word=rng.choice(WORDS), word2=rng.choice(WORDS))))
    return out


def plain_queries(n: int, seed: int = 0) -> list[str]:
    """Questions in people's words (the texts of `project_queries`)."""
    return [q for _, q in project_queries(n, seed)]


def _bare(word: str) -> str:
    """A term usable as an FTS5 bareword (letters, digits, underscore)."""
    return "".join(ch for ch in word if ch.isalnum() or ch == "_") or "error"


ERROR_WORDS = {
    "python": ("AssertionError", "KeyError", "TypeError", "timeout", "refused", "pytest", "ruff", "mypy", "FAILED"),
    "rust": ("borrow", "mismatched", "panicked", "clippy", "cargo", "compile", "Decimal"),
    "ts": ("TS2322", "assignable", "eslint", "vitest", "undefined", "AssertionError", "npm"),
    "go": ("FAIL", "replicas", "undefined", "nil", "errcheck", "deadline", "go"),
}


PHRASES = {
    "python": ("connection refused", "no such table", "unexpected keyword argument", "assert 401 == 200",
               "timed out", "git push origin"),
    "rust": ("borrow of moved value", "mismatched types", "unused variable", "could not compile", "git push origin"),
    "ts": ("not assignable", "never used", "unable to resolve dependency", "cannot read properties", "git push origin"),
    "go": ("nil pointer dereference", "deadline exceeded", "expected 3 replicas", "is not checked", "git push origin"),
}


def fts_queries(n: int, seed: int = 0) -> list[str]:
    """Queries in FTS5 syntax: AND/OR/NOT, "phrases", prefix*, NEAR(), grouping. All valid.

    Terms are drawn from one module and its language's errors, so most queries match something.
    """
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        p = rng.choices(PROJECTS, weights=[p.weight for p in PROJECTS])[0]
        m = rng.choice(p.modules)
        a = _bare(m.topic.split("_")[0])
        symbol = rng.choice(m.symbols)  # camelCase stays one token; snake_case splits
        b = _bare(symbol.split("_")[0])
        word = _bare(rng.choice(ERROR_WORDS[p.lang]))
        phrase = rng.choice(PHRASES[p.lang])
        out.append(rng.choice((
            f"{a} AND {word}", f"{a} OR {b}", f'"{phrase}"', f"{a} NOT test", f"{b[:4]}*",
            f'"{phrase}" AND {a}', f"({a} OR {b}) AND {word}", f"NEAR({a} {word}, 10)",
            f"{_bare(p.name.split('-')[0])} AND {a}*", f"{word}* NOT {a}", f"{a} AND {b}",
        )))
    return out
