"""Paired statistics: bootstrap interval, sign-flip test, win/tie/loss (reference §E.11, §M.8)."""

from __future__ import annotations

import math
import random
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prme.learning.stats import (
    mean,
    percentile_bootstrap_interval,
    sign_flip_p_value,
    win_tie_loss,
)

REFERENCE_DIFFS = [
    -0.15, 0.05, 0.25, -0.1, 0.1, 0.3, -0.05, 0.15, 0.35, 0.0,
    0.2, -0.15, 0.05, 0.25, -0.1, 0.1, 0.3, -0.05, 0.15, 0.35,
]  # fmt: skip


def _literal_bootstrap(diffs: list[float], samples: int, seed: int) -> tuple[float, float]:
    """The reference algorithm written out with a plain sequential float sum."""
    rng = random.Random(seed)
    means = []
    for _ in range(samples):
        total = 0.0
        for _ in diffs:
            total += rng.choice(diffs)
        means.append(total / len(diffs))
    means.sort()
    return means[int(0.025 * samples)], means[min(samples - 1, int(0.975 * samples))]


def test_mean() -> None:
    assert mean([0.1, 0.2, 0.3]) == math.fsum([0.1, 0.2, 0.3]) / 3
    assert mean(REFERENCE_DIFFS) == pytest.approx(0.1, abs=1e-15)
    with pytest.raises(ValueError, match="values"):
        mean([])


def test_bootstrap_reference_vectors_bit_exact() -> None:
    interval = percentile_bootstrap_interval(REFERENCE_DIFFS, samples=2000, seed=42)
    assert interval == (0.027500000000000004, 0.1725)
    interval = percentile_bootstrap_interval(REFERENCE_DIFFS, samples=100, seed=42)
    assert interval == (0.030000000000000006, 0.17749999999999996)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.floats(-1, 1, allow_nan=False), min_size=1, max_size=30),
    st.integers(1, 150),
    st.integers(0, 2**32),
)
def test_bootstrap_matches_literal_algorithm(diffs: list[float], samples: int, seed: int) -> None:
    expected = _literal_bootstrap([d + 0.0 for d in diffs], samples, seed)
    assert percentile_bootstrap_interval(diffs, samples=samples, seed=seed) == expected


def test_bootstrap_is_deterministic_and_seeded() -> None:
    first = percentile_bootstrap_interval(REFERENCE_DIFFS, samples=500, seed=7)
    assert percentile_bootstrap_interval(REFERENCE_DIFFS, samples=500, seed=7) == first
    assert percentile_bootstrap_interval(REFERENCE_DIFFS, samples=500, seed=8) != first


def test_bootstrap_does_not_touch_global_rng() -> None:
    random.seed(1)
    expected = random.random()
    random.seed(1)
    percentile_bootstrap_interval(REFERENCE_DIFFS, samples=100, seed=42)
    assert random.random() == expected


def test_bootstrap_constant_diffs() -> None:
    assert percentile_bootstrap_interval([1.0] * 5, samples=100, seed=0) == (1.0, 1.0)
    assert percentile_bootstrap_interval([0.25], samples=1, seed=0) == (0.25, 0.25)


def test_bootstrap_input_errors() -> None:
    with pytest.raises(ValueError, match="diffs"):
        percentile_bootstrap_interval([], samples=100, seed=42)
    with pytest.raises(ValueError, match="diffs"):
        percentile_bootstrap_interval([float("nan")], samples=100, seed=42)
    with pytest.raises(ValueError, match="samples"):
        percentile_bootstrap_interval([0.1], samples=0, seed=42)


def test_sign_flip_small_for_consistent_gain() -> None:
    p = sign_flip_p_value([0.1] * 40, samples=2000, seed=42)
    assert p < 0.01
    assert p >= 1 / 2001


def test_sign_flip_near_one_for_symmetric_diffs() -> None:
    assert sign_flip_p_value([0.1, -0.1] * 20, samples=2000, seed=42) > 0.9
    assert sign_flip_p_value([0.3, -0.1, -0.2, 0.2, 0.1, -0.3], samples=500, seed=1) > 0.9


def test_sign_flip_all_zero_is_one() -> None:
    assert sign_flip_p_value([0.0] * 10, samples=100, seed=42) == 1.0


def test_sign_flip_formula_on_one_difference() -> None:
    # every flip of a single value has the same |mean|, so all B rounds count as extreme
    assert sign_flip_p_value([0.5], samples=99, seed=3) == (1 + 99) / (99 + 1)


def test_sign_flip_deterministic_and_seeded() -> None:
    diffs = list(np.random.default_rng(0).normal(0.02, 0.1, 60))
    first = sign_flip_p_value(diffs, samples=1000, seed=5)
    assert sign_flip_p_value(diffs, samples=1000, seed=5) == first
    assert sign_flip_p_value(diffs, samples=1000, seed=6) != first
    assert 0.0 < first <= 1.0


def test_sign_flip_approximates_exact_enumeration() -> None:
    # five equal positive diffs: only all-plus and all-minus of the 2**5 flips reach |mean|
    p = sign_flip_p_value([0.1] * 5, samples=20000, seed=42)
    assert p == pytest.approx(2 / 2**5, abs=0.01)


def test_sign_flip_is_fast() -> None:
    diffs = list(np.random.default_rng(1).normal(0.0, 0.1, 1000))
    timings = []
    for _ in range(5):  # best of five, so a busy machine does not fail the test
        start = time.perf_counter()
        sign_flip_p_value(diffs, samples=2000, seed=42)
        timings.append(time.perf_counter() - start)
    assert min(timings) < 0.05


def test_sign_flip_input_errors() -> None:
    with pytest.raises(ValueError, match="diffs"):
        sign_flip_p_value([], samples=100, seed=42)
    with pytest.raises(ValueError, match="diffs"):
        sign_flip_p_value([float("inf")], samples=100, seed=42)
    with pytest.raises(ValueError, match="samples"):
        sign_flip_p_value([0.1], samples=-1, seed=42)


def test_win_tie_loss() -> None:
    assert win_tie_loss([0.1, 0.0, -0.2, 5e-13, -5e-13, 0.3]) == {
        "wins": 2,
        "ties": 3,
        "losses": 1,
    }
    assert win_tie_loss([]) == {"wins": 0, "ties": 0, "losses": 0}
    assert win_tie_loss([0.05, -0.05], tol=0.1) == {"wins": 0, "ties": 2, "losses": 0}
    with pytest.raises(ValueError, match="tol"):
        win_tie_loss([0.1], tol=-1.0)
    with pytest.raises(ValueError, match="diffs"):
        win_tie_loss([float("nan")])
