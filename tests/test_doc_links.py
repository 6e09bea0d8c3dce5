"""Every relative link in the README and the docs leads somewhere: the file exists and, for a
`#fragment` into a Markdown file, one of its headings has that anchor (as GitHub derives it).
Docs get split and headings renamed; this fails on the link left behind."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"#{1,6}\s+(.*)")


def documents() -> list[Path]:
    return [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def prose(path: Path) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces made hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose(path):
        if match := HEADING.match(line):
            name = slug(match.group(1))
            n = seen.get(name, 0)
            seen[name] = n + 1
            found.add(name if n == 0 else f"{name}-{n}")   # a repeated heading gets -1, -2, …
    return found


def broken(path: Path, root: Path = ROOT) -> list[str]:
    out = []
    for number, line in prose(path):
        for target in LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue  # http:, mailto: …: not ours to check offline
            file, _, fragment = target.partition("#")
            dest = (path.parent / file) if file else path
            where = f"{path.relative_to(root)}:{number}: {target}"
            if not dest.exists():
                out.append(f"{where} (no such file)")
            elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                out.append(f"{where} (no heading #{fragment} in {dest.relative_to(root)})")
    return out


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    assert broken(path) == []


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Where `it` goes, and why\n\n[ok](#where-it-goes-and-why) [gone](b.md) "
                                   "[moved](a.md#old-name)\n```\n[in code](nowhere.md)\n```\n")
    assert broken(tmp_path / "a.md", tmp_path) == ["a.md:3: b.md (no such file)",
                                         "a.md:3: a.md#old-name (no heading #old-name in a.md)"]
