"""Scoring a candidate pool: the weighted-formula features, then the fusion method of the base
scoring (looked up in the registry), pure over the owner index snapshot."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from prme.index.owner_index import OwnerIndex
from prme.models.scoring import ScoringWeights
from prme.retrieval.candidates import CandidatePool
from prme.retrieval.features import FusionInputs, weighted_features
from prme.retrieval.fusion_methods import FusionContext, FusionMethod, fusion_method
from prme.retrieval.scoring import FloatArray


@dataclass(frozen=True, slots=True)
class Scored:
    """Each pooled candidate's score, its trace features and rank-fusion inputs (if any)."""

    method: FusionMethod
    scores: list[float]
    features: dict[str, FloatArray]  # keyed by ScoreTrace field name
    rank_fusion: FusionInputs | None

    def gate(self, pool: CandidatePool) -> list[float]:
        """What ``min_score`` is compared with, per candidate: the score or the semantic
        relevance, as the fusion method says."""
        if self.method.min_score_on == "score":
            return self.scores
        semantic: list[float] = pool.semantic.tolist()
        return semantic


def score_pool(
    ix: OwnerIndex,
    pool: CandidatePool,
    base: ScoringWeights,
    applied: ScoringWeights,
    epistemic_map: Mapping[str, float],
    now_us: int,
    current_state: bool,
) -> Scored:
    """Score ``pool`` with ``applied`` (the base weights with the request's multipliers)."""
    features = weighted_features(
        ix,
        pool.pos,
        pool.semantic,
        pool.lexical,
        pool.graph,
        pool.path_counts,
        now_us,
        applied,
        epistemic_map,
    )
    method = fusion_method(base)
    context = FusionContext(
        ix=ix,
        pos=pool.pos,
        semantic=pool.semantic,
        lexical=pool.lexical,
        on_vector=pool.on_vector,
        on_lexical=pool.on_lexical,
        epistemic_map=epistemic_map,
        current_state=current_state,
    )
    fused = method.fuse(features, context, base, applied)
    return Scored(method, fused.scores, fused.features, fused.rank_fusion)
