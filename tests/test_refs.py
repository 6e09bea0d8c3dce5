"""The syntax of the ids nmem prints (`nmem.refs.parse_ref`)."""

from __future__ import annotations

import pytest

from nmem.errors import InvalidArgument
from nmem.refs import MEMORY, OBSERVATION, PROMPT, SESSION, Ref, parse_ref

ULID = "01J9Z8Y7X6W5V4T3S2R1Q0P9N8"


@pytest.mark.parametrize(("text", "expected"), [
    ("42", Ref(OBSERVATION, 42, "42")),
    (" o42 ", Ref(OBSERVATION, 42, "o42")),
    ("#42", Ref(OBSERVATION, 42, "#42")),
    ("p42", Ref(PROMPT, 42, "p42")),
    ("P42", Ref(PROMPT, 42, "P42")),
    ("s1a2b3c4d", Ref(SESSION, "1a2b3c4d", "s1a2b3c4d", prefix=True)),
    ("d4f8a2b1-9c3e-4f00-8a11-0123456789ab", Ref(SESSION, "d4f8a2b1-9c3e-4f00-8a11-0123456789ab",
                                                 "d4f8a2b1-9c3e-4f00-8a11-0123456789ab")),
    (ULID, Ref(MEMORY, ULID, ULID)),
    (ULID.lower(), Ref(MEMORY, ULID, ULID.lower())),
    ("nmem://project:web/observations/7", Ref(OBSERVATION, 7, "nmem://project:web/observations/7", "web")),
    ("nmem://project%3Aweb/prompts/7", Ref(PROMPT, 7, "nmem://project%3Aweb/prompts/7", "web")),
    ("nmem://project:web/sessions/abc", Ref(SESSION, "abc", "nmem://project:web/sessions/abc", "web")),
    (f"nmem://user/learnings/{ULID}", Ref(MEMORY, f"nmem://user/learnings/{ULID}", f"nmem://user/learnings/{ULID}")),
    # a memory namespace called "observations" outside a project domain stays a memory
    (f"nmem://user/observations/{ULID}", Ref(MEMORY, f"nmem://user/observations/{ULID}",
                                              f"nmem://user/observations/{ULID}")),
])
def test_parse_ref(text: str, expected: Ref) -> None:
    assert parse_ref(text) == expected


@pytest.mark.parametrize("text", ["", "  ", "nmem://project:web", "nmem://project:web/observations",
                                  "nmem://project:web/prompts/seven"])
def test_malformed_refs_are_invalid_arguments(text: str) -> None:
    with pytest.raises(InvalidArgument):
        parse_ref(text)
