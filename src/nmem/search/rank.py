"""Ranking of plain-language searches (placeholder while levers are measured)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Ranking:
    candidates: int = 0
