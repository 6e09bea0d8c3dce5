"""Ranking plain-language searches over the trail (prompts and observations).

FTS5 finds the candidates: the best `candidates` records sharing any content word with the
question, by BM25, with every filter applied in SQL (and, when the question names a time,
the best `time_candidates` from inside it). Each candidate is then scored as BM25
over its *context window*: the record plus up to `window` records on each side in the same
session, counted together as one document, a neighbour `d` steps away weighing
`window_decay ** d`. A question whose words are spread over a question and its answer, or
over a command and the error after it, then finds them. On top of that score:

- coverage: `× (1 + coverage · q)`, q the share of the question's IDF the record holds itself;
- label: `× (1 + label_boost)` when the record opens with a label the question names
  (`Caroline: …`, `pytest: …`): who spoke, or what the line is about;
- answer: `× (1 + answer_boost)` when the question asks for a time or a number ("when …",
  "how many …") and the record says one (`answer_cue`);
- time: `× (1 + time_boost · ½^(days outside / time_half_life_days))` when the question
  names a time ("in May 2023", "last week"; see `timewords`, `timeexpr`);
- recency: `× (1 + recency · ½^(age days / 7))`.
- asking (applied by the service once replies took their share, `asking`): `× ask_factor`
  when the record's last sentence is a question, `× ask_only_factor` when it only asks.

With `expand_terms` the service ranks a second time, the best hits' own words added to the
question's at a lower weight (`nmem.search.expand`; off by default). Only candidates are
returned: neighbours lend context, never become hits. Everything here is
pure; the service fetches candidates, windows, texts and index statistics from the store.
bench/locomo.py measures each knob (bench/README.md, "LoCoMo retrieval").
"""

from __future__ import annotations

import math
import re
import unicodedata
from functools import lru_cache

from nmem.models import Record
from nmem.search.porter import stem
from nmem.search.query import quote
from nmem.search.timewords import TimeRange, mentions_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

DAY = 86400
RECENCY_HALF_LIFE_DAYS = 7.0


class Ranking(Record):
    """Knobs of the ranking; the defaults are what the LoCoMo benchmark kept (`Ranking(window=3)`,
    `ranking.replace(window=3)` for variations). The records here are `nmem.models.Record`s, not
    dataclasses: `dataclasses` loads `inspect` (with `ast`, `dis`, `tokenize`) and compiles each
    class's methods at import, which cost a CLI search more than its own work."""

    candidates: int = 50            # FTS5 hits reranked per scope; 0 = plain FTS5 order, strictest tier first
    postings: int = 2000            # index entries the candidate OR may read; commoner words only score
    window: int = 2                 # neighbours on each side scored with a record (same session)
    window_decay: float = 0.5       # weight of a neighbour d records away: window_decay ** d
    promote: int = 50               # neighbours of the best N that share a word become candidates too
    k1: float = 1.2                 # BM25 term-frequency saturation
    b: float = 0.75                 # BM25 length normalisation
    coverage: float = 0.0           # boost for the share of the question a record matches itself
    label_boost: float = 0.6        # boost for a record whose leading label ("Name: …") the question names
    answer_boost: float = 0.3       # boost for a record that says what the question asks for (a time, a number)
    time_expressions: bool = True   # read "last week", "in May 2023" as a time to favour
    time_boost: float = 1.0         # boost for records inside that time
    time_half_life_days: float = 3.0
    time_candidates: int = 10       # extra candidates from inside the named time (± one half-life)
    recency: float = 0.0            # boost for new records (7-day half-life)
    brief: int = 3                  # a record of at most this many tokens ("See you!") is near-empty…
    brief_factor: float = 0.5       # …and keeps this share of its score
    said_times: bool = True         # a record's own "last Friday" counts from its time toward a named time
    replies: bool = True            # the record after a strong candidate that asks something is a candidate
    reply_share: float = 0.6        # a reply scores at least this share of what it answers
    supersede: float = 1.0          # an older record another session restates keeps this share (1 = off)
    supersede_share: float = 0.5    # …when the stems both hold carry this share of the question's IDF
    spread: float = 1.0             # each further hit of a session already shown weighs spread ** n (1 = off)
    spread_free: int = 0            # …n counted past this many hits of the session
    session_weight: float = 0.0     # × (1 + w · its session's evidence / the best session's) (0 = off)
    session_top: int = 1            # …a session's evidence: the sum of its best N scores
    expand_terms: int = 0           # search again with this many words of the best hits (0 = off)…
    expand_docs: int = 3            # …taken from the best N hits…
    expand_weight: float = 0.3      # …the best of them weighing this share of a question word
    turn_weight: float = 0.3        # × (1 + w · its turn's evidence / the best turn's) (0 = off)
    turn_top: int = 3               # …a turn's evidence: the sum of its best N scores
    turn_spread: float = 0.8        # each further hit of a turn already shown weighs turn_spread ** m (1 = off)
    ask_factor: float = 0.9         # a record that ends asking something keeps this share (1 = off)…
    ask_only_factor: float = 0.5    # …one that only asks ("Wow! What are their names?") this share


class IndexStats(Record):
    """Collection statistics for BM25: documents, mean length, document frequency per stem."""

    docs: int
    avg_length: float
    df: Mapping[str, int] = {}

    def idf(self, term: str) -> float:
        df = self.df.get(term, 0)
        return math.log(1.0 + (max(self.docs, df) - df + 0.5) / (df + 0.5))


class Doc(Record):
    """What ranking needs of one record: how often each query stem occurs (in the order of
    the question's stems), and its length in tokens."""

    counts: tuple[int, ...]
    length: int
    labelled: bool = False          # its leading label ("Name: …") holds a stem of the question
    answers: bool = False           # it mentions the kind of thing the question asks for
    said: TimeRange | None = None   # the time its own words name ("last Friday"), read from its time
    asking: int = 0                 # it ends with a question (ENDS_ASKING) or only asks (ASKS_ONLY)

    def matches(self) -> bool:
        return any(self.counts)


class Candidate(Record):
    id: int
    timestamp: int

_TOKEN = r"[^\W_]"
# Patterns used per text are compiled here, not named by string: each question compiles its own
# prefix pattern (`_prefix_pattern`), and once 512 have passed through `re`'s cache a pattern
# named by string is compiled again.
_WORD = re.compile(_TOKEN + "+")


@lru_cache(maxsize=256)
def _prefix_pattern(prefixes: tuple[str, ...]) -> re.Pattern[str] | None:
    """The words starting with any of `prefixes` (longest first): compiled once per question's stems.

    What `(?<!T)(?:p1|p2|…)T*` finds (T a token character), written so that each alternative
    opens with its first character: the regex engine then skips to the positions holding one
    (a scan of the text, not an attempt at every position), and checks the character before
    (the lookbehind, two characters wide) once the first matched. At any position only the
    prefixes starting with its character can match, in the same order: the same words."""
    if not prefixes:
        return None
    groups: dict[str, list[str]] = {}
    for prefix in prefixes:
        groups.setdefault(prefix[0], []).append(prefix[1:])
    heads = [f"{re.escape(c)}(?<!{_TOKEN}{re.escape(c)})(?:{'|'.join(map(re.escape, rest))})"
             for c, rest in groups.items()]
    return re.compile(rf"(?:{'|'.join(heads)}){_TOKEN}*")
# A line that opens with a short label and a colon: a speaker ("Caroline: …"), a tool, a tag.
# One to three words, the first a letter; `http://…` is no label.
_LABEL = re.compile(r"\s*([^\W\d_][^\W_]*(?:[ '.-]{1,2}[^\W_]+){0,2}):(?!//)")


@lru_cache(maxsize=4096)
def _fold_char(ch: str) -> str:
    parts = unicodedata.normalize("NFD", ch)
    return parts[0] if len(parts) == 2 and parts[0].isascii() and unicodedata.combining(parts[1]) else ch


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


_UNFOLDED: set[str] = set()   # characters seen that fold to themselves ("→", "…", "ß")
_UNFOLDED_KEPT = 4096


def fold(text: str) -> str:
    """Lower-case and strip a single diacritic from Latin letters, as FTS5's unicode61 does."""
    text = text.lower()
    if text.isascii():
        return text
    chars = set(_NON_ASCII.findall(text))
    if chars <= _UNFOLDED:   # the common case of a text with only arrows, dashes, quotes: as it is
        return text
    table = {}
    for c in chars:
        folded = _fold_char(c)
        if folded != c:
            table[ord(c)] = folded
        elif len(_UNFOLDED) < _UNFOLDED_KEPT:
            _UNFOLDED.add(c)
    return text.translate(table) if table else text


def query_stems(terms: Iterable[str]) -> tuple[str, ...]:
    """The index terms (FTS5 porter stems) of a question's words, once each."""
    return tuple(dict.fromkeys(stem(fold(t)) for t in terms if t))


def label_stems(text: str) -> tuple[str, ...]:
    """Index terms of the label a record opens with ("Caroline: …" → ("carolin",)); none without one."""
    if ":" not in text:   # no label without its colon: most records, spared the regex
        return ()
    label = _LABEL.match(text)
    return _label_stems(label.group(1)) if label else ()


@lru_cache(maxsize=4096)
def _label_stems(label: str) -> tuple[str, ...]:
    """The index terms of a label's words: a few labels ("Caroline", "pytest") open most records."""
    return query_stems(_WORD.findall(label))


def without_label(text: str) -> str:
    """The text after the label it opens with ("Caroline: hi" → " hi"); the text without one."""
    label = _LABEL.match(text)
    return text[label.end():] if label else text


def label_of(text: str) -> str | None:
    """The label a record opens with, folded ("Caroline: …" → "caroline"), or None."""
    label = _LABEL.match(text)
    return fold(label.group(1)) if label else None


class TermCounter:
    """Counts a question's stems in text the way the FTS5 index tokenised it.

    Only words starting like a stem are stemmed (a stem differs from its word in at most
    its last two letters), so counting costs one regex scan a text, not a stemmer call per word.
    """

    def __init__(self, stems: Sequence[str]) -> None:
        self.stems = tuple(stems)
        self._slot = {s: i for i, s in enumerate(self.stems)}
        self._words = _prefix_pattern(tuple(sorted({s[:max(2, len(s) - 2)] for s in self.stems},
                                                   key=len, reverse=True)))
        self._word_slot: dict[str, int | None] = {}   # a word found → its stem's slot (None: no stem of ours)
        self._counted: dict[str, tuple[int, ...]] = {}   # a text counted → its counts (a trail repeats itself:
        # the same command, the same test run; a counter lives for one ranking pass)

    def counts(self, text: str) -> tuple[int, ...]:
        return self.count_many([text])[0]

    def count_many(self, texts: Sequence[str]) -> list[tuple[int, ...]]:
        """Counts for each text: the words that start like a stem, stemmed and looked up."""
        words = self._words
        blank = (0,) * len(self.stems)
        if words is None:
            return [blank for _ in texts]
        find, known, slot_of, counted = words.findall, self._word_slot, self._slot.get, self._counted
        out: list[tuple[int, ...]] = []
        for text in texts:
            done = counted.get(text)
            if done is not None:
                out.append(done)
                continue
            counts: list[int] | None = None
            for word in find(fold(text)):
                slot = known.get(word, -1)
                if slot == -1:
                    slot = known[word] = slot_of(stem(word))
                if slot is not None:
                    if counts is None:
                        counts = list(blank)
                    counts[slot] += 1
            done = counted[text] = blank if counts is None else tuple(counts)
            out.append(done)
        return out

    def labelled(self, text: str) -> bool:
        """Whether the text opens with a label ("Name: …") holding one of the stems."""
        return any(x in self._slot for x in label_stems(text))


_ASKS_TIME = re.compile(r"\s*(?:when|since\s+when|what\s+(?:time|date|day|year|month)|how\s+long\s+ago)\b",
                        re.IGNORECASE)
_ASKS_COUNT = re.compile(r"\s*how\s+(?:many|much|often|long)\b", re.IGNORECASE)
_NUMBER_WORDS = frozenset("""one two three four five six seven eight nine ten eleven twelve twenty hundred thousand
once twice couple few several dozen dozens""".split())


def mentions_number(text: str) -> bool:
    """Whether the text says how many: a word that starts with a digit ("3", "5K", "1900s")
    or a number word."""
    return any(word[0].isdigit() or word.lower() in _NUMBER_WORDS for word in _WORD.findall(text))


def answer_cue(question: str) -> Callable[[str], bool] | None:
    """What a record answering the question would mention, when its first words say so: a
    time for "when …", "what date …"; a number for "how many …", "how often …"."""
    if _ASKS_TIME.match(question):
        return mentions_time
    if _ASKS_COUNT.match(question):
        return mentions_number
    return None


def _rows(term: str, df: Mapping[str, int]) -> int:
    return df.get(stem(fold(term)), 0)


def rare_terms(terms: Sequence[str], df: Mapping[str, int], postings: int) -> list[str]:
    """The rarest words, in question order, while their index rows add up to at most
    `postings`: an OR of them costs a bounded read however large the index grows."""
    chosen: set[str] = set()
    total = 0
    for term in sorted((t for t in terms if _rows(t, df)), key=lambda t: _rows(t, df)):
        if total + _rows(term, df) > postings:
            break
        chosen.add(term)
        total += _rows(term, df)
    return [t for t in terms if t in chosen]


def candidate_queries(terms: Sequence[str], df: Mapping[str, int], postings: int) -> list[str]:
    """FTS5 queries for the candidates, to run in order until one finds something.

    An OR reads (and BM25-scores) every row holding any of its words, so a word found in a
    third of the trail would cost tens of milliseconds at 100k records: the OR takes the
    rarest words while their rows add up to at most `postings` (`rare_terms`; the others
    still count when candidates are scored). When even the rarest is commoner than that,
    every word (AND) first, which FTS5 answers by skipping through the lists, then the
    rarest word alone. The OR of every word comes last, so a question sharing any word with
    a record that the filters allow never comes back empty (`df` counts the whole index,
    not the filtered part).
    """
    present = [t for t in terms if _rows(t, df)]   # a word the index never saw matches nothing
    if not present:
        return [" OR ".join(quote(t) for t in terms)] if terms else []
    rare = rare_terms(present, df, postings)
    if rare:
        queries = [" OR ".join(quote(t) for t in rare)]
    else:
        queries = [" AND ".join(quote(t) for t in present)] if len(present) > 1 else []
        queries.append(quote(min(present, key=lambda t: _rows(t, df))))
    every = " OR ".join(quote(t) for t in present)
    return queries if every in queries else [*queries, every]


def window_weights(ranking: Ranking) -> dict[int, float]:
    """Weight of a neighbour at each offset the window reaches: `window_decay ** |offset|`."""
    return {d: ranking.window_decay ** abs(d) for d in range(-ranking.window, ranking.window + 1)}


def window_tf(doc: Doc, neighbours: Iterable[tuple[Doc, int]],
              weights: Mapping[int, float]) -> tuple[list[float], float]:
    """Term counts and length of a record and its neighbours as one document, a neighbour
    weighing `weights[offset]`; one at an offset without a weight is outside the window."""
    tf: list[float] = list(doc.counts)
    length = float(doc.length)
    for other, offset in neighbours:
        weight = weights.get(offset)
        if weight is None:
            continue
        length += other.length * weight
        if other.matches():
            for i, c in enumerate(other.counts):
                if c:
                    tf[i] += c * weight
    return tf, length


# A trailing bracketed note ("… names? [shares a photo: …]") and the sentences before it.
_NOTE = re.compile(r"\s*\[[^\[\]]*\]\s*$")
_SENTENCE = re.compile(r"[^.!?]+[.!?]*[\"')\]]*")
ASKS_ONLY, ENDS_ASKING = 2, 1


def asking(text: str, brief: int = 3) -> int:
    """How much a record asks rather than tells: ASKS_ONLY when each of its sentences is a
    question or a few words ("Wow, Nate! What are their names?"), ENDS_ASKING when its last
    sentence is a question, else 0."""
    if "?" not in text[-600:]:
        return 0
    long = len(text) > 600   # only its end is read; a record that long is never only a question
    body = _NOTE.sub("", text[-600:] if long else without_label(text)).strip()
    if not body.rstrip("\"')] ").endswith("?"):
        return 0
    if long:
        return ENDS_ASKING
    for sentence in _SENTENCE.findall(body):
        if not sentence.rstrip("\"')] ").endswith("?") and len(sentence.split()) > brief:
            return ENDS_ASKING
    return ASKS_ONLY


def bm25(tf: Sequence[float], length: float, idf: Sequence[float], avg_length: float, k1: float, b: float) -> float:
    """Okapi BM25 of one document given its term counts and length."""
    norm = k1 * (1.0 - b + b * length / max(avg_length, 1e-9))
    return sum(w * t * (k1 + 1.0) / (t + norm) for w, t in zip(idf, tf, strict=True) if t)


def coverage(doc: Doc, idf: Sequence[float]) -> float:
    """Share (0..1) of the question's IDF mass found in the record itself."""
    total = sum(idf)
    return sum(w for w, c in zip(idf, doc.counts, strict=True) if c) / total if total else 0.0


def gap_days(a: TimeRange, b: TimeRange) -> float:
    """Days between two ranges (0 when they overlap; an open end reaches everything)."""
    if a.end is not None and b.start is not None and b.start >= a.end:
        return (b.start - a.end) / DAY
    if b.end is not None and a.start is not None and a.start >= b.end:
        return (a.start - b.end) / DAY
    return 0.0


def time_weight(timestamp: int, when: TimeRange | None, ranking: Ranking, said: TimeRange | None = None) -> float:
    """Boost for a record near the named time: its own time, or the time its words name
    ("last week", counted from its own time) when that is nearer."""
    if when is None or not ranking.time_boost:
        return 1.0
    days = when.distance(timestamp)
    if said is not None and days:
        days = min(days, gap_days(when, said))
    return 1.0 + ranking.time_boost * math.pow(0.5, days / ranking.time_half_life_days)


def recency_weight(timestamp: int, now: int, ranking: Ranking) -> float:
    if not ranking.recency:
        return 1.0
    age_days = max(now - timestamp, 0) / DAY
    return 1.0 + ranking.recency * math.pow(0.5, age_days / RECENCY_HALF_LIFE_DAYS)


def score(candidates: Sequence[Candidate], docs: Mapping[int, Doc],
          windows: Mapping[int, Sequence[tuple[int, int]]], stems: Sequence[str], stats: IndexStats,
          ranking: Ranking, when: TimeRange | None = None, now: int = 0,
          term_weights: Sequence[float] | None = None) -> dict[int, float]:
    """Final score of every candidate (ids missing from `docs` count as empty records); a
    stem's IDF counts `term_weights[i]` of itself (feedback words weigh less than the question's).
    `window_tf`, `bm25` and `coverage` worked out inline, in the same order of operations."""
    empty = Doc((0,) * len(stems), 0)
    idf = [stats.idf(t) * (term_weights[i] if term_weights is not None else 1.0) for i, t in enumerate(stems)]
    weights = window_weights(ranking)
    # The average window is as long as `window` records each side, decayed the same way.
    avg = stats.avg_length * sum(weights.values())
    k1, b = ranking.k1, ranking.b
    unit, mean, top = 1.0 - b, max(avg, 1e-9), k1 + 1.0
    timed = when is not None or ranking.recency
    boost_label, boost_answer = 1.0 + ranking.label_boost, 1.0 + ranking.answer_boost
    doc_of, window_of = docs.get, windows.get
    out: dict[int, float] = {}
    for cand in candidates:
        doc = doc_of(cand.id, empty)
        tf: list[float] = list(doc.counts)
        length = float(doc.length)
        for n, offset in window_of(cand.id, ()):
            weight = weights.get(offset)
            if weight is None:
                continue
            other = doc_of(n, empty)
            length += other.length * weight
            if any(other.counts):
                for i, c in enumerate(other.counts):
                    if c:
                        tf[i] += c * weight
        norm = k1 * (unit + b * length / mean)
        value = sum([w * t * top / (t + norm) for w, t in zip(idf, tf, strict=True) if t])
        if ranking.coverage:
            value *= 1.0 + ranking.coverage * coverage(doc, idf)
        if doc.labelled:
            value *= boost_label
        if doc.answers:
            value *= boost_answer
        if doc.length <= ranking.brief and coverage(doc, idf) < 0.5:
            value *= ranking.brief_factor  # near-empty, and scored mostly for its neighbours' words
        if timed:
            value *= (time_weight(cand.timestamp, when, ranking, doc.said)
                      * recency_weight(cand.timestamp, now, ranking))
        out[cand.id] = value
    return out
