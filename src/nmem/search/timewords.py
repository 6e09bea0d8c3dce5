"""Whether a text names a time, cheaply: the words and forms of time expressions, `TimeRange`,
`mentions_time` (does a record say when) and `may_name_time` (can `timeexpr.find_time` find
anything in it). The full reader (`timeexpr`, ~30 patterns and `datetime`) is loaded only for
a text that may name a time: a search whose question and candidates name none never loads it.
"""

from __future__ import annotations

import re

from nmem.models import Record

DAY = 86400

MONTHS = {name: i for i, names in enumerate((
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
    ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
    ("october", "oct"), ("november", "nov"), ("december", "dec")), start=1) for name in names}
WEEKDAYS = {name: i for i, name in enumerate(
    ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))}
NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
           "seven": 7, "eight": 8, "nine": 9, "ten": 10, "a couple of": 2, "a few": 3, "few": 3,
           "several": 3}
UNITS = {"day": 1, "week": 7, "month": 30, "year": 365}

# Every expression `timeexpr` reads holds a digit, a month, or one of these (weekdays end in
# "day"): a text with none of them names no time, and the reader (its ~30 patterns compiled,
# 10-20 ms, and `datetime`) loads only for one that may.
_CUES = ("day", "week", "month", "year", "tonight", "this", *MONTHS)


def may_name_time(text: str) -> bool:
    """False when `text` can hold no time expression `find_time` reads (case folded as
    IGNORECASE folds it, any Unicode digit as `\\d` takes it)."""
    folded = text.casefold().replace("ı", "i")  # IGNORECASE also takes the dotless i for an i
    return any(c.isdigit() for c in text) or any(cue in folded for cue in _CUES)


# Words that place a record in time: what a "when" question's answer says. Records are read
# word by word (a set lookup each), not matched against every date pattern: ~2 µs for a
# 50-character record of the benchmark corpus.
_TIME_WORDS = frozenset(("yesterday", "today", "tonight", "tomorrow", "ago", "recently", "lately", "weekend",
                         *WEEKDAYS, *(m for m in MONTHS if m not in ("may", "mar"))))
_RELATIVE = frozenset(("last", "next", "this", "past", "previous"))
_PERIODS = frozenset(("night", "week", "month", "year", "morning", "evening", "summer", "winter", "spring", "fall",
                      *WEEKDAYS))
# A word with its inner dots, dashes and slashes: "2023-05-08", "5/12", "0.0.0.0", "de-stress".
_WORD = re.compile(r"[^\W_]+(?:[/.-][^\W_]+)*")
_DATE = re.compile(r"(?:19|20)\d\d(?:-[01]?\d(?:-[0-3]?\d)?)?|[0-3]?\d/[0-3]?\d(?:/(?:19|20)?\d\d)?")


def mentions_time(text: str) -> bool:
    """Whether the text says when something happened: a date, a weekday, a month (the verb
    "may" is not one), or a relative time ("yesterday", "last week", "3 days ago")."""
    previous = ""
    for word in _WORD.findall(text):
        lower = word.lower()
        if (lower in _TIME_WORDS or word == "May" or (previous in _RELATIVE and lower in _PERIODS)
                or _DATE.fullmatch(word)):
            return True
        previous = lower
    return False


class TimeRange(Record):
    start: int | None          # epoch seconds, inclusive; None: open
    end: int | None            # epoch seconds, exclusive; None: open
    text: str                  # the words that said it

    def distance(self, timestamp: int) -> float:
        """Days from `timestamp` to the range (0 inside it)."""
        if self.start is not None and timestamp < self.start:
            return (self.start - timestamp) / DAY
        if self.end is not None and timestamp >= self.end:
            return (timestamp - self.end) / DAY
        return 0.0

