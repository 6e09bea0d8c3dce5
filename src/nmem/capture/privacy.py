"""Privacy filter applied to every text before it is stored, spooled or indexed.

Three passes, in order:
1. `<private>…</private>` blocks are removed (an unclosed tag hides the rest of the text);
2. nmem's own injected context (`<nmem-context>…</nmem-context>`) is removed, so recalled
   memory is never captured again as if it were new;
3. secrets are replaced by a visible placeholder, `[REDACTED:<kind>]`: the formats of
   `secret_formats.py`, then long high-entropy runs that no format named.

Scrubbing runs on every field of every hook event, so text without secrets costs almost
nothing. A format runs only when the text holds one of its trigger words (tested with `in`
on the lower-cased text) or a word of 20+ characters starting with one of its prefixes
(found with one byte translation and a substring search, in C); `re` is imported and a
pattern compiled only then. The high-entropy regex runs only when a run of 32+ token
characters is really to be redacted. docs/privacy.md has the rules and the figures.
"""

from __future__ import annotations

import math
import sys
from itertools import pairwise

from nmem.capture.events import HookEvent
from nmem.capture.secret_formats import FORMATS, PLACEHOLDER, TRIGGER_PARENTS, Format, cached_strength, secret_value
from nmem.util.lazyregex import LazyRegex

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from collections.abc import Callable
    from typing import Any, TypeVar

    from nmem.models import Record

    R = TypeVar("R", bound=Record)

_PRIVATE = LazyRegex(r"(?is)<private>.*?(?:</private>|\Z)")
_OWN_CONTEXT = LazyRegex(r"(?s)<nmem-context>.*?(?:</nmem-context>|\Z)|</nmem-context>")

_ORDER = {fmt: i for i, fmt in enumerate(FORMATS)}
_BY_TRIGGER: dict[str, list[Format]] = {}
_BY_FIRST_BYTE: dict[int, list[Format]] = {}
_MARKED = tuple(f for f in FORMATS if f.marker)
for _fmt in FORMATS:
    for _trigger in _fmt.triggers:
        _BY_TRIGGER.setdefault(_trigger, []).append(_fmt)
    for _first in {h[0] for h in _fmt.heads}:
        _BY_FIRST_BYTE.setdefault(_first, []).append(_fmt)
# Triggers tested on every text, and those tested only when their parent was found.
_ROOTS = tuple(sorted({TRIGGER_PARENTS.get(t, t) for t in _BY_TRIGGER}))
_CHILDREN: dict[str, tuple[str, ...]] = {}
for _child, _parent in TRIGGER_PARENTS.items():
    _CHILDREN[_parent] = (*_CHILDREN.get(_parent, ()), _child)
# One search for all the roots costs half the `in` tests, but needs `re`: it is used once a
# format has loaded `re` anyway, so a hook whose texts trigger nothing never imports it.
_ROOTS_PATTERN = LazyRegex("|".join("".join(c if c.isalnum() else "\\" + c for c in t) for t in _ROOTS))
_root_search: list[Callable[[str], object]] = []   # holds the compiled search once `re` is loaded


def _marking(chars: str) -> bytes:
    """Runs of a class of characters are found in the text's UTF-8 bytes: this translation marks
    each byte of the class `x` and every other byte (non-ASCII ones too) a space, and a search
    for `x` * n then finds a run of n or more, in C, without splitting the text into words."""
    table = bytearray(b" " * 256)
    for ch in chars:
        table[ord(ch)] = 0x78
    return bytes(table)


# Words for the prefix test: runs of [A-Za-z0-9_.~-] (dots kept: `SG.…`, `eyJ….eyJ…`, `hvs.…`).
MIN_WORD = 20
_WORD_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
_WORDS = _marking(_WORD_CHARS + "~")
_WORD_NEEDLE = b"x" * MIN_WORD

# High-entropy candidates: runs of 32+ characters of [A-Za-z0-9+_=/-]. A run without `/` is a
# key when it mixes upper case, lower case and digits with enough entropy; a run with `/` is
# judged whole as base64 (an AWS secret key has `/` in half of them) and piece by piece.
MIN_RUN = 32
_RUNS = _marking(_WORD_CHARS.replace(".", "") + "+=/")
_RUN_NEEDLE = b"x" * MIN_RUN
_BASE64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
ENTROPY_BITS = 4.2
BASE64_ENTROPY_BITS = 4.5   # paths have `/` too; random base64 of 40 characters averages ~4.9
_CANDIDATE = LazyRegex(r"[A-Za-z0-9+_=\-]{32,}")
_BASE64_CANDIDATE = LazyRegex(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/]{32,}={0,2}(?![A-Za-z0-9+/=_-])")
# Long and random but no secret: SRI, go.sum and wheel RECORD (`sha256=…`) digests, data: URIs,
# public keys and certificates.
_NOT_KEYS = LazyRegex(
    r"(?i)\b(?:(?:sha(?:1|224|256|384|512)|md5)[-=]|h1:)[A-Za-z0-9+/=_-]+|;base64,[A-Za-z0-9+/=]+"
    r"|\b(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp\d+|sk-ssh-ed25519@openssh\.com)[ \t]+AAAA[A-Za-z0-9+/]+=*"
    r"|-----BEGIN (?:CERTIFICATE|PUBLIC KEY|RSA PUBLIC KEY|X509 CRL|CERTIFICATE REQUEST|NEW CERTIFICATE REQUEST"
    r"|PKCS7|DH PARAMETERS|EC PARAMETERS|PGP PUBLIC KEY BLOCK|PGP SIGNATURE|SSH2 PUBLIC KEY)-----"
    r"[\s\S]*?(?:-----END [A-Z0-9 ]+-----|\Z)")


def shannon_entropy(text: str) -> float:
    counts: dict[str, int] = {}
    for ch in text:
        counts[ch] = counts.get(ch, 0) + 1
    total = len(text)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def _has_classes(token: str) -> bool:
    # upper() changes a token iff it holds a lower-case letter, lower() iff an upper-case one
    # (C loops, no Python frame per character).
    return token != token.upper() and token != token.lower() and any(map(str.isdigit, token))


def _is_sequence(token: str) -> bool:
    """`ABC…XYZabc…xyz0123456789`: an alphabet in code has every character once, in order."""
    return sum(ord(b) - ord(a) == 1 for a, b in pairwise(token)) * 2 > len(token)


def _is_high_entropy(token: str) -> bool:
    return _has_classes(token) and shannon_entropy(token) >= ENTROPY_BITS and not _is_sequence(token)


def _is_base64_key(run: bytes) -> bool:
    body = run.rstrip(b"=")
    if len(body) < MIN_RUN or body.translate(None, _BASE64) or body.count(b"/") * 8 > len(body):
        return False
    token = body.decode("ascii")
    return _has_classes(token) and shannon_entropy(token) >= BASE64_ENTROPY_BITS and not _is_sequence(token)


def _suspicious(run: bytes) -> bool:
    if run.islower() or run.isupper():  # most long runs (paths, identifiers): decided in C
        return False
    if b"/" not in run:
        return _is_high_entropy(run.decode("ascii"))
    return _is_base64_key(run) or any(
        len(piece) >= MIN_RUN and _is_high_entropy(piece.decode("ascii")) for piece in run.split(b"/"))


def _long_runs(raw: bytes, marked: bytes, needle: bytes) -> list[bytes]:
    """The runs of raw's bytes that `marked` (raw translated by a marking) marks, as long as `needle` or longer."""
    runs: list[bytes] = []
    at = marked.find(needle)
    while at >= 0:
        start = marked.rfind(b" ", 0, at) + 1
        end = marked.find(b" ", at)
        end = len(marked) if end < 0 else end
        runs.append(raw[start:end])
        at = marked.find(needle, end)
    return runs


def _digest_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _NOT_KEYS.get().finditer(text)]


def _redact_high_entropy(text: str) -> str:
    placeholder = PLACEHOLDER.format(kind="high-entropy")
    spans = _digest_spans(text)

    def base64_key(m: re.Match[str]) -> str:
        token = m.group(0)
        if "/" not in token or any(s <= m.start() and m.end() <= e for s, e in spans):
            return token
        return placeholder if _is_base64_key(token.encode("ascii")) else token

    text = _BASE64_CANDIDATE.get().sub(base64_key, text)
    spans = _digest_spans(text)

    def high_entropy(m: re.Match[str]) -> str:
        token = m.group(0)
        if any(s <= m.start() and m.end() <= e for s, e in spans):
            return token
        return placeholder if _is_high_entropy(token) else token

    return _CANDIDATE.get().sub(high_entropy, text)


def _formats_by_heads(raw: bytes, marked: bytes) -> set[Format]:
    """Formats whose prefix starts a word of 20+ characters in the text (given as UTF-8 bytes)."""
    found: set[Format] = set()
    for word in _long_runs(raw, marked, _WORD_NEEDLE):
        for fmt in _BY_FIRST_BYTE.get(word[0], ()):
            if word.startswith(fmt.heads):
                found.add(fmt)
        for fmt in _MARKED:
            if fmt.marker and word[fmt.marker[0]:fmt.marker[1]] == fmt.marker[2]:
                found.add(fmt)
    return found


def strip_private(text: str, lowered: str | None = None) -> str:
    if "<private>" in (text.lower() if lowered is None else lowered):
        text = _PRIVATE.get().sub("", text)
    if "nmem-context>" in text:
        text = _OWN_CONTEXT.get().sub("", text)
    return text


def _triggered(lowered: str, chosen: set[Format]) -> set[Format]:
    for root in [t for t in _ROOTS if t in lowered]:
        chosen.update(_BY_TRIGGER.get(root, ()))
        for child in _CHILDREN.get(root, ()):
            if child in lowered:
                chosen.update(_BY_TRIGGER[child])
    return chosen


def _use_root_search() -> None:
    if not _root_search and "re" in sys.modules:
        _root_search.append(_ROOTS_PATTERN.get().search)


def redact(text: str, lowered: str | None = None) -> str:
    """Replace every secret in `text` with a placeholder (`lowered`: text.lower(), if known)."""
    if lowered is None:
        lowered = text.lower()
    raw = b""
    chosen = None
    if len(text) >= MIN_WORD:
        raw = text.encode("utf-8", "surrogatepass")
        marked = raw.translate(_WORDS)
        if _WORD_NEEDLE in marked:  # about one text in three
            chosen = _formats_by_heads(raw, marked)
    if _root_search[0](lowered) if _root_search else any(map(lowered.__contains__, _ROOTS)):  # one text in ~15
        chosen = _triggered(lowered, chosen or set())
    if chosen:
        original = text
        for fmt in sorted(chosen, key=_ORDER.__getitem__):
            text = fmt.redact(text)
        if text is not original:
            raw = text.encode("utf-8", "surrogatepass")
        _use_root_search()
    if len(text) >= MIN_RUN:
        marked = raw.translate(_RUNS)
        if _RUN_NEEDLE in marked and any(map(_suspicious, _long_runs(raw, marked, _RUN_NEEDLE))):
            text = _redact_high_entropy(text)
    return text


def scrub(text: str) -> str:
    """Everything the filter does, for one string.

    A text with percent-escapes (a URL's path or query, a form body) is also read decoded: when
    that finds a secret, the decoded text is kept, redacted (`?q=password%3Dhunter2` would
    otherwise hide `password=hunter2` from every format).
    """
    if not text:
        return text
    lowered = text.lower()
    if "<private>" in lowered or "nmem-context>" in text:
        text = strip_private(text, lowered)
        lowered = text.lower()
    if "%" in text:
        decoded = [text]
        while len(decoded) < 3 and (once := percent_decoded(decoded[-1])) is not None:
            decoded.append(once)  # twice-encoded too (%253D)
        for plain in reversed(decoded[1:]):
            redacted = _redact_unescaped(plain, redact(plain))
            if redacted != plain:
                return redacted
    return _redact_unescaped(text, redact(text, lowered))


_ESCAPES = (("\\n", "\n"), ("\\r", "\r"), ("\\t", "\t"), ('\\"', '"'))
_REDACTED = PLACEHOLDER.split("{", 1)[0]


def _unescaped(text: str) -> str | None:
    """`text` with its escaped line breaks, tabs and quotes (`\\n`, `\\r`, `\\t`, `\\"`, and `\\\\`
    between them) decoded, or None when it has none."""
    if "\\" not in text or not any(escape in text for escape, _ in _ESCAPES):
        return None
    parts = text.split("\\\\")  # an escaped backslash is never the start of an escape
    for escape, char in _ESCAPES:
        parts = [part.replace(escape, char) for part in parts]
    return "\\".join(parts)


def _escaped(text: str) -> str:
    text = text.replace("\\", "\\\\")
    for escape, char in _ESCAPES:
        text = text.replace(char, escape)
    return text


def _redact_unescaped(text: str, redacted: str, depth: int = 2) -> str:
    """`text` also read with its escapes decoded (JSON or a quoted string: a tool's output, a
    JSON-encoded argument; twice-encoded too): `TOKEN=abc…\\nNEXT` would otherwise read
    `abc…\\nNEXT` as the value and judge it no secret, and `-H \\"X-Api-Key: abc…\\"` end the
    value at a backslash. When the decoded text holds a secret, it is redacted, escaped again when
    the escapes were the text's only way to write those characters (a JSON string, its quotes
    around it or not), and read as written once more, so what only that reading finds is redacted
    too. A text mixing real breaks with escaped ones (code, a log) stays as written when that
    reading left no secret the decoded one finds, else it stays decoded, as a percent-encoded text
    does. `redacted` is `redact(text)`."""
    plain = _unescaped(text)
    if plain is None:
        return redacted
    again = redact(plain)
    if depth > 1:
        again = _redact_unescaped(plain, again, depth - 1)
    if again == plain:
        return redacted
    if _escaped(plain) == text:
        again = _escaped(again)
    elif len(text) > 1 and text[0] == text[-1] == '"' and _escaped(plain[1:-1]) == text[1:-1] \
            and len(again) > 1 and again[0] == again[-1] == '"':
        again = '"' + _escaped(again[1:-1]) + '"'
    else:  # real breaks beside escaped ones (code, a log): as written, unless that left a secret
        left = _unescaped(redacted)
        if left is None or redact(left) == left:
            return redacted
    return redact(again)


_HEX = frozenset("0123456789abcdefABCDEF")


def percent_decoded(text: str) -> str | None:
    """`text` with its %XX escapes decoded (as UTF-8), or None when it has none.

    By hand rather than with urllib.parse, which a hook should not pay to import."""
    parts = text.split("%")
    out = bytearray(parts[0].encode("utf-8", "surrogatepass"))
    changed = False
    for part in parts[1:]:
        if len(part) >= 2 and part[0] in _HEX and part[1] in _HEX:
            out.append(int(part[:2], 16))
            out += part[2:].encode("utf-8", "surrogatepass")
            changed = True
        else:
            out += b"%" + part.encode("utf-8", "surrogatepass")
    return out.decode("utf-8", "replace") if changed else None


def scrub_value(value: Any) -> Any:
    """Scrub every string inside a JSON-like value, dict keys included (a key can be a secret:
    `{"ghp_…": true}`); a key that a secret shared with another keeps both values apart."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            key = scrub(k) if isinstance(k, str) else k
            while key in out:
                key = f"{key}_"
            out[key] = _named_secret(k, v) if isinstance(k, str) and isinstance(v, str) else scrub_value(v)
        return out
    if isinstance(value, (list, tuple)):
        return [scrub_value(v) for v in value]
    return value


def _named_secret(name: str, value: str) -> str:
    """A string value under a key: `{"password": "hunter2"}` says what the value is, which the
    value alone does not."""
    strength = cached_strength(name, False) if len(value) >= 3 else None
    if strength is not None and secret_value(value, strength, separator="assign", quoted=True,
                                             shouty=name.isupper(), after=""):
        return PLACEHOLDER.format(kind=strength)
    return scrub(value)


# What a tool answered (a file read, a command's output) can be long, and only its head and its
# tail are ever kept (`capture.extract`): a longer text is cut to both before it is scrubbed, the
# filter reading a margin past each cut, so that no secret is cut in two unseen.
OUTPUT_WINDOW = 4096
OUTPUT_MARGIN = 512
OUTPUT_GAP = "\n…\n"


def scrub_output(value: Any) -> Any:
    """scrub_value for a tool's answer: each string longer than two windows keeps its first and
    last OUTPUT_WINDOW characters only, each scrubbed with a margin beyond its cut."""
    if isinstance(value, str):
        if len(value) <= 2 * (OUTPUT_WINDOW + OUTPUT_MARGIN):
            return scrub(value)
        head = scrub(value[:OUTPUT_WINDOW + OUTPUT_MARGIN])[:OUTPUT_WINDOW]
        tail = scrub(value[-OUTPUT_WINDOW - OUTPUT_MARGIN:])[-OUTPUT_WINDOW:]
        return head + OUTPUT_GAP + tail
    if isinstance(value, dict):
        return {(scrub(k) if isinstance(k, str) else k):
                _named_secret(k, v) if isinstance(k, str) and isinstance(v, str) and len(v) < OUTPUT_WINDOW
                else scrub_output(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_output(v) for v in value]
    return value


OUTPUT_FIELDS = ("tool_response",)  # the payload fields that hold a tool's answer


def scrub_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """A raw hook payload as it may be kept (spooled, sent on): every string scrubbed, keys
    too, a tool's answer cut to its head and tail first (`scrub_output`)."""
    return {k: scrub_output(v) if k in OUTPUT_FIELDS else scrub_value(v) for k, v in payload.items()}


# Read, never stored (the transcript path), or nmem's own vocabulary (the event's kind and agent).
_KEPT_AS_IS = frozenset({"transcript_path", "kind", "hook_event_name", "agent"})


def scrub_event(event: HookEvent) -> HookEvent:
    """The one scrub step every hook event passes before anything reads it (`CaptureService.record_event`):
    every string field, the tool's input at any depth (keys too) and its answer (`scrub_output`).
    Run before extraction, so no later step can cut a secret in two or change its shape (a path
    normalised, an argument JSON-encoded) before the filter sees it. The transcript path is
    only read, never stored."""
    fields: dict[str, Any] = {}
    for name in HookEvent.__slots__:
        value = getattr(event, name)
        if name in ("tool_input", "decisions"):
            value = scrub_value(value)
        elif name == "tool_response":
            value = scrub_output(value)
        elif isinstance(value, str) and value and name not in _KEPT_AS_IS:
            value = scrub(value)
        fields[name] = value
    return HookEvent(**fields)


def scrub_record(record: R) -> R:
    """A record about to be stored (an observation, a memory) with every field through the filter:
    strings scrubbed, JSON values (metadata, tags) at any depth. The last step before the store,
    so a field an extractor adds tomorrow is scrubbed without anyone remembering to."""
    changes: dict[str, Any] = {}
    for name in record.__slots__:
        value = getattr(record, name)
        clean: Any
        if isinstance(value, str):
            clean = scrub(value)
        elif isinstance(value, (dict, list, tuple)):
            clean = scrub_value(value)
            clean = tuple(clean) if isinstance(value, tuple) else clean
        else:
            continue
        if clean != value:
            changes[name] = clean
    return record.replace(**changes) if changes else record


_URL_PASSWORD = LazyRegex(r"^([a-zA-Z][a-zA-Z0-9+.\-]*://[^/\s:@]*:)[^@\s/]+@")


def redact_url(url: str) -> str:
    """A URL safe to print (a store's, a sync remote's; every surface shows them through here): the
    password (if any) replaced by `***`, then every secret the filter knows redacted: a token given
    as the user (`https://ghp_…@github.com/…`), a password or token in the query (`?password=…`,
    `&sslpassword=…`, `?token=…`)."""
    if "@" in url:
        url = _URL_PASSWORD.get().sub(lambda m: m.group(1) + "***@", url)
    return scrub(url)
