"""The Porter stemmer exactly as SQLite's FTS5 `porter` tokenizer applies it.

Ranking counts query terms inside candidate records in Python, so it must fold words the
way the index did: `stem("researching") == "research"` because FTS5 stores that token as
"research". The rules follow `fts5_porter.c` (Porter 1980 with the `bli`/`logi` revisions)
and run on the token's UTF-8 bytes, as FTS5 does; tokens shorter than 3 or longer than 64
bytes are kept as they are.
"""

from __future__ import annotations

from functools import lru_cache

MAX_TOKEN = 64


def _vowel(c: str, y_is_vowel: bool) -> bool:
    return c in "aeiou" or (y_is_vowel and c == "y")


def _gobble_vc(w: str, prev_cons: bool) -> int:
    """Length of the leading [C]V+C, or 0 when there is none (one `m` of Porter's measure)."""
    cons = prev_cons
    i = 0
    while i < len(w):
        cons = not _vowel(w[i], cons)
        if not cons:
            break
        i += 1
    i += 1
    while i < len(w):
        cons = not _vowel(w[i], cons)
        if cons:
            return i + 1
        i += 1
    return 0


def _m_gt0(w: str) -> bool:
    return _gobble_vc(w, False) > 0


def _m_gt1(w: str) -> bool:
    n = _gobble_vc(w, False)
    return bool(n) and _gobble_vc(w[n:], True) > 0


def _m_eq1(w: str) -> bool:
    n = _gobble_vc(w, False)
    return bool(n) and _gobble_vc(w[n:], True) == 0


def _o_star(w: str) -> bool:
    """Ends consonant-vowel-consonant, the last not w, x or y."""
    if w[-1] in "wxy":
        return False
    mask = 0
    cons = False
    for c in w:
        cons = not _vowel(c, cons)
        mask = (mask << 1) + int(cons)
    return (mask & 0x7) == 0x5


def _has_vowel(w: str) -> bool:
    return any(_vowel(c, i > 0) for i, c in enumerate(w))


def _s_or_t_m_gt1(w: str) -> bool:
    return w[-1:] in ("s", "t") and _m_gt1(w)


# (suffix, replacement) per step, keyed by the word's second-to-last letter as fts5_porter.c
# switches; within a key the first suffix that matches decides, whether or not its condition holds.
_STEP2 = {
    "a": (("ational", "ate"), ("tional", "tion")),
    "c": (("enci", "ence"), ("anci", "ance")),
    "e": (("izer", "ize"),),
    "g": (("logi", "log"),),
    "l": (("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous")),
    "o": (("ization", "ize"), ("ation", "ate"), ("ator", "ate")),
    "s": (("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous")),
    "t": (("aliti", "al"), ("iviti", "ive"), ("biliti", "ble")),
}
_STEP3 = {
    "a": (("ical", "ic"),),
    "s": (("ness", ""),),
    "t": (("icate", "ic"), ("iciti", "ic")),
    "u": (("ful", ""),),
    "v": (("ative", ""),),
    "z": (("alize", "al"),),
}
_STEP4 = {
    "a": ("al",), "c": ("ance", "ence"), "e": ("er",), "i": ("ic",), "l": ("able", "ible"),
    "n": ("ant", "ement", "ment", "ent"), "o": ("ion", "ou"), "s": ("ism",), "t": ("ate", "iti"),
    "u": ("ous",), "v": ("ive",), "z": ("ize",),
}


def _replace(w: str, rules: dict[str, tuple[tuple[str, str], ...]]) -> str:
    for suffix, repl in rules.get(w[-2:-1], ()):
        if len(w) > len(suffix) and w.endswith(suffix):
            stem = w[: -len(suffix)]
            return stem + repl if _m_gt0(stem) else w
    return w


def _step1a(w: str) -> str:
    if w.endswith("s"):
        if w.endswith("e", 0, -1):
            if (len(w) > 4 and w.endswith("sses")) or (len(w) > 3 and w.endswith("ies")):
                return w[:-2]
            return w[:-1]
        if not w.endswith("ss"):
            return w[:-1]
    return w


def _step1b(w: str) -> str:
    removed = False
    if len(w) > 3 and w.endswith("eed"):
        if _m_gt0(w[:-3]):
            w = w[:-1]
    elif len(w) > 2 and w.endswith("ed"):
        if _has_vowel(w[:-2]):
            w, removed = w[:-2], True
    elif len(w) > 3 and w.endswith("ing") and _has_vowel(w[:-3]):
        w, removed = w[:-3], True
    if not removed:
        return w
    for suffix, repl in (("at", "ate"), ("bl", "ble"), ("iz", "ize")):
        if len(w) > 2 and w.endswith(suffix):
            return w[:-2] + repl
    last = w[-1]
    if not _vowel(last, False) and last not in "lsz" and len(w) > 1 and last == w[-2]:
        return w[:-1]
    if _m_eq1(w) and _o_star(w):
        return w + "e"
    return w


def _step4(w: str) -> str:
    for suffix in _STEP4.get(w[-2:-1], ()):
        if len(w) > len(suffix) and w.endswith(suffix):
            stem = w[: -len(suffix)]
            ok = _s_or_t_m_gt1(stem) if suffix == "ion" else _m_gt1(stem)
            return stem if ok else w
    return w


def _stem_bytes(w: str) -> str:
    w = _step1a(w)
    w = _step1b(w)
    if w.endswith("y") and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    w = _replace(w, _STEP2)
    w = _replace(w, _STEP3)
    w = _step4(w)
    if w.endswith("e") and (_m_gt1(w[:-1]) or (_m_eq1(w[:-1]) and not _o_star(w[:-1]))):
        w = w[:-1]
    if len(w) > 1 and w.endswith("ll") and _m_gt1(w[:-1]):
        w = w[:-1]
    return w


@lru_cache(maxsize=8192)
def stem(token: str) -> str:
    """The FTS5 porter stem of one lower-cased token."""
    raw = token.encode("utf-8")
    if len(raw) < 3 or len(raw) > MAX_TOKEN:
        return token
    # Each byte becomes one character, so non-ASCII letters count as consonants, as in C.
    return _stem_bytes(raw.decode("latin-1")).encode("latin-1").decode("utf-8")
