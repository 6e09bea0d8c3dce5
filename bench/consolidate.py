"""How well `nmem consolidate` finds near-duplicate memories: precision and recall of its merges.

    .venv/bin/python bench/consolidate.py                 # 400 facts, ~1.3k memories
    .venv/bin/python bench/consolidate.py --facts 1000 --json

A deterministic generator writes facts of a coding project (decisions, API limits, settings,
gotchas, conventions) as curated memories, then plants:
  - near-duplicates of some facts: the same fact restated (reordered, synonyms, a prefix such
    as "Decision:", different punctuation and case, a sentence of detail added or a word dropped);
  - hard negatives: the same sentence with one slot changed (another technology, component,
    number or file) or negated ("never use ..."). They read alike but state another fact.
The truth is which memories state the same fact. The real service (`Service.consolidate`, dry
run, on a throw-away database) proposes merges; every pair of memories it would put in one
group is a predicted pair. Precision = predicted pairs that state one fact / predicted pairs;
recall = same-fact pairs predicted / same-fact pairs. A threshold sweep over the same corpus
(the similarity module alone) shows why the default threshold sits where it does.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import sys
import tempfile
import time
from typing import Any

from nmem.config import load_settings
from nmem.lifecycle import similarity
from nmem.service.api import Service

TECH = ["PostgreSQL", "SQLite", "Redis", "Kafka", "RabbitMQ", "Celery", "FastAPI", "Django", "Flask", "httpx",
        "requests", "pydantic", "attrs", "pytest", "tox", "ruff", "mypy", "Docker", "Terraform", "nginx",
        "Caddy", "gunicorn", "uvicorn", "Alembic", "SQLAlchemy", "psycopg", "boto3", "Sentry", "Prometheus",
        "Grafana", "Elasticsearch", "MinIO", "Vault", "Consul", "gRPC", "protobuf", "msgpack", "orjson"]
COMPONENT = ["billing service", "auth gateway", "search indexer", "invoice worker", "upload pipeline",
             "notification queue", "report generator", "admin dashboard", "session store", "rate limiter",
             "audit log", "payment webhook", "export job", "metrics exporter", "feature flags", "cache layer"]
REASON = ["it handles our write volume", "the team already knows it", "it keeps deploys simple",
          "its failure modes are well understood", "it supports transactions", "it is fast enough on one core",
          "its licence fits our use", "it has mature tooling"]
SERVICE = ["GitHub", "Stripe", "Slack", "S3", "OpenSearch", "Twilio", "SendGrid", "Jira", "Linear", "PagerDuty"]
SETTING = ["pool_size", "max_retries", "timeout_seconds", "batch_size", "worker_count", "cache_ttl", "page_limit"]
FILE = ["settings.toml", "config/prod.yaml", ".env.production", "deploy/values.yaml", "pyproject.toml"]
TOOL = ["the migration script", "the release job", "pytest-xdist", "the docker build", "the seed loader",
        "pre-commit", "the schema check", "the backup cron"]
CONDITION = ["the lock file is stale", "TZ is not UTC", "the cache directory is missing",
             "two workers share a port", "the DNS cache is cold", "the token expired"]
FIX = ["make clean", "scripts/reset-db.sh", "pip install -e .", "docker compose down -v", "rm -rf .cache"]
SYNONYMS = {"Use": "We chose", "because": "since", "fails": "breaks", "run": "execute", "Set": "Configure",
            "requests per minute": "req/min", "is": "stays at", "in": "inside"}
DETAILS = ["This was agreed in the design review.", "See the runbook for details.",
           "It came up again last sprint.", "Keep this in mind for the next release."]


def fact(rng: random.Random, kind: str, slots: dict[str, Any]) -> tuple[str, str]:
    """(namespace, text) of one fact."""
    s = slots
    if kind == "decision":
        return "decisions", f"Use {s['tech']} for the {s['component']} because {s['reason']}."
    if kind == "api":
        return "apis", f"The {s['service']} API rate limit is {s['n']} requests per minute for the {s['component']}."
    if kind == "config":
        return "config", f"Set {s['setting']} to {s['n']} in {s['file']} for the {s['component']}."
    if kind == "gotcha":
        return "gotchas", f"{s['tool'].capitalize()} fails when {s['condition']}; run {s['fix']} first."
    return "conventions", f"Name {s['component']} modules in snake_case and keep {s['tech']} imports at the top."


def random_slots(rng: random.Random) -> dict[str, Any]:
    return {"tech": rng.choice(TECH), "component": rng.choice(COMPONENT), "reason": rng.choice(REASON),
            "service": rng.choice(SERVICE), "n": rng.choice([10, 20, 30, 50, 60, 100, 120, 250, 500, 1000]),
            "setting": rng.choice(SETTING), "file": rng.choice(FILE), "tool": rng.choice(TOOL),
            "condition": rng.choice(CONDITION), "fix": rng.choice(FIX)}


def restate(rng: random.Random, text: str) -> str:
    """The same fact in other words: two or three of the edits a person makes restating it."""
    out = text
    for edit in rng.sample(["synonyms", "prefix", "detail", "case", "drop", "punct"], k=rng.choice([2, 3])):
        if edit == "synonyms":
            for a, b in rng.sample(sorted(SYNONYMS.items()), k=2):
                out = out.replace(f" {a} ", f" {b} ") if f" {a} " in out else out.replace(a, b, 1)
        elif edit == "prefix":
            out = rng.choice(["Decision: ", "Note: ", "Reminder: ", "FYI ", "Important: "]) + out
        elif edit == "detail":
            out = f"{out} {rng.choice(DETAILS)}"
        elif edit == "case":
            out = out.lower()
        elif edit == "drop":
            words = out.split()
            droppable = [i for i, w in enumerate(words) if w.lower() in ("the", "a", "for", "first.", "our")]
            if droppable:
                del words[rng.choice(droppable)]
            out = " ".join(words)
        elif edit == "punct":
            out = out.replace(";", " -").rstrip(".") + "!"
    return out


def negative(rng: random.Random, kind: str, slots: dict[str, Any]) -> tuple[str, str] | None:
    """A hard negative: one slot changed, or the fact negated."""
    changed = dict(slots)
    key = rng.choice({"decision": ["tech", "component", "negate"], "api": ["n", "service", "component"],
                      "config": ["n", "setting", "file"], "gotcha": ["fix", "condition", "tool"],
                      "convention": ["component", "tech"]}[kind])
    if key == "negate":
        ns, text = fact(rng, kind, slots)
        return ns, text.replace("Use ", "Never use ", 1)
    pool = {"tech": TECH, "component": COMPONENT, "n": [10, 20, 30, 50, 60, 100, 120, 250, 500, 1000],
            "service": SERVICE, "setting": SETTING, "file": FILE, "fix": FIX, "condition": CONDITION,
            "tool": TOOL}[key]
    choices = [v for v in pool if v != slots[key]]
    changed[key] = rng.choice(choices)
    return fact(rng, kind, changed)


def build(facts: int, seed: int) -> tuple[list[tuple[str, str]], list[int]]:
    """Memories (namespace, text) and, for each, the id of the fact it states."""
    rng = random.Random(seed)
    memories: list[tuple[str, str]] = []
    truth: list[int] = []
    seen: set[str] = set()
    fact_id = 0
    kinds = ["decision", "api", "config", "gotcha", "convention"]
    while fact_id < facts:
        kind = rng.choice(kinds)
        slots = random_slots(rng)
        ns, text = fact(rng, kind, slots)
        if text in seen:
            continue
        seen.add(text)
        memories.append((ns, text))
        truth.append(fact_id)
        if rng.random() < 0.5:                     # planted near-duplicates
            for _ in range(rng.choice([1, 1, 2])):
                memories.append((ns, restate(rng, text)))
                truth.append(fact_id)
        fact_id += 1
        if rng.random() < 0.6:                     # a hard negative: another fact that reads alike
            neg = negative(rng, kind, slots)
            if neg is not None and neg[1] not in seen:
                seen.add(neg[1])
                memories.append(neg)
                truth.append(fact_id)
                fact_id += 1
    order = list(range(len(memories)))
    rng.shuffle(order)
    return [memories[i] for i in order], [truth[i] for i in order]


def true_pairs(truth: list[int]) -> set[tuple[int, int]]:
    return {(i, j) for i, j in itertools.combinations(range(len(truth)), 2) if truth[i] == truth[j]}


def score(predicted: set[tuple[int, int]], actual: set[tuple[int, int]]) -> dict[str, float]:
    hit = len(predicted & actual)
    p = hit / len(predicted) if predicted else 1.0
    r = hit / len(actual) if actual else 1.0
    return {"precision": round(p, 3), "recall": round(r, 3), "f1": round(2 * p * r / (p + r), 3) if p + r else 0.0,
            "predicted_pairs": len(predicted), "true_pairs": len(actual)}


def through_service(memories: list[tuple[str, str]]) -> tuple[set[tuple[int, int]], float, float]:
    """Predicted pairs of `Service.consolidate(dry_run=True)`, its seconds, and the threshold used."""
    with tempfile.TemporaryDirectory() as home:
        settings = load_settings({**os.environ, "NMEM_HOME": home})
        service = Service.open(settings)
        try:
            index: dict[str, int] = {}
            with service.store.transaction():
                for i, (ns, text) in enumerate(memories):
                    index[service.remember(text, namespace=ns, project="bench").id] = i
            start = time.perf_counter()
            report = service.consolidate(dry_run=True)
            seconds = time.perf_counter() - start
        finally:
            service.close()
    predicted: set[tuple[int, int]] = set()
    for merge in report["merges"]:
        group = sorted(index[m] for m in [merge["survivor"], *(x["id"] for x in merge["merged"])])
        predicted.update(itertools.combinations(group, 2))
    return predicted, seconds, float(report["threshold"])


def sweep(memories: list[tuple[str, str]], actual: set[tuple[int, int]]) -> list[dict[str, Any]]:
    texts = [text for _, text in memories]
    corpus = similarity.Corpus([f"{t}\n{t}" for t in texts])   # a memory's summary is its first line
    rows = []
    for threshold in (0.7, 0.75, 0.8, 0.85, 0.88, 0.9, 0.92, 0.95, 1.0):
        predicted = {p for survivor, members in similarity.star_groups(corpus, threshold)
                     for p in itertools.combinations(sorted([survivor, *members]), 2)}
        rows.append({"threshold": threshold, **score(predicted, actual)})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=400)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    memories, truth = build(args.facts, args.seed)
    actual = true_pairs(truth)
    predicted, seconds, threshold = through_service(memories)
    result = {"memories": len(memories), "facts": len(set(truth)), "threshold": threshold,
              "service": {**score(predicted, actual), "seconds": round(seconds, 3)},
              "sweep": sweep(memories, actual)}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    svc = result["service"]
    print(f"{result['memories']} memories stating {result['facts']} facts; {svc['true_pairs']} same-fact pairs")
    print(f"consolidate (threshold {threshold}): precision {svc['precision']}, recall {svc['recall']}, "
          f"f1 {svc['f1']}, {svc['predicted_pairs']} pairs merged, {svc['seconds']} s")
    print("\n| threshold | precision | recall | f1 | pairs merged |\n|---|---|---|---|---|")
    for row in result["sweep"]:
        print(f"| {row['threshold']} | {row['precision']} | {row['recall']} | {row['f1']} | {row['predicted_pairs']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
