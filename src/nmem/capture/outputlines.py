"""The lines of a successful command's output that a person would quote.

Versions (`croniter 1.3.8`, `Python 3.12.1`), counts (`42 passed in 1.2s`, `3 files changed`,
`2 moderate severity vulnerabilities`), pull request and issue numbers and links, errors and
warnings, outcomes (`Successfully installed …`, `naming to …:latest`): `quoted_lines` keeps a
few of them, so a command row can be found by what its run printed and not only by what was typed.
Each line is weighed (errors and numbers most, then counts, warnings and outcomes, then versions
and durations) and the heaviest few are kept, the later of two equal ones first (a run's summary
comes last), within a character budget, in the output's order. Chatter weighs nothing, whatever
numbers it holds: progress (`Progress: resolved 120`, `[1/4]`, `100% (5/5)`, `eta 0:00:01`),
advice (`run npm fund for details`, `To update, run: …`), funding, deprecation notices and
`Requirement already satisfied`. An output of a line or two is kept as it is when it holds a
number, a path or a link (`git rev-parse HEAD`, `wc -l`, `which python`). Pure string work,
no `re`: it runs on every successful command a hook records.
"""

from __future__ import annotations

from nmem.capture.errorline import clean

LINES = 4          # quoted lines kept at most
LINE_CHARS = 160
BUDGET = 300       # characters of kept lines, separators included
SHORT_CHARS = 160  # an output this short, on one or two lines, is kept whole
SEPARATOR = " · "
DECORATION = "=-_*#~+>|:. \t"
ERRORS = ("error", "fatal", "fail", "not found", "denied")   # in the lowercased line
DIGITS = "0123456789"
COUNTED = ("passed", "failed", "skipped", "errors", "error", "warnings", "warning", "tests", "test", "files",
           "file", "changed", "insertions", "deletions", "packages", "package", "rows", "records", "items",
           "issues", "commits", "ahead", "behind", "total", "found", "fixed", "added", "removed", "updated",
           "installed", "downloaded", "succeeded", "ok", "migrations", "vulnerabilities", "vulnerability",
           "lines", "matches")
COUNT_REACH = 3    # `2 moderate severity vulnerabilities`: the unit may follow the number by a few words
# The first word of a line that reports how a run ended (`Successfully installed …`, `ok  pkg 0.01s`,
# `Finished …`, BuildKit's `#9 naming to docker.io/library/app:latest`).
OUTCOMES = frozenset({"ok", "successfully", "finished", "naming", "built", "tagged", "deployed",
                      "published", "released"})
# Chatter, whatever numbers it holds: funding appeals, advice to run something else, progress,
# deprecation notices, pip's notices and already-installed requirements (in the lowercased line).
CHATTER = ("funding", "npm fund", "for details", ", run:", "run `", "progress:", " eta ", "deprecat", "[notice]",
           "new release of", "already satisfied", "using cached")
# Commands whose output is files' content or a search's matches, not what a run reported
# (agents without file tools, such as Codex, read and search through the shell).
READERS = frozenset({"cat", "head", "tail", "sed", "awk", "less", "more", "bat", "nl", "rg", "grep", "egrep", "fgrep",
                     "ag", "ack", "find", "fd", "ls", "tree", "diff", "jq", "xxd", "od", "strings"})
LINKS = ("/pull/", "/pulls/", "/issues/", "/merge_requests/", "/commit/", "/releases/", "/actions/runs/")


def _version(token: str) -> bool:
    """`1.3.8`, `v2.0`, `3.12.1rc1`, `croniter==1.3.8`, `react@18.2.0`: digits in two dot-separated
    parts at least."""
    token = token.strip("()[],;'\"")
    for pin in ("==", "@", "-", "/", ":"):
        token = token.rpartition(pin)[2]
    token = token.lstrip("=v^~<>")
    parts = token.split(".")
    if len(parts) < 2 or len(parts) > 5:
        return False
    return parts[0].isdigit() and len(parts[0]) <= 4 and parts[1][:1].isdigit()


def _counted(words: list[str]) -> bool:
    """A number followed by what it counts, maybe past a few words that qualify it (`42 passed`,
    `3 files changed`, `0 vulnerabilities`, `2 moderate severity vulnerabilities`)."""
    for at, number in enumerate(words):
        if not number.rstrip(",").replace(",", "").isdigit():
            continue
        for word in words[at + 1:at + 1 + COUNT_REACH]:
            unit = word.strip(",.;:()").lower()
            if unit in COUNTED:
                return True
            if not unit.isalpha():   # `3 |  let total = 5;` counts nothing
                break
    return False


def _stepped(words: list[str]) -> bool:
    """A progress counter (`[1/4]`, `(5/5),`, `Step 2/7`): digits on both sides of a slash."""
    for word in words:
        number, slash, total = word.strip("[](),:").partition("/")
        if slash and number.isdigit() and total.isdigit():
            return True
    return False


def _numbered(line: str) -> bool:
    """`#123` (a pull request or issue) or a link to one, a commit or a release."""
    at = line.find("#")
    while at >= 0:
        if line[at + 1:at + 2].isdigit() and (at == 0 or not line[at - 1].isalnum()):
            return True
        at = line.find("#", at + 1)
    return "://" in line and any(link in line for link in LINKS)


def reads_files(command: str) -> bool:
    """Whether a shell command reads or searches files (`cat`, `sed -n`, `rg`, `cd src && ls`),
    by the program its first step runs."""
    for step in command.replace("&&", ";").replace("||", ";").replace("|", ";").split(";"):
        program = next((w for w in step.split() if "=" not in w), "")   # past `LC_ALL=C`
        if program in ("", "cd"):
            continue
        return program.rpartition("/")[2] in READERS
    return False


def _step_status(words: list[str]) -> bool:
    """A build step's status line (BuildKit's `#6 DONE 0.6s`, `#4 CACHED`): a number, a word in
    capitals, maybe a time."""
    return len(words) <= 3 and words[0].isdigit() and words[1:2] != [] and words[1].isupper()


def weight(line: str, errors: tuple[str, ...] = ERRORS, chatter: tuple[str, ...] = CHATTER) -> int:
    """How much a line of a command's output says: 0 for nothing worth quoting (or chatter),
    more for errors and pull request numbers, counts, warnings and outcomes, versions.
    `errors` and `chatter`: those of `ERRORS` and `CHATTER` the whole output holds."""
    lower = line.lower()
    alarmed = any(alarm in lower for alarm in errors) if errors else False
    if not alarmed and chatter and any(noise in lower for noise in chatter):
        return 0
    words = line.split()
    if not alarmed and (("/" in line and _stepped(words)) or _step_status(words)):
        return 0
    score = 3 if alarmed else 0
    if _numbered(line):
        score += 3
    if "warn" in lower:
        score += 2
    first = next((w for w in words if not w.replace(".", "", 1).isdigit()), "")   # past BuildKit's step and time
    if len(words) > 1 and first.lower().rstrip(":") in OUTCOMES:   # `ok` alone says nothing
        score += 2
    if any(digit in line for digit in DIGITS):
        if _counted(words):
            score += 2
        elif any("." in word and _version(word) for word in words):
            score += 1
    return score


def _is_diff(line: str) -> bool:
    return line.startswith(("+++", "---", "@@", "diff --git", "index ")) or (
        line[:1] in "+-" and line[1:2] not in (" ", ""))


def _lines(text: str) -> list[str]:
    out = []
    for raw in clean(text).splitlines():
        line = " ".join(raw.split())
        if line.strip(DECORATION) and not _is_diff(raw.lstrip()):
            out.append(line.strip("=*#~ ") or line)
    return out


def _fitted(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + "…"


def quoted_lines(stdout: str, stderr: str = "", budget: int = BUDGET) -> str:
    """A few lines of a successful command's output worth finding it by, joined with ` · `:
    the heaviest (see `weight`), the later of two equal ones first, as many as fit `budget`
    characters, in the output's order; the whole output when it is a line or two; "" when it
    says nothing worth keeping. The output was scrubbed with its event before extraction
    (`privacy.scrub_event`)."""
    lines = _lines(stdout) + _lines(stderr)
    if not lines:
        return ""
    if len(lines) <= 2 and sum(map(len, lines)) <= SHORT_CHARS:
        short = SEPARATOR.join(lines)
        # a number, a hash, a path or a link says something; "ok", "done" do not
        return short if "/" in short or any(digit in short for digit in DIGITS) or weight(short) else ""
    whole = "\n".join(lines).lower()   # each line is searched only for what the whole output holds
    errors = tuple(alarm for alarm in ERRORS if alarm in whole)
    chatter = tuple(noise for noise in CHATTER if noise in whole)
    weighed = [(score, at) for at, line in enumerate(lines) if (score := weight(line, errors, chatter))]
    kept: dict[str, int] = {}   # line → its place in the output
    room = budget
    for _, at in sorted(weighed, reverse=True):
        line = _fitted(lines[at])
        if line in kept or (kept and len(line) + len(SEPARATOR) > room):
            continue
        kept[line] = at
        room -= len(line) + len(SEPARATOR)
        if len(kept) == LINES or room <= 0:
            break
    return SEPARATOR.join(sorted(kept, key=kept.__getitem__))
