"""What retrieve() returns: ranked candidates, the packed bundle and the metadata."""

from __future__ import annotations

from typing import Literal, get_args
from uuid import UUID

from pydantic import Field

from prme.models.base import Frozen, UTCDateTime
from prme.models.memory import MemoryNode
from prme.models.scoring import RankingMultipliers
from prme.models.trace import ScoreTrace

# How the vector channel searches (``retrieval.vector_index``).
VectorIndexName = Literal["exact", "hnsw"]
VECTOR_INDEXES: tuple[str, ...] = get_args(VectorIndexName)
RankingProfileStatusName = Literal["none", "applied", "inapplicable", "request_override"]
RankingProfileReason = Literal[
    "feature_identity_mismatch",
    "base_scoring_mismatch",
    "explicit_multipliers",
    "rank_fusion_scoring",
    "profile_unavailable",
]


class RetrievalCandidate(Frozen):
    node: MemoryNode
    paths: tuple[str, ...]
    path_count: int
    semantic_score: float
    lexical_score: float
    graph_proximity: float
    composite_score: float
    semantic_relevance: float | None = None
    score_trace: ScoreTrace
    token_cost: int
    in_context: bool


class MemoryBundle(Frozen):
    rendered_context: str
    included_count: int
    tokens_used: int
    token_budget: int
    budget_remaining: int
    excluded_ids: tuple[UUID, ...]
    context_format: str = "plain_lines_v1"


class RankingProfileResolution(Frozen):
    """How the active-profile pointer was resolved for one request."""

    status: RankingProfileStatusName = "none"
    profile_id: UUID | None = None
    reason: RankingProfileReason | None = None


class RetrievalMetadata(Frozen):
    request_id: UUID
    receipt_persisted: bool
    reference_time: UTCDateTime
    scoring_config_version: str
    fusion: Literal["weighted", "rrf"]
    ranking_multipliers: RankingMultipliers | None = None
    ranking_profile_status: RankingProfileStatusName = "none"
    ranking_profile_id: UUID | None = None
    ranking_profile_reason: RankingProfileReason | None = None
    result_limit: int
    min_score: float | None = None
    candidates_generated: dict[str, int] = Field(default_factory=dict)
    candidates_filtered: int = 0
    candidates_included: int = 0
    timing_ms: dict[str, float] = Field(default_factory=dict)


class CrossScopeHint(Frozen):
    """A strong match outside the requested scopes: not a result, not in the receipt."""

    node_id: UUID
    scope: str
    semantic_score: float


class RetrievalResponse(Frozen):
    # Lists, as the original system returns (``response.results == []`` for no result); each
    # response owns its lists, so changing one changes nothing stored.
    results: list[RetrievalCandidate]
    bundle: MemoryBundle
    metadata: RetrievalMetadata
    cross_scope_hints: list[CrossScopeHint] = Field(default_factory=list)


class OwnerIndexReport(Frozen):
    """What :meth:`~prme.client.MemoryClient.build_index` left ready for one owner's
    retrievals: the owner's column index (saved in the pack once large enough) and, past the
    approximate index's threshold, its HNSW segments (saved beside it)."""

    user_id: str = Field(
        description="The owner; every read and write is limited to this owner's objects."
    )
    rows: int = Field(description="Memories indexed.")
    vector_search: VectorIndexName = Field(description="exact or hnsw at this size.")
    hnsw_segments: int = Field(description="HNSW graphs searched.")
    exact_rows: int = Field(description="Rows scanned exactly.")
    elapsed_ms: float = Field(description="Milliseconds taken.")
