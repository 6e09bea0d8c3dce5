"""`make attack`: every hostile scenario of the trust review, replayed against real nmem parts.

Each area lives in a module of its own beside this one (`attack_team.py`, `attack_sync.py`,
`attack_input.py`, `attack_secrets.py`) and yields `Row`s from `scenarios(work, quick)`: what
was tried, and how much of it was lost (acknowledged writes that did not survive), leaked
(private or secret text seen by someone who must not see it, or found on disk), or ended in an
error that is not the clear refusal the scenario expects (a crash, a hang, a 500, a traceback).
Every column but `tried` must be zero.

    .venv/bin/python bench/attack.py                 # every area
    .venv/bin/python bench/attack.py --area sync     # one area
    .venv/bin/python bench/attack.py --quick --json  # the small run the tests use
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

AREAS = ("team", "sync", "input", "secrets")


@dataclass
class Row:
    area: str
    scenario: str
    tried: int
    lost: int = 0
    leaked: int = 0
    errors: int = 0
    note: str = ""

    @property
    def clean(self) -> bool:
        return self.lost == 0 and self.leaked == 0 and self.errors == 0


def run_area(area: str, work: Path, quick: bool) -> Iterator[Row]:
    sys.path.insert(0, str(Path(__file__).parent))
    module = importlib.import_module(f"attack_{area}")
    yield from module.scenarios(work, quick)


def table(rows: list[Row]) -> str:
    head = ["area", "scenario", "tried", "lost", "leaked", "errors", "note"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r.area} | {r.scenario} | {r.tried} | {r.lost} | {r.leaked} | {r.errors} | {r.note} |")
    total = [sum(getattr(r, c) for r in rows) for c in ("tried", "lost", "leaked", "errors")]
    lines.append(f"| **all** | {len(rows)} scenarios | {total[0]} | {total[1]} | {total[2]} | {total[3]} | |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--area", choices=AREAS, action="append", help="run only this area (repeatable)")
    parser.add_argument("--quick", action="store_true", help="small sizes, as the tests run it")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="nmem-attack-") as tmp:
        for area in args.area or AREAS:
            work = Path(tmp) / area
            work.mkdir()
            started = time.monotonic()
            for row in run_area(area, work, args.quick):
                rows.append(row)
                print(f"done: {row.area}/{row.scenario}", file=sys.stderr)
            print(f"area {area}: {time.monotonic() - started:.1f} s", file=sys.stderr)
    if args.json:
        print(json.dumps([asdict(r) for r in rows], indent=2))
    else:
        load = os.getloadavg()
        print(f"nmem attack scenarios: python {sys.version.split()[0]}, {os.cpu_count()} cores, "
              f"load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}\n")
        print(table(rows))
    return 0 if all(r.clean for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
