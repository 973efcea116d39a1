"""PRMEConfig: built once at the edge (env prefix ``PRME_``, nested delimiter ``__``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from prme.limits import MAX_CHANNEL_CANDIDATES, MAX_RESULT_LIMIT, MAX_TOKEN_BUDGET
from prme.models.retrieval import VectorIndexName
from prme.models.scoring import ScoringWeights, product_default_scoring

DEFAULT_EPISTEMIC_WEIGHTS: dict[str, float] = {
    "observed": 1.0,
    "asserted": 0.9,
    "inferred": 0.7,
    "hypothetical": 0.3,
    "conditional": 0.5,
    "deprecated": 0.1,
    "unverified": 0.5,
}


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EmbeddingConfig(_Section):
    provider: str = "minilm"
    dimension: int | None = None


class RetrievalConfig(_Section):
    vector_k: int = Field(default=500, ge=1, le=MAX_CHANNEL_CANDIDATES)
    lexical_k: int = Field(default=500, ge=1, le=MAX_CHANNEL_CANDIDATES)
    graph_max_candidates: int = Field(default=150, ge=0, le=MAX_CHANNEL_CANDIDATES)
    graph_max_hops: int = Field(default=3, ge=1, le=3)
    # The vector channel: "exact" scans every cosine; "hnsw" searches deterministic HNSW
    # segments (prme.index.ann) for an owner of at least vector_index_min_rows memories
    # and scans smaller owners exactly. Both are part of the feature identity. Exact is the
    # default until the index meets its goals at 1M rows: recall@10 on the benchmark queries
    # is 0.99 at 100k but 0.867 at 1M with the hashing embedder at 384 dimensions (0.98
    # wanted), and 1M retrieve p50 is about 21 ms (10 ms wanted).
    vector_index: VectorIndexName = "exact"
    vector_index_min_rows: int = Field(default=131072, ge=16, le=1 << 30)
    # The graphs searched are those of this many chunks fewer rows (the newest rows are scanned
    # exactly), so a growing owner's next graphs are built in the background, not inside a
    # retrieval. 0 searches every whole chunk's graph: a smaller exact tail for a pack that is
    # loaded once and then read (after build_index), at the cost of building a new layout's
    # graphs in the first retrieval after a chunk fills.
    vector_index_lag_chunks: int = Field(default=1, ge=0, le=8)
    default_limit: int = Field(default=20, ge=0, le=MAX_RESULT_LIMIT)
    token_budget: int = Field(default=4096, ge=0, le=MAX_TOKEN_BUDGET)
    unverified_confidence_threshold: float = Field(default=0.30, ge=0.0, le=1.0)
    epistemic_weights: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_EPISTEMIC_WEIGHTS)
    )


class APIConfig(_Section):
    user_keys: dict[str, SecretStr] = Field(default_factory=dict)
    max_body_bytes: int = Field(default=10 * 1024 * 1024, ge=1024)


class MCPConfig(_Section):
    user_id: str | None = None
    user_keys: dict[str, SecretStr] = Field(default_factory=dict)
    # Serve with nobody bound: every call names its user_id. Off by default, so a server
    # without --user-id (or HTTP keys) refuses to start instead of serving every owner.
    multi_owner: bool = False
    # The tools listed: "core" (store, retrieve, judge and the memory tools) or "all" (adds the
    # receipt, learning and profile tools).
    tools: Literal["core", "all"] = "all"


class StorageConfig(_Section):
    # A backend name of prme.storage.registry (sqlite, postgres); None: postgres when
    # postgres_url is set, else sqlite.
    backend: str | None = None
    postgres_url: SecretStr | None = None
    # PostgreSQL: where this host keeps the owners' saved indexes once read from the pack (None:
    # a temporary directory per open store, so each process reads them from the pack again)
    postgres_index_cache: Path | None = None
    busy_timeout_ms: int = Field(default=10000, ge=0)


class PRMEConfig(BaseSettings):
    """Everything configurable. Scoring defaults to rank fusion (``PRME_SCORING__FUSION=weighted``
    switches to the weighted formula that ranking profiles adjust)."""

    model_config = SettingsConfigDict(
        env_prefix="PRME_", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    scoring: ScoringWeights = Field(default_factory=product_default_scoring)
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    api: APIConfig = Field(default_factory=APIConfig)
    mcp: MCPConfig = Field(default_factory=MCPConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
