"""The ``k`` best documents by BM25 (:mod:`prme.index.bm25`) for the OR of a query's phrases,
exactly as scoring every matching document would rank them, without scoring them all.

A phrase's term of a score grows with its instance count and shrinks as the document grows,
also as rounded (each operation is monotonic), so a document's score is at most its *bound*:
the sum, in query order as the score is summed, of each phrase it matches's term for a count
of 1 (or the phrase's largest count, where it matches more than once) and the document's own
length — or, for a *set bound* over every document matching the same phrases, the owner's
shortest length and each phrase's largest count. Each matching document's phrases are marked in
a per-thread array of the owner's size (two bits per phrase: matched, matched more than once),
which gives every matching document once. The documents of the highest set bounds (at least
``k`` in scope) give the ``k`` of highest bounds, which are scored exactly; the least of those
scores, ``θ``, is at most the ``k``-th best of all. A document bounded below ``θ`` scores
below it, so it can neither be among the ``k`` best nor tie with the last of them: only the
documents bounded by ``θ`` or more are scored, with the same arithmetic as scoring every one
(:func:`prme.index.bm25.bm25_scores`), and ranked by score then position.

Few matching documents (up to :data:`SCORE_ALL`), or a query of many phrases (more than
:data:`MAX_PRUNED_PHRASES`), are all scored.
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
SCORE_ALL = 16384  # as few matching documents are all scored (bounding them costs more)
PLACE_BY_SEARCH = 4  # a phrase of 4 times the pool's size is searched, not mapped

# A phrase's documents (positions, ascending) and its instance count in each.
PhraseDocuments = tuple[npt.NDArray[Any], npt.NDArray[Any]]
Ranked = tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]

_local = threading.local()


def _scratch(name: str, size: int, dtype: type[np.integer[Any]]) -> npt.NDArray[Any]:
    """This thread's array ``name`` of at least ``size`` zeros (callers leave it zeroed)."""
    found: npt.NDArray[Any] | None = getattr(_local, name, None)
    if found is None or len(found) < size:
        grown = max(size, 2 * len(found) if found is not None else 0)
        found = np.zeros(grown, dtype=dtype)
        setattr(_local, name, found)
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
        pool, scores = _pruned(per_phrase, idfs, shortest, doc_len, avgdl, in_scope, k)
    order = best(scores, k)
    return pool[order], scores[order]


def largest_counts(per_phrase: Sequence[PhraseDocuments]) -> list[float]:
    """Each phrase's largest instance count in a document (0.0 for a phrase matching none)."""
    return [float(freqs.max()) if len(docs) else 0.0 for docs, freqs in per_phrase]


def phrase_set_bounds(
    most: Sequence[float], idfs: Sequence[float], avgdl: float, shortest: int
) -> npt.NDArray[np.float64]:
    """The bound of a document's score for each set of phrases it matches (entry ``s``: the
    phrases whose bits ``s`` sets), for any document length and counts: :func:`document_bounds`
    of the shortest length, with every phrase's largest count."""
    phrases = len(most)
    sets = np.arange(1 << phrases, dtype=np.int64) | (((1 << phrases) - 1) << phrases)
    return document_bounds(sets, np.full(len(sets), shortest, np.float64), most, idfs, avgdl)


def document_bounds(
    sets: npt.NDArray[Any],
    doc_len: npt.NDArray[np.float64],
    most: Sequence[float],
    idfs: Sequence[float],
    avgdl: float,
) -> npt.NDArray[np.float64]:
    """The bound of the score of documents of these lengths matching these sets of phrases
    (bit ``j``: phrase ``j`` matches; bit ``m + j`` of ``m`` phrases: more than once): each
    matched phrase's term for a count of 1, or of its largest count when it matches more than
    once, summed in query order with 0.0 for the others (as the score is summed), raised by
    ``BOUND_SLACK``."""
    norm = bm25_norms(doc_len, avgdl)
    bound = np.zeros(len(sets), dtype=np.float64)
    for j, (largest, idf) in enumerate(zip(most, idfs, strict=True)):
        if largest:
            high = (sets & (1 << (len(most) + j))) != 0
            count = np.where(high, largest, 1.0) if largest > 1.0 else np.float64(largest)
            term = bm25_contributions(idf, np.asarray(count, dtype=np.float64), norm)
            bound += np.where(sets & (1 << j), term, 0.0)
    bounded: npt.NDArray[np.float64] = bound * BOUND_SLACK
    return bounded


def _marked(
    per_phrase: Sequence[PhraseDocuments], in_scope: npt.NDArray[np.bool_]
) -> tuple[npt.NDArray[np.intp], npt.NDArray[Any]]:
    """Every in-scope matching document once (in no particular order) and the set of
    phrases it matches: bit ``j`` for phrase ``j``, and bit ``m + j`` (of ``m`` phrases) when
    phrase ``j`` matches it more than once (every listed document has a count of 1 or more)."""
    phrases = len(per_phrase)
    dtype = np.uint8 if phrases <= 4 else np.uint16 if phrases <= 8 else np.uint32
    marks = _scratch(f"marks_{np.dtype(dtype).name}", len(in_scope), dtype)
    indexes = [docs.astype(np.intp, copy=False) for docs, _ in per_phrase]
    documents: list[npt.NDArray[np.intp]] = []
    sets: list[npt.NDArray[Any]] = []
    try:
        for j, (docs, (_, freqs)) in enumerate(zip(indexes, per_phrase, strict=True)):
            marks[docs] |= dtype(1 << j)
            if len(docs) and freqs.max() > 1:
                marks[docs[freqs > 1]] |= dtype(1 << (phrases + j))
        for j, docs in enumerate(indexes):
            found = marks[docs]
            if j:
                first = (found & dtype((1 << j) - 1)) == 0  # not marked by an earlier phrase
                docs, found = docs[first], found[first]
            documents.append(docs)
            sets.append(found)
    finally:
        for docs in documents if len(documents) == phrases else indexes:
            marks[docs] = 0
    matched = np.concatenate(documents)
    held = np.concatenate(sets)
    keep = in_scope[matched]
    return matched[keep], held[keep]


def _pruned(
    per_phrase: Sequence[PhraseDocuments],
    idfs: Sequence[float],
    shortest: int,
    doc_len: npt.NDArray[Any],
    avgdl: float,
    in_scope: npt.NDArray[np.bool_],
    k: int,
) -> Ranked:
    """The documents that may be among the ``k`` best (every one bounded by ``θ`` or more,
    see the module), ascending, and their exact scores."""
    matched, sets = _marked(per_phrase, in_scope)
    if matched.size <= max(k, SCORE_ALL):
        pool = np.sort(matched)
        return pool, exact_scores(pool, per_phrase, idfs, doc_len, avgdl)
    most = largest_counts(per_phrase)
    table = phrase_set_bounds(most, idfs, avgdl, shortest)
    phrase_sets = sets & ((1 << len(per_phrase)) - 1)

    def bounded(at: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
        lengths = doc_len[matched[at]].astype(np.float64)
        return document_bounds(sets[at], lengths, most, idfs, avgdl)

    # the highest set bound with at least k documents bounded by it or more: the k of those
    # with the highest bounds of their own give θ
    levels = np.argsort(-table, kind="stable")
    reached = np.cumsum(np.bincount(phrase_sets, minlength=len(table))[levels])
    level = table[levels[int(np.searchsorted(reached, k))]]
    near = np.flatnonzero((table >= level)[phrase_sets])
    near_bounds = bounded(near)
    seed = np.sort(matched[near[np.argpartition(-near_bounds, k - 1)[:k]]])
    theta = exact_scores(seed, per_phrase, idfs, doc_len, avgdl).min()
    # the documents bounded by θ or more, by their set and by their own bound
    more = np.flatnonzero(((table >= theta) & (table < level))[phrase_sets])
    found = np.concatenate((near[near_bounds >= theta], more[bounded(more) >= theta]))
    pool = np.sort(matched[found])
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
        if len(docs) == pool.size and np.array_equal(docs, pool):  # the phrase's documents
            counts[:] = freqs
        elif len(docs) and pool.size:
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
    """``counts[i] = freqs[j]`` where ``pool[i] == docs[j]`` (0 where no ``docs[j]`` is),
    through the scratch array: the counts written at their documents, read at the pool's."""
    places = _scratch("places", int(max(pool[-1], docs[-1])) + 1, np.int32)
    at = docs.astype(np.intp, copy=False)
    try:
        places[at] = freqs  # (every count is positive)
        counts[:] = places[pool]
    finally:
        places[at] = 0


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
