"""Replaying a retrieval receipt: each recorded score from its trace alone, the stored order from
those scores, and :func:`verify_receipt`, the explicit check that a receipt replays exactly.

A receipt is plain data (:class:`~prme.models.receipt.RetrievalReceipt`); it is verified where
stored receipts are read and verified (``services.receipts.parse_receipt`` with
``verify_canonical``: ``get_retrieval_receipt`` and ``pack check``), not on construction, so a
retrieval scores its candidates once. Gate 1 replays whole snapshots itself, vectorized.
"""

from __future__ import annotations

from uuid import UUID

from prme.models.receipt import RetrievalReceipt
from prme.models.scoring import RankingMultipliers, adjusted_weights
from prme.retrieval.fusion_methods import fusion_method
from prme.retrieval.scoring import ranking_key


class ReceiptReplayError(ValueError):
    """A receipt whose recorded scores or order its traces do not reproduce."""


def replay_scores(
    receipt: RetrievalReceipt, multipliers: RankingMultipliers | None = None
) -> list[float]:
    """Each candidate's score from its trace alone; ``multipliers`` overrides the recorded ones."""
    method = fusion_method(receipt.scoring)
    chosen = receipt.ranking_multipliers if multipliers is None else multipliers
    weights = adjusted_weights(receipt.weights, chosen) if method.adjusts_weights else receipt.weights
    return method.replay(receipt.candidates, receipt.scoring, weights)


def replay_ranking(receipt: RetrievalReceipt, scores: list[float] | None = None) -> list[UUID]:
    """The stored candidates re-sorted by replayed score (or ``scores``) under the recorded
    ranking policy."""
    replayed = replay_scores(receipt) if scores is None else scores
    candidates = receipt.candidates
    order = sorted(
        range(len(candidates)),
        key=lambda i: ranking_key(replayed[i], candidates[i].trace.path_score, candidates[i].node_id),
    )
    return [candidates[i].node_id for i in order]


def verify_receipt(receipt: RetrievalReceipt) -> None:
    """Raise :class:`ReceiptReplayError` unless ``receipt`` replays exactly: unique candidates,
    one formula, no multipliers under rank fusion, every score from its trace, the stored order."""
    ids = [c.node_id for c in receipt.candidates]
    if len(set(ids)) != len(ids):
        raise ReceiptReplayError("receipt candidate ids must be unique")
    if (
        not fusion_method(receipt.scoring).adjusts_weights
        and receipt.ranking_multipliers is not None
        and not receipt.ranking_multipliers.is_neutral
    ):
        raise ReceiptReplayError("rank-fusion receipts cannot carry non-neutral multipliers")
    if receipt.weights.fusion != receipt.scoring.fusion:
        raise ReceiptReplayError("receipt weights and base scoring use different formulas")
    scores = replay_scores(receipt)
    for candidate, replayed in zip(receipt.candidates, scores, strict=True):
        if candidate.score != replayed:
            raise ReceiptReplayError(
                f"receipt score replay mismatch for candidate {candidate.node_id}"
            )
        # Schema 1 has no post-score adjustments: the trace's base score is the score.
        if candidate.trace.composite_score != candidate.score:
            raise ReceiptReplayError("receipt base score does not match its trace")
    if replay_ranking(receipt, scores) != ids:
        raise ReceiptReplayError("receipt ranking replay does not reproduce the stored order")
