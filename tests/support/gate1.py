"""Hand-built receipts and judgments for gate 1 as a pure function (reference §E, §M.9)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from prme.learning.gate1 import evaluate_learning
from prme.models.learning import LearningConfig, LearningEvaluation
from prme.models.receipt import (
    PackIdentity,
    PackingConfig,
    ReceiptCandidate,
    RetrievalExecution,
    RetrievalReceipt,
)
from prme.models.relevance import RelevanceRecord
from prme.models.scoring import (
    RankingMultipliers,
    ScoringWeights,
    adjusted_weights,
    product_default_scoring,
)
from prme.models.trace import RankFusionTrace, ScoreTrace
from prme.retrieval.scoring import ranking_key, rrf_score, weighted_score

CLOCK = datetime(2026, 9, 12, tzinfo=UTC)
WEIGHTS = ScoringWeights()
REFERENCE = LearningConfig(algorithm="pairwise_weight_multipliers_v1")


def fact(
    node: int,
    *,
    sem: float,
    lex: float,
    graph: float = 0.0,
    weights: ScoringWeights = WEIGHTS,
    in_context: bool = True,
    has_content: bool = True,
) -> ReceiptCandidate:
    """A `fact` candidate with confidence 0.8, salience 0.5, recency 1, asserted (0.9)."""
    features: dict[str, float] = {
        "semantic_similarity": sem,
        "lexical_relevance": lex,
        "graph_proximity": graph,
        "recency_factor": 1.0,
        "salience": 0.5,
        "confidence": 0.8,
        "epistemic_weight": 0.9,
        "node_type_boost": 1.15,
    }
    score = weighted_score(ScoreTrace(**features, composite_score=0.0), weights)
    return ReceiptCandidate(
        node_id=uuid.UUID(int=node),
        scope="project",
        node_type="fact",
        content_sha256="0" * 64,
        paths=("VECTOR",),
        score=score,
        trace=ScoreTrace(**features, composite_score=score),
        token_cost=5,
        in_context=in_context,
        has_content=has_content,
    )


def receipt(
    request: int,
    query: str,
    candidates: Sequence[ReceiptCandidate],
    *,
    user_id: str = "alice",
    scopes: tuple[str, ...] | None = ("project",),
    weights: ScoringWeights = WEIGHTS,
    multipliers: RankingMultipliers | None = None,
) -> RetrievalReceipt:
    ordered = sorted(candidates, key=lambda c: ranking_key(c.score, c.trace.path_score, c.node_id))
    return RetrievalReceipt(
        request_id=uuid.UUID(int=request),
        user_id=user_id,
        query=query,
        reference_time=CLOCK,
        scopes=scopes,
        retrieval_mode="default",
        min_score=None,
        result_limit=10,
        time_from=None,
        time_to=None,
        scoring=weights,
        weights=weights,
        ranking_multipliers=multipliers,
        packing=PackingConfig(),
        context_sha256="0" * 64,
        pack=PackIdentity(pack_id="pack", write_seq=1),
        execution=RetrievalExecution(inputs={}, outcomes={}, features={}),
        candidates=tuple(ordered),
    )


def record(
    feedback: int,
    on: RetrievalReceipt,
    labels: dict[int, bool],
    *,
    surface: str = "results",
    user_id: str = "alice",
) -> RelevanceRecord:
    return RelevanceRecord(
        feedback_id=uuid.UUID(int=feedback),
        request_id=on.request_id,
        labels={uuid.UUID(int=k): v for k, v in labels.items()},
        surface=surface,
        method="structured_evaluation",
        user_id=user_id,
        recorded_at=CLOCK,
        receipt_checksum=on.checksum,
    )


def reference_fixture(
    n: int = 100, *, multipliers: RankingMultipliers | None = None, flip: set[int] | None = None
) -> tuple[list[RetrievalReceipt], list[RelevanceRecord]]:
    """§M.9: request 10000+i ("query i") returns a lexical match 10i+1 (judged relevant) and a
    semantic + graph match 10i+2 (judged not relevant). ``flip`` reverses the labels of some i."""
    weights = WEIGHTS if multipliers is None else adjusted_weights(WEIGHTS, multipliers)
    receipts, records = [], []
    for i in range(n):
        # Candidates score with the applied weights; the receipt keeps the pre-multiplier ones.
        a = fact(10 * i + 1, sem=0.2, lex=0.9, weights=weights)
        b = fact(10 * i + 2, sem=0.9, lex=0.1, graph=1.0, weights=weights)
        r = receipt(10000 + i, f"query {i}", [a, b], multipliers=multipliers)
        relevant = i not in (flip or set())
        receipts.append(r)
        records.append(record(50000 + i, r, {10 * i + 1: relevant, 10 * i + 2: not relevant}))
    return receipts, records


def rrf_receipt(request: int, query: str, nodes: Sequence[int]) -> RetrievalReceipt:
    scoring = product_default_scoring()
    candidates = []
    for rank, node in enumerate(nodes, start=1):
        fusion = RankFusionTrace(
            semantic_rank=rank,
            lexical_rank=rank,
            epistemic_factor=1.0,
            node_type_factor=1.0,
            temporal_factor=1.0,
        )
        score = rrf_score(fusion, scoring.rrf_k or 60)
        candidates.append(
            ReceiptCandidate(
                node_id=uuid.UUID(int=node),
                scope="project",
                node_type="fact",
                content_sha256="0" * 64,
                paths=("LEXICAL", "VECTOR"),
                score=score,
                trace=ScoreTrace(composite_score=score),
                rank_fusion=fusion,
                semantic_relevance=0.5,
                token_cost=5,
                in_context=True,
                has_content=True,
            )
        )
    return receipt(request, query, candidates, weights=scoring)


def run(
    receipts: Sequence[RetrievalReceipt], records: Sequence[RelevanceRecord], **kwargs: Any
) -> LearningEvaluation:
    kwargs.setdefault("scopes", ["project"])
    return evaluate_learning(receipts, records, user_id="alice", **kwargs)
