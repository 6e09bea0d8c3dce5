"""The token estimate the context budget is kept with, against counts real tokenizers gave."""

from __future__ import annotations

import json

import pytest

from fixtures.harness import FIXTURES
from nmem.util.tokens import estimate_tokens

SAMPLES = json.loads((FIXTURES / "token_counts.json").read_text(encoding="utf-8"))["samples"]


@pytest.mark.parametrize("sample", SAMPLES, ids=[f"{s['kind']}-{i}" for i, s in enumerate(SAMPLES)])
def test_estimate_is_close_to_real_tokenizers(sample: dict[str, object]) -> None:
    text = str(sample["text"])
    ratio = estimate_tokens(text) / int(sample["claude"])  # type: ignore[call-overload]
    if sample["kind"] == "context block":
        # a budget must not be overrun: on the block itself the estimate errs high, a little
        assert 1.0 <= ratio <= 1.1, ratio
        assert estimate_tokens(text) >= int(sample["cl100k"])  # type: ignore[call-overload]
    else:
        assert 0.85 <= ratio <= 1.15, ratio


def test_estimate_counts_what_tokenizers_split() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("hello") == 2                      # a word: 1.3
    assert estimate_tokens("hello world") == 3                # 2.6
    assert estimate_tokens("internationalization") == 5      # 1.3 + 14 letters past the sixth x 0.2 = 4.1
    assert estimate_tokens("1234567") == 5                    # three digit groups: 4.5
    assert estimate_tokens("a.b") == 4                        # 1.3 + 0.5 + 1.3
    assert estimate_tokens("✓ ✗ →") == 3                      # non-ASCII characters: 1 each
    assert estimate_tokens("édition") < estimate_tokens("é d i t i o n")
    assert estimate_tokens("x\n" * 10) == estimate_tokens("x\n" * 5) * 2
