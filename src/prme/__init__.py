"""prme: a local-first memory engine whose ranking learns safely from explicit judgments."""

from prme.client import AsyncMemoryClient, MemoryClient
from prme.config import PRMEConfig
from prme.errors import (
    FrozenPackError,
    IntegrityError,
    InvalidInputError,
    NotFoundError,
    PRMEError,
    StaleRankingProfileError,
)
from prme.models.enums import (
    DecayProfile,
    EpistemicType,
    LifecycleState,
    NodeType,
    RetrievalMode,
    Scope,
    SourceType,
)
from prme.models.memory import MemoryNode
from prme.models.receipt import RetrievalReceipt
from prme.models.retrieval import RetrievalResponse
from prme.models.scoring import RankingMultipliers, ScoringWeights

__all__ = [
    "AsyncMemoryClient",
    "DecayProfile",
    "EpistemicType",
    "FrozenPackError",
    "IntegrityError",
    "InvalidInputError",
    "LifecycleState",
    "MemoryClient",
    "MemoryNode",
    "NodeType",
    "NotFoundError",
    "PRMEConfig",
    "PRMEError",
    "RankingMultipliers",
    "RetrievalMode",
    "RetrievalReceipt",
    "RetrievalResponse",
    "Scope",
    "ScoringWeights",
    "SourceType",
    "StaleRankingProfileError",
]
