"""Small trails and store views shared by the search-read tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nmem.service.api import Service

T0 = 1_790_000_000


def chat_trail(service: Service, words: Sequence[str], sessions: int = 6, turns: int = 12) -> None:
    """Sessions where each user prompt is answered by the agent, a word said on both sides."""
    store = service.store
    with store.transaction():
        for w in range(sessions):
            sid = f"chat-{w}"
            store.ensure_session(sid, f"proj{w % 3}", T0 + w)
            for i in range(1, turns + 1):
                word = words[(w + i) % len(words)]
                store.add_prompt(sid, T0 + 100 * i + w, "user", f"what about the {word} step, turn {i}?")
                store.add_prompt(sid, T0 + 100 * i + w + 5, "agent", f"the {word} step of turn {i} is done")


class Without:
    """A store without some of its reads (`Without(store, "prompt_turns")`): the service then takes
    the way it takes on an engine that has none, so the two ways can be compared on one store."""

    def __init__(self, store: Any, *hidden: str) -> None:
        self._store = store
        self._hidden = frozenset(hidden)

    def __getattr__(self, name: str) -> Any:
        if name in self._hidden:
            raise AttributeError(name)
        return getattr(self._store, name)
