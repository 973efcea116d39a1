"""An owner's lexical postings as an owner index shares them, and BM25 over them (pure of any
store): the ``k`` best of the owner's rows for the OR of a query's phrases, whatever derived the
postings (FTS5's tokens on SQLite, :mod:`prme.storage.fts5_lexical`; PostgreSQL's lexemes,
:mod:`prme.storage.postgres.lexical`). A single-token phrase reads the token's document
postings; a longer one its tokens' instances (the positions where they follow each other, as
FTS5 counts a phrase). The statistics are the owner's alone: document count, token total and
shortest length from the owner index, document frequencies from the postings.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from prme.index.bm25_topk import PhraseDocuments, top_k
from prme.index.owner_index import OwnerIndex
from prme.index.postings import Instances, OwnerPostings, Vocabulary

POSTINGS = "lexical_postings"  # the key of an owner index's postings in its derived values

Postings = tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]


@dataclass
class SharedPostings:
    """An owner index's postings, shared by every snapshot of the index (kept in its derived
    values): they cover ``postings.size`` positions, and grow under ``lock``."""

    postings: OwnerPostings = field(default_factory=lambda: OwnerPostings(Vocabulary()))
    lock: threading.Lock = field(default_factory=threading.Lock)


def shared_postings(index: OwnerIndex) -> SharedPostings:
    """The postings ``index`` and its snapshots share (none computed yet for a new index)."""
    found = index.derived_values.get(POSTINGS)
    if found is None:  # (the size is unused: the postings say which positions they cover)
        found = index.derived_values.setdefault(POSTINGS, (-1, SharedPostings()))
    shared: SharedPostings = found[1]
    return shared


def grown_postings(
    index: OwnerIndex, grow: Callable[[OwnerPostings], OwnerPostings]
) -> OwnerPostings:
    """The postings of the owner's rows in ``index``: those derived so far, grown by
    ``grow(postings)`` to the rows appended since (under the shared lock), cut to ``index``."""
    shared = shared_postings(index)
    with shared.lock:
        postings = shared.postings
        if postings.size < index.size:
            postings = shared.postings = grow(postings)
    return postings.upto(index.size)


def _run_lengths(docs: npt.NDArray[Any]) -> Postings:
    """Each distinct row of ``docs`` (ascending, as postings list them) once, and how many
    times it occurs."""
    if docs.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    first = np.empty(docs.size, dtype=np.bool_)
    first[0] = True
    np.not_equal(docs[1:], docs[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    counts = np.empty(starts.size, dtype=np.float64)
    np.subtract(starts[1:], starts[:-1], out=counts[:-1])
    counts[-1] = docs.size - starts[-1]
    return docs[starts].astype(np.int64), counts


def _phrase_frequencies(found: dict[str, Instances], tokens: Sequence[str]) -> Postings:
    """Rows holding the tokens at consecutive offsets, and how many times (FTS5 phrases): the
    starts ``(row, offset - i)`` of the ``i``-th token common to every token, as one int64 key
    each (row in the high half)."""
    starts: npt.NDArray[np.int64] | None = None
    for shift, token in enumerate(tokens):
        docs, offsets = found[token]
        start = offsets.astype(np.int64) - shift
        valid = start >= 0  # the first token's offsets are never negative
        keys = (docs[valid].astype(np.int64) << 32) | start[valid]  # ascending, distinct
        starts = keys if starts is None else np.intersect1d(starts, keys, assume_unique=True)
        if starts.size == 0:
            break
    if starts is None or starts.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    return _run_lengths(starts >> 32)


def postings_bm25(
    postings: OwnerPostings,
    index: OwnerIndex,
    in_scope: npt.NDArray[np.bool_],
    phrases: Sequence[tuple[str, ...]],
    k: int,
) -> list[tuple[int, float]]:
    """The owner's ``k`` best in-scope rows for the OR of ``phrases``: ``(rowid, score)``, by
    score descending then rowid, with FTS5's BM25 over ``postings`` (the owner's, covering
    ``index``'s positions)."""
    if index.size == 0 or k <= 0:
        return []
    doc_len = index.col("doc_len")
    shortest: int = index.derived("doc_len_min", lambda: int(doc_len.min()))
    positions, scores = ranked(
        postings, doc_len, index.doc_len_total(), in_scope, phrases, k, shortest
    )
    rowids = index.col("rowid")[positions]
    return list(zip(rowids.tolist(), scores.tolist(), strict=True))


def ranked(
    postings: OwnerPostings,
    doc_len: npt.NDArray[Any],
    doc_len_total: int,
    in_scope: npt.NDArray[np.bool_],
    phrases: Sequence[tuple[str, ...]],
    k: int,
    shortest: int | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """The ``k`` best in-scope positions of ``postings`` for the OR of ``phrases`` and their
    BM25 scores, by score descending then position (``doc_len``: each position's token count,
    ``doc_len_total``: their sum, ``shortest``: their minimum, computed when not given).
    A single-token phrase reads the token's document postings; a longer one its tokens'
    instances."""
    n_docs = postings.size
    if n_docs == 0 or k <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    single = postings.documents([t[0] for t in phrases if len(t) == 1])
    longer = [t for tokens in phrases if len(tokens) > 1 for t in tokens]
    found = postings.lookup(longer) if longer else {}
    per_phrase: list[PhraseDocuments] = []
    for tokens in phrases:
        if not tokens:  # FTS5 matches nothing for an empty phrase
            continue
        per_phrase.append(
            single[tokens[0]] if len(tokens) == 1 else _phrase_frequencies(found, tokens)
        )
    avgdl = float(doc_len_total) / float(n_docs)
    if shortest is None:
        shortest = int(doc_len[:n_docs].min())
    return top_k(per_phrase, n_docs, doc_len, avgdl, shortest, in_scope, k)
