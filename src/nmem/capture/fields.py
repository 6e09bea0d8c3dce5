"""What every extractor cuts a field with: a scrubbed head of a text, a short digest, an
absolute path. Shared by `extract` and the agents' own extractors (`patch`)."""

from __future__ import annotations

import os

from nmem.capture.privacy import scrub
from nmem.text import ELLIPSIS, WORD_MARGIN, word_cut

HEAD_CHARS = 160
CUT_MARGIN = 512   # text scrubbed beyond a cut, so a secret across it is still found

try:  # the hash functions without hashlib, which loads OpenSSL (~4 ms) for what one digest needs
    from _sha256 import sha256 as _sha256  # type: ignore[import-not-found, unused-ignore]  # Python 3.11
except ImportError:
    try:
        from _sha2 import sha256 as _sha256  # type: ignore[import-not-found, no-redef, unused-ignore]  # 3.12+
    except ImportError:  # pragma: no cover - builds without the builtin module
        from hashlib import sha256 as _sha256  # type: ignore[assignment, unused-ignore]


def head(text: str, size: int = HEAD_CHARS) -> str:
    text = text.strip()
    if len(text) <= size:
        return text
    end = size + CUT_MARGIN
    scrubbed = scrub(text[:end])
    kept = scrubbed[:size]
    # the character after the cut: a space means it already falls between words
    following = scrubbed[size:size + 1] if len(scrubbed) > size else (text[end:end + 1] or " ")
    if not following.isspace():
        kept = word_cut(kept, min(WORD_MARGIN, size // 4))
    return kept.rstrip() + ELLIPSIS


def digest(text: str) -> str:
    return str(_sha256(text.encode("utf-8", "replace")).hexdigest()[:16])


def absolute(path: str | None, cwd: str) -> str | None:
    if not path or not isinstance(path, str):
        return None
    expanded = os.path.expanduser(path)
    if not os.path.isabs(expanded):
        expanded = os.path.join(cwd, expanded)
    return os.path.normpath(expanded)
