"""Entity names of stored memories: the same names whether a capitalised run was seen before."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from prme.retrieval import query
from prme.retrieval.query import extract_entities


def _definition(content: str, explicit: object = None) -> list[str]:
    """The names from the definition, run by run (no cache)."""
    names: set[str] = set()
    for run in re.findall(r"\b[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*", content):
        words = [w.lower() for w in run.split() if w.lower() not in query._NOT_NAMES]
        names.update(words)
        if len(words) > 1:
            names.add(" ".join(words))
    if isinstance(explicit, list | tuple):
        names.update(str(e).strip().lower() for e in explicit if str(e).strip())
    return sorted(names)


def test_names_of_runs_words_and_explicit_entities() -> None:
    text = "Chen Wei met The Dana Okafor in Lisbon. What about Basalt? It rains."
    expected = ["basalt", "chen", "chen wei", "dana", "dana okafor", "lisbon", "okafor", "wei"]
    assert extract_entities(text) == expected
    assert extract_entities(text) == expected  # the runs' names now come from the cache
    assert extract_entities("no names here", [" Aster ", "", "X Y"]) == ["aster", "x y"]
    assert extract_entities("The It What") == []


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(["Aster", "The", "chen", "Chen", "WEI", "It's", "x-Ray", "Ä", "é", "  "])
        | st.text(max_size=6),
        max_size=12,
    ),
    st.none() | st.lists(st.text(max_size=5), max_size=3),
)
def test_names_equal_the_definition(words: list[str], explicit: list[str] | None) -> None:
    text = " ".join(words)
    assert extract_entities(text, explicit) == _definition(text, explicit)
    assert extract_entities(text, explicit) == _definition(text, explicit)
