"""Judgment evidence: one relevance judgment and the part of its receipt it judges, in columns.

Gate 1 only reads, per judgment, its surface and labels, the receipt's identity, query,
scopes, weights and recorded multipliers, and the score, trace and packing flags of the
*labelled* candidates. Re-parsing every whole receipt (kilobytes each, thousands per snapshot)
dominated ``evaluate_learning``, so when the engine admits a judgment it derives this compact
record from the same validated submission and the verified receipt, and appends it beside the
judgment in the same transaction. It is derived data, never a second source of truth: it names
its judgment (operation id) and its receipt (checksum), and ``prme pack check`` re-derives it
from the stored judgment and receipt and reports any difference.
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import itemgetter
from typing import Annotated, Literal
from uuid import UUID

from pydantic import Field, StrictBool, model_validator

from prme.models.base import FiniteFloat, Frozen, NonBlankStr, Sha256Hex
from prme.models.enums import Scope
from prme.models.receipt import RetrievalReceipt
from prme.models.relevance import RelevanceSurface
from prme.models.scoring import ADDITIVE_FEATURES, MULTIPLIER_MAX, MULTIPLIER_MIN
from prme.models.trace import WEIGHTED_COLUMNS

# ScoreTrace fields the weighted formula and the ranking policy read, in column order.
TRACE_COLUMNS: tuple[str, ...] = (*WEIGHTED_COLUMNS, "path_score")
_trace_row = itemgetter(*TRACE_COLUMNS)
# Canonical UUID text: what str(UUID) produces, so ids compare as strings without parsing.
CanonicalUUID = Annotated[
    str, Field(pattern=r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
]
_TRACE_WIDTH = len(TRACE_COLUMNS)
_FORMULA_WIDTH = len(ADDITIVE_FEATURES) + 2  # ScoringWeights.formula(): + temporal, floor
_MULTIPLIER_WIDTH = len(ADDITIVE_FEATURES)
TraceRow = Annotated[
    tuple[FiniteFloat, ...], Field(min_length=_TRACE_WIDTH, max_length=_TRACE_WIDTH)
]
FormulaWeights = Annotated[
    tuple[FiniteFloat, ...], Field(min_length=_FORMULA_WIDTH, max_length=_FORMULA_WIDTH)
]
MultiplierValues = Annotated[
    tuple[Annotated[float, Field(ge=MULTIPLIER_MIN, le=MULTIPLIER_MAX)], ...],
    Field(min_length=_MULTIPLIER_WIDTH, max_length=_MULTIPLIER_WIDTH),
]


class JudgmentEvidence(Frozen):
    """One judgment's labelled candidates, column by column: relevant ones first, each part in
    node-id order (the order gate 1 pairs them in)."""

    schema_version: Literal[1] = 1
    feedback_id: UUID
    request_id: UUID
    user_id: NonBlankStr
    surface: RelevanceSurface
    receipt_checksum: Sha256Hex
    query: str
    scopes: tuple[Scope, ...] | None
    fusion: Literal["weighted", "rrf"]
    # The receipt's pre-multiplier weights as the formula reads them, and the multipliers
    # recorded at retrieval (ADDITIVE_FEATURES order; None when none were recorded).
    weights: FormulaWeights
    ranking_multipliers: MultiplierValues | None
    node_ids: tuple[CanonicalUUID, ...] = Field(min_length=1)
    relevant: tuple[StrictBool, ...]  # the judgment's label of each candidate
    scores: tuple[FiniteFloat, ...]
    in_context: tuple[bool, ...]
    has_content: tuple[bool, ...]
    traces: tuple[TraceRow, ...]

    @model_validator(mode="after")
    def _columns_align(self) -> JudgmentEvidence:
        ids, relevant = self.node_ids, self.relevant
        n = len(ids)
        if not (
            len(relevant)
            == len(self.scores)
            == len(self.in_context)
            == len(self.has_content)
            == len(self.traces)
            == n
        ):
            raise ValueError("evidence columns must have one entry per candidate")
        split = relevant.count(True)
        head, tail = ids[:split], ids[split:]
        if relevant[:split].count(True) != split or not (
            head == tuple(sorted(head)) and tail == tuple(sorted(tail))
        ):
            raise ValueError("evidence lists relevant candidates first, each part by node id")
        if len(set(ids)) != n:
            raise ValueError("evidence candidate ids must be unique")
        return self

    @property
    def positives(self) -> int:
        """How many candidates (the first ones) are judged relevant."""
        return self.relevant.count(True)

    @classmethod
    def from_receipt(
        cls,
        receipt: RetrievalReceipt,
        feedback_id: UUID,
        labels: Mapping[UUID, bool],
        surface: RelevanceSurface,
    ) -> JudgmentEvidence:
        """Cut the evidence of the labelled candidates out of a receipt; labels naming
        candidates the receipt did not return are left out (callers check for them).

        Every value comes from an already validated receipt and judgment, so the model is
        constructed without re-validating it (a snapshot cuts thousands).
        """
        judged = [
            (not labels[c.node_id], str(c.node_id), c)
            for c in receipt.candidates
            if c.node_id in labels
        ]
        judged.sort(key=itemgetter(0, 1))
        chosen = [c for _, _, c in judged]
        return cls.model_construct(
            feedback_id=feedback_id,
            request_id=receipt.request_id,
            user_id=receipt.user_id,
            surface=surface,
            receipt_checksum=receipt.checksum,
            query=receipt.query,
            scopes=receipt.scopes,
            fusion=receipt.weights.fusion,
            weights=receipt.weights.formula(),
            ranking_multipliers=None
            if receipt.ranking_multipliers is None
            else receipt.ranking_multipliers.as_tuple(),
            node_ids=tuple(text for _, text, _ in judged),
            relevant=tuple(not irrelevant for irrelevant, _, _ in judged),
            scores=tuple(c.score for c in chosen),
            in_context=tuple(c.in_context for c in chosen),
            has_content=tuple(c.has_content for c in chosen),
            traces=tuple(_trace_row(c.trace.__dict__) for c in chosen),
        )
