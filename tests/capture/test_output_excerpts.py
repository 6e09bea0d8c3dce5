"""What a successful command's row keeps of its output, for the outputs of common tools as they
print them (npm, pnpm, yarn, pip, cargo, go test, gh, docker build): the lines a person would
quote (counts, severities, versions, outcomes, warnings), never the chatter around them (funding
appeals, advice to run something else, progress, deprecation notices), through `nmem record`
fed Claude Code's PostToolUse payloads.
"""

from __future__ import annotations

import json
from pathlib import Path

from fixtures.harness import event, hook_env, hook_ok, observations
from test_cli_support import ok

CWD = "/home/dev/code/ledger-api"

NPM_OUT = """
added 120 packages, and audited 121 packages in 3s

15 packages are looking for funding
  run `npm fund` for details

2 moderate severity vulnerabilities

To address all issues (including breaking changes), run:
  npm audit fix --force

Run `npm audit` for details.
"""
NPM_ERR = """npm warn deprecated inflight@1.0.6: This module is not supported, and leaks memory. \
Do not use it. Check out lru-cache if you want a good and tested way to coalesce async requests by a key value.
npm warn deprecated glob@7.2.3: Glob versions prior to v9 are no longer supported
npm warn deprecated rimraf@3.0.2: Rimraf versions prior to v4 are no longer supported
"""
PNPM = """Lockfile is up to date, resolution step is skipped
Progress: resolved 1, reused 0, downloaded 0, added 0
Packages: +120
++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++
Progress: resolved 120, reused 120, downloaded 0, added 120, done
 WARN  deprecated inflight@1.0.6

dependencies:
+ express 4.18.2
+ lodash 4.17.21

devDependencies:
+ typescript 5.3.3

Done in 2.1s
"""
YARN = """yarn install v1.22.19
[1/4] Resolving packages...
[2/4] Fetching packages...
[3/4] Linking dependencies...
warning " > react-dom@18.2.0" has unmet peer dependency "react@^18.2.0".
[4/4] Building fresh packages...
success Saved lockfile.
Done in 12.34s.
"""
PIP = """Collecting requests
  Downloading requests-2.31.0-py3-none-any.whl (62 kB)
     ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 62.6/62.6 kB 3.1 MB/s eta 0:00:00
Requirement already satisfied: idna<4,>=2.5 in ./venv/lib/python3.12/site-packages (from requests) (3.6)
Requirement already satisfied: certifi>=2017.4.17 in ./venv/lib/python3.12/site-packages (from requests) (2024.2.2)
Collecting charset-normalizer<4,>=2 (from requests)
  Using cached charset_normalizer-3.3.2-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl (140 kB)
Collecting urllib3<3,>=1.21.1 (from requests)
  Downloading urllib3-2.2.1-py3-none-any.whl (121 kB)
     ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 121.1/121.1 kB 5.2 MB/s eta 0:00:00
Installing collected packages: urllib3, charset-normalizer, requests
Successfully installed charset-normalizer-3.3.2 requests-2.31.0 urllib3-2.2.1

[notice] A new release of pip is available: 23.3.1 -> 24.0
[notice] To update, run: pip install --upgrade pip
"""
CARGO = "".join(f"   Compiling crate{i} v1.0.{i}\n" for i in range(30)) + """\
   Compiling ledger v0.1.0 (/home/dev/code/ledger)
warning: unused variable: `total`
 --> src/main.rs:3:9
  |
3 |     let total = 5;
  |         ^^^^^ help: if this is intentional, prefix it with an underscore: `_total`
  |
  = note: `#[warn(unused_variables)]` on by default

warning: `ledger` (bin "ledger") generated 1 warning
    Finished `dev` profile [unoptimized + debuginfo] target(s) in 12.34s
"""
GO = """ok  	github.com/acme/ledger/internal/billing	0.012s
ok  	github.com/acme/ledger/internal/api	(cached)
?   	github.com/acme/ledger/cmd/ledger	[no test files]
ok  	github.com/acme/ledger/internal/dates	0.345s
"""
GH_PR = ("https://github.com/acme/ledger/pull/318\n",
         "\nCreating pull request for feature/leap-year into main in acme/ledger\n\n")
DOCKER = """#0 building with "default" instance using docker driver

#1 [internal] load build definition from Dockerfile
#1 transferring dockerfile: 512B done
#1 DONE 0.0s

#2 [internal] load metadata for docker.io/library/python:3.12-slim
#2 DONE 1.2s

#3 [1/4] FROM docker.io/library/python:3.12-slim@sha256:9b8c2e6d
#3 DONE 0.0s

#4 [2/4] COPY requirements.txt .
#4 DONE 0.1s

#5 [3/4] RUN pip install -r requirements.txt
#5 2.104 Successfully installed flask-3.0.0
#5 DONE 4.3s

#6 exporting to image
#6 exporting layers 0.5s done
#6 writing image sha256:7f3c1a2b3c4d5e6f done
#6 naming to docker.io/library/ledger:latest done
#6 DONE 0.6s
"""
PYTEST = "." * 60 + "\n=== 61 passed, 2 skipped in 3.10s ==="

# command → (stdout, stderr, what its row keeps after `→ `)
RUNS = {
    "npm install": (NPM_OUT, NPM_ERR, "added 120 packages, and audited 121 packages in 3s · "
                                      "2 moderate severity vulnerabilities"),
    "npm ci 2>&1": (NPM_ERR + NPM_OUT, "", "added 120 packages, and audited 121 packages in 3s · "
                                           "2 moderate severity vulnerabilities"),
    "pnpm install": (PNPM, "", "+ express 4.18.2 · + lodash 4.17.21 · + typescript 5.3.3 · Done in 2.1s"),
    "yarn install": (YARN, "", 'yarn install v1.22.19 · warning " > react-dom@18.2.0" has unmet peer dependency '
                               '"react@^18.2.0". · Done in 12.34s.'),
    "pip install requests": (PIP, "", "Successfully installed charset-normalizer-3.3.2 requests-2.31.0 urllib3-2.2.1"),
    "cargo build": ("", CARGO, "warning: unused variable: `total` · note: `#[warn(unused_variables)]` on by default · "
                               'warning: `ledger` (bin "ledger") generated 1 warning · Finished `dev` profile '
                               "[unoptimized + debuginfo] target(s) in 12.34s"),
    "go test ./...": (GO, "", "ok github.com/acme/ledger/internal/billing 0.012s · "
                              "ok github.com/acme/ledger/internal/api (cached) · "
                              "ok github.com/acme/ledger/internal/dates 0.345s"),
    "gh pr create --fill": (*GH_PR, "https://github.com/acme/ledger/pull/318 · Creating pull request for "
                                    "feature/leap-year into main in acme/ledger"),
    "docker build -t ledger .": ("", DOCKER, "5 2.104 Successfully installed flask-3.0.0 · "
                                             "6 exporting layers 0.5s done · "
                                             "6 naming to docker.io/library/ledger:latest done"),
}
CHATTER = ("funding", "npm fund", "deprecated", "Progress:", "[1/4]", "eta 0:00", "[notice]", "already satisfied",
           "DONE 0.6s")


def test_common_tools_keep_the_lines_a_person_would_quote(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for command, (stdout, stderr, _) in RUNS.items():
        hook_ok(home, event("PostToolUse", "tools-1", CWD, tool_name="Bash", tool_input={"command": command},
                            tool_response={"stdout": stdout, "stderr": stderr, "interrupted": False,
                                           "isImage": False}))
    content = {r["content"].partition("\n")[0]: r["content"] for r in observations(home)
               if r["obs_type"] == "command"}
    for command, (_, _, kept) in RUNS.items():
        assert content[command] == f"{command}\n→ {kept}", command
        assert len(kept) <= 300
        assert not any(noise in content[command] for noise in CHATTER), content[command]
    found = json.loads(ok("search", "moderate severity vulnerabilities", "--format", "json",
                          env=hook_env(home)).stdout)
    assert any("npm install" in str(hit) for hit in found)


def test_chatter_gives_way_even_when_it_comes_first_and_is_long(tmp_path: Path) -> None:
    """Forty deprecation notices before the summary, each longer than a kept line: the summary
    is what the row keeps, whole; an output of chatter alone keeps nothing."""
    home = tmp_path / "home"
    notices = "".join(f"npm warn deprecated pkg{i}@1.0.{i}: " + "this package is no longer supported " * 6 + "\n"
                      for i in range(40))
    runs = {"npm install --legacy-peer-deps": notices + NPM_OUT,
            "npm update": notices + "\n3 packages are looking for funding\n  run `npm fund` for details\n"}
    for command, stdout in runs.items():
        hook_ok(home, event("PostToolUse", "tools-2", CWD, tool_name="Bash", tool_input={"command": command},
                            tool_response={"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False}))
    content = {r["content"].partition("\n")[0]: r["content"] for r in observations(home)
               if r["obs_type"] == "command"}
    assert content["npm install --legacy-peer-deps"] == (
        "npm install --legacy-peer-deps\n→ added 120 packages, and audited 121 packages in 3s · "
        "2 moderate severity vulnerabilities")
    assert content["npm update"] == "npm update"


PUSH_NEW = """Enumerating objects: 5, done.
Counting objects: 100% (5/5), done.
Delta compression using up to 8 threads
Compressing objects: 100% (3/3), done.
Writing objects: 100% (3/3), 310 bytes | 310.00 KiB/s, done.
Total 3 (delta 2), reused 0 (delta 0), pack-reused 0
remote: Resolving deltas: 100% (2/2), completed with 2 local objects.
remote:
remote: Create a pull request for 'feature/leap-year' on GitHub by visiting:
remote:      https://github.com/acme/ledger/pull/new/feature/leap-year
remote:
To github.com:acme/ledger.git
 * [new branch]      feature/leap-year -> feature/leap-year
branch 'feature/leap-year' set up to track 'origin/feature/leap-year'.
"""
PUSH = """To github.com:acme/ledger.git
   1a2b3c4..5d6e7f8  main -> main
"""


def test_a_push_keeps_its_branch_and_the_link_to_open_a_pull_request(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for command, stderr in {"git push -u origin feature/leap-year": PUSH_NEW, "git push": PUSH}.items():
        hook_ok(home, event("PostToolUse", "tools-3", CWD, tool_name="Bash", tool_input={"command": command},
                            tool_response={"stdout": "", "stderr": stderr, "interrupted": False, "isImage": False}))
    pushes = {r["content"].partition("\n")[0]: r for r in observations(home) if r["obs_type"] == "git_push"}
    new = pushes["git push -u origin feature/leap-year"]
    assert new["content"] == ("git push -u origin feature/leap-year\n"
                              "→ remote: https://github.com/acme/ledger/pull/new/feature/leap-year")
    assert new["metadata"]["branch"] == "feature/leap-year"
    assert pushes["git push"]["content"] == "git push", "progress and the ref update say nothing more"
    assert pushes["git push"]["metadata"]["sha"] == "5d6e7f8"
