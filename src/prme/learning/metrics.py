"""Ranking metrics with binary gains and 0-based positions, shared by both learning gates.

Every formula uses ``gain(i) = 1 / log2(i + 2)`` for a relevant item at 0-based position ``i``.
Sums run in ascending position order, left to right, so results equal the written-out arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Sequence
from functools import lru_cache
from typing import TypeVar

from prme.errors import InvalidInputError

T = TypeVar("T", bound=Hashable)


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInputError("k", "must be an integer >= 1", k)


def _unique(ranked_ids: Sequence[T], field: str) -> None:
    if len(set(ranked_ids)) != len(ranked_ids):
        raise InvalidInputError(field, "must not repeat an id", list(ranked_ids))


def _relevant_set(relevant: Collection[T], field: str) -> frozenset[T]:
    items = frozenset(relevant)
    if not items:
        raise InvalidInputError(field, "must contain at least one id", list(relevant))
    return items


def _hits(ranked_ids: Sequence[T], relevant: frozenset[T], k: int) -> list[int]:
    return [i for i, item in enumerate(ranked_ids[:k]) if item in relevant]


@lru_cache(maxsize=4096)
def discount(position: int) -> float:
    """The gain of a relevant item at 0-based ``position``: ``1 / log2(position + 2)``."""
    return 1.0 / math.log2(position + 2)


def dcg(hit_positions: Sequence[int], k: int) -> float:
    """``DCG@k = Σ_{i ∈ hit_positions, i < k} 1 / log2(i + 2)``.

    Args:
        hit_positions: distinct 0-based positions of the relevant items in a ranking.
        k: the cutoff; positions ``>= k`` contribute nothing.

    Raises:
        InvalidInputError: ``k < 1``, or a position is negative or repeated.
    """
    _check_k(k)
    if any(i < 0 for i in hit_positions) or len(set(hit_positions)) != len(hit_positions):
        raise InvalidInputError(
            "hit_positions", "must be distinct non-negative positions", list(hit_positions)
        )
    return sum((discount(i) for i in sorted(hit_positions) if i < k), 0.0)


def ideal_dcg(n_relevant: int, k: int) -> float:
    """``IDCG@k = Σ_{i < min(k, n_relevant)} 1 / log2(i + 2)`` (every relevant item on top).

    Raises:
        InvalidInputError: ``k < 1`` or ``n_relevant < 0``.
    """
    if n_relevant < 0:
        raise InvalidInputError("n_relevant", "must be >= 0", n_relevant)
    _check_k(k)
    return dcg(range(min(k, n_relevant)), k)


def ndcg_at_k(ranked_ids: Sequence[T], relevant: Collection[T], k: int) -> float:
    """``NDCG@k = DCG@k(hits) / IDCG@k(|relevant|)``, in [0, 1].

    Args:
        ranked_ids: the returned order (distinct ids); only the first ``k`` count.
        relevant: the complete relevant set, including relevant ids that were not returned.
        k: the cutoff.

    Raises:
        InvalidInputError: ``relevant`` is empty, ``ranked_ids`` repeats an id, or ``k < 1``.
    """
    _check_k(k)
    _unique(ranked_ids, "ranked_ids")
    items = _relevant_set(relevant, "relevant")
    return dcg(_hits(ranked_ids, items, k), k) / ideal_dcg(len(items), k)


def recall_at_k(ranked_ids: Sequence[T], relevant: Collection[T], k: int) -> float:
    """``recall@k = |{i < k : ranked_ids[i] ∈ relevant}| / |relevant|``.

    The denominator is the whole relevant set even when it is larger than ``k``, so recall@k
    can stay below 1.

    Raises:
        InvalidInputError: ``relevant`` is empty, ``ranked_ids`` repeats an id, or ``k < 1``.
    """
    _check_k(k)
    _unique(ranked_ids, "ranked_ids")
    items = _relevant_set(relevant, "relevant")
    return len(_hits(ranked_ids, items, k)) / len(items)


def reciprocal_rank_at_k(ranked_ids: Sequence[T], relevant: Collection[T], k: int) -> float:
    """``RR@k = 1 / (i + 1)`` for the first relevant position ``i < k``, else 0.

    Raises:
        InvalidInputError: ``relevant`` is empty, ``ranked_ids`` repeats an id, or ``k < 1``.
    """
    _check_k(k)
    _unique(ranked_ids, "ranked_ids")
    hits = _hits(ranked_ids, _relevant_set(relevant, "relevant"), k)
    return 1.0 / (hits[0] + 1) if hits else 0.0


def judged_ndcg(order: Sequence[T], positives: Collection[T], k: int) -> float:
    """Gate-1 judged NDCG: ``DCG@k(positions of positives in order) / IDCG@k(#positives)``.

    ``order`` holds only the judged candidates of one request (positives and negatives) in their
    rescored order, so every positive appears in it and IDCG runs over ``min(k, #positives)``.

    Raises:
        InvalidInputError: ``positives`` is empty or not all in ``order``, ``order`` repeats an
            id, or ``k < 1``.
    """
    _check_k(k)
    _unique(order, "order")
    items = _relevant_set(positives, "positives")
    if not items <= set(order):
        raise InvalidInputError("positives", "every positive must appear in order", list(items))
    return dcg(_hits(order, items, k), k) / ideal_dcg(len(items), k)


def pairwise_accuracy(
    order: Sequence[T], positives: Collection[T], negatives: Collection[T]
) -> float:
    """``#{(p, n) ∈ positives × negatives : pos(p) < pos(n)} / (|positives| · |negatives|)``.

    ``pos`` is the 0-based position in ``order``, which is strict, so there are no ties.

    Raises:
        InvalidInputError: there are no pairs, an id is both positive and negative, a judged id
            is missing from ``order``, or ``order`` repeats an id.
    """
    _unique(order, "order")
    pos, neg = frozenset(positives), frozenset(negatives)
    if not pos or not neg:
        raise InvalidInputError(
            "positives", "pairwise accuracy needs at least one positive and one negative"
        )
    if pos & neg:
        raise InvalidInputError("negatives", "an id cannot be both positive and negative")
    if not (pos | neg) <= set(order):
        raise InvalidInputError("order", "every judged id must appear in order")
    positives_seen = 0
    correct = 0
    for item in order:
        if item in pos:
            positives_seen += 1
        elif item in neg:
            correct += positives_seen
    return correct / (len(pos) * len(neg))
