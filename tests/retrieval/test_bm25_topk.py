"""The lexical channel's top-k (prme.index.bm25_topk, through prme.index.lexical.ranked) is exactly
what scoring every matching document gives: the same positions, the same scores bit for bit,
the same order (score descending, then position), whatever the phrases (multi-token, repeated
tokens, repeated phrases, tokens no row holds), the scope, ``k`` and the segments; and with
pruning off, or counts placed either way, too."""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt
from hypothesis import given, settings
from hypothesis import strategies as st

from prme.index import bm25_topk
from prme.index.bm25 import bm25_idf, bm25_scores
from prme.index.lexical import ranked
from prme.index.postings import OwnerPostings, Vocabulary

WORDS = ["a", "b", "c", "d", "e", "f"]  # few tokens and short rows: many ties and phrase hits


def built(docs: list[list[str]], sizes: list[int]) -> OwnerPostings:
    """The postings of ``docs`` appended in batches of ``sizes`` (tokens ascending, each
    token's instances by position then offset, as FTS5's vocabulary tables list them)."""
    postings = OwnerPostings(Vocabulary())
    for size in sizes:
        start = postings.size
        found: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for i, tokens in enumerate(docs[start : start + size]):
            for offset, token in enumerate(tokens):
                found[token].append((start + i, offset))
        tokens = sorted(found)
        pairs = [p for t in tokens for p in found[t]]
        postings = postings.appended(
            start + size,
            tokens,
            np.asarray([len(found[t]) for t in tokens], np.int64),
            np.asarray([p for p, _ in pairs], np.int64),
            np.asarray([o for _, o in pairs], np.int64),
        )
    assert postings.size == len(docs)
    return postings


def reference(
    docs: list[list[str]],
    in_scope: npt.NDArray[np.bool_],
    phrases: Sequence[tuple[str, ...]],
    k: int,
) -> tuple[list[int], bytes]:
    """Every matching in-scope row scored, from the rows' tokens themselves."""
    n = len(docs)
    doc_len = np.asarray([len(d) for d in docs], np.int64)
    per_phrase: list[Counter[int]] = []
    for tokens in phrases:
        if not tokens:
            continue
        counts: Counter[int] = Counter()
        for row, words in enumerate(docs):
            for at in range(len(words) - len(tokens) + 1):
                if tuple(words[at : at + len(tokens)]) == tokens:
                    counts[row] += 1
        per_phrase.append(counts)
    pool = np.asarray(sorted({d for c in per_phrase for d in c if in_scope[d]}), np.int64)
    if pool.size == 0 or k <= 0:
        return [], b""
    idfs = [bm25_idf(n, len(c)) for c in per_phrase]
    frequencies = [np.asarray([c[d] for d in pool.tolist()], np.float64) for c in per_phrase]
    avgdl = float(doc_len.sum()) / float(n)
    scores = bm25_scores(idfs, frequencies, doc_len[pool].astype(np.float64), avgdl)
    order = np.lexsort((pool, -scores))[:k]
    return pool[order].tolist(), scores[order].tobytes()


def found(
    postings: OwnerPostings,
    docs: list[list[str]],
    in_scope: npt.NDArray[np.bool_],
    phrases: Sequence[tuple[str, ...]],
    k: int,
    shortest: int | None,
) -> tuple[list[int], bytes]:
    doc_len = np.asarray([len(d) for d in docs], np.int64)
    positions, scores = ranked(
        postings, doc_len, int(doc_len.sum()), in_scope, phrases, k, shortest
    )
    assert positions.dtype == np.int64 and scores.dtype == np.float64
    return positions.tolist(), scores.tobytes()


rows = st.lists(st.lists(st.sampled_from(WORDS), max_size=9), min_size=1, max_size=120)
phrase = st.lists(st.sampled_from([*WORDS, "absent"]), min_size=0, max_size=3).map(tuple)
KNOBS = ("MAX_PRUNED_PHRASES", "PLACE_BY_SEARCH", "SCORE_ALL")
DEFAULTS = tuple(getattr(bm25_topk, name) for name in KNOBS)
MODES = [
    DEFAULTS,  # (generated owners are small: every match scored)
    (10, bm25_topk.PLACE_BY_SEARCH, 0),  # pruned however few match
    (0, bm25_topk.PLACE_BY_SEARCH, 0),  # every match scored: too many phrases to prune
    (10, 0, 0),  # pruned; counts always found by binary search
    (10, 10**9, 0),  # pruned; counts always placed through the map
]


@contextmanager
def knobs(values: tuple[int, ...]) -> Iterator[None]:
    """bm25_topk's thresholds set to ``values`` (:data:`KNOBS`) for a while."""
    saved = tuple(getattr(bm25_topk, name) for name in KNOBS)
    for name, value in zip(KNOBS, values, strict=True):
        setattr(bm25_topk, name, value)
    try:
        yield
    finally:
        for name, value in zip(KNOBS, saved, strict=True):
            setattr(bm25_topk, name, value)


@settings(max_examples=300, deadline=None)
@given(
    docs=rows,
    phrases=st.lists(phrase, min_size=1, max_size=12),
    k=st.sampled_from([1, 2, 3, 5, 8, 40, 1000]),
    scope_seed=st.integers(0, 2**32 - 1),
    scoped=st.booleans(),
    batches=st.integers(1, 9),
    mode=st.sampled_from(MODES),
    give_shortest=st.booleans(),
)
def test_top_k_is_scoring_every_match(
    docs: list[list[str]],
    phrases: list[tuple[str, ...]],
    k: int,
    scope_seed: int,
    scoped: bool,
    batches: int,
    mode: tuple[int, ...],
    give_shortest: bool,
) -> None:
    rng = np.random.default_rng(scope_seed)
    in_scope = rng.random(len(docs)) < 0.6 if scoped else np.ones(len(docs), np.bool_)
    step = max(1, len(docs) // batches)
    sizes = [min(step, len(docs) - s) for s in range(0, len(docs), step)]
    postings = built(docs, sizes)
    shortest = min(len(d) for d in docs) if give_shortest else None
    with knobs(mode):
        assert found(postings, docs, in_scope, phrases, k, shortest) == reference(
            docs, in_scope, phrases, k
        )
        # a view of fewer rows (a snapshot) ranks only those, with their statistics
        size = max(1, len(docs) * 2 // 3)
        assert found(postings.upto(size), docs[:size], in_scope[:size], phrases, k, None) == (
            reference(docs[:size], in_scope[:size], phrases, k)
        )


def test_ties_at_the_kth_score_are_broken_by_position() -> None:
    # 300 identical rows and a few better ones: the k-th best is tied with hundreds
    docs = [["a", "b", "c"]] * 300 + [["a", "a", "b"]] * 3 + [["c"]] * 50
    postings = built(docs, [100, 150, 53, 50])
    everything = np.ones(len(docs), np.bool_)
    for k, mode, phrases in itertools.product(
        (1, 3, 4, 10, 299, 303, 500),
        MODES,
        ([("a",)], [("a",), ("b",)], [("a", "b"), ("c",)], [("a",), ("a",)]),
    ):
        want = reference(docs, everything, phrases, k)
        with knobs(mode):
            assert found(postings, docs, everything, phrases, k, None) == want
            assert len(want[0]) == min(k, 353 if ("c",) in phrases else 303)


def test_a_larger_owner_with_common_and_rare_tokens() -> None:
    rng = np.random.default_rng(17)
    words = [f"t{i}" for i in range(40)]
    weights = 1.0 / np.arange(1, 41)  # a few common tokens, many rare ones
    weights /= weights.sum()
    docs = [
        [str(w) for w in rng.choice(words, size=int(rng.integers(0, 14)), p=weights)]
        for _ in range(3000)
    ]
    postings = built(docs, [1024, 1024, 512, 256, 184])
    in_scope = rng.random(len(docs)) < 0.7
    for trial in range(40):
        count = int(rng.integers(1, 12))
        phrases = [
            tuple(str(w) for w in rng.choice(words, size=int(rng.integers(1, 3)), p=weights))
            for _ in range(count)
        ]
        scope = in_scope if trial % 2 else np.ones(len(docs), np.bool_)
        for k, mode in itertools.product((1, 10, 500), MODES):
            with knobs(mode):
                got = found(postings, docs, scope, phrases, k, None)
            assert got == reference(docs, scope, phrases, k), (phrases, k, mode)


def test_scoring_any_pool_is_the_reference_arithmetic() -> None:
    rng = np.random.default_rng(3)
    docs_a = np.flatnonzero(rng.random(5000) < 0.3)
    docs_b = np.flatnonzero(rng.random(5000) < 0.01)
    per_phrase: list[Any] = [
        (docs_a.astype(np.int32), rng.integers(1, 4, docs_a.size).astype(np.int32)),
        (docs_b.astype(np.int32), rng.integers(1, 4, docs_b.size).astype(np.int32)),
    ]
    doc_len = rng.integers(1, 30, 5000)
    idfs = [bm25_idf(5000, docs_a.size), bm25_idf(5000, docs_b.size)]
    pool = np.union1d(docs_a[::7], docs_b).astype(np.int64)
    frequencies = []
    for docs, freqs in per_phrase:
        counts = dict(zip(docs.tolist(), freqs.tolist(), strict=True))
        frequencies.append(np.asarray([counts.get(d, 0) for d in pool.tolist()], np.float64))
    want = bm25_scores(idfs, frequencies, doc_len[pool].astype(np.float64), 15.5)
    for search in (0, 16, 10**9):
        with knobs((10, search, 0)):
            got = bm25_topk.exact_scores(pool, per_phrase, idfs, doc_len, 15.5)
        assert got.tobytes() == want.tobytes()
