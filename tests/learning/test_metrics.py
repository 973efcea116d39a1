"""Binary-gain ranking metrics with 0-based positions (reference §E.10, §F.3)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prme.learning.metrics import (
    dcg,
    ideal_dcg,
    judged_ndcg,
    ndcg_at_k,
    pairwise_accuracy,
    recall_at_k,
    reciprocal_rank_at_k,
)


def test_dcg_sums_gains_below_k() -> None:
    assert dcg([0, 2], 10) == 1 / math.log2(2) + 1 / math.log2(4)
    assert dcg([2, 0], 10) == 1 / math.log2(2) + 1 / math.log2(4)
    assert dcg([0, 2], 2) == 1 / math.log2(2)
    assert dcg([], 5) == 0.0


def test_ideal_dcg() -> None:
    assert ideal_dcg(2, 10) == 1 / math.log2(2) + 1 / math.log2(3)
    assert ideal_dcg(5, 2) == 1 / math.log2(2) + 1 / math.log2(3)
    assert ideal_dcg(0, 3) == 0.0


def test_ndcg_three_item_list() -> None:
    ranked = ["a", "b", "c"]
    assert ndcg_at_k(ranked, {"a", "c"}, 10) == (1 / math.log2(2) + 1 / math.log2(4)) / (
        1 / math.log2(2) + 1 / math.log2(3)
    )
    assert ndcg_at_k(ranked, {"b"}, 10) == (1 / math.log2(3)) / (1 / math.log2(2))
    assert ndcg_at_k(ranked, {"a", "b"}, 10) == 1.0


def test_ndcg_counts_unreturned_relevant_in_ideal() -> None:
    # "z" is relevant but was never returned; IDCG still covers min(k, 2) = 2 positions.
    assert ndcg_at_k(["a", "b"], {"a", "z"}, 10) == 1 / (1 / math.log2(2) + 1 / math.log2(3))
    # with k = 1 the ideal covers one position only
    assert ndcg_at_k(["a", "b"], {"a", "z"}, 1) == 1.0


def test_recall_denominator_is_the_full_relevant_set() -> None:
    ranked = ["a", "b", "c", "d"]
    assert recall_at_k(ranked, {"a", "c", "x"}, 10) == 2 / 3
    assert recall_at_k(ranked, {"a", "c", "x"}, 2) == 1 / 3
    assert recall_at_k(ranked, {"b", "c", "d"}, 1) == 0 / 3


def test_reciprocal_rank_truncated_at_k() -> None:
    ranked = ["a", "b", "c"]
    assert reciprocal_rank_at_k(ranked, {"c", "b"}, 10) == 1 / 2
    assert reciprocal_rank_at_k(ranked, {"c"}, 3) == 1 / 3
    assert reciprocal_rank_at_k(ranked, {"c"}, 2) == 0.0
    assert reciprocal_rank_at_k([], {"c"}, 2) == 0.0


def test_judged_ndcg_over_judged_candidates() -> None:
    order = ["n1", "p1", "n2", "p2"]
    assert judged_ndcg(order, {"p1", "p2"}, 10) == (1 / math.log2(3) + 1 / math.log2(5)) / (
        1 / math.log2(2) + 1 / math.log2(3)
    )
    assert judged_ndcg(order, {"p1", "p2"}, 1) == 0.0
    assert judged_ndcg(["p", "n"], {"p"}, 10) == 1.0


def test_pairwise_accuracy() -> None:
    order = ["p1", "n1", "p2", "n2"]
    # pairs: (p1,n1) ok, (p1,n2) ok, (p2,n1) wrong, (p2,n2) ok
    assert pairwise_accuracy(order, {"p1", "p2"}, {"n1", "n2"}) == 3 / 4
    assert pairwise_accuracy(["n", "p"], {"p"}, {"n"}) == 0.0
    assert pairwise_accuracy(["p", "x", "n"], {"p"}, {"n"}) == 1.0


def test_metrics_are_generic_over_hashable_ids() -> None:
    assert recall_at_k([3, 1, 2], frozenset({1, 2}), 2) == 1 / 2


def test_input_errors() -> None:
    with pytest.raises(ValueError, match="relevant"):
        ndcg_at_k(["a"], set(), 10)
    with pytest.raises(ValueError, match="relevant"):
        recall_at_k(["a"], [], 10)
    with pytest.raises(ValueError, match="relevant"):
        reciprocal_rank_at_k(["a"], (), 10)
    with pytest.raises(ValueError, match="k"):
        ndcg_at_k(["a"], {"a"}, 0)
    with pytest.raises(ValueError, match="k"):
        dcg([0], True)
    with pytest.raises(ValueError, match="ranked_ids"):
        recall_at_k(["a", "a"], {"a"}, 10)
    with pytest.raises(ValueError, match="hit_positions"):
        dcg([1, 1], 10)
    with pytest.raises(ValueError, match="hit_positions"):
        dcg([-1], 10)
    with pytest.raises(ValueError, match="n_relevant"):
        ideal_dcg(-1, 10)
    with pytest.raises(ValueError, match="positives"):
        judged_ndcg(["a"], {"b"}, 10)
    with pytest.raises(ValueError, match="positives"):
        judged_ndcg(["a"], set(), 10)
    with pytest.raises(ValueError, match="positive"):
        pairwise_accuracy(["a", "b"], {"a"}, set())
    with pytest.raises(ValueError, match="negatives"):
        pairwise_accuracy(["a", "b"], {"a"}, {"a", "b"})
    with pytest.raises(ValueError, match="order"):
        pairwise_accuracy(["a"], {"a"}, {"b"})


rankings = st.lists(st.integers(0, 30), unique=True, max_size=20)
relevant_sets = st.sets(st.integers(0, 30), min_size=1, max_size=15)


@given(rankings, relevant_sets, st.integers(1, 25))
def test_ndcg_in_unit_interval(ranked: list[int], relevant: set[int], k: int) -> None:
    assert 0.0 <= ndcg_at_k(ranked, relevant, k) <= 1.0 + 1e-12


@given(rankings, relevant_sets, st.integers(1, 25))
def test_recall_monotone_in_k(ranked: list[int], relevant: set[int], k: int) -> None:
    assert recall_at_k(ranked, relevant, k) <= recall_at_k(ranked, relevant, k + 1)
    assert 0.0 <= recall_at_k(ranked, relevant, k) <= 1.0


@given(st.permutations(list(range(8))), st.integers(1, 7))
def test_pairwise_accuracy_matches_pair_count(order: list[int], n_pos: int) -> None:
    positives, negatives = set(range(n_pos)), set(range(n_pos, 8))
    where = {item: i for i, item in enumerate(order)}
    correct = sum(1 for p in positives for n in negatives if where[p] < where[n])
    pairs = len(positives) * len(negatives)
    assert pairwise_accuracy(order, positives, negatives) == correct / pairs
    assert pairwise_accuracy(order[::-1], positives, negatives) == (pairs - correct) / pairs
