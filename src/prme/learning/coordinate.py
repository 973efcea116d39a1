"""Coordinate search in log-multiplier space, shared by the gate-1 fits (§E.9).

From neutral, each step size in turn: for every feature try ``−step`` and ``+step`` (clamped to
the multiplier bounds), keep the better proposal that lowers the loss by more than
``TOLERANCE``; repeat up to ``passes`` times per step while anything changes. A proposal whose
loss is ``None`` is refused (a fit's own guard).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from prme.models.learning import TOLERANCE
from prme.models.scoring import ADDITIVE_FEATURES, MULTIPLIER_MAX, MULTIPLIER_MIN

FloatArray = npt.NDArray[np.float64]
LOG_MIN = math.log(MULTIPLIER_MIN)
LOG_MAX = math.log(MULTIPLIER_MAX)


def coordinate_search(
    loss: Callable[[FloatArray], float | None],
    start_loss: float,
    steps: Sequence[float],
    passes: int,
) -> tuple[FloatArray, float]:
    """(log multipliers, their loss) after the search from neutral, whose loss is
    ``start_loss``."""
    current = np.zeros(len(ADDITIVE_FEATURES))
    best = start_loss
    for step in steps:
        for _ in range(passes):
            changed = False
            for f in range(len(ADDITIVE_FEATURES)):
                winner: FloatArray | None = None
                for delta in (-step, step):
                    proposal = current.copy()
                    proposal[f] = min(LOG_MAX, max(LOG_MIN, current[f] + delta))
                    if proposal[f] == current[f]:
                        continue
                    value = loss(proposal)
                    if value is not None and value < best - TOLERANCE:
                        best, winner = value, proposal
                if winner is not None:
                    current, changed = winner, True
            if not changed:
                break
    return current, best
