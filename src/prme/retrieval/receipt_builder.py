"""Receipt building: the ``RetrievalReceipt``, the response and its metadata, from the stage
outputs (pure; the caller persists the receipt)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, TypeAdapter

from prme.canonical import sha256_hex
from prme.index.owner_index import SCOPES, OwnerIndex
from prme.models.memory import MemoryNode
from prme.models.receipt import (
    PackIdentity,
    PackingConfig,
    ReceiptCandidate,
    RetrievalExecution,
    RetrievalReceipt,
)
from prme.models.request import PARAMETERS, input_keys
from prme.models.retrieval import (
    CrossScopeHint,
    MemoryBundle,
    RankingProfileResolution,
    RetrievalCandidate,
    RetrievalMetadata,
    RetrievalResponse,
)
from prme.models.scoring import RankingMultipliers
from prme.retrieval.candidates import PINNED_LIMIT, CandidatePool
from prme.retrieval.features import FusionInputs
from prme.retrieval.packing import Packed
from prme.retrieval.ranking import Scored
from prme.retrieval.selection import Selection
from prme.retrieval.settings import RetrievalSettings
from prme.retrieval.validate import ValidRequest


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one retrieval produced, stage by stage, and the context it ran in."""

    request_id: uuid.UUID
    request: ValidRequest
    reference_time: datetime
    resolution: RankingProfileResolution
    multipliers: RankingMultipliers | None  # the applied ones (explicit or the profile's)
    pool: CandidatePool
    scored: Scored
    selection: Selection
    nodes: Sequence[MemoryNode]  # the selected memories, in returned order
    packed: Packed
    hints: tuple[tuple[int, float], ...]


_RECEIPT_CANDIDATES = TypeAdapter(tuple[ReceiptCandidate, ...])
_RESULTS = TypeAdapter(tuple[RetrievalCandidate, ...])


def _fusion_trace(fi: FusionInputs, i: int) -> dict[str, Any]:
    """A candidate's ``RankFusionTrace`` fields."""
    weights = fi.channel_weights
    return dict(
        semantic_rank=int(fi.semantic_rank[i]) or None,
        lexical_rank=int(fi.lexical_rank[i]) or None,
        epistemic_factor=float(fi.epistemic_factor[i]),
        node_type_factor=float(fi.node_type_factor[i]),
        temporal_factor=float(fi.temporal_factor[i]),
        recency_boost_factor=None
        if fi.recency_boost_factor is None
        else float(fi.recency_boost_factor[i]),
        tie_break=None if fi.tie_break is None or not fi.ranked[i] else float(fi.tie_break[i]),
        semantic_weight=None if weights is None else weights[0],
        lexical_weight=None if weights is None else weights[1],
    )


def _recorded(value: Any) -> Any:
    """A parameter's value as ``execution.inputs`` records it."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, frozenset):
        return sorted(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


def _recorded_inputs(o: Outcome, cfg: RetrievalSettings) -> dict[str, Any]:
    """``execution.inputs``: every parameter whose receipt path is there (``RetrievalRequest``
    says which; the multipliers are the applied ones), then the configuration and the profile
    resolution the retrieval ran with (``CONFIGURED_INPUTS``)."""
    applied = {"ranking_multipliers": o.multipliers}
    inputs = {
        key: _recorded(applied[name] if name in applied else getattr(o.request, name))
        for name in PARAMETERS
        for key in input_keys(name)
    }
    return inputs | {
        "ranking_profile": o.resolution.model_dump(mode="json"),
        "epistemic_weights": dict(sorted(cfg.epistemic_weights.items())),
        "unverified_confidence_threshold": cfg.unverified_confidence_threshold,
        "vector_k": cfg.vector_k,
        "lexical_k": cfg.lexical_k,
        "graph_max_candidates": cfg.graph_max_candidates,
        "graph_max_hops": cfg.graph_max_hops,
        "pinned_limit": PINNED_LIMIT,
    }


@dataclass(frozen=True, slots=True)
class Built:
    receipt: RetrievalReceipt
    results: tuple[RetrievalCandidate, ...]


def build_receipt(
    o: Outcome,
    ix: OwnerIndex,
    cfg: RetrievalSettings,
    pack: PackIdentity,
    features_identity: Mapping[str, Any],
) -> Built:
    """The receipt of ``o`` and the response's results (same traces, same order).

    Over 80 lines because one loop fills each receipt candidate and its response result side
    by side (so the two can never drift apart), and the receipt's fields are listed once."""
    pool, scored, fi = o.pool, o.scored, o.scored.rank_fusion
    names = list(scored.features)
    # Plain values, then one validation per list: the same checks as building each model on
    # its own, in one call into pydantic-core instead of three per candidate.
    receipt_items: list[dict[str, Any]] = []
    result_items: list[dict[str, Any]] = []
    for rank, (i, p) in enumerate(zip(o.selection.chosen, o.selection.positions, strict=True)):
        node, item, paths = o.nodes[rank], o.packed.items[rank], pool.paths(i)
        score = scored.scores[i]
        trace = {name: float(scored.features[name][i]) for name in names}
        trace["composite_score"] = score
        relevance = None if fi is None else float(pool.semantic[i])
        receipt_items.append(
            {
                "node_id": node.id,
                "scope": node.scope,
                "node_type": node.node_type,
                "content_sha256": ix.content_sha256[p],
                "paths": paths,
                "score": score,
                "trace": trace,
                "rank_fusion": None if fi is None else _fusion_trace(fi, i),
                "semantic_relevance": relevance,
                "token_cost": item.token_cost,
                "in_context": item.in_context,
                "has_content": item.has_content,
            }
        )
        result_items.append(
            {
                "node": node,
                "paths": paths,
                "path_count": len(paths),
                "semantic_score": float(pool.raw_cosine[i]),
                "lexical_score": float(pool.lexical[i]),
                "graph_proximity": float(pool.graph[i]),
                "composite_score": score,
                "semantic_relevance": relevance,
                "token_cost": item.token_cost,
                "in_context": item.in_context,
            }
        )
    candidates = _RECEIPT_CANDIDATES.validate_python(receipt_items)
    for result, candidate in zip(result_items, candidates, strict=True):
        result["score_trace"] = candidate.trace  # the receipt's trace, validated once
    results = _RESULTS.validate_python(result_items)
    r = o.request
    outcomes: dict[str, Any] = {
        "candidates_generated": pool.generated,
        "candidates_filtered": pool.filtered,
        "candidates_included": len(o.selection.chosen),
        "tokens_used": o.packed.tokens_used,
        "cross_scope_hint_count": len(o.hints),
    }
    receipt = RetrievalReceipt(
        request_id=o.request_id,
        user_id=r.owner,
        query=r.query,
        reference_time=o.reference_time,
        scopes=None if r.scopes is None else tuple(r.scopes),
        retrieval_mode=r.mode,
        min_score=r.min_score,
        result_limit=r.result_limit,
        time_from=r.time_from,
        time_to=r.time_to,
        scoring=r.base,
        weights=r.base,  # the pre-multiplier weights: the base (no query-specific shifts)
        ranking_multipliers=o.multipliers,
        packing=PackingConfig(token_budget=r.token_budget),
        context_sha256=sha256_hex(o.packed.rendered_context),
        pack=pack,
        execution=RetrievalExecution(
            inputs=_recorded_inputs(o, cfg), outcomes=outcomes, features=dict(features_identity)
        ),
        candidates=candidates,
    )
    return Built(receipt, results)


def build_response(
    o: Outcome,
    built: Built,
    ix: OwnerIndex,
    persisted: bool,
    timings: Mapping[str, float],
) -> RetrievalResponse:
    """The caller's response: results, the packed bundle, metadata and cross-scope hints."""
    r, packed, candidates = o.request, o.packed, built.receipt.candidates
    bundle = MemoryBundle(
        rendered_context=packed.rendered_context,
        included_count=sum(1 for c in candidates if c.in_context),
        tokens_used=packed.tokens_used,
        token_budget=r.token_budget,
        budget_remaining=r.token_budget - packed.tokens_used,
        excluded_ids=tuple(c.node_id for c in candidates if not c.in_context),
    )
    metadata = RetrievalMetadata(
        request_id=o.request_id,
        receipt_persisted=persisted,
        reference_time=o.reference_time,
        scoring_config_version=r.base.version_id,
        fusion=r.base.fusion,
        ranking_multipliers=o.multipliers,
        ranking_profile_status=o.resolution.status,
        ranking_profile_id=o.resolution.profile_id,
        ranking_profile_reason=o.resolution.reason,
        result_limit=r.result_limit,
        min_score=r.min_score,
        candidates_generated=o.pool.generated,
        candidates_filtered=o.pool.filtered,
        candidates_included=len(o.selection.chosen),
        timing_ms={k: round(v, 3) for k, v in timings.items()},
    )
    hints = tuple(
        CrossScopeHint(
            node_id=uuid.UUID(ix.ids[p]),
            scope=SCOPES[int(ix.col("scope")[p])],
            semantic_score=float(score),
        )
        for p, score in o.hints
    )
    return RetrievalResponse(
        results=built.results, bundle=bundle, metadata=metadata, cross_scope_hints=hints
    )
