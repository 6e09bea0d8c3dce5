"""Privacy filter applied to every text before it is stored, spooled or indexed.

Three passes, in order:
1. `<private>…</private>` blocks are removed (an unclosed tag hides the rest of the text);
2. nmem's own injected context (`<nmem-context>…</nmem-context>`) is removed, so recalled
   memory is never captured again as if it were new;
3. secrets are replaced by a visible placeholder, `[REDACTED:<kind>]`.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

PLACEHOLDER = "[REDACTED:{kind}]"

_PRIVATE = re.compile(r"<private>.*?(?:</private>|\Z)", re.IGNORECASE | re.DOTALL)
_OWN_CONTEXT = re.compile(r"<nmem-context>.*?(?:</nmem-context>|\Z)|</nmem-context>", re.DOTALL)

_Replacer = Callable[[re.Match[str]], str]


def _whole(kind: str) -> _Replacer:
    return lambda m: PLACEHOLDER.format(kind=kind)


def _keep_group1(kind: str) -> _Replacer:
    """Keep the label (group 1), hide the value."""
    return lambda m: m.group(1) + PLACEHOLDER.format(kind=kind)


# Order matters: specific token formats before generic assignments and entropy.
_PATTERNS: tuple[tuple[re.Pattern[str], _Replacer], ...] = (
    (re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----.*?"
                r"(?:-----END ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----|\Z)", re.DOTALL),
     _whole("private-key")),
    (re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b"), _whole("aws-access-key")),
    (re.compile(r"(?i)(aws_?secret_?access_?key[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9/+=]{40}"),
     _keep_group1("aws-secret-key")),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,255}"), _whole("github-token")),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,255}\b"), _whole("github-token")),
    (re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}"), _whole("gitlab-token")),
    (re.compile(r"\bgl(?:dt|rt|ptt|cbt|imt|agent|oas|ft|soat)-[A-Za-z0-9_\-]{20,}"), _whole("gitlab-token")),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), _whole("slack-token")),
    (re.compile(r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_\-]+"), _whole("slack-webhook")),
    (re.compile(r"\bsk-ant-[A-Za-z0-9]+-[A-Za-z0-9_\-]{20,}"), _whole("anthropic-key")),
    (re.compile(r"\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}"), _whole("openai-key")),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{35,40}"), _whole("google-api-key")),
    (re.compile(r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}"), _whole("stripe-key")),
    (re.compile(r"\bwhsec_[0-9A-Za-z]{24,}"), _whole("stripe-webhook-secret")),
    (re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), _whole("npm-token")),
    (re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"), _whole("huggingface-token")),
    (re.compile(r"\bpypi-AgE[A-Za-z0-9_\-]{50,}"), _whole("pypi-token")),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), _whole("jwt")),
    # user:password@host in any URL scheme: keep the user and host, hide the password.
    (re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^/\s:@]*:)[^@\s/]+(?=@)"), _keep_group1("password")),
    (re.compile(r"(?i)(\bauthorization[\"']?\s*[:=]\s*[\"']?(?:bearer|basic|token)\s+)[A-Za-z0-9._~+/=\-]{8,}"),
     _keep_group1("auth-header")),
    (re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/\-]{20,}=*"), _keep_group1("bearer-token")),
    # Password-like names hide any value: export DB_PASSWORD=letmein, --password=swordfish.
    (re.compile(r"(?i)(\b[A-Za-z0-9_.\-]*(?:passw(?:or)?d|passwd|pwd|passphrase)[A-Za-z0-9_\-]*[\"']?\s*[:=]\s*)"
                r"(?:\"[^\"\n]{3,}\"|'[^'\n]{3,}'"
                # ...but not code reading another name: `password_field = form.password`
                r"|(?![\"'])(?![A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:[\s,;)\]}]|$))[^\s,;()\[\]{}<>\"']{3,})"),
     _keep_group1("secret")),
    # api_key: "...", export GITHUB_TOKEN=..., "client_secret": "..." (unquoted values must look like one)
    (re.compile(
        r"(?i)(\b[A-Za-z0-9_.\-]*(?:passw(?:or)?d|passwd|pwd|secret|token|api[_\-]?key|apikey|access[_\-]?key"
        r"|private[_\-]?key|credentials?)[A-Za-z0-9_\-]*[\"']?\s*[:=]\s*)"
        r"(?:\"[^\"\n]{4,}\"|'[^'\n]{4,}'"
        r"|(?![\"'])(?=[^\s,;()\[\]{}<>]*\d)(?>[^\s,;()\[\]{}<>]{6,})(?!\()"
        r"|(?![\"'])(?>[^\s,;()\[\]{}<>]{16,})(?!\())"),
     _keep_group1("secret")),
)

# Lower-case substrings without which each pattern above cannot match: most text carries
# none, so one `in` test per pattern replaces a regex scan (scrubbing is on every write path).
_TRIGGERS: tuple[tuple[str, ...], ...] = (
    ("-----begin",),
    ("akia", "asia", "abia", "acca", "agpa", "aida", "aroa", "anpa", "anva", "aipa"),
    ("secret",),
    ("github_pat_",),
    ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ("glpat-",),
    ("gldt-", "glrt-", "glptt-", "glcbt-", "glimt-", "glagent-", "gloas-", "glft-", "glsoat-"),
    ("xox",),
    ("hooks.slack.com",),
    ("sk-ant-",),
    ("sk-",),
    ("aiza",),
    ("_live_", "_test_"),
    ("whsec_",),
    ("npm_",),
    ("hf_",),
    ("pypi-",),
    ("eyj",),
    ("://",),
    ("authorization",),
    ("bearer",),
    ("passw", "pwd", "passphrase"),
    ("passw", "pwd", "secret", "token", "key", "credential"),
)
assert len(_TRIGGERS) == len(_PATTERNS)
_ANY_TRIGGER = re.compile("|".join(sorted({re.escape(t) for ts in _TRIGGERS for t in ts}, key=len, reverse=True)))

_CANDIDATE = re.compile(r"[A-Za-z0-9+_=\-]{32,}")
ENTROPY_BITS = 4.2


def shannon_entropy(text: str) -> float:
    counts = Counter(text)
    total = len(text)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def _high_entropy(match: re.Match[str]) -> str:
    token = match.group(0)
    has_classes = (any(c.islower() for c in token) and any(c.isupper() for c in token)
                   and any(c.isdigit() for c in token))
    if has_classes and shannon_entropy(token) >= ENTROPY_BITS:
        return PLACEHOLDER.format(kind="high-entropy")
    return token


def strip_private(text: str) -> str:
    return _OWN_CONTEXT.sub("", _PRIVATE.sub("", text))


def redact(text: str) -> str:
    """Replace every secret in `text` with a placeholder."""
    present = set(_ANY_TRIGGER.findall(text.lower()))
    if present:
        for (pattern, replace), triggers in zip(_PATTERNS, _TRIGGERS, strict=True):
            if present.intersection(triggers):
                text = pattern.sub(replace, text)
    return _CANDIDATE.sub(_high_entropy, text)


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


_URL_PASSWORD = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*://[^/\s:@]*:)[^@\s/]+@")


def redact_url(url: str) -> str:
    """A store URL safe to print: the password (if any) replaced by `***`."""
    return _URL_PASSWORD.sub(lambda m: m.group(1) + "***@", url)
