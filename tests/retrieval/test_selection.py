"""Selection: floor, deterministic order, caps and limit, over plain inputs."""

from __future__ import annotations

import random
from uuid import UUID

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from support.owner_index import STAGE_NOW, build_index, memory

from prme.config import DEFAULT_EPISTEMIC_WEIGHTS
from prme.models.scoring import ScoringWeights, product_default_scoring
from prme.retrieval.candidates import candidate_pool, channel_hits
from prme.retrieval.features import FilterSettings
from prme.retrieval.ranking import score_pool
from prme.retrieval.scan import scan
from prme.retrieval.scoring import ranking_key
from prme.retrieval.selection import Caps, ranked_order, select, select_candidates
from prme.storage.timeutil import to_us

IDS = [f"id-{c}" for c in "edcba"]


def test_order_is_score_then_path_then_id() -> None:
    scores = [0.5, 0.9, 0.5, 0.5, 0.1]
    paths = [1.0, 0.2, 1.0, 0.6, 1.0]
    # candidates 0 and 2 tie on (score, path): the smaller id ("id-c" at position 2) first
    assert list(ranked_order(scores, paths, IDS, [0, 1, 2, 3, 4], scores, None)) == [1, 2, 0, 3, 4]


def test_positions_map_candidates_to_ids() -> None:
    # candidate i is the index's position positions[i]: ids are read through it
    scores, paths = [0.5, 0.5], [1.0, 1.0]
    assert list(ranked_order(scores, paths, IDS, [4, 0], scores, None)) == [0, 1]  # a < e
    assert list(ranked_order(scores, paths, IDS, [0, 4], scores, None)) == [1, 0]


def test_floor_reads_the_gate_not_the_score() -> None:
    scores = [0.9, 0.8, 0.7]
    gate = [0.1, 0.6, 0.5]
    order = ranked_order(scores, [0.0] * 3, IDS, [0, 1, 2], gate, 0.5)
    assert list(order) == [1, 2]


@given(
    st.lists(st.tuples(st.sampled_from([0.1, 0.5, 0.9]), st.sampled_from([0.0, 1.0])), max_size=30),
    st.sampled_from([1, 2, 5, 64]),
    st.sampled_from([None, 0.5]),
)
def test_order_equals_the_ranking_key(
    candidates: list[tuple[float, float]], tier: int, floor: float | None
) -> None:
    """Whatever the tier (the first one sorted alone), and with ties across its edge."""
    ids = [str(UUID(int=random.Random(i).getrandbits(128))) for i in range(len(candidates))]
    scores = [s for s, _ in candidates]
    paths = [p for _, p in candidates]
    positions = list(range(len(candidates)))
    expected = sorted(positions, key=lambda i: ranking_key(scores[i], paths[i], ids[i]))
    expected = [i for i in expected if floor is None or scores[i] >= floor]
    order = ranked_order(scores, np.array(paths), ids, np.array(positions), scores, floor, tier)
    assert list(order) == expected


def test_caps_and_limit() -> None:
    evidence = ["[a]", "[a]", "[a]", "[b]", "[b]", "[c]"]
    content = ["x", "x", "y", "x", "z", "x"]
    positions = list(range(6))
    everything = Caps(limit=10)
    assert select(iter(positions), evidence, content, positions, everything) == (0, 1, 2, 3, 4, 5)
    per_source = Caps(limit=10, max_per_source=1)  # one per (evidence, content)
    assert select(iter(positions), evidence, content, positions, per_source) == (0, 2, 3, 4, 5)
    per_evidence = Caps(limit=10, max_per_evidence=1)
    assert select(iter(positions), evidence, content, positions, per_evidence) == (0, 3, 5)
    assert select(iter(positions), evidence, content, positions, Caps(limit=2)) == (0, 1)
    assert select(iter(positions), evidence, content, positions, Caps(limit=0)) == ()
    # a capped candidate does not count against the limit
    assert select(iter(positions), evidence, content, positions, Caps(2, None, None, 1)) == (0, 3)


def test_select_candidates_returns_positions_in_order() -> None:
    rows = [memory(vector=(v, 0, 0, 0)) for v in (0.2, 0.9, 0.5, 0.7)]
    ix = build_index(rows)
    query = np.array([1, 0, 0, 0], dtype=np.float32)
    in_scope = ix.scope_mask(None)
    hits = channel_hits(ix, in_scope, scan(ix, query, in_scope, 3), [], [], 3, 150)
    f = FilterSettings("default", None, None, None, None, None, frozenset(), None, 0.3, None)
    pool = candidate_pool(ix, hits, f)
    assert pool.pos.tolist() == [1, 2, 3]  # the vector channel's top 3
    now = to_us(STAGE_NOW)
    for weights in (ScoringWeights(), product_default_scoring()):
        scored = score_pool(ix, pool, weights, weights, DEFAULT_EPISTEMIC_WEIGHTS, now, False)
        selection = select_candidates(ix, pool, scored, Caps(limit=2))
        assert selection.positions == (1, 3)  # cosine 0.9, then 0.7
        assert selection.chosen == (0, 2)
        # rrf compares min_score with the semantic relevance, weighted with the score
        gate = scored.gate(pool)
        expected = pool.semantic.tolist() if weights.fusion == "rrf" else scored.scores
        assert gate == expected
        floor = sorted(gate)[-2]
        chosen = select_candidates(ix, pool, scored, Caps(limit=5, min_score=floor))
        assert chosen.positions == (1, 3)
