"""The line that says why a tool call failed, picked out of its output.

A failed test run, build or install prints its reason in a form of its own, and rarely in
its first or last line: `key_line` finds up to three parts and joins them with ` · `:

1. the run's summary: `1 failed, 2 passed in 0.12s`, `Tests: 1 failed, 3 total`,
   `3 failed, 1 passed, 4 total` (node:test), `FAIL example.com/calc 0.01s`, `Found 2 errors in 1 file`;
2. the failing tests: pytest's first `FAILED tests/x.py::test_y - …`; the names of all (as many as
   fit) for jest/vitest (`● suite › name`), node:test (`not ok: a, b`), go (`--- FAIL: TestA, TestB/sub`)
   and cargo (`FAILED tests::a, tests::b`);
3. the cause: the first compiler or linter error, else the first failing test's assertion
   (node:test, jest's Expected/Received), else the last exception of a traceback (and
   its root cause when chained), else a tool's own error line (`npm ERR!`, `fatal:`, `ERROR:`,
   `command not found`, `make: ***`); the last (or first) line that says anything when
   nothing else was found.

Pure and light (no `re` until a failure needs it): the hook path calls it on failures only,
and reads call it for rows stored before it existed.
"""

from __future__ import annotations

from nmem.text import preview
from nmem.util.lazyregex import LazyRegex

SEPARATOR = " · "
PART_CHARS = 160
KEY_CHARS = 300
# Compilers print their errors first, test runners their summary last: a long output is read
# at both ends.
HEAD_SCAN = 16_000
TAIL_SCAN = 48_000


class Rule:
    """One form of informative line: its pattern, and which match counts when there are several."""

    __slots__ = ("fmt", "last", "many", "name", "regex", "triggers", "weak")

    def __init__(self, name: str, pattern: str, triggers: tuple[str, ...], *, last: bool = False,
                 fmt: str | None = None, weak: bool = False, many: bool = False) -> None:
        self.name = name
        self.regex = LazyRegex("(?m)" + pattern)
        self.triggers = triggers   # substrings without which the pattern cannot match
        self.last = last           # the last match wins (summaries, the exception raised last)
        self.fmt = fmt             # how the groups read as one line; default: the groups joined
        self.weak = weak           # a cause worth naming only when no summary or test says more
        self.many = many           # every match names tests (a line each in group 1): fmt holds their list

    def names(self, text: str) -> str:
        found: list[str] = []
        for match in self.regex.get().finditer(text):
            for line in match.group(1).split("\n"):
                name = line.strip()
                if name and name not in found:
                    found.append(name)
        # a subtest (`TestParse/empty`) says more than the parent that failed with it
        found = [name for name in found if not any(other.startswith(name + "/") for other in found)]
        return (self.fmt or "{}").format(name_list(found)) if found else ""

    def find(self, text: str) -> str:
        if not any(t in text for t in self.triggers):
            return ""
        if self.many:
            return self.names(text)
        regex = self.regex.get()
        if self.last:
            matches = list(regex.finditer(text))
            found = matches[-1] if matches else None
        else:
            found = regex.search(text)
        if found is None:
            return ""
        if self.fmt is not None:
            return self.fmt.format(*found.groups(default=""))
        return ", ".join(g for g in found.groups() if g) or found.group(0)


SUMMARY: tuple[Rule, ...] = (
    Rule("pytest", r"^[= ]*((?:\d+ (?:failed|passed|errors?|skipped|xfailed|xpassed|warnings?|deselected|rerun)"
                   r"(?:, )?)+ in [\d.]+s(?: \([\d:]+\))?)[= ]*$", (" in ",), last=True),
    Rule("pytest-interrupted", r"^[!= ]*(Interrupted: [^\n=!]+?)[!= ]*$", ("Interrupted: ",), last=True),
    Rule("jest", r"^[ \t]*(Tests:?[ \t]+\d+ \w+(?:(?:,| \|) \d+ \w+)*(?: \(\d+\))?)[ \t]*$", ("Tests",),
         last=True),
    Rule("mocha", r"^[ \t]*(\d+ passing)[^\n]*\n(?:[ \t]*(\d+ pending)[^\n]*\n)?[ \t]*(\d+ failing)[ \t]*$",
         (" failing",), last=True),
    Rule("mocha-failing", r"^[ \t]*(\d+ failing)[ \t]*$", (" failing",), last=True),
    # node:test, TAP (`# fail 3`) or spec (`ℹ fail 3`) reporter
    Rule("node-test", r"^[#ℹ] tests (\d+)\n(?:[#ℹ] suites \d+\n)?[#ℹ] pass (\d+)\n[#ℹ] fail (\d+)$",
         ("# fail ", "ℹ fail "), last=True, fmt="{2} failed, {1} passed, {0} total"),
    Rule("go", r"^(FAIL)\t(\S+)[ \t]+([\d.]+s|\[[^\]\n]+\])[ \t]*$", ("FAIL\t",), last=True, fmt="{0} {1} {2}"),
    Rule("cargo", r"^(test result: FAILED\. \d+ passed; \d+ failed)", ("test result: FAILED",), last=True),
    Rule("unittest", r"^(FAILED \((?:failures|errors)=[^\n]*\))[ \t]*$", ("FAILED (",), last=True),
    Rule("found-errors", r"^[ \t]*(Found \d+ errors?\b[^\n]*)$", ("Found ",), last=True),
    Rule("eslint", r"^[ \t]*(✖ \d+ problems? \([^\n]*\))[ \t]*$", ("✖",), last=True),
)

TEST: tuple[Rule, ...] = (
    Rule("pytest", r"^((?:FAILED|ERROR) \S+?(?:::|\.py\b)[^\n]*)$", ("FAILED ", "ERROR ")),
    Rule("go", r"^[ \t]*--- FAIL: (\S+)", ("--- FAIL",), many=True, fmt="--- FAIL: {}"),
    Rule("cargo", r"^failures:\n((?:    \S+\n)+)", ("failures:",), many=True, fmt="FAILED {}"),
    Rule("cargo-line", r"^test (\S+) \.\.\. FAILED[ \t]*$", ("... FAILED",), many=True, fmt="FAILED {}"),
    # TAP names suites and files whose subtests failed too: only the tests that failed themselves count
    Rule("node-tap", r"^[ \t]*not ok \d+ - ([^\n#]*[^\n# ])(?:[ \t]+#[^\n]*)?\n"
                     r"(?![ \t]*---\n(?:[ \t]+\w+: [^\n]*\n){0,6}?[ \t]+failureType: 'subtestsFailed')",
         ("not ok ",), many=True, fmt="not ok: {}"),
    Rule("node-spec", r"^test at [^\n]+\n✖ ([^\n]+?)(?: \([\d.]+m?s\))?$", ("✖ failing tests",), many=True,
         fmt="✖ {}"),
    Rule("unittest", r"^((?:FAIL|ERROR): \w+ \([^\n]*\))[ \t]*$", ("FAIL: ", "ERROR: ")),
    Rule("jest", r"^[ \t]*● (?!Console\b)([^\n]+)$", ("●",), many=True, fmt="● {}"),
    # mocha names a failure over several indented lines, the last ending with `:`
    Rule("mocha", r"^[ \t]*(\d+\) [^\n]+(?:\n[ \t]+[^\n]+){0,6}?):[ \t]*$", (") ",)),
    Rule("vitest", r"^[ \t]*FAIL[ \t]+(\S+\.\w+ > [^\n]+?)[ \t]*$", ("FAIL ",), many=True, fmt="FAIL {}"),
    Rule("jest-file", r"^[ \t]*(FAIL \S+\.\w+)[ \t]*$", ("FAIL ",)),
)

# Python and JavaScript exceptions; the one raised last is the one that ended the run.
EXCEPTION = Rule("exception", r"^[ \t]*(?:E[ \t]+)?((?:[A-Za-z_]\w*\.)*[A-Z]?\w*(?:Error|Exception|Exit|Interrupt)"
                              r"(?: \[\w+\])?(?::[^\n]*)?)[ \t]*$", ("Error", "Exception", "Exit", "Interrupt"),
                 last=True)

CAUSE: tuple[Rule, ...] = (
    Rule("rustc", r"^(error(?:\[E\d+\])?: [^\n]+)\n[ \t]*--> (\S+)", ("-->",), fmt="{0} at {1}"),
    Rule("ruff", r"^([A-Z]{1,4}\d{2,4} (?:\[\*\] )?[^\n]+)\n[ \t]*--> (\S+)", ("-->",), fmt="{0} at {1}"),
    Rule("tsc", r"^([^\n]*\berror TS\d+: [^\n]+)$", ("error TS",)),
    Rule("compiler", r"^(\S+?:\d+(?::\d+)?: (?:fatal )?error: [^\n]+)$", ("error: ",)),
    Rule("ruff-concise", r"^(\S+?:\d+:\d+: [A-Z]{1,4}\d{2,4}\b[^\n]+)$", (": ",)),
    Rule("eslint", r"^[ \t]*(\d+:\d+[ \t]+error[ \t]+[^\n]+)$", ("error",)),
    # node:test's TAP error, a YAML scalar (`error: |-` and the lines indented under it, or quoted)
    Rule("node-tap-error", r"^([ \t]+)error: (?:\|-\n((?:\1[ \t]+[^\n]*\n|[ \t]*\n){1,6})|'((?!\d+ subtests? failed)"
                           r"[^\n]+)'|\"([^\n]+)\")", ("error: ",), fmt="{1}{2}{3}"),
    # node:test's spec reporter, under `✖ failing tests:`: the error, and its next line when it ends in `:`
    Rule("node-spec-error", r"^test at [^\n]+\n✖ [^\n]+\n[ \t]+(?:([^\n]+:)\n[ \t]*\n[ \t]+(?!at )([^\n]+)|([^\n]+))",
         ("✖ failing tests",), fmt="{0} {1}{2}"),
    # jest's `expect(received).toBe(expected)`, with the Expected/Received lines under it
    Rule("jest-expect", r"^[ \t]*expect\((?:received|value)\)\.([\w.]+)\([^\n]*\n(?:[ \t]*\n)?(?:[^\n]*\n){0,3}?"
                        r"[ \t]*((?:- )?Expected[^\n]*)\n[ \t]*((?:\+ )?Received[^\n]*)", ("expect(",),
         fmt="{0}: {1}, {2}"),
    # vitest's error under the first failing test (its last exception belongs to the last test)
    Rule("vitest-error", r"^[ \t]*FAIL[ \t]+\S+\.\w+ > [^\n]+\n(\S[^\n]*)$", ("FAIL ",)),
    EXCEPTION,
    Rule("pytest-assert", r"^E[ \t]{3,}(\S[^\n]*)$", ("\nE   ",)),  # pytest's `E   assert 3 == 4`
    Rule("rust-panic", r"^thread '[^'\n]*'(?: \(\d+\))? panicked at ([^\n]*?):\n([^\n]+)", ("panicked at",),
         fmt="{1} (at {0})"),
    Rule("panic", r"^((?:thread '[^'\n]*'(?: \(\d+\))? panicked at|panic:) [^\n]+)$", ("panic",)),
    # `file.go:9: message` (go vet, t.Errorf); not pytest's `file.py:8: AssertionError` or `: in f`
    Rule("file-line", r"^[ \t]*(\S+\.\w+:\d+(?::\d+)?: (?!in |\w*(?:Error|Exception|Warning)$)[^\n]+)$", (": ",)),
    Rule("git-rejected", r"^[ \t]*(! \[(?:remote )?rejected\][^\n]+)$", ("rejected]",)),
    Rule("fatal", r"^[ \t]*(fatal: [^\n]+)$", ("fatal: ",)),
    Rule("pip", r"^[ \t]*(ERROR: [^\n]+)$", ("ERROR: ",)),
    Rule("not-found", r"^([^\n]*(?:command not found|: not found)\b[^\n]*)$", ("not found",)),
    Rule("npm", r"^(npm (?:ERR!|error) (?!code\b|errno\b|syscall\b|path\b|signal\b|command\b|cwd\b|A complete log"
                r"|[ \t]*(?:/|[A-Z]:\\|$)|This is probably|Failed at the|Exit status|Did you mean|To see a list"
                r"|Run `npm|Log files|enoent This|\S+@\S+ \w+: `)[^\n]+)$", ("npm ",), weak=True),
    # not a YAML block's `error: |-` (node:test's TAP)
    Rule("error", r"^[ \t]*((?:[\w./@-]+: )*(?:error|ERROR)(?:\[\w+\])?(?::| in) (?![|>][-+]?$)[^\n]+)$",
         ("error", "ERROR"), weak=True),
    Rule("os", r"^([^\n]*(?:No such file or directory|Permission denied|cannot access|Could not resolve host)"
               r"[^\n]*)$", ("No such file", "Permission denied", "cannot access", "Could not resolve"), weak=True),
    Rule("make", r"^(make(?:\[\d+\])?: \*\*\* [^\n]+)$", ("make",), weak=True),
)

_CHAINED = ("The above exception was the direct cause", "During handling of the above exception")
_ANSI = LazyRegex(r"\x1b\[[0-9;?]*[A-Za-z]")
# Lines that never say why: traceback frames, stack lines, hints, separators, wrappers.
_NOISE_PREFIXES = ("Traceback (most recent call last)", "File \"", "at ", "hint:", "note:", "help:",
                   "[end of output]", "Node.js v", "Require stack", "- ", "^", "~", "|", "--> ",
                   "npm ERR! A complete log", "npm error A complete log")


def clean(text: str) -> str:
    """Output as lines of text: colours, carriage returns and `<tool_use_error>` tags removed."""
    if "\x1b" in text:
        text = _ANSI.get().sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "tool_use_error>" in text:
        text = text.replace("<tool_use_error>", "").replace("</tool_use_error>", "")
    return text


def scan_window(text: str) -> str:
    """The part of a long output `key_line` reads: its head and its tail."""
    if len(text) <= HEAD_SCAN + TAIL_SCAN:
        return text
    return text[:HEAD_SCAN] + "\n" + text[-TAIL_SCAN:]


NAMES_CHARS = 120


def name_list(names: list[str]) -> str:
    """Names joined while they fit in NAMES_CHARS; the rest counted (`a, b (+3 more)`)."""
    shown = names[:1]
    for name in names[1:]:
        if len(", ".join([*shown, name])) > NAMES_CHARS:
            break
        shown.append(name)
    rest = len(names) - len(shown)
    return ", ".join(shown) + (f" (+{rest} more)" if rest else "")


def _cut(text: str, size: int) -> str:
    return preview(" ".join(text.split()), size)


def _first(rules: tuple[Rule, ...], text: str) -> tuple[Rule | None, str]:
    for rule in rules:
        found = rule.find(text)
        if found:
            return rule, found
    return None, ""


def _said(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped.strip("=-_*#~^|.·─━│╰╭╮╯>+ ")) and not stripped.startswith(_NOISE_PREFIXES)


def plain_line(text: str, *, last: bool = True) -> str:
    """The last (or first) line that says something, for outputs no rule knows."""
    lines = [line for line in clean(text).splitlines() if _said(line)]
    if not lines:
        return ""
    return _cut(lines[-1] if last else lines[0], PART_CHARS)


def _cause(text: str, *, strong_only: bool) -> str:
    rule, cause = _first(CAUSE, text)
    if rule is None or (strong_only and rule.weak):
        return ""
    if rule is EXCEPTION and any(marker in text for marker in _CHAINED):
        root = EXCEPTION.regex.get().search(text)  # the first exception: where the chain began
        if root and root.group(1).strip() != cause.strip():
            cause = f"{_cut(cause, PART_CHARS // 2)} (from {root.group(1).strip()})"
    return cause


def key_line(text: str, *, last: bool = True) -> str:
    """The informative slice of an error output, on one line of at most KEY_CHARS ("" for none).

    `last` chooses the fallback when no known form matches: the last line that says
    something (a command's output ends with its error) or the first (a tool's message).
    """
    text = scan_window(clean(text or ""))
    if not text.strip():
        return ""
    summary, test = _first(SUMMARY, text)[1], _first(TEST, text)[1]
    parts: list[str] = []
    for found in (summary, test, _cause(text, strong_only=bool(summary or test))):
        part = _cut(found.rstrip(":"), PART_CHARS) if found else ""
        if part and not any(part.rstrip("…") in kept for kept in parts):
            parts.append(part)
    if not parts:
        return plain_line(text, last=last)
    return _cut(SEPARATOR.join(parts), KEY_CHARS)
