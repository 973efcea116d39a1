"""Receipt verification is an explicit function: a receipt is data, verified where it is read."""

from __future__ import annotations

from typing import Any

import pytest

from prme import MemoryClient
from prme.models.receipt import RetrievalReceipt
from prme.models.scoring import RankingMultipliers, ScoringWeights, product_default_scoring
from prme.retrieval import fusion_methods
from prme.retrieval.replay import (
    ReceiptReplayError,
    replay_ranking,
    replay_scores,
    verify_receipt,
)

TEXTS = ["Aster runs PostgreSQL 16", "Aster moved to Azure", "Basalt runs on Fly.io", "Aster"]


def stored(client: MemoryClient, weights: ScoringWeights) -> RetrievalReceipt:
    for text in TEXTS:
        client.store(text, user_id="alice")
    response = client.retrieve("Aster PostgreSQL", user_id="alice", weights=weights)
    receipt = client.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
    assert receipt is not None and len(receipt.candidates) >= 3
    return receipt


def edited(receipt: RetrievalReceipt, **update: Any) -> RetrievalReceipt:
    """``receipt`` with fields replaced, through ordinary construction (no replay there)."""
    fields = {name: getattr(receipt, name) for name in RetrievalReceipt.model_fields}
    return RetrievalReceipt.model_validate({**fields, **update})


@pytest.mark.parametrize("weights", [ScoringWeights(), product_default_scoring()])
def test_an_honest_receipt_verifies(client: MemoryClient, weights: ScoringWeights) -> None:
    receipt = stored(client, weights)
    verify_receipt(receipt)
    assert replay_scores(receipt) == [c.score for c in receipt.candidates]
    assert replay_ranking(receipt) == [c.node_id for c in receipt.candidates]


@pytest.mark.parametrize("weights", [ScoringWeights(), product_default_scoring()])
def test_every_forgery_is_refused_by_verification_not_by_construction(
    client: MemoryClient, weights: ScoringWeights
) -> None:
    receipt = stored(client, weights)
    first, second, *rest = receipt.candidates
    forged_score = first.model_copy(update={"score": first.score + 0.5})
    forgeries = {
        "score replay mismatch": (forged_score, second, *rest),
        "ranking replay": (second, first, *rest),
        "ids must be unique": (first, first, *rest),
    }
    for message, candidates in forgeries.items():
        forged = edited(receipt, candidates=candidates)  # constructs: receipts are data
        with pytest.raises(ReceiptReplayError, match=message):
            verify_receipt(forged)
    other = "rrf" if weights.fusion == "weighted" else "weighted"
    mixed = edited(receipt, weights=receipt.weights.model_copy(update={"fusion": other}))
    with pytest.raises(ReceiptReplayError, match="different formulas"):
        verify_receipt(mixed)
    trace = first.trace.model_copy(update={"composite_score": first.score + 1})
    traced = first.model_copy(update={"trace": trace})
    with pytest.raises(ReceiptReplayError, match="base score"):
        verify_receipt(edited(receipt, candidates=(traced, second, *rest)))
    if weights.fusion == "rrf":
        boosted = edited(receipt, ranking_multipliers=RankingMultipliers(lexical=2.0))
        with pytest.raises(ReceiptReplayError, match="non-neutral multipliers"):
            verify_receipt(boosted)


def test_a_retrieval_scores_its_candidates_once(
    client: MemoryClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building the receipt used to replay every score in the model's validator."""
    for text in TEXTS:
        client.store(text, user_id="alice")
    calls: list[str] = []
    for name, method in list(fusion_methods.FUSION_METHODS.items()):

        def counted(*args: Any, _replay: Any = method.replay, _name: str = name) -> list[float]:
            calls.append(_name)
            result: list[float] = _replay(*args)
            return result

        monkeypatch.setitem(
            fusion_methods.FUSION_METHODS, name, method.__class__(
                method.name, method.adjusts_weights, method.min_score_on, method.fuse, counted
            ),
        )  # fmt: skip
    for weights in (ScoringWeights(), product_default_scoring()):
        response = client.retrieve("Aster", user_id="alice", weights=weights)
        assert response.results and response.metadata.receipt_persisted
    assert calls == []
    # reading the receipt back verifies it: one replay
    receipt = client.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
    assert receipt is not None and calls == ["rrf"]
    assert receipt.request_id == response.metadata.request_id
