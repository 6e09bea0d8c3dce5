"""Privacy filter applied to every text before it is stored, spooled or indexed.

Three passes, in order:
1. `<private>…</private>` blocks are removed (an unclosed tag hides the rest of the text);
2. nmem's own injected context (`<nmem-context>…</nmem-context>`) is removed, so recalled
   memory is never captured again as if it were new;
3. secrets are replaced by a visible placeholder, `[REDACTED:<kind>]`.

Scrubbing runs on every field of every hook event, so text without secrets costs almost
nothing: each pattern lists substrings without which it cannot match, tested with `in` on
the lower-cased text, and a pattern is compiled (and `re` imported) only once one of them
is present. Runs of 32+ token characters are found with one byte translation; the
high-entropy regex runs only when such a run is really to be redacted.
"""

from __future__ import annotations

import math

from nmem.lazyregex import LazyRegex

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from typing import Any

PLACEHOLDER = "[REDACTED:{kind}]"

_PRIVATE = LazyRegex(r"(?is)<private>.*?(?:</private>|\Z)")
_OWN_CONTEXT = LazyRegex(r"(?s)<nmem-context>.*?(?:</nmem-context>|\Z)|</nmem-context>")


class _Secret:
    """One secret format: its pattern, its kind, and what must be in the text for it to match."""

    __slots__ = ("assignment", "keep_label", "kind", "regex", "triggers")

    def __init__(self, source: str, kind: str, triggers: tuple[str, ...], *, keep_label: bool = False,
                 assignment: bool = False) -> None:
        self.regex = LazyRegex(source)
        self.kind = kind
        self.triggers = triggers          # lower-case substrings, any of which the text must hold
        self.keep_label = keep_label      # group 1 is a label (`password=`) kept before the placeholder
        self.assignment = assignment      # needs `:` or `=` in the text

    def present(self, text: str, found: set[str]) -> bool:
        """Whether the text can hold this secret, given the triggers `found` in it."""
        if self.assignment and "=" not in text and ":" not in text:
            return False
        return not found.isdisjoint(self.triggers)

    def redact(self, text: str) -> str:
        placeholder = PLACEHOLDER.format(kind=self.kind)
        if self.keep_label:
            return self.regex.get().sub(lambda m: m.group(1) + placeholder, text)
        return self.regex.get().sub(placeholder, text)


# Order matters: specific token formats before generic assignments and entropy.
_SECRETS: tuple[_Secret, ...] = (
    _Secret(r"(?s)-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----.*?"
            r"(?:-----END ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----|\Z)", "private-key", ("-----begin",)),
    _Secret(r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b", "aws-access-key",
            ("akia", "asia", "abia", "acca", "agpa", "aida", "aroa", "anpa", "anva", "aipa")),
    _Secret(r"(?i)(aws_?secret_?access_?key[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9/+=]{40}", "aws-secret-key",
            ("secret",), keep_label=True, assignment=True),
    _Secret(r"\bgithub_pat_[A-Za-z0-9_]{22,255}", "github-token", ("github_pat_",)),
    _Secret(r"\bgh[pousr]_[A-Za-z0-9]{30,255}\b", "github-token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    _Secret(r"\bglpat-[A-Za-z0-9_\-]{20,}", "gitlab-token", ("glpat-",)),
    _Secret(r"\bgl(?:dt|rt|ptt|cbt|imt|agent|oas|ft|soat)-[A-Za-z0-9_\-]{20,}", "gitlab-token",
            ("gldt-", "glrt-", "glptt-", "glcbt-", "glimt-", "glagent-", "gloas-", "glft-", "glsoat-")),
    _Secret(r"\bxox[abposr]-[A-Za-z0-9-]{10,}", "slack-token", ("xox",)),
    _Secret(r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_\-]+", "slack-webhook",
            ("hooks.slack.com",)),
    _Secret(r"\bsk-ant-[A-Za-z0-9]+-[A-Za-z0-9_\-]{20,}", "anthropic-key", ("sk-ant-",)),
    _Secret(r"\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}", "openai-key", ("sk-",)),
    _Secret(r"\bAIza[0-9A-Za-z_\-]{35,40}", "google-api-key", ("aiza",)),
    _Secret(r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}", "stripe-key", ("_live_", "_test_")),
    _Secret(r"\bwhsec_[0-9A-Za-z]{24,}", "stripe-webhook-secret", ("whsec_",)),
    _Secret(r"\bnpm_[A-Za-z0-9]{36}\b", "npm-token", ("npm_",)),
    _Secret(r"\bhf_[A-Za-z0-9]{30,}\b", "huggingface-token", ("hf_",)),
    _Secret(r"\bpypi-AgE[A-Za-z0-9_\-]{50,}", "pypi-token", ("pypi-",)),
    _Secret(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", "jwt", ("eyj",)),
    # user:password@host in any URL scheme: keep the user and host, hide the password.
    _Secret(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^/\s:@]*:)[^@\s/]+(?=@)", "password", ("://",), keep_label=True),
    _Secret(r"(?i)(\bauthorization[\"']?\s*[:=]\s*[\"']?(?:bearer|basic|token)\s+)[A-Za-z0-9._~+/=\-]{8,}",
            "auth-header", ("authorization",), keep_label=True, assignment=True),
    _Secret(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/\-]{20,}=*", "bearer-token", ("bearer",), keep_label=True),
    # Password-like names hide any value: export DB_PASSWORD=letmein, --password=swordfish.
    _Secret(r"(?i)(\b[A-Za-z0-9_.\-]*(?:passw(?:or)?d|passwd|pwd|passphrase)[A-Za-z0-9_\-]*[\"']?\s*[:=]\s*)"
            r"(?:\"[^\"\n]{3,}\"|'[^'\n]{3,}'"
            # ...but not code reading another name: `password_field = form.password`
            r"|(?![\"'])(?![A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:[\s,;)\]}]|$))[^\s,;()\[\]{}<>\"']{3,})",
            "secret", ("passw", "pwd", "passphrase"), keep_label=True, assignment=True),
    # api_key: "...", export GITHUB_TOKEN=..., "client_secret": "..." (unquoted values must look like one)
    _Secret(r"(?i)(\b[A-Za-z0-9_.\-]*(?:passw(?:or)?d|passwd|pwd|secret|token|api[_\-]?key|apikey|access[_\-]?key"
            r"|private[_\-]?key|credentials?)[A-Za-z0-9_\-]*[\"']?\s*[:=]\s*)"
            r"(?:\"[^\"\n]{4,}\"|'[^'\n]{4,}'"
            r"|(?![\"'])(?=[^\s,;()\[\]{}<>]*\d)(?>[^\s,;()\[\]{}<>]{6,})(?!\()"
            r"|(?![\"'])(?>[^\s,;()\[\]{}<>]{16,})(?!\())",
            "secret", ("passw", "pwd", "secret", "token", "key", "credential"), keep_label=True, assignment=True),
)

_ALL_TRIGGERS = tuple(sorted({t for secret in _SECRETS for t in secret.triggers}))

# High-entropy candidates: runs of 32+ characters of this class.
MIN_RUN = 32
_RUN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+_=-"
_CANDIDATE = LazyRegex(r"[A-Za-z0-9+_=\-]{32,}")
# Every byte outside the class becomes a space, so `split()` yields the runs (non-ASCII
# bytes of UTF-8 are outside it too, as they are outside the regex's class).
_RUNS_TABLE = bytes(b if chr(b) in _RUN_CHARS else 0x20 for b in range(256))
ENTROPY_BITS = 4.2


def shannon_entropy(text: str) -> float:
    counts: dict[str, int] = {}
    for ch in text:
        counts[ch] = counts.get(ch, 0) + 1
    total = len(text)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def _is_high_entropy(token: str) -> bool:
    # Tokens are ASCII runs of _RUN_CHARS: upper() changes one iff it holds a lower-case
    # letter, lower() iff an upper-case one (C loops, no Python frame per character).
    has_classes = token != token.upper() and token != token.lower() and any(map(str.isdigit, token))
    return has_classes and shannon_entropy(token) >= ENTROPY_BITS


def _high_entropy(match: re.Match[str]) -> str:
    token = match.group(0)
    return PLACEHOLDER.format(kind="high-entropy") if _is_high_entropy(token) else token


def _has_high_entropy_run(text: str) -> bool:
    if len(text) < MIN_RUN:
        return False
    runs = text.encode("utf-8", "surrogatepass").translate(_RUNS_TABLE).split()
    if max(map(len, runs), default=0) < MIN_RUN:  # nearly every text: decided without a Python loop
        return False
    return any(len(run) >= MIN_RUN and _is_high_entropy(run.decode("ascii")) for run in runs)


def strip_private(text: str) -> str:
    if "<private>" in text.lower():
        text = _PRIVATE.get().sub("", text)
    if "nmem-context>" in text:
        text = _OWN_CONTEXT.get().sub("", text)
    return text


def redact(text: str) -> str:
    """Replace every secret in `text` with a placeholder."""
    lowered = text.lower()
    found = {t for t in _ALL_TRIGGERS if t in lowered}
    if found:
        for secret in _SECRETS:
            if secret.present(text, found):
                text = secret.redact(text)
    if _has_high_entropy_run(text):
        text = _CANDIDATE.get().sub(_high_entropy, text)
    return text


def scrub(text: str) -> str:
    """Everything the filter does, for one string."""
    if not text:
        return text
    return redact(strip_private(text))


def scrub_value(value: Any) -> Any:
    """Scrub every string inside a JSON-like value (dict keys stay as they are)."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: scrub_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_value(v) for v in value]
    return value


_URL_PASSWORD = LazyRegex(r"^([a-zA-Z][a-zA-Z0-9+.\-]*://[^/\s:@]*:)[^@\s/]+@")


def redact_url(url: str) -> str:
    """A store URL safe to print: the password (if any) replaced by `***`."""
    if "@" not in url:
        return url
    return _URL_PASSWORD.get().sub(lambda m: m.group(1) + "***@", url)
