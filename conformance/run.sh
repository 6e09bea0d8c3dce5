#!/usr/bin/env bash
# Run the official MCP conformance suite against `nmem serve --transport http`.
#
#   conformance/run.sh                              # the active server scenarios (the gate)
#   conformance/run.sh --suite pending              # scenarios the suite has not made required yet
#   conformance/run.sh --scenario tools-list        # one scenario (extra args go to the suite's CLI)
#
# Installs Node 22 and @modelcontextprotocol/conformance from npm into .cache/conformance/
# (git-ignored; the suite needs Node >= 22), starts nmem on a free loopback port with a
# throw-away NMEM_HOME, runs the scenarios, and compares the outcome with
# conformance/expected-failures.yml: exit 0 only if exactly the listed scenarios fail.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SUITE_VERSION=0.1.16
NODE_MAJOR=22
CACHE="$ROOT/.cache/conformance"
PY=${PYTHON:-"$ROOT/.venv/bin/python"}
BASELINE="$ROOT/conformance/expected-failures.yml"
NODE="$CACHE/node_modules/.bin/node"
CLI="$CACHE/node_modules/@modelcontextprotocol/conformance/dist/index.js"

say() { printf 'conformance: %s\n' "$*" >&2; }

# -- the suite and its Node, cached --------------------------------------------------------------
mkdir -p "$CACHE"
[ -f "$ROOT/.cache/.gitignore" ] || printf '*\n' > "$ROOT/.cache/.gitignore"
installed_version() {
    "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' \
        "$CACHE/node_modules/@modelcontextprotocol/conformance/package.json" 2>/dev/null || true
}
if [ "$(installed_version)" != "$SUITE_VERSION" ] || ! "$NODE" --version 2>/dev/null | grep -q "^v$NODE_MAJOR\."; then
    command -v npm >/dev/null || { say "npm is required to install the suite"; exit 2; }
    say "installing node@$NODE_MAJOR and @modelcontextprotocol/conformance@$SUITE_VERSION into $CACHE"
    npm install --prefix "$CACHE" --no-audit --no-fund --save-exact --loglevel=error \
        "node@$NODE_MAJOR" "@modelcontextprotocol/conformance@$SUITE_VERSION" >&2
fi
say "suite $(installed_version) on node $("$NODE" --version)"

# -- nmem on a free loopback port, without a token (the suite cannot send one) --------------------
while IFS= read -r var; do unset "$var"; done < <(env | sed -n 's/^\(NMEM_[A-Za-z0-9_]*\)=.*/\1/p')
WORK=$(mktemp -d "${TMPDIR:-/tmp}/nmem-conformance.XXXXXX")
export NMEM_HOME="$WORK/home"
SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# something to list and read
"$PY" -m nmem remember --project conformance -n decisions --summary "Conformance runs against nmem" \
    "The MCP conformance suite runs against nmem serve --transport http." >/dev/null

PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$PY" -m nmem serve --transport http --host 127.0.0.1 --port "$PORT" --project conformance \
    >"$WORK/serve.log" 2>&1 &
SERVER_PID=$!
"$PY" - "$PORT" "$SERVER_PID" <<'EOF' || { say "nmem did not start:"; cat "$WORK/serve.log" >&2; exit 1; }
import os, socket, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit(1)
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", port)) == 0:
            sys.exit(0)
    time.sleep(0.05)
sys.exit(1)
EOF
URL="http://127.0.0.1:$PORT/mcp"
say "nmem serving $URL"

# -- the scenarios ---------------------------------------------------------------------------------
RESULTS="$CACHE/results/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$RESULTS"
ARGS=("$@")
[ ${#ARGS[@]} -gt 0 ] || ARGS=(--suite active)
set +e
"$NODE" "$CLI" server --url "$URL" --expected-failures "$BASELINE" -o "$RESULTS" "${ARGS[@]}" >"$RESULTS/run.log" 2>&1
STATUS=$?
set -e
sed -n '/=== SUMMARY ===/,$p' "$RESULTS/run.log"

# One line per outcome, from the saved checks (a scenario passes when no check is a FAILURE).
"$PY" - "$RESULTS" "$BASELINE" <<'EOF'
import json, pathlib, re, sys
results, baseline = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
expected = set(re.findall(r"^\s*-\s*([\w-]+)", baseline.read_text(), re.M))
passed, failed, warned = [], [], []
for checks in sorted(results.glob("server-*/checks.json")):
    name = re.sub(r"^server-|-\d{4}-\d\d-\d\dT.*$", "", checks.parent.name)
    statuses = [c["status"] for c in json.loads(checks.read_text())]
    # the suite's baseline rule: a WARNING fails a scenario as a FAILURE does
    (failed if "FAILURE" in statuses or "WARNING" in statuses else passed).append(name)
    if "WARNING" in statuses and "FAILURE" not in statuses:
        warned.append(name)
print(f"\npassed ({len(passed)}): {', '.join(passed)}")
if warned:
    print(f"warnings only ({len(warned)}): {', '.join(warned)}")
print(f"failed as expected ({len(set(failed) & expected)}): {', '.join(sorted(set(failed) & expected))}")
unexpected = sorted(set(failed) - expected)
stale = sorted(expected & set(passed))
print(f"unexpected failures ({len(unexpected)}): {', '.join(unexpected) or '-'}")
print(f"listed but passing ({len(stale)}): {', '.join(stale) or '-'}")
print(f"results: {results}")
EOF
cp "$WORK/serve.log" "$RESULTS/serve.log" 2>/dev/null || true
[ "$STATUS" -eq 0 ] || say "FAILED (exit $STATUS): see $RESULTS/run.log and $RESULTS/serve.log"
exit "$STATUS"
