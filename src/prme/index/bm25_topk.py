"""The ``k`` best documents by BM25 (:mod:`prme.index.bm25`) for the OR of a query's phrases,
exactly as scoring every matching document would rank them, without scoring them all.

Each phrase's term of a score is at most its *bound*: its term for the phrase's largest
instance count in a document and the owner's shortest document (the term grows with the count
and shrinks with the length, also as rounded), so a document matching a set of phrases scores
at most the sum of their bounds (in query order, as the score is summed). Each matching
document's set is marked in a per-thread array of the owner's size (a bit per phrase), which
gives every matching document once, with its bound. The documents with the highest bounds, at
least ``k`` in scope, are scored exactly; the ``k``-th best of those scores, ``θ``, is at most
the ``k``-th best of all. A document whose bound is below ``θ`` scores below it, so it can
neither be among the ``k`` best nor tie with the last of them: only the documents bounded by
``θ`` or more are scored, with the same arithmetic, and ranked by score then position.

A query of many phrases (more than :data:`MAX_PRUNED_PHRASES`) scores every matching document.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from prme.index.bm25 import bm25_contributions, bm25_idf, bm25_norms, bm25_scores

MAX_PRUNED_PHRASES = 10  # the bounds of every set of phrases: a table of 2**10 entries
BOUND_SLACK = 1.0 + 1e-9  # each bound raised a little more (bounds need only be bounds)
PLACE_BY_SEARCH = 16  # a phrase of 16 times the pool's size is searched, not mapped

# A phrase's documents (positions, ascending) and its instance count in each.
PhraseDocuments = tuple[npt.NDArray[Any], npt.NDArray[Any]]
Ranked = tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]

_local = threading.local()


def _scratch(size: int) -> npt.NDArray[np.int32]:
    """This thread's array of at least ``size`` zeros (callers leave it zeroed)."""
    found: npt.NDArray[np.int32] | None = getattr(_local, "scratch", None)
    if found is None or len(found) < size:
        grown = max(size, 2 * len(found) if found is not None else 0)
        found = _local.scratch = np.zeros(grown, dtype=np.int32)
    return found


def top_k(
    per_phrase: Sequence[PhraseDocuments],
    n_docs: int,
    doc_len: npt.NDArray[Any],
    avgdl: float,
    shortest: int,
    in_scope: npt.NDArray[np.bool_],
    k: int,
) -> Ranked:
    """The ``k`` best in-scope positions for the OR of the phrases (in query order) and their
    BM25 scores, by score descending then position.

    Args:
        per_phrase: each phrase's documents, over positions ``[0, n_docs)``.
        n_docs: the owner's document count (the idf's ``N``).
        doc_len: each position's token count; ``avgdl``: their mean.
        shortest: the smallest token count of any position.
        in_scope: the positions that may be returned.
        k: how many.
    """
    idfs = [bm25_idf(n_docs, len(docs)) for docs, _ in per_phrase]
    if k <= 0 or not any(len(docs) for docs, _ in per_phrase):
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    if len(per_phrase) > MAX_PRUNED_PHRASES:
        pool = np.unique(np.concatenate([docs for docs, _ in per_phrase])).astype(np.int64)
        pool = pool[in_scope[pool]]
        scores = exact_scores(pool, per_phrase, idfs, doc_len, avgdl)
    else:
        bounds = phrase_set_bounds(per_phrase, idfs, avgdl, shortest)
        pool, scores = _pruned(per_phrase, idfs, bounds, doc_len, avgdl, in_scope, k)
    order = best(scores, k)
    return pool[order], scores[order]


def phrase_set_bounds(
    per_phrase: Sequence[PhraseDocuments], idfs: Sequence[float], avgdl: float, shortest: int
) -> npt.NDArray[np.float64]:
    """The bound of a document's score for each set of phrases it matches (entry ``s``: the
    phrases whose bits ``s`` sets), summed in query order with 0.0 for the others."""
    norm = bm25_norms(np.asarray([shortest], dtype=np.float64), avgdl)
    sets = np.arange(1 << len(per_phrase), dtype=np.int64)
    table = np.zeros(len(sets), dtype=np.float64)
    for j, ((docs, freqs), idf) in enumerate(zip(per_phrase, idfs, strict=True)):
        if len(docs):
            most = np.asarray([freqs.max()], dtype=np.float64)
            bound = float(bm25_contributions(idf, most, norm)[0]) * BOUND_SLACK
            table += np.where(sets & (1 << j), bound, 0.0)
    return table


def _marked(
    per_phrase: Sequence[PhraseDocuments], in_scope: npt.NDArray[np.bool_]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """Every in-scope matching document once (in no particular order) and the set of
    phrases it matches (a bit per phrase)."""
    marks = _scratch(len(in_scope))
    documents: list[npt.NDArray[Any]] = []
    sets: list[npt.NDArray[np.int32]] = []
    try:
        for j, (docs, _) in enumerate(per_phrase):
            marks[docs] |= np.int32(1 << j)
        for j, (docs, _) in enumerate(per_phrase):
            found = marks[docs]
            first = (found & np.int32((1 << j) - 1)) == 0  # not marked by an earlier phrase
            documents.append(docs[first])
            sets.append(found[first])
    finally:
        for docs, _ in per_phrase:
            marks[docs] = 0
    matched = np.concatenate(documents).astype(np.int64)
    held = np.concatenate(sets)
    keep = in_scope[matched]
    return matched[keep], held[keep]


def _pruned(
    per_phrase: Sequence[PhraseDocuments],
    idfs: Sequence[float],
    table: npt.NDArray[np.float64],
    doc_len: npt.NDArray[Any],
    avgdl: float,
    in_scope: npt.NDArray[np.bool_],
    k: int,
) -> Ranked:
    """The documents that may be among the ``k`` best (every one bounded by ``θ`` or more,
    see the module), ascending, and their exact scores."""
    matched, sets = _marked(per_phrase, in_scope)
    if matched.size <= k:
        pool = np.sort(matched)
        return pool, exact_scores(pool, per_phrase, idfs, doc_len, avgdl)
    bounds = table[sets]
    # the highest bound level with at least k documents bounded by it or more
    levels = np.argsort(-table, kind="stable")
    reached = np.cumsum(np.bincount(sets, minlength=len(table))[levels])
    level = table[levels[int(np.searchsorted(reached, k))]]
    seeded = np.flatnonzero(bounds >= level)
    seeded = seeded[np.argsort(matched[seeded], kind="stable")]
    seed = matched[seeded]
    seed_scores = exact_scores(seed, per_phrase, idfs, doc_len, avgdl)
    theta = np.partition(seed_scores, seed.size - k)[seed.size - k]
    if theta >= level:  # every document bounded by θ is in the seed
        keep = bounds[seeded] >= theta
        return seed[keep], seed_scores[keep]
    pool = np.sort(matched[bounds >= theta])
    return pool, exact_scores(pool, per_phrase, idfs, doc_len, avgdl)


def exact_scores(
    pool: npt.NDArray[np.int64],
    per_phrase: Sequence[PhraseDocuments],
    idfs: Sequence[float],
    doc_len: npt.NDArray[Any],
    avgdl: float,
) -> npt.NDArray[np.float64]:
    """The BM25 score of each document of ``pool`` (ascending), as
    :func:`prme.index.bm25.bm25_scores` gives it: each phrase's instance count in each (0.0
    where it does not match) found by binary search, or, for a phrase much longer than the
    pool, through a map of the positions (this thread's scratch array)."""
    frequencies = []
    for docs, freqs in per_phrase:
        counts = np.zeros(pool.size, dtype=np.float64)
        if len(docs) and pool.size:
            if len(docs) > PLACE_BY_SEARCH * pool.size:
                at = np.searchsorted(docs, pool)
                inside = at < len(docs)
                hit = np.zeros(pool.size, dtype=np.bool_)
                hit[inside] = docs[at[inside]] == pool[inside]
                counts[hit] = freqs[at[hit]]
            else:
                _place(counts, pool, docs, freqs)
        frequencies.append(counts)
    return bm25_scores(idfs, frequencies, doc_len[pool].astype(np.float64), avgdl)


def _place(
    counts: npt.NDArray[np.float64],
    pool: npt.NDArray[np.int64],
    docs: npt.NDArray[Any],
    freqs: npt.NDArray[Any],
) -> None:
    """``counts[i] = freqs[j]`` where ``pool[i] == docs[j]``, through the scratch array."""
    places = _scratch(int(max(pool[-1], docs[-1])) + 1)
    try:
        places[pool] = np.arange(1, pool.size + 1, dtype=np.int32)
        at = places[docs]
        hit = at > 0
        counts[at[hit] - 1] = freqs[hit]
    finally:
        places[pool] = 0


def best(scores: npt.NDArray[np.float64], k: int) -> npt.NDArray[np.int64]:
    """The indexes of the ``k`` best scores, best first, then by index (pools are in position
    order, hence rowid order): the ``k``-th best score bounds the candidates, so only they are
    sorted."""
    if k < scores.size:
        bound = np.partition(scores, scores.size - k)[scores.size - k]
        candidates = np.flatnonzero(scores >= bound)  # the k best, and any tied with the last
        order: npt.NDArray[np.int64] = candidates[
            np.argsort(-scores[candidates], kind="stable")[:k]
        ]
        return order
    return np.argsort(-scores, kind="stable")
