"""prme: a local-first memory engine whose ranking learns safely from explicit judgments."""

from prme.async_client import AsyncMemoryClient
from prme.client import MemoryClient
from prme.config import PRMEConfig
from prme.errors import (
    FrozenPackError,
    IntegrityError,
    InvalidInputError,
    NotFoundError,
    PRMEError,
    ReadOnlyPackError,
    StaleRankingProfileError,
)
from prme.learning.gate1 import evaluate_learning
from prme.learning.gate2 import evaluate_full_retrieval
from prme.models.enums import (
    DecayProfile,
    EpistemicType,
    LifecycleState,
    NodeType,
    RetrievalMode,
    Scope,
    SourceType,
)
from prme.models.holdout import (
    FullRetrievalEvaluation,
    FullRetrievalEvaluationConfig,
    FullRetrievalQueryResult,
    FullRetrievalTrial,
)
from prme.models.learning import LearningConfig, LearningEvaluation, QueryLearningResult
from prme.models.memory import MemoryNode, MemoryRecord
from prme.models.profiles import (
    RankingProfile,
    RankingProfileApplication,
    RankingProfileState,
    RankingProfileStatus,
)
from prme.models.receipt import RetrievalReceipt
from prme.models.relevance import RelevanceRecord, RelevanceSubmission
from prme.models.retrieval import RetrievalResponse
from prme.models.scoring import RankingMultipliers, ScoringWeights
from prme.services.integrity import IntegrityProblem, IntegrityReport

__all__ = [
    "AsyncMemoryClient",
    "DecayProfile",
    "EpistemicType",
    "FrozenPackError",
    "FullRetrievalEvaluation",
    "FullRetrievalEvaluationConfig",
    "FullRetrievalQueryResult",
    "FullRetrievalTrial",
    "IntegrityError",
    "IntegrityProblem",
    "IntegrityReport",
    "InvalidInputError",
    "LearningConfig",
    "LearningEvaluation",
    "LifecycleState",
    "MemoryClient",
    "MemoryNode",
    "MemoryRecord",
    "NodeType",
    "NotFoundError",
    "PRMEConfig",
    "PRMEError",
    "QueryLearningResult",
    "RankingMultipliers",
    "RankingProfile",
    "RankingProfileApplication",
    "RankingProfileState",
    "RankingProfileStatus",
    "ReadOnlyPackError",
    "RelevanceRecord",
    "RelevanceSubmission",
    "RetrievalMode",
    "RetrievalReceipt",
    "RetrievalResponse",
    "Scope",
    "ScoringWeights",
    "SourceType",
    "StaleRankingProfileError",
    "evaluate_full_retrieval",
    "evaluate_learning",
]
