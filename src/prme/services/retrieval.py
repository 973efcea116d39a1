"""retrieve(): candidates → features → scores → selection → packing → receipt."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

import numpy as np
from pydantic import ValidationError

from prme.canonical import sha256_hex
from prme.engine import Engine
from prme.errors import InvalidInputError
from prme.models.enums import NodeType, RetrievalMode, Scope, SourceType
from prme.models.receipt import (
    PackIdentity,
    PackingConfig,
    ReceiptCandidate,
    RetrievalExecution,
    RetrievalReceipt,
)
from prme.models.retrieval import (
    CrossScopeHint,
    MemoryBundle,
    RetrievalCandidate,
    RetrievalMetadata,
    RetrievalResponse,
)
from prme.models.scope import ScopeInput, normalize_scope, scope_set_key
from prme.models.scoring import RankingMultipliers, ScoringWeights, adjusted_weights
from prme.models.trace import RankFusionTrace, ScoreTrace
from prme.retrieval.features import (
    GRAPH_PROXIMITY,
    FilterSettings,
    exclusion_reason,
    fusion_inputs,
    minmax,
    weighted_features,
)
from prme.retrieval.packing import pack
from prme.retrieval.query import analyze_query
from prme.retrieval.scoring import ranking_key, rrf_value, weighted_scores
from prme.services.receipts import persist_receipt
from prme.services.resolution import resolve_multipliers
from prme.storage.timeutil import to_us
from prme.validation import (
    require_aware,
    require_finite_nonnegative,
    require_int,
    require_owner,
)

log = logging.getLogger("prme.retrieval")
MAX_QUERY_CHARS = 10_000
PINNED_LIMIT = 500
HINT_LIMIT = 5
RRF_MULTIPLIER_ERROR = (
    "Ranking multipliers adjust the weighted formula and do not apply to fusion='rrf'"
)


def _parse_model(cls: type[Any], value: Any, field: str) -> Any:
    if value is None or isinstance(value, cls):
        return value
    try:
        return cls.model_validate(value)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise InvalidInputError(f"{field}.{loc}" if loc else field, err["msg"]) from None


def _enum_set(cls: type[Any], values: Collection[Any] | None, field: str) -> frozenset[str] | None:
    if values is None:
        return None
    if isinstance(values, str) or not isinstance(values, Collection):
        raise InvalidInputError(field, "must be a collection of names", values)
    out: set[str] = set()
    for value in values:
        try:
            out.add(cls(value).value)
        except ValueError:
            valid = ", ".join(m.value for m in cls)
            raise InvalidInputError(field, f"invalid value {value!r} (valid: {valid})") from None
    return frozenset(out)


def check_rank_fusion_request(base: ScoringWeights, multipliers: RankingMultipliers | None) -> None:
    """Under rrf, non-neutral multipliers are rejected before any retrieval work."""
    if base.fusion == "rrf" and multipliers is not None and not multipliers.is_neutral:
        raise InvalidInputError("ranking_multipliers", RRF_MULTIPLIER_ERROR)


def retrieve(
    engine: Engine,
    query: str,
    *,
    user_id: str,
    scope: ScopeInput = None,
    time_from: datetime | None = None,
    time_to: datetime | None = None,
    reference_time: datetime | None = None,
    knowledge_at: datetime | None = None,
    event_time_from: datetime | None = None,
    event_time_to: datetime | None = None,
    token_budget: int | None = None,
    min_score: float | None = None,
    limit: int | None = None,
    max_per_source: int | None = None,
    max_per_evidence: int | None = None,
    exclude_node_types: Collection[NodeType | str] | None = None,
    source_types: Collection[SourceType | str] | None = None,
    weights: ScoringWeights | Mapping[str, Any] | None = None,
    ranking_multipliers: RankingMultipliers | Mapping[str, Any] | None = None,
    retrieval_mode: RetrievalMode | str = RetrievalMode.DEFAULT,
    include_cross_scope: bool = True,
) -> RetrievalResponse:
    started = time.perf_counter()
    # ---- validation: everything before any work
    owner = require_owner(user_id)
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("query", "must be a non-blank string", query)
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInputError("query", f"must be at most {MAX_QUERY_CHARS} characters")
    scopes = normalize_scope(scope, "scope")
    clock = require_aware(reference_time, "reference_time")
    t_from = require_aware(time_from, "time_from")
    t_to = require_aware(time_to, "time_to")
    k_at = require_aware(knowledge_at, "knowledge_at")
    e_from = require_aware(event_time_from, "event_time_from")
    e_to = require_aware(event_time_to, "event_time_to")
    cfg = engine.config.retrieval
    result_limit = cfg.default_limit if limit is None else require_int(limit, "limit", minimum=0)
    budget = (
        cfg.token_budget
        if token_budget is None
        else require_int(token_budget, "token_budget", minimum=0)
    )
    floor = None if min_score is None else require_finite_nonnegative(min_score, "min_score")
    per_source = (
        None if max_per_source is None else require_int(max_per_source, "max_per_source", minimum=1)
    )
    per_evidence = (
        None
        if max_per_evidence is None
        else require_int(max_per_evidence, "max_per_evidence", minimum=1)
    )
    excluded_types = _enum_set(NodeType, exclude_node_types, "exclude_node_types")
    allowed_sources = _enum_set(SourceType, source_types, "source_types")
    base: ScoringWeights = _parse_model(ScoringWeights, weights, "weights") or engine.config.scoring
    explicit: RankingMultipliers | None = _parse_model(
        RankingMultipliers, ranking_multipliers, "ranking_multipliers"
    )
    try:
        mode = RetrievalMode(retrieval_mode)
    except ValueError:
        raise InvalidInputError(
            "retrieval_mode", "must be 'default' or 'explicit'", retrieval_mode
        ) from None
    if not isinstance(include_cross_scope, bool):
        raise InvalidInputError("include_cross_scope", "must be a boolean", include_cross_scope)
    check_rank_fusion_request(base, explicit)

    resolution, multipliers = resolve_multipliers(
        engine, owner, scope_set_key(scopes), base, explicit
    )
    now = clock or engine.clock()
    now_us = to_us(now)
    request_id = uuid.uuid4()
    analysis = analyze_query(query)
    timings: dict[str, float] = {}

    t0 = time.perf_counter()
    query_vector = engine.embedder.embed([query])[0]
    timings["embed_query"] = (time.perf_counter() - t0) * 1000

    # ---- candidate generation inside one read snapshot: the pack identity matches the data
    t0 = time.perf_counter()
    store = engine.store
    with store.read_snapshot() as pack_identity:
        vector_hits = store.vector_search(owner, scopes, query_vector, cfg.vector_k)
        lexical_hits = store.lexical_search(owner, scopes, analysis.terms, cfg.lexical_k)
        graph_hits = store.graph_search(
            owner, scopes, analysis.entity_names, cfg.graph_max_hops, cfg.graph_max_candidates
        )
        pinned = store.pinned_rowids(owner, scopes, PINNED_LIMIT)
        hints: list[tuple[int, float]] = []
        if include_cross_scope and scopes is not None:
            others = [s for s in Scope if s not in set(scopes)]
            if others:
                hints = store.vector_search(owner, others, query_vector, HINT_LIMIT)
        cosine = dict(vector_hits)
        bm25 = dict(lexical_hits)
        pool = sorted(set(cosine) | set(bm25) | set(graph_hits) | set(pinned))
        rows = store.candidate_rows(pool)
    timings["candidates"] = (time.perf_counter() - t0) * 1000

    # ---- filtering
    t0 = time.perf_counter()
    settings = FilterSettings(
        mode=mode.value,
        time_from=t_from,
        time_to=t_to,
        knowledge_at=k_at,
        event_time_from=e_from,
        event_time_to=e_to,
        exclude_node_types=excluded_types or frozenset(),
        source_types=allowed_sources,
        unverified_threshold=cfg.unverified_confidence_threshold,
    )
    names = list(rows.columns)
    records = [{name: rows.columns[name][i] for name in names} for i in range(len(rows.rowids))]
    kept = [i for i, r in enumerate(records) if exclusion_reason(r, settings) is None]
    kept_rows = [records[i] for i in kept]
    rowids = [rows.rowids[i] for i in kept]
    pinned_set = set(pinned)
    paths: list[tuple[str, ...]] = []
    for rowid in rowids:
        p = []
        if rowid in graph_hits:
            p.append("GRAPH")
        if rowid in bm25:
            p.append("LEXICAL")
        if rowid in pinned_set:
            p.append("PINNED")
        if rowid in cosine:
            p.append("VECTOR")
        paths.append(tuple(p))
    raw_cosine = [cosine.get(r, 0.0) for r in rowids]
    semantic = [max(0.0, c) for c in raw_cosine]
    lex_idx = [i for i, r in enumerate(rowids) if r in bm25]
    lex_norm = minmax([bm25[rowids[i]] for i in lex_idx])
    lexical = [0.0] * len(rowids)
    for i, value in zip(lex_idx, lex_norm, strict=True):
        lexical[i] = value
    graph = [GRAPH_PROXIMITY[graph_hits[r]] if r in graph_hits else 0.0 for r in rowids]
    path_counts = [len(p) for p in paths]

    # ---- scoring: the pre-multiplier weights are the base (no query-specific shifts)
    pre_weights = base
    applied = adjusted_weights(pre_weights, multipliers)
    features = weighted_features(
        kept_rows, semantic, lexical, graph, path_counts, now_us, applied, cfg.epistemic_weights
    )
    if base.fusion == "weighted":
        scores = weighted_scores(features, applied)
    else:
        fi = fusion_inputs(
            kept_rows,
            semantic,
            lexical,
            [r in cosine for r in rowids],
            [r in bm25 for r in rowids],
            base,
            cfg.epistemic_weights,
            analysis.current_state,
        )
        k = base.rrf_k or 60
        scores = [
            rrf_value(
                fi.semantic_rank[i],
                fi.lexical_rank[i],
                fi.epistemic_factor[i],
                fi.node_type_factor[i],
                fi.temporal_factor[i],
                fi.recency_boost_factor[i],
                fi.tie_break[i],
                k,
            )
            for i in range(len(rowids))
        ]
        features["recency_factor"] = np.asarray(fi.recency_raw, dtype=np.float64)
        features["salience"] = np.zeros(len(rowids))
        features["confidence"] = np.zeros(len(rowids))

    # ---- selection: floor, deterministic order, caps, limit
    gate = semantic if base.fusion == "rrf" else scores
    path_score = features["path_score"].tolist()
    eligible = [i for i in range(len(rowids)) if floor is None or gate[i] >= floor]
    eligible.sort(key=lambda i: ranking_key(scores[i], path_score[i], kept_rows[i]["id"]))
    selected: list[int] = []
    source_counts: dict[tuple[str, str], int] = {}
    evidence_counts: dict[str, int] = {}
    for i in eligible:
        if len(selected) >= result_limit:
            break
        evidence = kept_rows[i]["evidence_refs"]
        if per_source is not None:
            skey = (evidence, kept_rows[i]["content_sha256"])
            if source_counts.get(skey, 0) >= per_source:
                continue
            source_counts[skey] = source_counts.get(skey, 0) + 1
        if per_evidence is not None:
            if evidence_counts.get(evidence, 0) >= per_evidence:
                continue
            evidence_counts[evidence] = evidence_counts.get(evidence, 0) + 1
        selected.append(i)
    timings["score"] = (time.perf_counter() - t0) * 1000

    # ---- packing
    t0 = time.perf_counter()
    nodes = store.get_memories_by_rowid([rowids[i] for i in selected])
    chosen = [nodes[rowids[i]] for i in selected]
    packed = pack([(n.content, n.event_time or n.created_at) for n in chosen], budget)
    timings["pack"] = (time.perf_counter() - t0) * 1000

    # ---- receipt and response
    t0 = time.perf_counter()
    feature_names = list(features)
    candidates: list[ReceiptCandidate] = []
    results: list[RetrievalCandidate] = []
    for position, i in enumerate(selected):
        node = chosen[position]
        item = packed.items[position]
        trace = ScoreTrace(
            **{name: float(features[name][i]) for name in feature_names},
            composite_score=scores[i],
        )
        fusion = None
        if base.fusion == "rrf":
            fusion = RankFusionTrace(
                semantic_rank=fi.semantic_rank[i],
                lexical_rank=fi.lexical_rank[i],
                epistemic_factor=fi.epistemic_factor[i],
                node_type_factor=fi.node_type_factor[i],
                temporal_factor=fi.temporal_factor[i],
                recency_boost_factor=fi.recency_boost_factor[i],
                tie_break=fi.tie_break[i],
            )
        relevance = semantic[i] if base.fusion == "rrf" else None
        candidates.append(
            ReceiptCandidate(
                node_id=node.id,
                scope=node.scope,
                node_type=node.node_type,
                content_sha256=kept_rows[i]["content_sha256"],
                paths=paths[i],
                score=scores[i],
                trace=trace,
                rank_fusion=fusion,
                semantic_relevance=relevance,
                token_cost=item.token_cost,
                in_context=item.in_context,
                has_content=item.has_content,
            )
        )
        results.append(
            RetrievalCandidate(
                node=node,
                paths=paths[i],
                path_count=len(paths[i]),
                semantic_score=raw_cosine[i],
                lexical_score=lexical[i],
                graph_proximity=graph[i],
                composite_score=scores[i],
                semantic_relevance=relevance,
                score_trace=trace,
                token_cost=item.token_cost,
                in_context=item.in_context,
            )
        )
    generated = {
        "vector": len(vector_hits),
        "lexical": len(lexical_hits),
        "graph": len(graph_hits),
        "pinned": len(pinned),
        "merged": len(pool),
    }
    inputs: dict[str, Any] = {
        "ranking_multipliers": None if multipliers is None else multipliers.model_dump(mode="json"),
        "ranking_profile": resolution.model_dump(mode="json"),
        "knowledge_at": None if k_at is None else k_at.isoformat(),
        "event_time_from": None if e_from is None else e_from.isoformat(),
        "event_time_to": None if e_to is None else e_to.isoformat(),
        "include_cross_scope": include_cross_scope,
        "exclude_node_types": None if excluded_types is None else sorted(excluded_types),
        "source_types": None if allowed_sources is None else sorted(allowed_sources),
        "max_per_source": per_source,
        "max_per_evidence": per_evidence,
        "epistemic_weights": dict(sorted(cfg.epistemic_weights.items())),
        "unverified_confidence_threshold": cfg.unverified_confidence_threshold,
        "vector_k": cfg.vector_k,
        "lexical_k": cfg.lexical_k,
        "graph_max_candidates": cfg.graph_max_candidates,
        "graph_max_hops": cfg.graph_max_hops,
        "pinned_limit": PINNED_LIMIT,
    }
    outcomes: dict[str, Any] = {
        "candidates_generated": generated,
        "candidates_filtered": len(records) - len(kept),
        "candidates_included": len(selected),
        "tokens_used": packed.tokens_used,
        "cross_scope_hint_count": len(hints),
    }
    packing_config = PackingConfig(token_budget=budget)
    receipt = RetrievalReceipt(
        request_id=request_id,
        user_id=owner,
        query=query,
        reference_time=now,
        scopes=None if scopes is None else tuple(scopes),
        retrieval_mode=mode,
        min_score=floor,
        result_limit=result_limit,
        time_from=t_from,
        time_to=t_to,
        scoring=base,
        weights=pre_weights,
        ranking_multipliers=multipliers,
        packing=packing_config,
        context_sha256=sha256_hex(packed.rendered_context),
        pack=PackIdentity(pack_id=pack_identity.pack_id, write_seq=pack_identity.write_seq),
        execution=RetrievalExecution(
            inputs=inputs, outcomes=outcomes, features=engine.feature_identity()
        ),
        candidates=tuple(candidates),
    )
    persisted = True
    try:
        persist_receipt(engine, receipt)
    except Exception:  # a failed receipt write never fails the retrieval
        log.exception("retrieval receipt %s was not persisted", request_id)
        persisted = False
    timings["receipt"] = (time.perf_counter() - t0) * 1000
    timings["total"] = (time.perf_counter() - started) * 1000

    excluded_ids = tuple(c.node_id for c in candidates if not c.in_context)
    bundle = MemoryBundle(
        rendered_context=packed.rendered_context,
        included_count=sum(1 for c in candidates if c.in_context),
        tokens_used=packed.tokens_used,
        token_budget=budget,
        budget_remaining=budget - packed.tokens_used,
        excluded_ids=excluded_ids,
    )
    metadata = RetrievalMetadata(
        request_id=request_id,
        receipt_persisted=persisted,
        reference_time=now,
        scoring_config_version=base.version_id,
        fusion=base.fusion,
        ranking_multipliers=multipliers,
        ranking_profile_status=resolution.status,
        ranking_profile_id=resolution.profile_id,
        ranking_profile_reason=resolution.reason,
        result_limit=result_limit,
        min_score=floor,
        candidates_generated=generated,
        candidates_filtered=len(records) - len(kept),
        candidates_included=len(selected),
        timing_ms={k: round(v, 3) for k, v in timings.items()},
    )
    hint_models = tuple(
        CrossScopeHint(node_id=uuid.UUID(str(n.id)), scope=n.scope.value, semantic_score=score)
        for rowid, score in hints
        for n in [store.get_memories_by_rowid([rowid])[rowid]]
    )
    return RetrievalResponse(
        results=tuple(results), bundle=bundle, metadata=metadata, cross_scope_hints=hint_models
    )
