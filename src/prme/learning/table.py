"""The columnar gate-1 table: every judged candidate as a row of trace features, every explicit
pair as two row indices, exact replay scores, positions and per-request metrics."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from prme.errors import InvalidInputError
from prme.learning.metrics import discount
from prme.learning.observations import ObservedRequest
from prme.models.evidence import TRACE_COLUMNS
from prme.models.scoring import (
    ADDITIVE_FEATURES,
    RankingMultipliers,
    ScoringWeights,
    adjusted_weights,
)
from prme.retrieval.scoring import FactoredWeighted, weighted_scores

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
PATH = TRACE_COLUMNS.index("path_score")


# --------------------------------------------------------------------------- feature table
def _columns(block: FloatArray) -> dict[str, FloatArray]:
    return {name: block[:, j] for j, name in enumerate(TRACE_COLUMNS)}


def _classes(keys: list[Any], sizes: IntArray) -> dict[Any, IntArray]:
    """Table rows of each distinct per-request key (requests own ``sizes`` rows each, in order)."""
    number: dict[Any, int] = {}
    per_request = np.asarray([number.setdefault(k, len(number)) for k in keys], dtype=np.int64)
    per_row = np.repeat(per_request, sizes)
    return {key: np.flatnonzero(per_row == n) for key, n in number.items()}


class JudgedTable:
    """Every judged candidate of every observed request as one row of trace features, and every
    explicit (positive, negative) pair as a pair of rows.

    Rows of one request are contiguous (positives, then negatives), so a stable sort by
    (request, ranking key) keeps each request in its own row range. Pairs run request by
    request, positive-major, as the objective and the metrics define them.
    """

    def __init__(self, requests: list[ObservedRequest]) -> None:
        traces: list[tuple[float, ...]] = []
        recorded: list[float] = []
        ids: list[str] = []
        for request in requests:
            request.first_row = len(ids)
            traces.extend(request.traces)
            recorded.extend(request.scores)
            ids.extend(request.positive_ids)
            ids.extend(request.negative_ids)
        n_pos = np.asarray([len(r.positive_ids) for r in requests], dtype=np.int64)
        n_neg = np.asarray([len(r.negative_ids) for r in requests], dtype=np.int64)
        sizes = n_pos + n_neg
        first = np.cumsum(sizes) - sizes
        self.requests = requests
        self.n_pos, self.n_neg = n_pos, n_neg
        self.features: FloatArray = np.asarray(traces, dtype=np.float64).reshape(
            -1, len(TRACE_COLUMNS)
        )
        self.recorded = recorded
        self.owner: IntArray = np.repeat(np.arange(len(requests), dtype=np.int64), sizes)
        self.first_row: IntArray = np.repeat(first, sizes)
        self.id_rank: IntArray = np.unique(np.asarray(ids, dtype=str), return_inverse=True)[
            1
        ].astype(np.int64)
        # pairs: request r owns n_pos[r]·n_neg[r] of them, t = p·n_neg[r] + q
        pairs = n_pos * n_neg
        self.pair_request: IntArray = np.repeat(np.arange(len(requests), dtype=np.int64), pairs)
        t = np.arange(int(pairs.sum()), dtype=np.int64) - np.repeat(np.cumsum(pairs) - pairs, pairs)
        width = n_neg[self.pair_request]
        self.pair_pos: IntArray = first[self.pair_request] + t // width
        self.pair_neg: IntArray = first[self.pair_request] + n_pos[self.pair_request] + t % width
        weight_keys = [r.weights for r in requests]
        replay_keys = [(r.weights, _applied(r.multipliers)) for r in requests]
        # One ScoringWeights per distinct formula: it scores exactly as the receipts' weights.
        self.weights = {key: ScoringWeights.from_formula(key) for key in set(weight_keys)}
        self.recorded_weights = {
            (key, applied): adjusted_weights(self.weights[key], _multiplier_model(applied))
            for key, applied in set(replay_keys)
        }
        self.by_weights = _classes(weight_keys, sizes)
        self.by_replay = _classes(replay_keys, sizes)

    def factored(self, rows: IntArray) -> FactoredWeighted:
        """The weighted formula's float form over the given rows (for fitting)."""
        formulas = np.empty((len(self.recorded), len(ADDITIVE_FEATURES) + 2), dtype=np.float64)
        for formula, index in self.by_weights.items():
            formulas[index] = formula
        return FactoredWeighted(_columns(self.features[rows]), formulas[rows])

    def _scores(self, index: IntArray, weights: ScoringWeights) -> list[float]:
        return weighted_scores(_columns(self.features[index]), weights)

    def exact_scores(self, multipliers: RankingMultipliers) -> FloatArray:
        """Every row's score by the exact replay arithmetic (weighted_scores ≡ weighted_score)."""
        out = np.empty(len(self.recorded), dtype=np.float64)
        for key, index in self.by_weights.items():
            out[index] = self._scores(index, adjusted_weights(self.weights[key], multipliers))
        return out

    def check_replays(self, baseline: FloatArray) -> None:
        """The recorded multipliers over the pre-multiplier weights reproduce every judged score.

        Equivalent to ``weighted_score(trace, receipt.applied_weights()) == score`` per judged
        candidate, batched: rows with the same weights and multipliers replay in one call, and
        rows recorded without multipliers are the ``baseline`` (neutral) scores already.
        """
        recorded = np.asarray(self.recorded, dtype=np.float64)
        replayed = baseline.copy()
        for (key, applied), index in self.by_replay.items():
            if applied is not None:
                replayed[index] = self._scores(index, self.recorded_weights[(key, applied)])
        mismatched = np.unique(self.owner[np.flatnonzero(replayed != recorded)]).tolist()
        if mismatched:
            rid = min(str(self.requests[i].request_id) for i in mismatched)
            raise InvalidInputError(
                "receipts", f"Baseline score replay mismatch for request {rid}", rid
            )

    def positions(self, scores: FloatArray) -> IntArray:
        """Each row's 0-based position within its request under the ranking policy
        (score desc, path score desc, node id asc)."""
        order = np.lexsort((self.id_rank, -self.features[:, PATH], -scores, self.owner))
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        positions: IntArray = rank - self.first_row
        return positions

    def metrics(self, positions: IntArray, k: int) -> tuple[list[float], list[float]]:
        """Per request: pairwise accuracy and judged NDCG@k of its judged order.

        The same arithmetic as :func:`prme.learning.metrics.pairwise_accuracy` and
        :func:`~prme.learning.metrics.judged_ndcg`: exact integer pair counts divided once, and
        DCG summed left to right over the hit positions in ascending order (one vector step per
        hit rank, so every request adds in exactly the order ``sum(..., 0.0)`` would).
        """
        requests = len(self.requests)
        correct = np.bincount(
            self.pair_request,
            weights=(positions[self.pair_pos] < positions[self.pair_neg]).astype(np.float64),
            minlength=requests,
        )
        pairwise = correct / (self.n_pos * self.n_neg)
        is_positive = np.arange(len(positions)) - self.first_row < self.n_pos[self.owner]
        is_hit = is_positive & (positions < k)
        hit_rows = np.flatnonzero(is_hit)
        hit_owner = self.owner[hit_rows]
        hit_pos = positions[hit_rows]
        order = np.lexsort((hit_pos, hit_owner))
        hit_owner, hit_pos = hit_owner[order], hit_pos[order]
        counts = np.bincount(hit_owner, minlength=requests)
        rank = np.arange(len(hit_owner)) - np.repeat(np.cumsum(counts) - counts, counts)
        gains = np.asarray([discount(int(i)) for i in range(k)] or [0.0], dtype=np.float64)
        dcg = np.zeros(requests, dtype=np.float64)
        for step in range(int(counts.max()) if requests else 0):
            at = rank == step
            dcg[hit_owner[at]] = dcg[hit_owner[at]] + gains[hit_pos[at]]
        ideal_by_n = {
            n: sum((discount(i) for i in range(min(k, n))), 0.0) for n in set(self.n_pos.tolist())
        }
        ideal = np.asarray([ideal_by_n[n] for n in self.n_pos.tolist()], dtype=np.float64)
        ndcg: list[float] = (dcg / ideal).tolist() if requests else []
        return pairwise.tolist(), ndcg


def _applied(multipliers: tuple[float, ...] | None) -> tuple[float, ...] | None:
    """Recorded multipliers as they act on scores: neutral ones act as none."""
    return None if multipliers is None or all(m == 1.0 for m in multipliers) else multipliers


def _multiplier_model(values: tuple[float, ...] | None) -> RankingMultipliers | None:
    return None if values is None else RankingMultipliers.from_tuple(values)
