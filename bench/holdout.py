"""Gate-2 benchmark: the pure evaluate_full_retrieval on 1,000 synthetic paired trials.

Prints one JSON object. Run: ``python bench/holdout.py``.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from datetime import UTC, datetime
from typing import Any

# ---- gate 2 ----


def _gate2_receipt(
    ranked: list[uuid.UUID], query: str, multipliers: Any, rng: random.Random
) -> Any:
    from prme.models.enums import NodeType, RetrievalMode, Scope
    from prme.models.receipt import (
        PackIdentity,
        PackingConfig,
        ReceiptCandidate,
        RetrievalExecution,
        RetrievalReceipt,
    )
    from prme.models.scoring import ScoringWeights, adjusted_weights
    from prme.models.trace import ScoreTrace
    from prme.retrieval.scoring import ranking_key, weighted_score

    base = ScoringWeights()
    applied = adjusted_weights(base, multipliers)
    rows = []
    for node_id in ranked:
        trace = ScoreTrace(
            semantic_similarity=rng.uniform(0.4, 1.0),
            lexical_relevance=rng.random(),
            recency_factor=rng.random(),
            salience=0.5,
            confidence=rng.random(),
            composite_score=0.0,
        )
        score = weighted_score(trace, applied)
        rows.append((node_id, trace.model_copy(update={"composite_score": score}), score))
    rows.sort(key=lambda r: ranking_key(r[2], r[1].path_score, r[0]))
    return RetrievalReceipt(
        request_id=uuid.uuid4(),
        user_id="alice",
        query=query,
        reference_time=datetime(2026, 9, 14, tzinfo=UTC),
        scopes=(Scope.PROJECT,),
        retrieval_mode=RetrievalMode.DEFAULT,
        min_score=None,
        result_limit=len(ranked),
        time_from=None,
        time_to=None,
        scoring=base,
        weights=base,
        ranking_multipliers=multipliers,
        packing=PackingConfig(),
        context_sha256="0" * 64,
        pack=PackIdentity(pack_id="bench-pack", write_seq=1),
        execution=RetrievalExecution(
            inputs={"max_per_source": None, "include_cross_scope": False},
            outcomes={},
            features={"feature_schema": 1, "embedder": "bench"},
        ),
        candidates=tuple(
            ReceiptCandidate(
                node_id=node_id,
                scope=Scope.PROJECT,
                node_type=NodeType.FACT,
                content_sha256="1" * 64,
                paths=("VECTOR",),
                score=score,
                trace=trace,
                token_cost=8,
                in_context=True,
                has_content=True,
            )
            for node_id, trace, score in rows
        ),
    )


def bench_gate2(trials: int = 1000, candidates: int = 10, seed: int = 42) -> dict[str, Any]:
    """Time the pure gate 2 on ``trials`` paired trials, one group each (the bootstrap's worst
    case), receipts with ``candidates`` results each; the candidate arm leans on confidence."""
    from prme.canonical import canonical_json
    from prme.learning.gate2 import evaluate_full_retrieval
    from prme.models.holdout import FullRetrievalTrial
    from prme.models.scoring import RankingMultipliers

    rng = random.Random(seed)
    candidate_m = RankingMultipliers(confidence=4.0, semantic=0.25, lexical=0.25)
    receipts = []
    pairs = []
    for t in range(trials):
        pool = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(candidates)]
        baseline = _gate2_receipt(pool, f"query {t}", None, rng)
        candidate = _gate2_receipt(pool, f"query {t}", candidate_m, rng)
        receipts += [baseline, candidate]
        pairs.append(
            FullRetrievalTrial(
                group_id=f"group-{t:05d}",
                baseline_request_id=baseline.request_id,
                candidate_request_id=candidate.request_id,
                relevant_node_ids=tuple(rng.sample(pool, 2)),
            )
        )
    kwargs: dict[str, Any] = {
        "user_id": "alice",
        "scopes": ["project"],
        "proposal_input_checksum": "a" * 64,
        "memory_artifact_sha256": "b" * 64,
        "candidate_multipliers": candidate_m,
        "pack_digest": "c" * 64,
    }
    timings = []
    report = None
    for _ in range(3):
        started = time.perf_counter()
        report = evaluate_full_retrieval(receipts, pairs, **kwargs)
        timings.append(time.perf_counter() - started)
    assert report is not None
    rng.shuffle(receipts)
    rng.shuffle(pairs)
    shuffled = evaluate_full_retrieval(receipts, pairs, **kwargs)
    return {
        "trials": trials,
        "query_groups": report.coverage["query_groups"],
        "candidates_per_receipt": candidates,
        "bootstrap_samples": report.config.bootstrap_samples,
        "seconds_best": round(min(timings), 4),
        "seconds_worst": round(max(timings), 4),
        "within_1s": max(timings) <= 1.0,
        "decision": report.decision,
        "ndcg_gain": report.ndcg_gain,
        "order_independent": canonical_json(report) == canonical_json(shuffled),
    }


if __name__ == "__main__":
    print(json.dumps({"gate2": bench_gate2()}, indent=2))
