"""The engine context every service function receives: store, configuration, embedder, clock."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from prme.canonical import checksum
from prme.config import PRMEConfig
from prme.embed.base import Embedder
from prme.errors import InvalidInputError
from prme.index.ann import AnnPolicy
from prme.storage.base import Store

FEATURE_SCHEMA = 2  # bump whenever feature computation changes meaning (2: hub-free graph)
ENTITY_EXTRACTOR = "capitalised-v1"


def utc_now() -> datetime:
    return datetime.now(UTC)


def vector_index_policy(config: PRMEConfig) -> AnnPolicy | None:
    """The approximate vector index the configuration asks for (None: exact scans only)."""
    retrieval = config.retrieval
    if retrieval.vector_index == "exact":
        return None
    rows = retrieval.vector_index_min_rows
    return AnnPolicy(
        min_rows=rows,
        chunk_rows=min(rows, AnnPolicy.chunk_rows),
        lag_chunks=retrieval.vector_index_lag_chunks,
    )


@dataclass
class Engine:
    store: Store
    config: PRMEConfig
    embedder: Embedder
    clock: Callable[[], datetime] = utc_now
    _features: dict[str, Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.reconfigure(self.config, self.embedder)

    def reconfigure(self, config: PRMEConfig, embedder: Embedder) -> None:
        """Use ``config`` and ``embedder`` from now on (``configure_pack``)."""
        self.config, self.embedder, self._features = config, embedder, None
        # the store builds the owners' indexes, so it searches the way this engine is set up
        self.store.configure_vector_index(vector_index_policy(config))

    def feature_identity(self) -> dict[str, Any]:
        """What produced the features: explicit and versioned, never source hashes."""
        if self._features is None:
            self._features = {
                "feature_schema": FEATURE_SCHEMA,
                "embedder": self.embedder.identity.model_dump(mode="json"),
                "lexical": self.store.lexical_identity,
                "vector_search": _vector_identity(vector_index_policy(self.config)),
                "entity_extractor": ENTITY_EXTRACTOR,
                "storage": self.store.backend_name,
            }
        return self._features

    def feature_identity_sha256(self) -> str:
        return checksum(self.feature_identity())

    def check_embedder(self) -> None:
        """A pack keeps the embedder it was written with; a different one is an explicit error."""
        bound = self.store.embedder_identity()
        mine = self.embedder.identity.model_dump(mode="json")
        if bound is not None and bound != mine:
            raise InvalidInputError(
                "embedding.provider",
                f"this pack was written with embedder {bound}, but {mine} is configured; "
                "set PRME_EMBEDDING__PROVIDER to match the pack",
            )


def _vector_identity(policy: AnnPolicy | None) -> str | dict[str, Any]:
    """``"exact"`` (the identity of every pack before approximate search), or the policy."""
    return "exact" if policy is None else policy.identity()
