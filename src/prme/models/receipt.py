"""The retrieval receipt: everything needed to replay a ranking, checksummed.

Schema version 2 of prme's own receipt; stored version-1 receipts still parse, replay and
re-encode to their exact bytes. The versions differ only in what ``pack.write_seq`` counts:

- 1: the pack's content write sequence (it moved with every owner's writes);
- 2: the **owner's** content write sequence (only the owner's own content writes move it, so
  a receipt shows nothing of another owner's activity).

Later fields must be added so that stored bytes (and therefore checksums) never change.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, Final, Literal
from uuid import UUID

from pydantic import Field, ValidationInfo, model_validator

from prme.canonical import checksum, sha256_hex
from prme.models.base import FiniteFloat, Frozen, NonBlankStr, Sha256Hex, UTCDateTime
from prme.models.enums import NodeType, RetrievalMode, Scope
from prme.models.scoring import RankingMultipliers, ScoringWeights, adjusted_weights
from prme.models.trace import RankFusionTrace, ScoreTrace
from prme.retrieval.fusion_methods import fusion_method
from prme.retrieval.scoring import ranking_key

RECEIPT_SCHEMA_VERSION: Final = 2
REPLAY_CONTEXT = "prme.receipt.replay"


class PackIdentity(Frozen):
    """Which pack, at which content write sequence, answered the request (in a receipt of
    schema 2 the sequence is the owner's; see the module docstring)."""

    pack_id: str
    write_seq: int = Field(ge=0)


class PackingConfig(Frozen):
    """How results were packed into the context bundle."""

    token_budget: int = Field(default=4096, ge=0)
    tokenizer: str = "prme-regex-v1"
    context_format: Literal["plain_lines_v1"] = "plain_lines_v1"


class RetrievalExecution(Frozen):
    """Request inputs (compared between paired arms), observed outcomes, and feature identity."""

    schema_version: Literal[1] = 1
    inputs: dict[str, Any]
    outcomes: dict[str, Any]
    features: dict[str, Any]


class ReceiptCandidate(Frozen):
    """One returned result, in returned order."""

    node_id: UUID
    scope: Scope
    node_type: NodeType
    content_sha256: Sha256Hex
    paths: tuple[str, ...]
    score: FiniteFloat
    trace: ScoreTrace
    rank_fusion: RankFusionTrace | None = None
    semantic_relevance: FiniteFloat | None = None
    token_cost: int = Field(ge=0)
    in_context: bool
    has_content: bool


class RetrievalReceipt(Frozen):
    """A frozen, replayable record of one retrieval."""

    schema_version: Literal[1, 2] = RECEIPT_SCHEMA_VERSION
    request_id: UUID
    user_id: NonBlankStr
    query: str
    reference_time: UTCDateTime
    scopes: tuple[Scope, ...] | None
    retrieval_mode: RetrievalMode
    min_score: FiniteFloat | None
    result_limit: int = Field(ge=0)
    time_from: UTCDateTime | None
    time_to: UTCDateTime | None
    scoring: ScoringWeights
    weights: ScoringWeights
    ranking_multipliers: RankingMultipliers | None
    ranking_policy: Literal["score_path_id"] = "score_path_id"
    packing: PackingConfig
    context_sha256: Sha256Hex
    pack: PackIdentity
    execution: RetrievalExecution
    candidates: tuple[ReceiptCandidate, ...]

    # Computed once per object (receipts are immutable; learning hashes thousands of them).
    # A cached_property lives outside the fields, so equality and dumps ignore it.
    @cached_property
    def checksum(self) -> str:
        """SHA-256 of the receipt's canonical JSON."""
        return checksum(self)

    @classmethod
    def from_canonical_json(cls, payload: str, *, replay: bool = True) -> RetrievalReceipt:
        """Parse stored canonical bytes; the checksum is the SHA-256 of exactly those bytes.

        ``replay=False`` skips the per-receipt replay check, for bulk readers that replay the
        whole snapshot themselves (gate 1 does, vectorized).
        """
        receipt = cls.model_validate_json(payload, context={REPLAY_CONTEXT: replay})
        receipt.__dict__["checksum"] = sha256_hex(payload)  # the cached_property's slot
        return receipt

    @property
    def fusion(self) -> str:
        return self.scoring.fusion

    def applied_weights(self) -> ScoringWeights:
        """Pre-multiplier weights with the recorded multipliers applied."""
        return adjusted_weights(self.weights, self.ranking_multipliers)

    def replay_scores(self, multipliers: RankingMultipliers | None = None) -> list[float]:
        """Each candidate's score from its trace alone; ``multipliers`` overrides the recorded ones."""
        method = fusion_method(self.scoring)
        chosen = self.ranking_multipliers if multipliers is None else multipliers
        weights = adjusted_weights(self.weights, chosen) if method.adjusts_weights else self.weights
        return method.replay(self.candidates, self.scoring, weights)

    def replay_ranking(self) -> list[UUID]:
        """The stored candidates re-sorted by replayed score under the recorded ranking policy."""
        scores = self.replay_scores()
        order = sorted(
            range(len(self.candidates)),
            key=lambda i: ranking_key(
                scores[i], self.candidates[i].trace.path_score, self.candidates[i].node_id
            ),
        )
        return [self.candidates[i].node_id for i in order]

    @model_validator(mode="after")
    def _replays_exactly(self, info: ValidationInfo) -> RetrievalReceipt:
        if isinstance(info.context, dict) and info.context.get(REPLAY_CONTEXT) is False:
            return self
        ids = [c.node_id for c in self.candidates]
        if len(set(ids)) != len(ids):
            raise ValueError("receipt candidate ids must be unique")
        if (
            not fusion_method(self.scoring).adjusts_weights
            and self.ranking_multipliers is not None
            and not self.ranking_multipliers.is_neutral
        ):
            raise ValueError("rank-fusion receipts cannot carry non-neutral multipliers")
        if self.weights.fusion != self.scoring.fusion:
            raise ValueError("receipt weights and base scoring use different formulas")
        for candidate, replayed in zip(self.candidates, self.replay_scores(), strict=True):
            if candidate.score != replayed:
                raise ValueError(f"receipt score replay mismatch for candidate {candidate.node_id}")
            # Schema 1 has no post-score adjustments: the trace's base score is the score.
            if candidate.trace.composite_score != candidate.score:
                raise ValueError("receipt base score does not match its trace")
        if self.replay_ranking() != ids:
            raise ValueError("receipt ranking replay does not reproduce the stored order")
        return self
