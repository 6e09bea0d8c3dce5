"""LoCoMo retrieval benchmark: does nmem's own search find the turns a question is about?

    .venv/bin/python bench/locomo.py                         # all conversations, nmem's default ranking
    .venv/bin/python bench/locomo.py --json                  # one JSON object
    .venv/bin/python bench/locomo.py --conversations conv-43,conv-44,conv-47
    .venv/bin/python bench/locomo.py --mode tiers            # another ranking (see MODES)

Every conversation is ingested through nmem's public API in a throw-away NMEM_HOME: one
project per conversation, one session per LoCoMo session (its date as the time), one user
prompt per turn (`Speaker: text`, plus `[shares a photo: caption]`). Then each category 1-4
question with evidence is asked through `Service.search(question, scope="prompts",
project=conversation, limit=10)` and the hits' turn ids are scored (bench/locomo_scoring.py).
The data (CC BY-NC 4.0) is read from ../shared/bench/locomo/locomo-dev.json; never commit it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from locomo_scoring import METRICS, Conversation, Tally, iter_turns, load_conversation, question_scores
from measure import machine, percentile
from nmem.capture import events as ev
from nmem.config import load_settings
from nmem.errors import QuerySyntaxError
from nmem.search.rank import Ranking
from nmem.service.api import Service

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "bench" / "locomo" / "locomo-dev.json"
LIMIT = 10
DAY = 86400

# Named rankings: nmem's default, the levers added one at a time, and ablations of the
# default (bench/README.md, "LoCoMo retrieval").
BASE = Ranking()
# The first ranking (commit c3ff0b3): windows, promotion, time boost, coverage
FIRST = BASE.replace(coverage=0.3, label_boost=0.0, answer_boost=0.0, time_candidates=0)
_OR = FIRST.replace(window=0, promote=0, coverage=0.0, time_expressions=False)
_LABEL = FIRST.replace(label_boost=BASE.label_boost)
_ANSWER = _LABEL.replace(answer_boost=BASE.answer_boost)
MODES: dict[str, Ranking] = {
    "default": BASE,
    # nmem before ranking: FTS5 bm25 order of the strictest tier (AND, then OR) that finds anything
    "tiers": BASE.replace(candidates=0),
    "or": _OR,                                                   # every content word OR'd, BM25 order
    "windows": _OR.replace(window=BASE.window),                 # + BM25 over ±2 records of the session
    "promote": _OR.replace(window=BASE.window, promote=BASE.promote),   # + matching neighbours as candidates
    "time": FIRST.replace(coverage=0.0),                        # + time expressions
    "first": FIRST,                                              # + coverage boost: the first default
    "label": _LABEL,                                             # + a record labelled with a name the question says
    "answer": _ANSWER,                                           # + "when …" favours times, "how many …" numbers
    "time-pool": _ANSWER.replace(time_candidates=BASE.time_candidates),  # + candidates from inside a named time
    # − the coverage boost, which stopped paying once the label boost came in: the default
    # ablations of the default
    "no-windows": BASE.replace(window=0, promote=0),
    "no-promote": BASE.replace(promote=0),
    "no-time": BASE.replace(time_expressions=False),
    "coverage": BASE.replace(coverage=FIRST.coverage),
    "no-label": BASE.replace(label_boost=0.0),
    "no-answer": BASE.replace(answer_boost=0.0),
    "no-time-pool": BASE.replace(time_candidates=0),
    "window-1": BASE.replace(window=1),
    "window-3": BASE.replace(window=3),
    "recency": BASE.replace(recency=0.5),
    # third round (issue 22): replies, near-empty turns, dates said relative to a record's
    # time, turn spread; session spread and supersession measured, left off
    "second": BASE.replace(replies=False, brief_factor=1.0, said_times=False, turn_spread=1.0),
    "no-replies": BASE.replace(replies=False),
    "replies-0.9": BASE.replace(reply_share=0.9),
    "no-brief": BASE.replace(brief_factor=1.0),
    "no-said": BASE.replace(said_times=False),
    "spread-0.9": BASE.replace(spread=0.9),
    "spread-0.5": BASE.replace(spread=0.5),
    "supersede-0.8": BASE.replace(supersede=0.8),
    # fifth round (issue 22): signal beyond shared words, measured and left off
    "expand": BASE.replace(expand_terms=10),                    # pseudo-relevance feedback, 10 words of the best 3
    "expand-5": BASE.replace(expand_terms=5),
    "session-weight-0.3": BASE.replace(session_weight=0.3),     # a record weighed by its session's best score
    "session-weight-0.1": BASE.replace(session_weight=0.1),
    # seventh round (issue 22): asking is not telling
    "no-ask": BASE.replace(ask_factor=1.0, ask_only_factor=1.0),  # the default before it
    "ask-only": BASE.replace(ask_factor=1.0),                     # only a record that only asks yields
    "ask-flat": BASE.replace(ask_only_factor=BASE.ask_factor),    # every asking record at ask_factor
}


def with_settings(ranking: Ranking, pairs: list[str]) -> Ranking:
    """`--set window=3 --set coverage=0`: one-off variations of a mode."""
    changes: dict[str, Any] = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        current = getattr(ranking, name.strip())
        changes[name.strip()] = (value.strip().lower() in ("1", "true", "yes") if isinstance(current, bool)
                                 else type(current)(value))
    return ranking.replace(**changes)


def ingest(service: Service, root: Path, conversation: Conversation) -> dict[int, str]:
    """Record every turn as a user prompt; return prompt id → dia id."""
    dia: dict[int, str] = {}
    cwd = str(root / conversation.sample_id)  # the project is the directory's name
    for session, turn in iter_turns(conversation):
        index = int(turn.dia_id.split(":")[1])
        outcome = service.record_event(ev.HookEvent(
            kind=ev.PROMPT, session_id=f"{conversation.sample_id}-s{session.number}", cwd=cwd,
            timestamp=session.timestamp + index,  # the session's date; turns keep their order
            hook_event_name="UserPromptSubmit", prompt=turn.content()))
        if outcome.prompt_id is None or outcome.project != conversation.sample_id:
            raise RuntimeError(f"{conversation.sample_id} {turn.dia_id}: not stored ({outcome})")
        dia[outcome.prompt_id] = turn.dia_id
    return dia


def ask(service: Service, conversations: list[Conversation], maps: dict[str, dict[int, str]],
        groups: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """Every question through nmem's search as the service is set up, scored, with latencies."""
    total = Tally()
    per_conv: dict[str, Any] = {}
    tallies: dict[str, Tally] = {}
    latencies: list[float] = []
    errors = 0
    for conv in conversations:
        # Asked the day after the conversation's last session.
        service.clock = lambda t=conv.sessions[-1].timestamp + DAY: float(t)
        tally = Tally()
        dia = maps[conv.sample_id]
        for q in conv.questions:
            t0 = time.perf_counter()
            try:
                hits = service.search(q.text, scope="prompts", project=conv.sample_id, limit=LIMIT).hits
            except QuerySyntaxError:
                hits, errors = [], errors + 1  # a question nmem could not even run counts as empty
            latencies.append((time.perf_counter() - t0) * 1000)
            tally.add(q.category, question_scores(q.evidence, [dia[int(h.record.id)] for h in hits]))
        per_conv[conv.sample_id] = {**tally.overall(), "skipped": conv.skipped}
        tallies[conv.sample_id] = tally
        total.extend(tally)
    by_group: dict[str, Any] = {}
    for name, members in (groups or {}).items():
        group = Tally()
        for member in members:
            group.extend(tallies[member])
        by_group[name] = {"conversations": members, "overall": group.overall(), "by_category": group.by_category()}
    return {"overall": total.overall(), "by_category": total.by_category(), "by_conversation": per_conv,
            "by_group": by_group, "query_errors": errors,
            "query_p50_ms": round(statistics.median(latencies), 3) if latencies else None,
            "query_p95_ms": round(percentile(latencies, 95), 3) if latencies else None}


def run(conversations: list[Conversation], ranking: Ranking, home: Path,
        groups: dict[str, list[str]] | None = None) -> dict[str, Any]:
    service = Service.open(load_settings({"NMEM_HOME": str(home)}))
    service.ranking = ranking
    try:
        started = time.perf_counter()
        maps = {c.sample_id: ingest(service, home / "projects", c) for c in conversations}
        ingest_s = time.perf_counter() - started
        answers = ask(service, conversations, maps, groups)
    finally:
        service.close()
    turns = sum(len(s.turns) for c in conversations for s in c.sessions)
    return {**answers, "turns": turns, "ingest_s": round(ingest_s, 3),
            "ingest_turns_per_s": round(turns / ingest_s, 1) if ingest_s else None}


def load(path: Path, only: list[str] | None) -> list[Conversation]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    conversations = [load_conversation(c) for c in raw]
    if only:
        known = {c.sample_id for c in conversations}
        missing = [name for name in only if name not in known]
        if missing:
            raise SystemExit(f"unknown conversation(s): {', '.join(missing)}; have {', '.join(sorted(known))}")
        conversations = [c for c in conversations if c.sample_id in only]
    return conversations


def parse_groups(parser: argparse.ArgumentParser, specs: list[str],
                 conversations: list[Conversation]) -> dict[str, list[str]]:
    """`--group NAME=ID,ID` options as {name: ids}; a usage error for an id not loaded."""
    groups: dict[str, list[str]] = {}
    for spec in specs:
        name, _, members = spec.partition("=")
        groups[name.strip()] = [m.strip() for m in members.split(",") if m.strip()]
        if not name.strip() or set(groups[name.strip()]) - {c.sample_id for c in conversations}:
            parser.error(f"--group {spec!r}: expected NAME=ID,ID of loaded conversations")
    return groups


def data_arguments(parser: argparse.ArgumentParser) -> None:
    """--data, --conversations, --group and --json, as every LoCoMo runner reads them."""
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo JSON (default: %(default)s)")
    parser.add_argument("--conversations", default="", help="comma-separated sample ids (default: all)")
    parser.add_argument("--group", action="append", default=[], metavar="NAME=ID,ID",
                        help="also report these conversations together, e.g. tune=conv-26,conv-30 (repeatable)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def read_data(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[list[Conversation],
                                                                                   dict[str, list[str]]]:
    """The conversations `data_arguments` named, and the groups of them."""
    if not args.data.exists():
        parser.error(f"no data at {args.data} (pass --data)")
    only = [c.strip() for c in args.conversations.split(",") if c.strip()]
    conversations = load(args.data, only or None)
    return conversations, parse_groups(parser, args.group, conversations)


def print_report(report: dict[str, Any]) -> None:
    cols = list(METRICS)
    print(f"LoCoMo retrieval — mode {report['mode']}, {report['turns']} turns, "
          f"{report['overall']['questions']} questions ({', '.join(report['conversations'])})")
    print(f"{'':>14}" + "".join(f"{c:>16}" for c in [*cols, "questions"]))
    rows = [("overall", report["overall"])] + [(f"category {k}", v) for k, v in report["by_category"].items()]
    rows += [(k, v) for k, v in report["by_conversation"].items()]
    rows += [(f"group {k}", v["overall"]) for k, v in report["by_group"].items()]
    for name, row in rows:
        print(f"{name:>14}" + "".join(f"{row[c]:>16.3f}" for c in cols) + f"{int(row['questions']):>16}")
    print(f"ingest {report['ingest_s']:.2f} s ({report['ingest_turns_per_s']} turns/s, one transaction per turn); "
          f"query p50 {report['query_p50_ms']:.2f} ms, p95 {report['query_p95_ms']:.2f} ms")
    m = report["machine"]
    print(f"machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, SQLite {m['sqlite']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    data_arguments(parser)
    parser.add_argument("--mode", choices=sorted(MODES), default="default", help="ranking to measure")
    parser.add_argument("--set", action="append", default=[], metavar="KNOB=VALUE",
                        help="override one field of the mode's nmem.search.rank.Ranking (repeatable)")
    args = parser.parse_args(argv)
    conversations, groups = read_data(parser, args)
    with tempfile.TemporaryDirectory(prefix="nmem-locomo-") as tmp:
        ranking = with_settings(MODES[args.mode], args.set)
        report = run(conversations, ranking, Path(tmp), groups)
    report = {"mode": args.mode, "ranking": ranking.fields(), "conversations": [c.sample_id for c in conversations],
              **report, "machine": machine()}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
