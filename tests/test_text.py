"""Word runs and marks: the ASCII fast path finds exactly what the regular expressions find."""

from __future__ import annotations

import re

from hypothesis import example, given
from hypothesis import strategies as st

from prme.text import count_words_and_marks, word_runs

_ASCII = st.text(alphabet=st.characters(max_codepoint=127), max_size=120)
_ANY = st.text(max_size=60)


@given(_ASCII | _ANY)
@example("\x1c\x1d\x1e\x1f x\x0bq\x0c_")  # ASCII whitespace that only Unicode \s knows
@example("[2026-09-01] it's, \u00e9t\u00e9 \u212a")
def test_words_and_marks_are_what_the_pattern_finds(text: str) -> None:
    assert count_words_and_marks(text) == len(re.findall(r"\w+|[^\w\s]", text))


@given(_ASCII | _ANY)
@example("a_b-c\x1fd\x7f")
def test_word_runs_are_what_the_pattern_finds(text: str) -> None:
    assert word_runs(text) == re.findall(r"\w+", text)
