"""Paired statistics over per-group metric differences (candidate − baseline), shared by both gates.

Randomness is always an argument: each function builds its own generator from ``seed`` and never
touches a global RNG, so the same inputs and seed give the same result bit for bit.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import numpy as np

from prme.errors import InvalidInputError

# Rows drawn at once by the bootstrap and the randomization test, bounded so that one chunk
# holds at most this many float64 values (8 MB) whatever the number of groups.
_CHUNK_CELLS = 1_000_000
TIE_TOLERANCE = 1e-12


def _checked(values: Sequence[float], field: str) -> list[float]:
    items = [float(v) + 0.0 for v in values]  # + 0.0 turns -0.0 into 0.0, as sum() from 0 does
    if not items:
        raise InvalidInputError(field, "must contain at least one value", items)
    if not all(math.isfinite(v) for v in items):
        raise InvalidInputError(field, "must contain only finite values", items)
    return items


def _check_samples(samples: int) -> None:
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise InvalidInputError("samples", "must be an integer >= 1", samples)


def mean(values: Sequence[float]) -> float:
    """``mean(x) = fsum(x) / len(x)`` (exactly rounded sum, then one division).

    Raises:
        InvalidInputError: ``values`` is empty.
    """
    if not values:
        raise InvalidInputError("values", "mean of no values", list(values))
    return math.fsum(values) / len(values)


def percentile_bootstrap_interval(
    diffs: Sequence[float], *, samples: int, seed: int
) -> tuple[float, float]:
    """95 % paired percentile-bootstrap interval of the mean of ``diffs``, without interpolation.

    With ``rng = random.Random(seed)`` and ``B = samples``, each of the B resamples draws
    ``len(diffs)`` values with ``rng.choice`` (with replacement) and takes
    ``m_b = sum(draw) / len(draw)`` (a plain left-to-right float sum). With ``m`` the sorted
    means, the interval is ``(m[int(0.025·B)], m[min(B − 1, int(0.975·B))])``; for B = 2000 the
    indices are 50 and 1950. This is bit-compatible with the reference implementation
    (CPython's Mersenne Twister and Python 3.11's uncompensated ``sum``), which is why it does
    not use :func:`mean`.

    Args:
        diffs: one paired difference per group, in group order.
        samples: the number of resamples B.
        seed: the generator seed.

    Raises:
        InvalidInputError: ``diffs`` is empty or not finite, or ``samples < 1``.
    """
    values = _checked(diffs, "diffs")
    _check_samples(samples)
    rng = random.Random(seed)
    n = len(values)
    array = np.asarray(values, dtype=np.float64)
    # rng.choice(values) is values[r] for the first r = getrandbits(k) < n with k = n.bit_length();
    # for k <= 32 every attempt consumes one 32-bit Mersenne Twister word, and getrandbits(32·m)
    # returns m consecutive words little-endian. Filtering bulk words therefore yields exactly the
    # indices that successive choice() calls would pick, about 30× faster.
    shift = np.uint32(32 - n.bit_length())
    rows = max(1, _CHUNK_CELLS // n)
    chunks: list[np.ndarray[Any, np.dtype[np.float64]]] = []
    done = 0
    pending = np.zeros(0, dtype=np.uint32)
    while done < samples:
        count = min(rows, samples - done)
        need = count * n
        while len(pending) < need:
            words = 2 * (need - len(pending)) + 64
            raw = np.frombuffer(rng.getrandbits(32 * words).to_bytes(4 * words, "little"), "<u4")
            picked = raw >> shift
            pending = np.concatenate([pending, picked[picked < n]])
        draws = array[pending[:need]]
        pending = pending[need:]
        # cumsum adds left to right, so its last column is the plain sequential sum of each
        # resample on every Python version (3.12's sum() compensates and would differ).
        chunks.append(np.cumsum(draws.reshape(count, n), axis=1)[:, -1] / n)
        done += count
    means = np.sort(np.concatenate(chunks))
    return float(means[int(0.025 * samples)]), float(means[min(samples - 1, int(0.975 * samples))])


def sign_flip_p_value(diffs: Sequence[float], *, samples: int, seed: int) -> float:
    """Two-sided paired sign-flip randomization test of ``mean(diffs) = 0``.

    With ``rng = numpy.random.default_rng(seed)``, each of the B = ``samples`` rounds flips the
    sign of every difference independently with probability 1/2 (one random bit from
    ``rng.bytes`` per difference) and takes the mean ``m_b``. Then
    ``p = (1 + #{b : |m_b| ≥ |mean(diffs)| − 1e-12}) / (B + 1)``, which is never 0.
    If every difference is 0 the answer is 1.0.

    Args:
        diffs: one paired difference per group, in group order.
        samples: the number of random sign assignments B.
        seed: the generator seed.

    Raises:
        InvalidInputError: ``diffs`` is empty or not finite, or ``samples < 1``.
    """
    values = _checked(diffs, "diffs")
    _check_samples(samples)
    if all(v == 0.0 for v in values):
        return 1.0
    n = len(values)
    observed = abs(mean(values))
    d = np.asarray(values, dtype=np.float64)
    total = float(d.sum())
    rng = np.random.default_rng(seed)
    row_bytes = (n + 7) // 8
    rows = max(1, _CHUNK_CELLS // n)
    extreme = 0
    done = 0
    while done < samples:
        count = min(rows, samples - done)
        # one random bit per difference and round: 1 flips its sign
        raw = np.frombuffer(rng.bytes(count * row_bytes), dtype=np.uint8)
        flipped = np.unpackbits(raw.reshape(count, row_bytes), axis=1, count=n)
        # the sum with flipped signs = sum(d) − 2 · (sum of the flipped entries)
        flipped_means = (total - 2.0 * (flipped.astype(np.float64) @ d)) / n
        extreme += int(np.count_nonzero(np.abs(flipped_means) >= observed - TIE_TOLERANCE))
        done += count
    return (1 + extreme) / (samples + 1)


def win_tie_loss(diffs: Sequence[float], tol: float = TIE_TOLERANCE) -> dict[str, int]:
    """Counts of ``d > tol`` (wins), ``|d| ≤ tol`` (ties) and ``d < −tol`` (losses).

    Args:
        diffs: one paired difference (candidate − baseline) per group.
        tol: the tie tolerance, ≥ 0.

    Raises:
        InvalidInputError: ``tol`` is negative or not finite, or a difference is not finite.
    """
    if not (math.isfinite(tol) and tol >= 0.0):
        raise InvalidInputError("tol", "must be a finite value >= 0", tol)
    values = [float(v) for v in diffs]
    if not all(math.isfinite(v) for v in values):
        raise InvalidInputError("diffs", "must contain only finite values", values)
    wins = sum(1 for v in values if v > tol)
    losses = sum(1 for v in values if v < -tol)
    return {"wins": wins, "ties": len(values) - wins - losses, "losses": losses}
