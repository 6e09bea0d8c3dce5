"""Cutting text at word and sentence boundaries: summaries, intents and closing messages."""

from __future__ import annotations

from nmem.capture.summary import summarize
from nmem.text import clip, gist


def test_clip_cuts_at_a_word_boundary_on_one_line() -> None:
    assert clip("short  text\nhere", 40) == "short text here"
    assert clip("the quick brown fox jumps over the lazy dog", 20) == "the quick brown fox…"
    assert len(clip("the quick brown fox jumps over the lazy dog", 20)) <= 20
    assert clip("alpha, beta, gamma, delta", 14) == "alpha, beta…", "no dangling comma"
    # one long token (a path, a hash) is cut inside rather than shown as a bare ellipsis
    path = "/home/dev/code/project/src/very/deeply/nested/module/name.py"
    assert clip(path, 30) == path[:29] + "…"


def test_gist_keeps_whole_opening_sentences() -> None:
    message = ("Fixed the redirect in login.py; org accounts land on their dashboard now. "
               "The login tests pass. I also looked at the signup flow, which has the same bug in two places.")
    assert gist(message, 120) == ("Fixed the redirect in login.py; org accounts land on their dashboard now. "
                                  "The login tests pass.")
    assert gist(message, 1000) == message


def test_gist_stops_where_the_prose_ends_and_drops_markup() -> None:
    message = ("## Summary\n\nI **fixed** the bug.\n\nIt was a race.\n\n"
               "Changes:\n- a.py\n- b.py\n\nMore prose after the list.")
    assert gist(message, 300) == "Summary I fixed the bug. It was a race."
    assert gist("- only\n- a list", 300) == "only a list"


def test_gist_of_one_long_sentence_is_clipped_at_a_word() -> None:
    sentence = "This sentence goes on " + "and on " * 40 + "until it ends."
    said = gist(sentence, 100)
    assert len(said) <= 100 and said.endswith("…") and sentence.startswith(said[:-1])


def test_summaries_cut_lines_at_word_boundaries() -> None:
    prompt = "please make the invoice exporter stream rows instead of building the whole file in memory " * 2
    command = "python -m billing.export --from 2026-01-01 --to 2026-12-31 --format csv --output " + "x" * 60
    summary = summarize([("command", None, command, 1), ("file_edit", "/r/a.py", "/r/a.py", 1),
                         ("file_error", "/r/b.py", "/r/b.py", 1), ("command_error", None, "make lint\nE1", 1)],
                        [(1, "user", prompt)])
    (intent,) = summary["intents"]
    assert intent.endswith("…") and len(intent) <= 120 and prompt.startswith(intent[:-1])
    assert prompt[len(intent) - 1] == " ", "cut before a word, not inside it"
    (shown,) = summary["commands"]
    assert shown.endswith("…") and command.startswith(shown[:-1].rstrip())
    assert summary["files_changed"] == ["/r/a.py"], "a failed edit is no change"
    assert summary["errors"] == ["failed: /r/b.py", "make lint"]
