"""Receipt building from the stage outputs, without a pack: a receipt that replays exactly, the
recorded inputs, and the response built from the same outputs."""

from __future__ import annotations

import uuid
from datetime import timedelta

import numpy as np
import pytest
from support.owner_index import STAGE_NOW, build_index, memory

from prme.config import RetrievalConfig
from prme.index.owner_index import OwnerIndex
from prme.models.enums import Scope
from prme.models.memory import MemoryNode
from prme.models.receipt import PackIdentity, RetrievalReceipt
from prme.models.request import CONFIGURED_INPUTS, PARAMETERS, RetrievalRequest, receipt_paths
from prme.models.retrieval import RankingProfileResolution
from prme.models.scoring import (
    RankingMultipliers,
    ScoringWeights,
    adjusted_weights,
    product_default_scoring,
)
from prme.retrieval.candidates import candidate_pool, channel_hits, cross_scope_hints
from prme.retrieval.features import FilterSettings
from prme.retrieval.packing import pack
from prme.retrieval.ranking import score_pool
from prme.retrieval.receipt_builder import Outcome, build_receipt, build_response
from prme.retrieval.replay import verify_receipt
from prme.retrieval.scan import scan
from prme.retrieval.selection import Caps, select_candidates
from prme.retrieval.validate import validate_request
from prme.storage.timeutil import to_us

VECTORS = [(0.9, 0.1, 0, 0), (0.2, 0.8, 0, 0), (0.7, 0, 0.3, 0), (0.5, 0, 0, 0.5)]
TEXTS = ["Aster runs PostgreSQL", "Basalt is on Fly.io", "Aster moved to Azure", " "]
CFG = RetrievalConfig()
FEATURES = {"feature_schema": "test", "embedder": {"provider": "none"}}


def node(ix_id: str, text: str, scope: Scope) -> MemoryNode:
    return MemoryNode(
        id=uuid.UUID(ix_id),
        user_id="alice",
        scope=scope,
        content=text,
        created_at=STAGE_NOW,
        updated_at=STAGE_NOW,
        valid_from=STAGE_NOW,
        last_reinforced_at=STAGE_NOW,
    )


def outcome(
    weights: ScoringWeights, multipliers: RankingMultipliers | None, budget: int
) -> tuple[Outcome, OwnerIndex]:
    rows = [memory(vector=v) for v in VECTORS] + [memory(vector=(1, 0, 0, 0), scope="project")]
    ix = build_index(rows)
    request = RetrievalRequest.unchecked(
        {"query": "Aster", "user_id": "alice", "scope": "personal", "weights": weights,
         "token_budget": budget, "reference_time": STAGE_NOW + timedelta(days=1)}
    )  # fmt: skip
    r = validate_request(request, CFG, ScoringWeights())
    assert r.reference_time is not None
    now = to_us(r.reference_time)
    query = np.array([1, 0, 0, 0], dtype=np.float32)
    in_scope = ix.scope_mask(r.scopes)
    hits = channel_hits(ix, in_scope, scan(ix, query, in_scope, 10), [(1, 2.0), (3, 1.0)], [], 3, 150)
    f = FilterSettings("default", None, None, None, None, None, frozenset(), None, 0.3, now)
    pool = candidate_pool(ix, hits, f)
    applied = adjusted_weights(r.base, multipliers)
    scored = score_pool(ix, pool, r.base, applied, CFG.epistemic_weights, now, False)
    selection = select_candidates(ix, pool, scored, Caps(r.result_limit))
    nodes = [node(ix.ids[p], TEXTS[p], Scope.PERSONAL) for p in selection.positions]
    packed = pack([(n.content, n.created_at) for n in nodes], r.token_budget)
    hints = cross_scope_hints(ix, hits.cosines, in_scope, f)
    resolution = RankingProfileResolution(status="none")
    o = Outcome(
        uuid.UUID(int=7), r, r.reference_time, resolution, multipliers, pool, scored, selection,
        nodes, packed, hints,
    )  # fmt: skip
    return o, ix


@pytest.mark.parametrize(
    ("weights", "multipliers"),
    [
        (ScoringWeights(), None),
        (ScoringWeights(), RankingMultipliers(semantic=2.0, confidence=0.5)),
        (product_default_scoring(), None),
    ],
)
def test_receipt_replays_and_records_every_input(
    weights: ScoringWeights, multipliers: RankingMultipliers | None
) -> None:
    o, ix = outcome(weights, multipliers, 4096)
    built = build_receipt(o, ix, CFG, PackIdentity(pack_id="p", write_seq=3), FEATURES)
    receipt = built.receipt
    verify_receipt(receipt)  # every score and the order replay exactly
    assert [str(c.node_id) for c in receipt.candidates] == [ix.ids[p] for p in o.selection.positions]
    assert [c.score for c in receipt.candidates] == [o.scored.scores[i] for i in o.selection.chosen]
    assert receipt.ranking_multipliers == multipliers
    assert receipt.scopes == (Scope.PERSONAL,)
    assert all((c.rank_fusion is None) == (weights.fusion == "weighted") for c in receipt.candidates)
    parameter_inputs = {
        path.removeprefix("execution.inputs.")
        for name in PARAMETERS
        for path in receipt_paths(name)
        if path.startswith("execution.inputs.")
    }
    assert set(receipt.execution.inputs) == parameter_inputs | CONFIGURED_INPUTS
    assert receipt.execution.features == FEATURES
    assert receipt.execution.outcomes == {
        "candidates_generated": o.pool.generated,
        "candidates_filtered": o.pool.filtered,
        "candidates_included": len(o.selection.chosen),
        "tokens_used": o.packed.tokens_used,
        "cross_scope_hint_count": 1,
    }
    # the bytes are a function of the inputs: building twice gives the same receipt
    again = build_receipt(o, ix, CFG, PackIdentity(pack_id="p", write_seq=3), FEATURES)
    assert again.receipt.checksum == receipt.checksum
    parsed = RetrievalReceipt.from_canonical_json(receipt.model_dump_json())
    assert parsed == receipt


def test_response_reports_the_same_outcome() -> None:
    o, ix = outcome(ScoringWeights(), None, 12)  # room for one line
    built = build_receipt(o, ix, CFG, PackIdentity(pack_id="p", write_seq=0), FEATURES)
    response = build_response(o, built, ix, True, {"score": 1.23456, "total": 2.0})
    results = response.results
    assert [r.node.id for r in results] == [c.node_id for c in built.receipt.candidates]
    assert [r.score_trace for r in results] == [c.trace for c in built.receipt.candidates]
    assert response.bundle.token_budget == 12
    assert response.bundle.included_count == sum(r.in_context for r in results) == 1
    assert response.bundle.excluded_ids == tuple(r.node.id for r in results if not r.in_context)
    assert response.bundle.budget_remaining == 12 - response.bundle.tokens_used
    meta = response.metadata
    assert meta.request_id == uuid.UUID(int=7) and meta.receipt_persisted
    assert meta.timing_ms == {"score": 1.235, "total": 2.0}
    assert meta.candidates_included == len(results) == len(o.selection.chosen)
    assert meta.fusion == "weighted" and meta.ranking_profile_status == "none"
    assert [h.scope for h in response.cross_scope_hints] == [Scope.PROJECT]
    assert str(response.cross_scope_hints[0].node_id) == ix.ids[4]
