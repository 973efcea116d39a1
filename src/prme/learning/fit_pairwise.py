"""The reference fit ``pairwise_weight_multipliers_v1`` (§E.9): a group-weighted pairwise
logistic loss with a (ln m)² pull towards neutral, minimized by coordinate descent in log space."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from prme.learning.coordinate import coordinate_search
from prme.learning.observations import ObservedGroup
from prme.learning.table import JudgedTable
from prme.models.learning import (
    LearningConfig,
)
from prme.models.scoring import (
    ADDITIVE_FEATURES,
    MULTIPLIER_MAX,
    MULTIPLIER_MIN,
)

FloatArray = npt.NDArray[np.float64]
STEP_SIZES = (0.5, 0.25, 0.125, 0.0625)


class PairwiseObjective:
    """``L(m) = mean_G mean_{r∈G} mean_{(p,n)} softplus(margin_scale·(s_n − s_p)) + λ·Σ(ln m)²``
    over the training groups' explicit pairs, with scores by
    :class:`~prme.retrieval.scoring.FactoredWeighted` (the weighted formula's float form)."""

    def __init__(
        self, table: JudgedTable, groups: list[ObservedGroup], config: LearningConfig
    ) -> None:
        requests = len(table.requests)
        # Each training pair weighs 1 / (|groups| · |requests of its group| · n_pos · n_neg),
        # divided in Python: exact integer products, one correctly rounded division.
        share = np.zeros(requests, dtype=np.float64)
        number = {id(r): i for i, r in enumerate(table.requests)}
        for group in groups:
            for request in group.requests:
                pairs = len(request.positive_ids) * len(request.negative_ids)
                share[number[id(request)]] = 1.0 / (len(groups) * len(group.requests) * pairs)
        training = share[table.pair_request] > 0.0
        # Only the rows of training pairs enter the loss; pairs index into that subset.
        rows = np.flatnonzero(np.repeat(share > 0.0, table.n_pos + table.n_neg))
        subset = np.full(len(table.recorded), -1, dtype=np.int64)
        subset[rows] = np.arange(len(rows))
        self.pos = subset[table.pair_pos[training]]
        self.neg = subset[table.pair_neg[training]]
        self.weight = share[table.pair_request[training]]
        self.formula = table.factored(rows)
        self.margin_scale = config.margin_scale
        self.regularization = config.regularization

    def __call__(self, logs: FloatArray) -> float:
        scores = self.formula.scores(np.clip(np.exp(logs), MULTIPLIER_MIN, MULTIPLIER_MAX).tolist())
        z = self.margin_scale * (scores[self.neg] - scores[self.pos])
        softplus = np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z)))
        penalty = math.fsum(x * x for x in logs.tolist())
        return float((self.weight * softplus).sum()) + self.regularization * penalty


def coordinate_descent(
    objective: PairwiseObjective, passes: int
) -> tuple[FloatArray, float, float]:
    """Coordinate descent in log space (§E.9): returns (log multipliers, loss before, after)."""
    before = objective(np.zeros(len(ADDITIVE_FEATURES)))
    logs, after = coordinate_search(objective, before, STEP_SIZES, passes)
    return logs, before, after


def fit_pairwise(
    table: JudgedTable, training: list[ObservedGroup], config: LearningConfig
) -> tuple[FloatArray, float, float]:
    """``pairwise_weight_multipliers_v1`` on the training groups: (log multipliers, training
    loss before, after)."""
    return coordinate_descent(PairwiseObjective(table, training, config), config.passes_per_step)
