"""The lines of a successful command's output that a person would quote.

Versions (`croniter 1.3.8`, `Python 3.12.1`), counts (`42 passed in 1.2s`, `3 files changed`),
pull request and issue numbers and links, errors and warnings: `quoted_lines` keeps a few of
them, so a command row can be found by what its run printed and not only by what was typed.
An output of a line or two is kept as it is when it holds a number, a path or a link
(`git rev-parse HEAD`, `wc -l`, `which python`). Pure string work,
no `re`: it runs on every successful command a hook records.
"""

from __future__ import annotations

from itertools import pairwise

from nmem.capture.errorline import clean

LINES = 4          # quoted lines kept at most: the first and the last ones (a run's summary comes last)
LINE_CHARS = 160
SHORT_CHARS = 160  # an output this short, on one or two lines, is kept whole
SEPARATOR = " · "
DECORATION = "=-_*#~+>|:. \t"
ALARMS = ("error", "warn", "fatal", "fail", "deprecat", "not found", "denied")   # in the lowercased line
DIGITS = "0123456789"
COUNTED = ("passed", "failed", "skipped", "errors", "warnings", "tests", "test", "files", "file", "changed",
           "insertions", "deletions", "packages", "package", "rows", "records", "items", "issues", "commits",
           "ahead", "behind", "total", "found", "fixed", "added", "removed", "updated", "installed", "downloaded",
           "succeeded", "ok", "migrations", "vulnerabilities", "lines", "matches")
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
    """A number followed by what it counts (`42 passed`, `3 files changed`, `0 vulnerabilities`)."""
    for number, unit in pairwise(words):
        if number.rstrip(",").replace(",", "").isdigit() and unit.strip(",.;:()").lower() in COUNTED:
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


def quoted(line: str) -> bool:
    """Whether a line says something a person would quote from a command's output."""
    lower = line.lower()
    if any(alarm in lower for alarm in ALARMS) or _numbered(line):
        return True
    if not any(digit in line for digit in DIGITS):
        return False
    words = line.split()
    return _counted(words) or any("." in word and _version(word) for word in words)


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


def quoted_lines(stdout: str, stderr: str = "") -> str:
    """A few lines of a successful command's output worth finding it by, joined with ` · `;
    the whole output when it is a line or two; "" when it says nothing worth keeping.
    The output was scrubbed with its event before extraction (`privacy.scrub_event`)."""
    lines = _lines(stdout) + _lines(stderr)
    if not lines:
        return ""
    if len(lines) <= 2 and sum(map(len, lines)) <= SHORT_CHARS:
        short = SEPARATOR.join(lines)
        # a number, a hash, a path or a link says something; "ok", "done" do not
        return short if "/" in short or any(digit in short for digit in DIGITS) or quoted(short) else ""
    first = next((i for i, line in enumerate(lines) if quoted(line)), None)
    if first is None:
        return ""
    last: list[str] = []   # read from the end, where a run's summary is, until enough are found
    for line in reversed(lines[first + 1:]):
        if line != lines[first] and line not in last and quoted(line):
            last.append(line)
            if len(last) == LINES - 1:
                break
    kept = [lines[first], *reversed(last)]
    return SEPARATOR.join(line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + "…" for line in kept)
