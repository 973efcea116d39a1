"""Judgment evidence: the part of a receipt one relevance record judges, stored in columns.

Gate 1 only reads, per judgment, the receipt's identity, query, scopes, weights and recorded
multipliers, and the score, trace and packing flags of the *labelled* candidates. Re-parsing
every whole receipt (kilobytes each, thousands per snapshot) dominated ``evaluate_learning``, so
the engine derives this compact record from the verified receipt when it admits the judgment and
appends it beside the record, in the same transaction. It is derived data, never a second source
of truth: it names the receipt checksum it was cut from, gate 1 checks it against the record, and
``prme pack check`` re-derives it from the stored receipt.
"""

from __future__ import annotations

from collections.abc import Collection
from operator import itemgetter
from typing import Annotated, Literal
from uuid import UUID

from pydantic import Field, model_validator

from prme.models.base import FiniteFloat, Frozen, NonBlankStr, Sha256Hex
from prme.models.enums import Scope
from prme.models.receipt import RetrievalReceipt
from prme.models.scoring import MULTIPLIER_MAX, MULTIPLIER_MIN

# ScoreTrace fields the weighted formula and the ranking policy read, in column order.
TRACE_COLUMNS = (
    "semantic_similarity",
    "lexical_relevance",
    "graph_proximity",
    "recency_factor",
    "salience",
    "confidence",
    "epistemic_weight",
    "temporal_affinity",
    "node_type_boost",
    "path_score",
)
_trace_row = itemgetter(*TRACE_COLUMNS)
# Canonical UUID text: what str(UUID) produces, so ids compare as strings without parsing.
CanonicalUUID = Annotated[
    str, Field(pattern=r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
]
TraceRow = Annotated[tuple[FiniteFloat, ...], Field(min_length=10, max_length=10)]
# ScoringWeights.formula(): six additive weights, temporal_boost, relevance_floor.
FormulaWeights = Annotated[tuple[FiniteFloat, ...], Field(min_length=8, max_length=8)]
MultiplierValues = Annotated[
    tuple[Annotated[float, Field(ge=MULTIPLIER_MIN, le=MULTIPLIER_MAX)], ...],
    Field(min_length=6, max_length=6),
]


class JudgmentEvidence(Frozen):
    """The labelled candidates of one judgment's receipt, in returned order, column by column."""

    schema_version: Literal[1] = 1
    feedback_id: UUID
    request_id: UUID
    user_id: NonBlankStr
    receipt_checksum: Sha256Hex
    query: str
    scopes: tuple[Scope, ...] | None
    fusion: Literal["weighted", "rrf"]
    # The receipt's pre-multiplier weights as the formula reads them, and the multipliers
    # recorded at retrieval (ADDITIVE_FEATURES order; None when none were recorded).
    weights: FormulaWeights
    ranking_multipliers: MultiplierValues | None
    node_ids: tuple[CanonicalUUID, ...] = Field(min_length=1)
    scores: tuple[FiniteFloat, ...]
    in_context: tuple[bool, ...]
    has_content: tuple[bool, ...]
    traces: tuple[TraceRow, ...]

    @model_validator(mode="after")
    def _columns_align(self) -> JudgmentEvidence:
        n = len(self.node_ids)
        lengths = {len(self.scores), len(self.in_context), len(self.has_content), len(self.traces)}
        if lengths != {n}:
            raise ValueError("evidence columns must have one entry per candidate")
        if len(set(self.node_ids)) != n:
            raise ValueError("evidence candidate ids must be unique")
        return self

    @classmethod
    def from_receipt(
        cls, receipt: RetrievalReceipt, feedback_id: UUID, labelled: Collection[UUID | str]
    ) -> JudgmentEvidence:
        """Cut the evidence of ``labelled`` candidates out of a receipt.

        Every value comes from the already validated receipt, so the model is constructed
        without re-validating it (a snapshot cuts thousands).
        """
        wanted = {n if isinstance(n, UUID) else UUID(n) for n in labelled}
        chosen = [c for c in receipt.candidates if c.node_id in wanted]
        return cls.model_construct(
            feedback_id=feedback_id,
            request_id=receipt.request_id,
            user_id=receipt.user_id,
            receipt_checksum=receipt.checksum,
            query=receipt.query,
            scopes=receipt.scopes,
            fusion=receipt.weights.fusion,
            weights=receipt.weights.formula(),
            ranking_multipliers=None
            if receipt.ranking_multipliers is None
            else receipt.ranking_multipliers.as_tuple(),
            node_ids=tuple(str(c.node_id) for c in chosen),
            scores=tuple(c.score for c in chosen),
            in_context=tuple(c.in_context for c in chosen),
            has_content=tuple(c.has_content for c in chosen),
            traces=tuple(_trace_row(c.trace.__dict__) for c in chosen),
        )
