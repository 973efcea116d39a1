"""retrieve(): candidates → features → scores → selection → packing → receipt."""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Collection, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import ValidationError

from prme.canonical import sha256_hex
from prme.embed.base import embed_queries
from prme.engine import Engine
from prme.errors import InvalidInputError
from prme.models.enums import NodeType, RetrievalMode, SourceType
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
    keep_mask,
    minmax,
    weighted_features,
)
from prme.retrieval.fusion_methods import FusionContext, fusion_method
from prme.retrieval.owner_index import SCOPES, OwnerIndex
from prme.retrieval.packing import pack
from prme.retrieval.query import analyze_query
from prme.retrieval.scoring import FloatArray
from prme.services.receipts import persist_receipt
from prme.services.resolution import resolve_multipliers
from prme.storage.timeutil import to_us
from prme.validation import (
    require_aware,
    require_cap,
    require_finite_nonnegative,
    require_owner,
    require_result_limit,
    require_text,
    require_token_budget,
)

log = logging.getLogger("prme.retrieval")
MAX_QUERY_CHARS = 10_000
PINNED_LIMIT = 500
HINT_LIMIT = 5
# Owner indexes with at least this many memories scan their vectors in a worker thread: the
# hand-off costs tens of microseconds, a scan of 8k rows of 256-384 floats about a millisecond.
PARALLEL_SCAN_ROWS = 8192
_executor: ThreadPoolExecutor | None = None
_executor_pid = 0
_executor_lock = threading.Lock()
_scan_slot = threading.Semaphore(1)
RRF_MULTIPLIER_ERROR = (
    "Ranking multipliers adjust the weighted formula and do not apply to fusion='rrf'"
)


Scan = tuple[npt.NDArray[np.float32], npt.NDArray[np.int64], npt.NDArray[np.float32]]


def _scan(
    ix: OwnerIndex, query: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_], k: int
) -> Scan:
    """Every position's cosine, and the top ``k`` masked positions with their cosines."""
    cosines = ix.cosines(query)
    return (cosines, *ix.top_k(cosines, mask, k))


def _scan_in_background(
    ix: OwnerIndex, query: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_], k: int
) -> Future[Scan] | None:
    """The vector scan on the process's scan thread (started on first use), or None when that
    thread is busy with another retrieval's scan (the caller then scans inline, not queued)."""
    global _executor, _executor_pid
    if not _scan_slot.acquire(blocking=False):
        return None
    try:
        with _executor_lock:
            # a forked child does not inherit the parent's worker thread: it starts its own
            if _executor is None or _executor_pid != os.getpid():
                _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prme-scan")
                _executor_pid = os.getpid()
            executor = _executor
        future = executor.submit(_scan, ix, query, mask, k)
    except RuntimeError:  # the interpreter is shutting down: scan inline
        _scan_slot.release()
        return None
    except BaseException:
        _scan_slot.release()
        raise
    future.add_done_callback(lambda _: _scan_slot.release())
    return future


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


def _lookup(
    keys: npt.NDArray[np.int64], values: npt.NDArray[Any], wanted: npt.NDArray[np.int64]
) -> FloatArray:
    """``values`` at the positions of ``wanted`` within ``keys`` (every wanted key is present)."""
    order = np.argsort(keys, kind="stable")
    found = np.searchsorted(keys[order], wanted)
    result: FloatArray = values[order][found].astype(np.float64)
    return result


def _members(
    size: int, members: npt.NDArray[np.int64], wanted: npt.NDArray[np.int64]
) -> npt.NDArray[np.bool_]:
    """Which of ``wanted`` (positions below ``size``) are among ``members``."""
    table = np.zeros(size, dtype=np.bool_)
    table[members] = True
    result: npt.NDArray[np.bool_] = table[wanted]
    return result


def _paths(on_graph: bool, on_lexical: bool, on_pinned: bool, on_vector: bool) -> tuple[str, ...]:
    flags = (
        ("GRAPH", on_graph),
        ("LEXICAL", on_lexical),
        ("PINNED", on_pinned),
        ("VECTOR", on_vector),
    )
    return tuple(name for name, on in flags if on)


def _ranked_order(
    scores: list[float],
    path_score: list[float],
    ids: list[str],
    positions: list[int],
    gate: list[float],
    floor: float | None,
) -> Iterator[int]:
    """Candidates in ``ranking_key`` order, lazily: numpy orders by (score, path); only runs of
    equal (score, path) are sorted by id (``ids[positions[i]]``) in Python."""
    score_array = np.asarray(scores, dtype=np.float64)
    path_array = np.asarray(path_score, dtype=np.float64)
    order = np.lexsort((-path_array, -score_array)).tolist()
    start = 0
    while start < len(order):
        end = start + 1
        first = order[start]
        while (
            end < len(order)
            and scores[order[end]] == scores[first]
            and path_score[order[end]] == path_score[first]
        ):
            end += 1
        run = order[start:end]
        for i in run if len(run) == 1 else sorted(run, key=lambda j: ids[positions[j]]):
            if floor is None or gate[i] >= floor:
                yield i
        start = end


def check_rank_fusion_request(base: ScoringWeights, multipliers: RankingMultipliers | None) -> None:
    """Under rrf, non-neutral multipliers are rejected before any retrieval work."""
    adjustable = fusion_method(base).adjusts_weights
    if not adjustable and multipliers is not None and not multipliers.is_neutral:
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
    require_text(query, "query")
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
    result_limit = cfg.default_limit if limit is None else require_result_limit(limit)
    budget = cfg.token_budget if token_budget is None else require_token_budget(token_budget)
    floor = None if min_score is None else require_finite_nonnegative(min_score, "min_score")
    per_source = None if max_per_source is None else require_cap(max_per_source, "max_per_source")
    per_evidence = (
        None if max_per_evidence is None else require_cap(max_per_evidence, "max_per_evidence")
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
    query_vector = embed_queries(engine.embedder, [query])[0]
    timings["embed_query"] = (time.perf_counter() - t0) * 1000

    # ---- candidate generation inside one read snapshot: the pack identity matches the data
    t0 = time.perf_counter()
    store = engine.store
    with store.read_snapshot() as pack_identity:
        owner_write_seq = store.owner_write_seq(owner)  # the receipt's (schema 2)
        ix = store.owner_index(owner)
        if ix is None:  # nothing stored yet in this pack
            ix = OwnerIndex(engine.embedder.identity.dimension)
        in_scope = ix.scope_mask(scopes)
        # A large owner's exact vector scan (numpy on the fixed index snapshot, no store access)
        # runs in a worker thread while this one does the lexical query and the other channels;
        # both release the GIL. The scan's arithmetic is the same in either thread.
        scan = (
            _scan_in_background(ix, query_vector, in_scope, cfg.vector_k)
            if ix.size >= PARALLEL_SCAN_ROWS
            else None
        )
        lexical_hits = store.lexical_search(owner, scopes, analysis.terms, cfg.lexical_k)
    lex_pos, lex_found = ix.positions_of([r for r, _ in lexical_hits])
    lex_raw = np.array([s for _, s in lexical_hits], dtype=np.float64)[lex_found]
    graph_hits = ix.graph_search(
        analysis.entity_names, in_scope, cfg.graph_max_hops, cfg.graph_max_candidates
    )
    pinned_pos = np.flatnonzero(ix.pinned_mask() & in_scope)[:PINNED_LIMIT]
    # A scan the busy worker has not started yet is taken back and done here.
    cosines, vec_pos, vec_cos = (
        _scan(ix, query_vector, in_scope, cfg.vector_k)
        if scan is None or scan.cancel()
        else scan.result()
    )
    pool = np.unique(
        np.concatenate(
            [vec_pos, lex_pos, np.fromiter(graph_hits, np.int64, len(graph_hits)), pinned_pos]
        ).astype(np.int64)
    )
    timings["candidates"] = (time.perf_counter() - t0) * 1000

    # ---- filtering, then features over the kept pool
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
        clock_us=now_us,
    )
    pos = pool[keep_mask(ix, pool, settings)]
    n = len(pos)
    hints: list[tuple[int, float]] = []
    if include_cross_scope and scopes is not None:
        # Hints obey the same filters as results and need a positive similarity.
        hint_pos, hint_cos = ix.top_k(cosines, ~in_scope, HINT_LIMIT * 4)
        allowed = keep_mask(ix, hint_pos, settings) & (hint_cos > 0)
        hints = list(zip(hint_pos[allowed].tolist(), hint_cos[allowed].tolist(), strict=True))
        hints = hints[:HINT_LIMIT]
    graph_pos = np.fromiter(graph_hits, np.int64, len(graph_hits))
    on_vector = _members(ix.size, vec_pos, pos)
    on_lexical = _members(ix.size, lex_pos, pos)
    on_graph = _members(ix.size, graph_pos, pos)
    on_pinned = _members(ix.size, pinned_pos, pos)
    raw_cosine = np.zeros(n, dtype=np.float64)
    raw_cosine[on_vector] = _lookup(vec_pos, vec_cos, pos[on_vector])
    semantic = np.maximum(0.0, raw_cosine)
    lexical = np.zeros(n, dtype=np.float64)
    lexical[on_lexical] = minmax(_lookup(lex_pos, lex_raw, pos[on_lexical]))
    proximity = np.zeros(ix.size, dtype=np.float64)
    proximity[graph_pos] = [GRAPH_PROXIMITY[hop] for hop in graph_hits.values()]
    graph = proximity[pos]
    path_matrix = np.stack([on_graph, on_lexical, on_pinned, on_vector])
    path_counts = path_matrix.sum(axis=0).astype(np.int64)

    # ---- scoring: the pre-multiplier weights are the base (no query-specific shifts)
    pre_weights = base
    applied = adjusted_weights(pre_weights, multipliers)
    features = weighted_features(
        ix, pos, semantic, lexical, graph, path_counts, now_us, applied, cfg.epistemic_weights
    )
    method = fusion_method(base)
    fused = method.fuse(
        features,
        FusionContext(
            ix=ix,
            pos=pos,
            semantic=semantic,
            lexical=lexical,
            on_vector=on_vector,
            on_lexical=on_lexical,
            epistemic_map=cfg.epistemic_weights,
            current_state=analysis.current_state,
        ),
        base,
        applied,
    )
    scores, features, fi = fused.scores, fused.features, fused.rank_fusion

    # ---- selection: floor, deterministic order, caps, limit
    gate = semantic.tolist() if method.min_score_on == "semantic_relevance" else scores
    path_score = features["path_score"].tolist()
    plist = pos.tolist()
    ordered = _ranked_order(scores, path_score, ix.ids, plist, gate, floor)
    selected: list[int] = []
    source_counts: dict[tuple[str, str], int] = {}
    evidence_counts: dict[str, int] = {}
    for i in ordered:
        if len(selected) >= result_limit:
            break
        evidence = ix.evidence[plist[i]]
        if per_source is not None:
            skey = (evidence, ix.content_sha256[plist[i]])
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
    rowid_col = ix.col("rowid")
    selected_rowids = [int(rowid_col[plist[i]]) for i in selected]
    nodes = store.get_memories_by_rowid(selected_rowids)
    chosen = [nodes[r] for r in selected_rowids]
    packed = pack([(m.content, m.event_time or m.created_at) for m in chosen], budget)
    timings["pack"] = (time.perf_counter() - t0) * 1000

    # ---- receipt and response
    t0 = time.perf_counter()
    feature_names = list(features)
    candidates: list[ReceiptCandidate] = []
    results: list[RetrievalCandidate] = []
    for position, i in enumerate(selected):
        node = chosen[position]
        item = packed.items[position]
        paths = _paths(*(bool(flag) for flag in path_matrix[:, i]))
        trace = ScoreTrace(
            **{name: float(features[name][i]) for name in feature_names},
            composite_score=scores[i],
        )
        fusion = None
        relevance = None
        if fi is not None:
            fusion = RankFusionTrace(
                semantic_rank=int(fi.semantic_rank[i]) or None,
                lexical_rank=int(fi.lexical_rank[i]) or None,
                epistemic_factor=float(fi.epistemic_factor[i]),
                node_type_factor=float(fi.node_type_factor[i]),
                temporal_factor=float(fi.temporal_factor[i]),
                recency_boost_factor=None
                if fi.recency_boost_factor is None
                else float(fi.recency_boost_factor[i]),
                tie_break=None
                if fi.tie_break is None or not fi.ranked[i]
                else float(fi.tie_break[i]),
                semantic_weight=None if fi.channel_weights is None else fi.channel_weights[0],
                lexical_weight=None if fi.channel_weights is None else fi.channel_weights[1],
            )
            relevance = float(semantic[i])
        candidates.append(
            ReceiptCandidate(
                node_id=node.id,
                scope=node.scope,
                node_type=node.node_type,
                content_sha256=ix.content_sha256[plist[i]],
                paths=paths,
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
                paths=paths,
                path_count=len(paths),
                semantic_score=float(raw_cosine[i]),
                lexical_score=float(lexical[i]),
                graph_proximity=float(graph[i]),
                composite_score=scores[i],
                semantic_relevance=relevance,
                score_trace=trace,
                token_cost=item.token_cost,
                in_context=item.in_context,
            )
        )
    generated = {
        "vector": len(vec_pos),
        "lexical": len(lex_pos),
        "graph": len(graph_hits),
        "pinned": len(pinned_pos),
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
        "candidates_filtered": len(pool) - n,
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
        pack=PackIdentity(pack_id=pack_identity.pack_id, write_seq=owner_write_seq),
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
        candidates_filtered=len(pool) - n,
        candidates_included=len(selected),
        timing_ms={k: round(v, 3) for k, v in timings.items()},
    )
    hint_models = tuple(
        CrossScopeHint(
            node_id=uuid.UUID(ix.ids[p]),
            scope=SCOPES[int(ix.col("scope")[p])],
            semantic_score=float(score),
        )
        for p, score in hints
    )
    return RetrievalResponse(
        results=tuple(results), bundle=bundle, metadata=metadata, cross_scope_hints=hint_models
    )
