"""Time expressions in a question ("last week", "in May 2023", "on 3 June") as a time range.

The full reader; `timewords` holds the vocabulary, `TimeRange`, and the cheap test that
sends a text here only when it may name a time. `find_time(text, now)` returns the first
expression it recognises as a `TimeRange` (epoch seconds, start inclusive, end exclusive,
either end open for "before …"/"since …"/"as of …"; "between … and …" spans both) and the
text without it, so ranking can favour records from that time instead of searching for the
words "May" or "2023". Dates are read in UTC, like every other date nmem takes. Relative
expressions count from `now`; a month or day without a year is its latest occurrence that
has begun by `now`. Anything ambiguous ("may" the verb, a bare number) is left alone.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

from nmem.search.timewords import MONTHS, NUMBERS, UNITS, WEEKDAYS, TimeRange, may_name_time

_MONTH = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_NUM = r"(?P<num>\d{1,3}|" + "|".join(sorted(NUMBERS, key=len, reverse=True)) + r")"
_UNIT = r"(?P<unit>day|week|month|year)s?"
# before: up to its start; by/until/as of/up to: up to the end of what follows; after: from
# its end; since: from its start. Otherwise a preposition ("in May 2023", "on 3 June") belongs
# to the expression.
_BOUND = (r"(?:(?P<bound>before|by|until|till|after|since|as\s+of|up\s+to)\s+"
          r"|(?:in|on|during|of|at|from)\s+)?")
_UP_TO_END = ("by", "until", "till", "as of", "up to")

# A day named outright: the anchor of "the week before 9 June 2023".
_DAYS = (
    r"(?P<year>(?:19|20)\d\d)-(?P<mnum>[01]?\d)-(?P<day>[0-3]?\d)",
    rf"(?:the\s+)?{_DAY}(?:\s+of)?\s+{_MONTH},?\s+{_YEAR}",
    rf"{_MONTH}\s+{_DAY},?\s+{_YEAR}",
    rf"(?:the\s+)?{_DAY}(?:\s+of)?\s+{_MONTH}",
    rf"{_MONTH}\s+{_DAY}",
)
_PERIOD = r"(?P<period>day|week|weekend|month|" + "|".join(WEEKDAYS) + r")"
# "the week before 9 June", "two days after May 3, 2023", "last weekend before April 10",
# "last Friday on 23 January": a time counted from a day rather than from now.
_OFFSET = rf"(?:(?:in|on|during|at|from)\s+)?(?:(?:the|last|that)\s+{_PERIOD}|{_NUM}\s+{_UNIT})"
_ANCHORED = tuple(rf"(?<![\w-]){_OFFSET}\s+(?P<direction>before|after|on)\s+{body}(?![\w-])" for body in _DAYS)

# "between August 11 and August 15 2023", "from May to July 2023": two times and what lies
# between them. Each side is a day or a month (a bare number is too often not a year: "from
# 2000 to 2048 tokens"); a year written once, at the end, holds for both.
_SIDES: tuple[tuple[str, str], ...] = (
    ("iso_day", r"(?P<year>(?:19|20)\d\d)-(?P<mnum>[01]?\d)-(?P<day>[0-3]?\d)"),
    ("day", rf"(?:the\s+)?{_DAY}(?:\s+of)?\s+{_MONTH},?\s+{_YEAR}"),
    ("day", rf"{_MONTH}\s+{_DAY},?\s+{_YEAR}"),
    ("iso_month", r"(?P<year>(?:19|20)\d\d)-(?P<mnum>[01]\d)"),
    ("month", rf"{_MONTH},?\s+(?:of\s+)?{_YEAR}"),
    ("day", rf"(?:the\s+)?{_DAY}(?:\s+of)?\s+{_MONTH}"),
    ("day", rf"{_MONTH}\s+{_DAY}"),
    ("month", _MONTH),
)
_BETWEEN = r"(?<![\w-])(?:between|from)\s+"
_AND = r"\s*(?:and|to|until|till|through|-|–)\s*"

# Most specific first; each pattern must name enough groups to build a range.
_PATTERNS: tuple[tuple[str, str], ...] = tuple(("anchored", p) for p in _ANCHORED) + tuple(
    (kind, rf"(?<![\w-]){_BOUND}{body}(?![\w-])") for kind, body in (
    ("iso_day", r"(?P<year>(?:19|20)\d\d)-(?P<mnum>[01]?\d)-(?P<day>[0-3]?\d)"),
    ("day", rf"(?:the\s+)?{_DAY}(?:\s+of)?\s+{_MONTH},?\s+{_YEAR}"),
    ("day", rf"{_MONTH}\s+{_DAY},?\s+{_YEAR}"),
    ("iso_month", r"(?P<year>(?:19|20)\d\d)-(?P<mnum>[01]\d)"),
    ("month", rf"(?:(?:early|mid|late|the\s+(?:beginning|start|end|middle)\s+of)\s+)?{_MONTH},?\s+(?:of\s+)?{_YEAR}"),
    ("day", rf"(?:the\s+)?{_DAY}(?:\s+of)?\s+{_MONTH}"),
    ("day", rf"{_MONTH}\s+{_DAY}"),
    ("ago", rf"{_NUM}\s+{_UNIT}\s+ago"),
    ("past", rf"(?:the\s+)?(?:last|past)\s+{_NUM}\s+{_UNIT}"),
    ("yesterday", r"(?:the\s+day\s+before\s+)?yesterday"),
    ("today", r"today|tonight|this\s+morning|this\s+afternoon|this\s+evening"),
    ("weekday", r"last\s+(?P<weekday>" + "|".join(WEEKDAYS) + r")"),
    ("weekend", r"(?P<which>last|this|past)\s+weekend"),
    ("period", r"(?P<which>last|this|past|previous)\s+(?P<unit>week|month|year)"),
    # a month or a year alone needs a word that makes it a time: "may" is mostly a verb
    ("month", rf"(?:(?<=in\s)|(?<=of\s)|(?<=during\s)|(?<=since\s)|(?<=before\s)|(?<=after\s)|(?<=by\s)"
              rf"|(?<=until\s)|(?<=up\sto\s)|early\s+|mid\s+|late\s+){_MONTH}"),
    ("year", rf"(?:(?<=in\s)|(?<=of\s)|(?<=during\s)|(?<=since\s)|(?<=before\s)|(?<=after\s)|(?<=by\s)"
             rf"|(?<=until\s)|(?<=up\sto\s)){_YEAR}"),
))


class _Compiled:
    """The patterns above, compiled on the first question that may name a time."""

    __slots__ = ("patterns", "sides", "between", "joint")

    def __init__(self) -> None:
        self.patterns = tuple((kind, re.compile(body, re.IGNORECASE)) for kind, body in _PATTERNS)
        self.sides = tuple((kind, re.compile(body, re.IGNORECASE)) for kind, body in _SIDES)
        self.between = re.compile(_BETWEEN, re.IGNORECASE)
        self.joint = re.compile(_AND, re.IGNORECASE)


_compiled: list[_Compiled] = []


def _regexes() -> _Compiled:
    if not _compiled:
        _compiled.append(_Compiled())
    return _compiled[0]


def _ts(d: date) -> int:
    return int(datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp())


def _month_range(year: int, month: int) -> tuple[date, date]:
    first = date(year, month, 1)
    return first, date(year + month // 12, month % 12 + 1, 1)


def _latest_month(today: date, month: int) -> int:
    return today.year if month <= today.month else today.year - 1


def _latest_day(today: date, month: int, day: int) -> date | None:
    for year in (today.year, today.year - 1):
        try:
            candidate = date(year, month, day)
        except ValueError:
            return None
        if candidate <= today:
            return candidate
    return None


def _number(text: str) -> int:
    text = " ".join(text.lower().split())
    return int(text) if text.isdigit() else NUMBERS[text]


def _day(groups: dict[str, str | None], today: date) -> date | None:
    """The day a "day" or "iso_day" match names (ValueError for 31 February)."""
    month = int(groups["mnum"] or 0) if groups.get("mnum") else MONTHS[(groups["month"] or "").lower()]
    if groups.get("year"):
        return date(int(groups["year"] or 0), month, int(groups["day"] or 0))
    return _latest_day(today, month, int(groups["day"] or 0))


def _from_anchor(anchor: date, groups: dict[str, str | None]) -> tuple[date, date]:
    """What "the week before <anchor>", "two days after <anchor>" cover, the anchor included:
    a record about the event may be dated at either end."""
    after = (groups["direction"] or "").lower() == "after"
    sign = 1 if after else -1
    period = (groups.get("period") or "").lower()
    if groups.get("num"):
        days = _number(groups["num"] or "") * UNITS[(groups["unit"] or "").lower()]
        slack = max(1, days // 7)
        start = anchor + timedelta(days=sign * days - slack)
        end = anchor + timedelta(days=sign * days + slack + 1)
    elif period in WEEKDAYS:
        gap = ((WEEKDAYS[period] - anchor.weekday()) if after else (anchor.weekday() - WEEKDAYS[period])) % 7 or 7
        start = anchor + timedelta(days=sign * gap)
        end = start + timedelta(days=1)
    elif period == "weekend":
        gap = ((5 - anchor.weekday()) if after else (anchor.weekday() - 5)) % 7 or 7
        start = anchor + timedelta(days=sign * gap)
        if not after and start + timedelta(days=1) >= anchor:
            start -= timedelta(days=7)  # the weekend before a Sunday is the one before it
        end = start + timedelta(days=2)
    else:
        length = timedelta(days={"day": 1, "week": 7, "month": 30}[period])
        start = anchor + timedelta(days=1) if after else anchor - length
        end = start + length
    return min(start, anchor), max(end, anchor + timedelta(days=1))


def _span(kind: str, m: re.Match[str], today: date) -> tuple[date, date] | None:
    """The [first day, day after last) an expression covers, or None if it names no real date."""
    groups = m.groupdict()
    try:
        if kind in ("iso_day", "day", "anchored"):
            start = _day(groups, today)
            if start is None:
                return None
            if kind == "anchored":
                return _from_anchor(start, groups)
            return start, start + timedelta(days=1)
        if kind in ("iso_month", "month"):
            month = int(groups["mnum"]) if kind == "iso_month" else MONTHS[groups["month"].lower()]
            year = int(groups["year"]) if groups.get("year") else _latest_month(today, month)
            return _month_range(year, month)
        if kind == "year":
            year = int(groups["year"])
            return date(year, 1, 1), date(year + 1, 1, 1)
    except ValueError:
        return None  # 31 February, month 13
    if kind == "ago":
        days = _number(groups["num"]) * UNITS[groups["unit"].lower()]
        centre = today - timedelta(days=days)
        slack = max(1, days // 7)  # "three weeks ago" is roughly, not exactly, 21 days
        return centre - timedelta(days=slack), centre + timedelta(days=slack + 1)
    if kind == "past":
        days = _number(groups["num"]) * UNITS[groups["unit"].lower()]
        return today - timedelta(days=days), today + timedelta(days=1)
    if kind == "yesterday":
        back = 2 if m.group(0).lower().startswith("the") else 1
        return today - timedelta(days=back), today - timedelta(days=back - 1)
    if kind == "today":
        return today, today + timedelta(days=1)
    if kind == "weekday":
        back = (today.weekday() - WEEKDAYS[groups["weekday"].lower()] - 1) % 7 + 1
        that_day = today - timedelta(days=back)
        return that_day, that_day + timedelta(days=1)
    if kind == "weekend":
        saturday = today - timedelta(days=(today.weekday() - 5) % 7)
        if groups["which"].lower() != "this" and saturday + timedelta(days=1) >= today:
            saturday -= timedelta(days=7)  # "last weekend" said on a Sunday is the one before
        return saturday, saturday + timedelta(days=2)
    which = groups["which"].lower()
    unit = groups["unit"].lower()
    back = 0 if which == "this" else 1
    if unit == "week":
        monday = today - timedelta(days=today.weekday() + 7 * back)
        return monday, monday + timedelta(days=7)
    if unit == "month":
        year, month = today.year, today.month - back
        if month == 0:
            year, month = year - 1, 12
        return _month_range(year, month)
    return date(today.year - back, 1, 1), date(today.year - back + 1, 1, 1)


def _side(text: str, pos: int) -> tuple[str, re.Match[str]] | None:
    """The day or month `text` opens with at `pos`, as a whole word."""
    for kind, pattern in _regexes().sides:
        m = pattern.match(text, pos)
        if m and not (m.end() < len(text) and (text[m.end()].isalnum() or text[m.end()] == "-")):
            return kind, m
    return None


def _between(text: str, today: date) -> tuple[re.Match[str], TimeRange, str] | None:
    """The first "between <time> and <time>" / "from <time> to <time>" in `text`, both ends
    included: where it starts, the range, and the text without it."""
    for lead in _regexes().between.finditer(text):
        first = _side(text, lead.end())
        joint = _regexes().joint.match(text, first[1].end()) if first else None
        second = _side(text, joint.end()) if joint else None
        if first is None or second is None:
            continue
        own_year = first[1].groupdict().get("year")
        year = second[1].groupdict().get("year")
        if own_year is None and year is not None:
            # the year written after the second time holds for the first: "August 11 and August 15 2023"
            first = _side(f"{first[1].group(0)} {year}", 0) or first
        span = _span(*first, today)
        if span is None:
            continue
        last = _span(*second, today)
        if year is None and own_year is not None:
            # "from Dec 30 2022 to Jan 2": the first such day after the start
            later = (_side(f"{second[1].group(0)} {y}", 0) for y in (span[0].year, span[0].year + 1))
            last = next((t for t in (_span(*side, today) for side in later if side) if t and t[1] > span[0]), None)
        if last is None:
            continue
        start, end = span[0], last[1]
        if start >= end and own_year is None:  # "from November to February": the November before
            try:
                start = start.replace(year=start.year - 1)
            except ValueError:  # 29 February
                start = start.replace(year=start.year - 1, day=28)
        if start >= end:
            continue
        stop = second[1].end()
        rest = " ".join(f"{text[:lead.start()]} {text[stop:]}".split())
        return lead, TimeRange(_ts(start), _ts(end), text[lead.start():stop]), rest
    return None


def find_time(text: str, now: float) -> tuple[TimeRange | None, str]:
    """The first time expression in `text` and the text without it."""
    if not may_name_time(text):
        return None, text
    today = datetime.fromtimestamp(now, UTC).date()
    ranged = _between(text, today)
    best: tuple[int, str, re.Match[str]] | None = None
    for kind, pattern in _regexes().patterns:
        m = pattern.search(text)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), kind, m)
    if ranged is not None and (best is None or ranged[0].start() <= best[0]):
        return ranged[1], ranged[2]
    if best is None:
        return None, text
    _, kind, m = best
    span = _span(kind, m, today)
    rest = " ".join(f"{text[:m.start()]} {text[m.end():]}".split())
    if span is None:
        return None, text
    start, end = _ts(span[0]), _ts(span[1])
    bound = " ".join((m.groupdict().get("bound") or "").lower().split())
    if bound == "before" or bound in _UP_TO_END:
        return TimeRange(None, end if bound != "before" else start, m.group(0)), rest
    if bound in ("after", "since"):
        return TimeRange(start if bound != "after" else end, None, m.group(0)), rest
    return TimeRange(start, end, m.group(0)), rest
