"""Query analysis: lexical terms, entity look-up names, and current-state wording."""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise

_WORD = re.compile(r"\w+", re.UNICODE)
_CURRENT_STATE = re.compile(
    r"\b(current(ly)?|now|latest|today|these days|right now|at the moment|nowadays)\b",
    re.IGNORECASE,
)
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "she",
        "he",
        "so",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "too",
        "us",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "about",
        "am",
        "any",
        "all",
        "also",
        "just",
        "than",
    ]
)


@dataclass(frozen=True, slots=True)
class QueryAnalysis:
    terms: tuple[str, ...]
    entity_names: tuple[str, ...]
    current_state: bool


def analyze_query(query: str) -> QueryAnalysis:
    """Lowercased content words for BM25, unigrams and bigrams for entity look-up."""
    words = [w.lower() for w in _WORD.findall(query)]
    content = [w for w in words if w not in STOPWORDS]
    terms = tuple(dict.fromkeys(content or words))
    bigrams = [f"{a} {b}" for a, b in pairwise(words)]
    names = tuple(dict.fromkeys([*content, *bigrams]))
    return QueryAnalysis(
        terms=terms, entity_names=names, current_state=bool(_CURRENT_STATE.search(query))
    )


_CAPITALISED = re.compile(r"\b[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*")
_NOT_NAMES = frozenset(
    [
        "the",
        "a",
        "an",
        "i",
        "it",
        "we",
        "you",
        "he",
        "she",
        "they",
        "this",
        "that",
        "these",
        "those",
        "what",
        "which",
        "who",
        "when",
        "where",
        "why",
        "how",
        "yes",
        "no",
        "ok",
        "my",
        "our",
        "your",
        "his",
        "her",
        "their",
        "is",
        "are",
        "was",
        "were",
        "do",
        "does",
        "did",
        "can",
        "will",
    ]
)


_RUN_NAMES: dict[str, tuple[str, ...]] = {}  # a capitalised run's names (runs repeat a lot)
_RUN_NAMES_LIMIT = 100_000


def _run_names(run: str) -> tuple[str, ...]:
    """The names one capitalised run gives: its lowercased words but the stop words, and
    their phrase when there are several."""
    found = _RUN_NAMES.get(run)
    if found is None:
        words = [w for w in (w.lower() for w in run.split()) if w not in _NOT_NAMES]
        found = (*words, " ".join(words)) if len(words) > 1 else tuple(words)
        if len(_RUN_NAMES) < _RUN_NAMES_LIMIT:
            _RUN_NAMES[run] = found
    return found


def extract_entities(content: str, explicit: object = None) -> list[str]:
    """Deterministic entity names: capitalised words and runs, plus ``metadata["entities"]``."""
    names: set[str] = set()
    for run in _CAPITALISED.findall(content):
        names.update(_run_names(run))
    if isinstance(explicit, list | tuple):
        names.update(str(e).strip().lower() for e in explicit if str(e).strip())
    return sorted(names)
