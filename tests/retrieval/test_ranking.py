"""Scoring a pool: features, then the base scoring's fusion method from the registry."""

from __future__ import annotations

import numpy as np
import pytest
from support.owner_index import STAGE_NOW, build_index, memory

from prme.config import DEFAULT_EPISTEMIC_WEIGHTS
from prme.index.owner_index import OwnerIndex
from prme.models.scoring import (
    RankingMultipliers,
    ScoringWeights,
    adjusted_weights,
    product_default_scoring,
)
from prme.retrieval.candidates import CandidatePool, candidate_pool, channel_hits
from prme.retrieval.features import FilterSettings, weighted_features
from prme.retrieval.ranking import score_pool
from prme.retrieval.scan import scan
from prme.retrieval.scoring import rrf_scores, weighted_scores
from prme.storage.timeutil import to_us

NOW = to_us(STAGE_NOW)


def pool_of() -> tuple[OwnerIndex, CandidatePool]:
    rows = [
        memory(vector=(0.9, 0.1, 0, 0), entities=("aster",)),
        memory(vector=(0.3, 0.7, 0, 0), epistemic="observed", node_type="fact"),
        memory(vector=(0.6, 0, 0, 0.4), pinned=True),
        memory(vector=(0.1, 0, 0.9, 0)),
    ]
    ix = build_index(rows)
    query = np.array([1, 0, 0, 0], dtype=np.float32)
    in_scope = ix.scope_mask(None)
    lexical = [(2, 3.0), (4, 1.0), (1, 0.5)]
    hits = channel_hits(ix, in_scope, scan(ix, query, in_scope, 3), lexical, ["aster"], 3, 150)
    f = FilterSettings("default", None, None, None, None, None, frozenset(), None, 0.3, NOW)
    return ix, candidate_pool(ix, hits, f)


def test_weighted_scores_the_features_with_the_applied_weights() -> None:
    ix, pool = pool_of()
    base = ScoringWeights()
    applied = adjusted_weights(base, RankingMultipliers(lexical=2.0))
    scored = score_pool(ix, pool, base, applied, DEFAULT_EPISTEMIC_WEIGHTS, NOW, False)
    assert scored.method.name == "weighted" and scored.rank_fusion is None
    features = weighted_features(
        ix, pool.pos, pool.semantic, pool.lexical, pool.graph, pool.path_counts, NOW, applied,
        DEFAULT_EPISTEMIC_WEIGHTS,
    )  # fmt: skip
    assert scored.scores == weighted_scores(features, applied)
    assert scored.scores != score_pool(ix, pool, base, base, DEFAULT_EPISTEMIC_WEIGHTS, NOW, False).scores
    assert set(scored.features) == set(features)


def test_rrf_scores_ranks_and_records_its_inputs() -> None:
    ix, pool = pool_of()
    base = product_default_scoring()
    scored = score_pool(ix, pool, base, base, DEFAULT_EPISTEMIC_WEIGHTS, NOW, False)
    assert scored.method.name == "rrf"
    fi = scored.rank_fusion
    assert fi is not None
    assert fi.semantic_rank.tolist() == [1, 3, 2, 0]  # cosine 0.9, 0.3, 0.6; 3 is off the channel
    assert fi.lexical_rank.tolist() == [3, 1, 0, 2]  # rowid 3 is not on the lexical channel
    expected = rrf_scores(
        fi.semantic_rank, fi.lexical_rank, fi.epistemic_factor, fi.node_type_factor,
        fi.temporal_factor, fi.recency_boost_factor, fi.tie_break, base.rrf_k or 60,
        fi.channel_weights,
    )  # fmt: skip
    assert scored.scores == expected
    # rrf's trace carries no salience or confidence
    assert scored.features["salience"].tolist() == [0.0] * 4


@pytest.mark.parametrize("weights", [ScoringWeights(), product_default_scoring()])
def test_scoring_is_deterministic(weights: ScoringWeights) -> None:
    runs = [
        score_pool(*pool_of(), weights, weights, DEFAULT_EPISTEMIC_WEIGHTS, NOW, True)
        for _ in range(2)
    ]
    assert runs[0].scores == runs[1].scores
    assert all(
        np.array_equal(runs[0].features[k], runs[1].features[k]) for k in runs[0].features
    )
