"""The default fit ``listwise_ndcg_multipliers_v1``: what the gates decide, on training groups.

Both gates judge a proposal by judged NDCG@k per query group and (gate 2) by how many groups
regress, so this fit maximizes exactly that on the training groups:

``loss(x) = 1 − mean_G N_G(x) + mean_G max(0, N_G(0) − N_G(x)) + λ·Σ x_f²``, ``m = exp(x)``,

where ``N_G`` is group G's judged NDCG@k (mean over its requests, same metric and tie-breaking
as the gate) and ``N_G(0)`` its value under base scoring. A group that gets worse than base
counts twice, and a move that makes more than the holdout's ``max_regression_fraction`` of
training groups worse than base is never taken. The search is a deterministic pattern search
in log space from neutral (each coordinate ±step, steps halving from 1.0 to 1/16, bounds
[ln 0.25, ln 4]); a move is taken only when it lowers the loss by more than 1e-12, so the result
is never worse than neutral on this loss.

Conservative by construction: judged NDCG is a step function, so the search can move further
than the evidence asks. The found point ``x*`` is shrunk towards neutral to the smallest
``t·x*`` (t = 1/16, 2/16, …, 1) that keeps at least 90 % of the improvement of the evidence
part ``1 − mean N + regret`` (the pull is left out: it would reward any shrink), keeps the
regression guard and still beats neutral on the whole loss: the smallest move that keeps most
of the training gain.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from prme.learning.coordinate import coordinate_search
from prme.learning.metrics import discount
from prme.learning.observations import ObservedGroup
from prme.learning.table import PATH, JudgedTable
from prme.models.holdout import FullRetrievalEvaluationConfig
from prme.models.learning import TOLERANCE, LearningConfig
from prme.models.scoring import ADDITIVE_FEATURES, MULTIPLIER_MAX, MULTIPLIER_MIN

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
STEP_SIZES = (1.0, 0.5, 0.25, 0.125, 0.0625)
REGRESSION_WEIGHT = 1.0  # a training group below base counts (1 + this) times its drop
KEEP_GAIN = 0.9  # the shrink keeps at least this share of the loss improvement
SHRINK_STEPS = 16
MAX_REGRESSION_FRACTION: float = FullRetrievalEvaluationConfig.model_fields[
    "max_regression_fraction"
].default


class ListwiseObjective:
    """Per training group judged NDCG@k of the weighted formula's float form at ``m = exp(x)``.

    Positions come from pairs: every positive of a request is compared with every judged row of
    the same request (``n_pos × n`` pairs), a row ranking above it when its score is higher or,
    on an exact tie, when it comes first under (path score desc, node id asc) — the gate's
    ranking policy. A positive's position is the number of rows above it.
    """

    def __init__(
        self, table: JudgedTable, groups: list[ObservedGroup], config: LearningConfig
    ) -> None:
        number = {id(r): i for i, r in enumerate(table.requests)}
        index, group_of, share = [], [], []
        for g, group in enumerate(groups):
            for request in group.requests:
                index.append(number[id(request)])
                group_of.append(g)
                share.append(1.0 / len(group.requests))
        chosen = np.asarray(index, dtype=np.int64)
        n_pos = table.n_pos[chosen]
        n = n_pos + table.n_neg[chosen]
        requests = len(chosen)
        first = np.asarray([table.requests[i].first_row for i in index], dtype=np.int64)
        local_first = np.cumsum(n) - n
        within = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(local_first, n)
        rows = np.repeat(first, n) + within
        self.formula = table.factored(rows)
        owner = np.repeat(np.arange(requests, dtype=np.int64), n)
        order = np.lexsort((table.id_rank[rows], -table.features[rows, PATH], owner))
        tie_rank = np.empty(len(rows), dtype=np.int64)
        tie_rank[order] = np.arange(len(rows), dtype=np.int64)
        pairs = n_pos * n
        pair_request = np.repeat(np.arange(requests, dtype=np.int64), pairs)
        t = np.arange(int(pairs.sum()), dtype=np.int64) - np.repeat(np.cumsum(pairs) - pairs, pairs)
        width = n[pair_request]
        self.positive_row = local_first[pair_request] + t // width
        self.other_row = local_first[pair_request] + t % width
        self.tie_beats = tie_rank[self.other_row] < tie_rank[self.positive_row]
        self.positive = (np.cumsum(n_pos) - n_pos)[pair_request] + t // width
        self.positives = int(n_pos.sum())
        self.positive_request = np.repeat(np.arange(requests, dtype=np.int64), n_pos)
        k = config.ndcg_k
        longest = int(n.max()) if requests else 1
        self.gains = np.asarray([discount(i) if i < k else 0.0 for i in range(longest)])
        ideal_by_n = {
            c: math.fsum(discount(i) for i in range(min(k, c))) for c in set(n_pos.tolist())
        }
        self.ideal = np.asarray([ideal_by_n[c] for c in n_pos.tolist()], dtype=np.float64)
        self.requests = requests
        self.group_of = np.asarray(group_of, dtype=np.int64)
        self.share = np.asarray(share, dtype=np.float64)
        self.groups = len(groups)
        self.regularization = config.regularization
        self.base = self.group_ndcg(np.zeros(len(ADDITIVE_FEATURES)))

    def group_ndcg(self, logs: FloatArray) -> FloatArray:
        """Each training group's judged NDCG@k at log multipliers ``logs``."""
        m = np.clip(np.exp(logs), MULTIPLIER_MIN, MULTIPLIER_MAX).tolist()
        scores = self.formula.scores(m)
        mine, other = scores[self.positive_row], scores[self.other_row]
        above = (other > mine) | ((other == mine) & self.tie_beats)
        position = np.bincount(self.positive, weights=above, minlength=self.positives)
        gains = self.gains[position.astype(np.int64)]
        dcg = np.bincount(self.positive_request, weights=gains, minlength=self.requests)
        ndcg = dcg / self.ideal
        by_group = np.bincount(self.group_of, weights=ndcg * self.share, minlength=self.groups)
        return np.asarray(by_group, dtype=np.float64)

    def __call__(self, logs: FloatArray) -> tuple[float, float, float]:
        """(loss, its evidence part ``1 − quality + regret`` without the pull, share of training
        groups worse than base) at ``logs``."""
        ndcg = self.group_ndcg(logs)
        drop = self.base - ndcg
        regressed = int(np.count_nonzero(drop > TOLERANCE)) / self.groups
        quality = math.fsum(ndcg.tolist()) / self.groups
        regret = math.fsum(np.maximum(drop, 0.0).tolist()) / self.groups
        evidence = 1.0 - quality + REGRESSION_WEIGHT * regret
        penalty = math.fsum(x * x for x in logs.tolist())
        return evidence + self.regularization * penalty, evidence, regressed


def pattern_search(objective: ListwiseObjective, passes: int) -> tuple[FloatArray, float, float]:
    """Guarded coordinate pattern search from neutral, then the shrink towards neutral:
    (log multipliers, loss at neutral, loss at the result)."""
    seen: dict[tuple[float, ...], tuple[float, float, float]] = {}

    def evaluate(logs: FloatArray) -> tuple[float, float, float]:
        key = tuple(logs.tolist())  # the search revisits points: each is evaluated once
        if key not in seen:
            seen[key] = objective(logs)
        return seen[key]

    def guarded(logs: FloatArray) -> float | None:
        loss, _, regressed = evaluate(logs)
        return loss if regressed <= MAX_REGRESSION_FRACTION else None

    before, base_evidence, _ = evaluate(np.zeros(len(ADDITIVE_FEATURES)))
    current, best = coordinate_search(guarded, before, STEP_SIZES, passes)
    if not best < before - TOLERANCE:
        return np.zeros(len(ADDITIVE_FEATURES)), before, before
    # The shrink is judged on the evidence alone (the pull would reward any shrink).
    _, found, _ = evaluate(current)
    wanted = base_evidence - KEEP_GAIN * (base_evidence - found)
    for i in range(1, SHRINK_STEPS):
        shrunk = current * (i / SHRINK_STEPS)
        loss, evidence, regressed = evaluate(shrunk)
        if (
            regressed <= MAX_REGRESSION_FRACTION
            and evidence <= wanted
            and loss < before - TOLERANCE
        ):
            return shrunk, before, loss
    return current, before, best


def fit_listwise(
    table: JudgedTable, training: list[ObservedGroup], config: LearningConfig
) -> tuple[FloatArray, float, float]:
    """``listwise_ndcg_multipliers_v1`` on the training groups: (log multipliers, training loss
    before, after)."""
    return pattern_search(ListwiseObjective(table, training, config), config.passes_per_step)
