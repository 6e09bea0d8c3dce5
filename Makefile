# One entry point for chores. Everything runs from the project venv (.venv).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: seeds setup run test lint bench bench-cli bench-core bench-engines bench-quick bench-hooks bench-hooks-encrypted bench-locomo bench-context bench-coding bench-team faults attack docs clean

$(BIN)/nmem: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@# the distribution was called `nmem` before it became nmem-memory (PyPI's `nmem` is another project)
	$(BIN)/pip uninstall --quiet --yes nmem 2>/dev/null || true
	$(BIN)/pip install --quiet -e '.[dev,postgres]'
	@touch $@

setup: $(BIN)/nmem

# The main job on the embedded default: the MCP server over SQLite in ~/.nmem (or $$NMEM_HOME).
run: setup
	$(BIN)/nmem serve --transport http

lint: setup
	$(BIN)/ruff check src tests scripts $(wildcard bench)
	$(BIN)/mypy

test: lint
	$(BIN)/pytest -n 2 -q --durations=20

docs: setup
	$(BIN)/python scripts/docs.py

# Exactly the tests docs/seeds.toml names: every "as specified" and "superset" row of the seeds' table.
seeds: setup
	$(BIN)/pytest -q -n 2 $$($(BIN)/python scripts/docs.py --seed-tests)

# Every benchmark: core (ingest, latency, size at 10k/100k), hooks as processes, MCP, LoCoMo.
bench: bench-core bench-hooks bench-cli bench-mcp bench-http bench-locomo

bench-core: setup
	$(BIN)/python bench/core.py

# Search p50/p95 on SQLite and PostgreSQL in one run, same rows (ROWS=1000000 for 1M).
bench-engines: setup
	$(BIN)/python bench/engines.py --rows $(or $(ROWS),100000)

bench-hooks: setup
	$(BIN)/python bench/hooks.py

# The common CLI commands as processes (light path and full click CLI) beside `python -c pass` and `python -S -c pass`.
bench-cli: setup
	$(BIN)/python bench/cli.py --callgrind

# The same on an SQLCipher-encrypted database (raw 256-bit key; docs/encryption.md).
bench-hooks-encrypted: setup
	$(BIN)/python bench/hooks.py --encrypted raw

bench-quick: setup
	$(BIN)/python bench/core.py --quick

# Claude Code sessions (subagents, slash commands, compactions, a worktree) replayed through the hooks and
# the importer; the next SessionStart block's tokens, rows and checks.
bench-context: setup
	$(BIN)/python bench/context_replay.py

# Generated Claude Code coding sessions imported with the real importer: recall@5/@10 of `nmem search` beside
# plain BM25 over whole turns, per kind of question (decisions mid-turn, root causes, preferences, updates, outputs).
bench-coding: setup
	$(BIN)/python bench/coding_sessions.py --sessions 60

# The team server on loopback: 50 concurrent writers posting hook events and 200 concurrent searches;
# p50/p99 per operation, lost / duplicated / errors (docs/team.md); one server process, then one per core
# (`--workers 0`, as a team server runs). `--writers hooks` uses real hook processes.
bench-team: setup
	$(BIN)/python bench/team.py
	$(BIN)/python bench/team.py --workers 0

# SIGKILLs during hook writes and imports, 16 hooks draining 2,000 spooled events: a table of lost / duplicated / errors.
faults: setup
	$(BIN)/python bench/faults.py

# The trust review's hostile scenarios (team isolation, hostile sync remotes, hostile files and bodies,
# secrets in every field): a table of tried / lost / leaked / errors, all zero.
attack: setup
	$(BIN)/python bench/attack.py

bench-locomo: setup
	$(BIN)/python bench/locomo.py --group tune=conv-26,conv-30,conv-41,conv-42 --group held-out=conv-43,conv-44,conv-47

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

.PHONY: conformance bench-mcp bench-http bench-claude-mem bench-consolidate bench-sse

# 100 SSE clients of `nmem serve --transport http` on loopback; latency from a hook's write to each client.
bench-sse: setup
	$(BIN)/python bench/sse.py

# The official MCP conformance suite against `nmem serve --transport http` (npm, Node 22; not in `make test`).
conformance: setup
	conformance/run.sh

# `nmem serve` startup to the first tools/list, and search latency through the stdio client at 100k observations.
bench-mcp: setup
	$(BIN)/python bench/mcp_server.py

# Search over HTTP at 100k observations: requests/s and p50/p99 at 1, 4 and 16 concurrent clients.
bench-http: setup
	$(BIN)/python bench/http_server.py

# claude-mem's operations (nmem.compat.claude_mem) at 10k and 100k observations.
bench-claude-mem: setup
	$(BIN)/python bench/claude_mem_ops.py
# Precision and recall of `nmem consolidate`'s merges on a generated corpus with planted duplicates.
bench-consolidate: setup
	$(BIN)/python bench/consolidate.py
