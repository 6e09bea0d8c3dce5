"""Where a session left off: what it left failing, what it fixed, and what its last message says is
still to do. Read by the SessionStart context block; no `re` (it runs inside the hook's budget).

A failing command counts as fixed once a later run of the same command passes in the same
session. "The same" is the command as typed, less what does not change what runs (a leading
`cd dir &&`, environment assignments, `2>&1 | tail -20`), or, for a test runner, a run whose
targets include the failing one (`pytest tests/` passing fixes `pytest tests/test_x.py::test_a`).
A failed file tool (obs_type `file_error`) is fixed by a later read (for a failed Read) or
change (for a failed Write/Edit) of the same file.
"""

from __future__ import annotations

from nmem.capture.errorline import SEPARATOR, key_line
from nmem.models import Record
from nmem.text import clip, one_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from nmem.models import Observation, Prompt

ERROR_CHARS = 110
PENDING_CHARS = 160
PENDING_LIMIT = 5

# Leading steps that only set the scene for the command that matters.
_SCENE = ("cd", "pushd", "source", ".", "export", "set", "ulimit", "nvm", "conda", "workon")
# Filters a command's output is piped through to keep it short; they do not change what ran.
_FILTERS = ("tail", "head", "grep", "egrep", "less", "more", "tee", "cat", "sort", "uniq", "wc", "cut", "awk",
            "sed", "column", "tr", "jq")
_REDIRECTS = ("2>&1", "&>/dev/null", ">/dev/null", "2>/dev/null", "1>/dev/null", ">&2")
# Words that run the command after them, with how many of their own arguments to skip
# (`timeout 60 pytest` is pytest; `uv run pytest` is pytest).
_WRAPPERS = {"time": 0, "nice": 0, "exec": 0, "command": 0, "env": 0, "sudo": 0, "npx": 0, "bunx": 0,
             "pnpx": 0, "timeout": 1}
_RUNNERS = ("uv", "poetry", "pipenv", "hatch", "pdm", "rye")   # `<tool> run <command>`
_PYTHONS = ("python", "python3", "py")
# pytest options that take a value (`-k expr`), and those that pick a subset of the tests.
_PYTEST_VALUE = frozenset(("-k", "-m", "-n", "-p", "-c", "-o", "-W", "-r", "--tb", "--maxfail", "--durations",
                           "--rootdir", "--ignore", "--ignore-glob", "--deselect", "--cov", "--cov-report",
                           "--junitxml", "--basetemp", "--log-level", "--timeout", "--numprocesses", "--dist",
                           "--confcutdir", "--capture", "--import-mode"))
_PYTEST_SUBSET = frozenset(("-k", "-m", "--lf", "--last-failed", "--deselect", "--ignore", "--ignore-glob",
                            "--sw", "--stepwise"))
_TEST_VERBS = ("test", "tests")
_TEST_TOOLS = ("jest", "vitest", "mocha", "tox", "nox", "rspec", "phpunit", "ctest")


def display_command(content: str) -> str:
    """The command a row's content names, as a person would retype it: its first line, without
    leading `cd …&&`-style scene setting, redirections and trailing output filters."""
    line = one_line(content.strip().splitlines()[0]) if content.strip() else ""
    while line.split(" ", 1)[0] in _SCENE:
        ends = [at for at in (line.find("&&"), line.find(";")) if at != -1]
        if not ends:
            break
        line = line[min(ends):].removeprefix("&&").removeprefix(";").strip()
    for redirect in _REDIRECTS:
        line = line.replace(" " + redirect, "")
    # `a | tail -20`: only single pipes, never `||`
    parts = line.replace("||", "\0").split(" | ")
    while len(parts) > 1 and parts[-1].strip().split(" ", 1)[0] in _FILTERS:
        parts.pop()
    return " | ".join(parts).replace("\0", "||").strip()


def _is_assignment(word: str) -> bool:
    name, eq, _ = word.partition("=")
    return bool(eq) and bool(name) and name.replace("_", "").isalnum() and not name[0].isdigit()


def _unwrap(words: list[str]) -> list[str]:
    """Words without leading `VAR=value` assignments, wrappers (`uv run`, `timeout 60`) and
    interpreter launches (`python -m pytest` is `pytest`); the executable by its base name."""
    while words:
        head = words[0].rsplit("/", 1)[-1]
        if _is_assignment(words[0]):
            words = words[1:]
        elif head in _WRAPPERS:
            words = words[1 + _WRAPPERS[head]:]
        elif (head in _RUNNERS and words[1:2] == ["run"]) or (
                head.split(".", 1)[0] in _PYTHONS and len(words) > 2 and words[1] == "-m"):
            words = words[2:]
        else:
            break
    return [words[0].rsplit("/", 1)[-1], *words[1:]] if words else []


class CommandKey(Record):
    """What a command runs, for telling whether a later passing run fixes a failing one."""

    runner: str  # "pytest", "cargo test"... or the whole command for anything else
    args: tuple[str, ...] = ()  # a test run's targets (files, node ids, directories, name filters)
    subset: tuple[str, ...] = ()  # options that run a subset of the tests (`-k login`, `--lf`)
    test: bool = False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CommandKey) and (self.runner, self.args, self.subset) == (
            other.runner, other.args, other.subset)

    def __hash__(self) -> int:
        return hash((self.runner, self.args, self.subset))

    def covers(self, failed: CommandKey) -> bool:
        """Whether this command passing means that `failed` now passes too."""
        if self.runner != failed.runner:
            return False
        if self == failed:
            return True
        if not self.test or (self.subset and self.subset != failed.subset):
            return False
        if not self.args:
            return not self.subset or self.subset == failed.subset   # the whole suite (or subset) passed
        if self.runner != "pytest":
            return False
        return bool(failed.args) and all(any(_under(f, p) for p in self.args) for f in failed.args)


def _under(target: str, scope: str) -> bool:
    scope = scope.rstrip("/")
    return target == scope or target.startswith((scope + "::", scope + "/"))


def _target(word: str) -> str:
    return word[2:] if word.startswith("./") else word


def _pytest_key(args: list[str]) -> CommandKey:
    targets: list[str] = []
    subset: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        name = word.split("=", 1)[0]
        takes_value = name in _PYTEST_VALUE and "=" not in word
        if name in _PYTEST_SUBSET:
            subset.append(f"{word} {args[i + 1]}" if takes_value and i + 1 < len(args) else word)
        if word.startswith("-"):
            i += 2 if takes_value else 1
            continue
        targets.append(_target(word))
        i += 1
    return CommandKey("pytest", tuple(sorted(targets)), tuple(sorted(subset)), test=True)


def command_key(content: str) -> CommandKey:
    words = _unwrap(display_command(content).split())
    if not words:
        return CommandKey("")
    if words[0] in ("pytest", "py.test"):
        return _pytest_key(words[1:])
    for size in (3, 2):  # `npm run test`, `cargo test`, `go test`, `make test`...
        if len(words) >= size and words[size - 1] in _TEST_VERBS and (size == 2 or words[1] == "run"):
            args = tuple(_target(w) for w in words[size:] if not w.startswith("-"))
            return CommandKey(" ".join(words[:size]), args, test=True)
    if words[0] in _TEST_TOOLS:
        return CommandKey(words[0], tuple(_target(w) for w in words[1:] if not w.startswith("-")), test=True)
    return CommandKey(" ".join(words))


def error_gist(text: str, size: int = ERROR_CHARS, key: str | None = None) -> str:
    """The most telling line of a failure's output: a test summary with the exception behind it
    (`1 error in 0.05s · ModuleNotFoundError: …`, as capture's previews read it), else a test
    summary (`1 failed, 2 passed`), else the last line naming an error, else the last line.
    `key` is the output's key line when capture kept it (`error_line`); else it is read here."""
    combined = key if key is not None else key_line(text)
    if SEPARATOR in combined:
        return clip(combined, size)
    lines = [line.strip().strip("=").strip() for line in text.strip().splitlines()]
    lines = [line for line in lines if line and line != "…"]
    if not lines:
        return ""
    for line in reversed(lines):
        low = line.lower()
        if (" failed" in low or " error" in low) and (" passed" in low or " in " in low) and low[:1].isdigit():
            return clip(line, size)
    for line in reversed(lines):     # a traceback's or a runner's final word on it
        if any(word in line for word in _STRONG_ERROR_WORDS):
            return clip(line, size)
    for line in lines:               # a linter's or compiler's first complaint
        if any(word in line.lower() for word in _ERROR_WORDS):
            return clip(line, size)
    return clip(lines[-1], size)


_STRONG_ERROR_WORDS = ("Error", "Exception", "FAILED", "fatal:", "panicked", "Traceback")
_ERROR_WORDS = ("error", "failed", "denied", "not found", "no such file", "cannot", "can't", "unable")


class Failure:
    """A failing command (or file tool) of a session and what became of it."""

    __slots__ = ("denied", "error", "fails", "fixed_by", "key", "label", "last", "path")

    def __init__(self, key: object, label: str, last: Observation, path: str | None = None) -> None:
        self.key = key
        self.label = label                    # the command, or the file tool's name
        self.path = path                      # the file of a failed file tool
        self.last = last                      # the latest failing run
        self.fails = 0
        self.error = ""
        self.denied = False
        self.fixed_by: Observation | None = None

    @property
    def open(self) -> bool:
        return self.fixed_by is None


def _error_text(obs: Observation) -> str:
    meta = obs.metadata if isinstance(obs.metadata, dict) else {}
    error = meta.get("error")
    if isinstance(error, str) and error.strip():
        return error
    _, _, rest = obs.content.partition("\n")
    return rest


def _file_kind(tool: object) -> str:
    return "read" if tool in ("Read", "NotebookRead") else "change"


_MISSING = ("does not exist", "no such file", "not found", "enoent", "cannot find")


def is_probe(obs: Observation) -> bool:
    """A Read of a file that is not there: the agent looking whether it exists, not work left open."""
    meta = obs.metadata if isinstance(obs.metadata, dict) else {}
    tool = meta.get("tool") or obs.tool_name
    if obs.obs_type != "file_error" or _file_kind(tool) != "read" or meta.get("denied"):
        return False
    low = _error_text(obs).lower() or obs.content.lower()
    return any(word in low for word in _MISSING)


def failures(observations: Iterable[Observation]) -> list[Failure]:
    """Every distinct failure of a session (observations in time order), oldest first; each
    `open` unless a later passing run fixed it. A Read of a missing file is a probe, not a failure."""
    found: dict[object, Failure] = {}
    for obs in observations:
        meta = obs.metadata if isinstance(obs.metadata, dict) else {}
        if is_probe(obs):
            continue
        if obs.obs_type == "command_error":
            key: object = command_key(obs.content)
            label = display_command(obs.content)
        elif obs.obs_type == "file_error" and obs.file_path:
            tool = meta.get("tool") or obs.tool_name or "file tool"
            key = ("file", _file_kind(tool), obs.file_path)
            label = str(tool)
        elif obs.obs_type == "command":
            waiting = [(f, f.key) for f in found.values() if f.open and isinstance(f.key, CommandKey)]
            if waiting:   # a passing run is read only when it may fix something
                passed = command_key(obs.content)
                for failure, failed in waiting:
                    if passed.covers(failed):
                        failure.fixed_by = obs
            continue
        elif obs.obs_type in ("file_read", "file_write", "file_edit") and obs.file_path:
            kind = "read" if obs.obs_type == "file_read" else "change"
            failure_ = found.get(("file", kind, obs.file_path))
            if failure_ is not None and failure_.open:
                failure_.fixed_by = obs
            continue
        else:
            continue
        failure = found.pop(key) if key in found else Failure(key, label, obs, obs.file_path)
        found[key] = failure  # re-inserted: the dict stays in order of each failure's latest run
        failure.fails += 1
        failure.last = obs
        failure.fixed_by = None
        failure.denied = bool(meta.get("denied"))
    for failure in found.values():   # why each failed, read once, from its latest run
        failure.error = error_gist(_error_text(failure.last), key=_kept_key_line(failure.last))
    return list(found.values())


def _kept_key_line(obs: Observation) -> str | None:
    """The key line capture kept with a failure (`error_line`, what its preview shows), read from the
    whole output before its tail was cut for `error`; None for rows stored before it was kept, and
    for a denial (whose `error_line` is the denial's own wording)."""
    meta = obs.metadata if isinstance(obs.metadata, dict) else {}
    line = meta.get("error_line")
    return line if isinstance(line, str) and line and not meta.get("denied") else None


# -- what the last message says is still to do ----------------------------------------------

PENDING_MARKERS = (
    "still failing", "still fails", "still broken", "still pending", "still need", "still open",
    "still to do", "still todo", "still has", "todo", "fixme", "next step", "remaining", "not yet",
    "left to do", "pending", "unresolved", "follow-up", "follow up", "haven't", "have not", "didn't get to",
    "did not get to", "blocked", "open question", "outstanding", "known issue", "yet to", "wip",
)
_DONE = ("pass", "done", "fixed", "green", "fine", "succeed", "work")
_NEGATIONS = ("no ", "nothing", "none", "without", "zero ", "all tests pass", "0 failed", "no longer")


def _has_marker(low: str) -> int:
    """Where the first pending marker starts in a lower-cased line (as a whole word), or -1."""
    best = -1
    for marker in PENDING_MARKERS:
        start = 0
        while (at := low.find(marker, start)) != -1:
            end = at + len(marker)
            if (at == 0 or not low[at - 1].isalnum()) and (end == len(low) or not low[end].isalnum()
                                                           or marker in ("next step", "todo")):
                best = at if best == -1 else min(best, at)
                break
            start = at + 1
    return best


def _negated(low: str, at: int) -> bool:
    before = low[max(0, at - 24):at]
    return any(neg in before for neg in _NEGATIONS)


def _item(line: str) -> str:
    text = line.strip()
    for bullet in ("- [ ] ", "- [x] ", "- ", "* ", "+ ", "• "):
        if text.startswith(bullet):
            return text[len(bullet):].strip()
    head, dot, rest = text.partition(". ")
    if dot and head.isdigit():
        return rest.strip()
    return text.lstrip("#").strip().replace("**", "")


def _is_list_item(line: str) -> bool:
    text = line.strip()
    head, dot, _ = text.partition(". ")
    return text[:2] in ("- ", "* ", "+ ", "• ") or bool(dot and head.isdigit())


def _sentences(text: str) -> list[str]:
    out: list[str] = []
    start = 0
    for i, char in enumerate(text):
        if char in ".!?" and (i + 1 == len(text) or text[i + 1] == " "):
            out.append(text[start:i + 1].strip())
            start = i + 1
    if text[start:].strip():
        out.append(text[start:].strip())
    return out


def _pending(text: str) -> bool:
    low = text.lower()
    at = _has_marker(low)
    if at == -1 or _negated(low, at):
        return False
    # "the remaining tests pass" reports a result, not work left
    return not (low.startswith("remaining", at) and any(word in low for word in _DONE))


def pending_lines(message: str, limit: int = PENDING_LIMIT, size: int = PENDING_CHARS) -> list[str]:
    """What an agent's message says is still to do: its sentences and list items that say
    "still failing", "TODO", "not yet"..., and the items under a heading such as "Next steps:";
    cut at word boundaries, at most `limit`."""
    lines = message.replace("\r\n", "\n").splitlines()
    found: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if not line or not any(_pending(sentence) for sentence in _sentences(line)):
            continue
        if line.rstrip("*").endswith(":") or line.startswith("#"):
            # a heading ("Next steps:", "## Remaining") names the list under it
            items: list[str] = []
            while i < len(lines) and ((not lines[i].strip() and not items) or _is_list_item(lines[i])):
                if lines[i].strip():
                    items.append(_item(lines[i]))
                i += 1
            if items:
                found.extend(clip(item, size) for item in items if item)
                continue
        if _is_list_item(line):
            found.append(clip(_item(line), size))
        else:
            found.extend(clip(sentence, size) for sentence in _sentences(_item(line)) if _pending(sentence))
    return list(dict.fromkeys(found))[:limit]


def open_and_fixed(observations: Sequence[Observation]) -> tuple[list[Failure], list[Failure]]:
    """The session's failures still open, and those fixed later in it, each oldest first."""
    found = failures(observations)
    return [f for f in found if f.open], [f for f in found if not f.open]


# -- the reply a session closed on ----------------------------------------------------------------

COURTESY_WORDS = 12   # a reply this short may be a courtesy ("You're welcome.", "Glad to help!")
STEM = 4              # content words compared by their first letters (`tests` and `test`)


def _stems(text: str) -> set[str]:
    words = "".join(c if c.isalpha() else " " for c in text.lower()).split()
    return {w[:STEM] for w in words if len(w) >= STEM}


def courtesy_shaped(reply: str) -> bool:
    """Whether a reply is short enough, and bare enough (no number, path or code), to be a courtesy."""
    return len(reply.split()) <= COURTESY_WORDS and not any(c.isdigit() or c in "/`" for c in reply)


def courtesy(reply: str, asked: str) -> bool:
    """Whether a reply says nothing of substance: courtesy-shaped, and sharing no content word
    with the request it answers ("thanks" → "You're welcome.")."""
    return courtesy_shaped(reply) and not _stems(reply) & _stems(asked)


def closing_reply(prompts: Sequence[Prompt]) -> tuple[Prompt | None, int]:
    """The session's last substantive reply (a courtesy after it gives way to it) and the id of
    the last request after it that still wants an answer (0 for none): a request answered by a
    courtesy only is not one."""
    replies = [p for p in prompts if p.source == "agent"]
    if not replies:
        return None, max((p.id for p in prompts if p.source == "user"), default=0)
    asked = ""
    before: dict[int, str] = {}
    for p in prompts:
        if p.source == "user":
            asked = p.content
        elif p.source == "agent":
            before[p.id] = asked
    at = len(replies) - 1
    while at >= 0 and courtesy(replies[at].content, before[replies[at].id]):
        at -= 1
    if at < 0:   # courtesies only ("Hello!", "You're welcome."): the last one is how it closed
        at = len(replies) - 1
    after = replies[-1].id if at < len(replies) - 1 else replies[at].id
    return replies[at], max((p.id for p in prompts if p.source == "user" and p.id > after), default=0)
