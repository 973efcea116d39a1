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

from pydantic import Field

from prme.canonical import checksum, sha256_hex
from prme.models.base import FiniteFloat, Frozen, NonBlankStr, Sha256Hex, UTCDateTime
from prme.models.enums import NodeType, RetrievalMode, Scope
from prme.models.scoring import RankingMultipliers, ScoringWeights, adjusted_weights
from prme.models.trace import RankFusionTrace, ScoreTrace

RECEIPT_SCHEMA_VERSION: Final = 2


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
    """A frozen, replayable record of one retrieval.

    Plain data: constructing or parsing one checks its shape, not its replay. Whether its
    scores and order replay exactly is :func:`prme.retrieval.replay.verify_receipt`, called
    where stored receipts are read and verified.
    """

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
    def from_canonical_json(cls, payload: str) -> RetrievalReceipt:
        """Parse stored canonical bytes; the checksum is the SHA-256 of exactly those bytes."""
        receipt = cls.model_validate_json(payload)
        receipt.__dict__["checksum"] = sha256_hex(payload)  # the cached_property's slot
        return receipt

    @property
    def fusion(self) -> str:
        return self.scoring.fusion

    def applied_weights(self) -> ScoringWeights:
        """Pre-multiplier weights with the recorded multipliers applied."""
        return adjusted_weights(self.weights, self.ranking_multipliers)
