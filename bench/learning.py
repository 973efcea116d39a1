"""Learning-gate timings; prints one JSON document.

Gate 1 (``evaluate_learning``): a synthetic workload where one "judgment" is one relevance
record on its own retrieval receipt (10 returned candidates, 4 of them labelled: the two with
the highest confidence relevant, the other two not). Five requests share each query, so n
judgments form n/5 query groups. The pure function is timed on in-memory models (whole
receipts, the evidence cut from them), then the engine path at the smaller sizes: read each
judgment with its stored evidence from a pack, gate, attest, persist.

    python bench/learning.py                       # 1k, 10k, 100k pure; 1k, 10k engine
    python bench/learning.py --sizes 1000 --engine-sizes 1000
    python bench/learning.py --only gate1 --sizes 1000 10000 --algorithms listwise_ndcg_multipliers_v1

Gate 1 is timed for each fitting algorithm (``--algorithms``, both by default).
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import random
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prme import MemoryClient, PRMEConfig, ScoringWeights
from prme.bulk import gc_paused
from prme.config import EmbeddingConfig
from prme.learning.fitting import fit_multipliers
from prme.learning.gate1 import evaluate_judgments, evaluate_learning
from prme.learning.observations import observe
from prme.learning.snapshot import snapshot_from_receipts
from prme.learning.stats import percentile_bootstrap_interval
from prme.models.learning import OPTIMIZERS, LearningConfig
from prme.models.receipt import (
    PackIdentity,
    PackingConfig,
    ReceiptCandidate,
    RetrievalExecution,
    RetrievalReceipt,
)
from prme.models.relevance import RelevanceRecord, RelevanceSubmission
from prme.models.trace import ScoreTrace
from prme.retrieval.scoring import ranking_key, weighted_score
from prme.services.receipts import persist_receipt
from prme.services.relevance import read_judgments

Section = Callable[[argparse.Namespace], dict[str, Any]]
SECTIONS: dict[str, Section] = {}


def _seconds(action: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = action()
    return round(time.perf_counter() - started, 4), result


# ---- gate 1 ----
CLOCK = datetime(2026, 9, 12, tzinfo=UTC)
WEIGHTS = ScoringWeights()
OWNER = "bench"
REQUESTS_PER_QUERY = 5
CANDIDATES = 10
POOL = 5000


def _candidate_pool(rng: random.Random) -> list[ReceiptCandidate]:
    pool = []
    for _ in range(POOL):
        features = {
            "semantic_similarity": rng.random(),
            "lexical_relevance": rng.random(),
            "graph_proximity": rng.choice([0.0, 0.4, 0.7, 1.0]),
            "recency_factor": rng.random(),
            "salience": rng.random(),
            "confidence": rng.random(),
            "epistemic_weight": 0.9,
            "node_type_boost": 1.15,
            "path_score": rng.choice([1 / 3, 2 / 3, 1.0]),
        }
        score = weighted_score(ScoreTrace(**features, composite_score=0.0), WEIGHTS)
        pool.append(
            ReceiptCandidate(
                node_id=uuid.UUID(int=rng.getrandbits(128)),
                scope="project",
                node_type="fact",
                content_sha256=f"{rng.getrandbits(256):064x}",
                paths=("LEXICAL", "VECTOR"),
                score=score,
                trace=ScoreTrace(**features, composite_score=score),
                token_cost=12,
                in_context=True,
                has_content=True,
            )
        )
    return pool


def synthetic_gate1(
    judgments: int, seed: int = 7
) -> tuple[list[RetrievalReceipt], list[RelevanceRecord]]:
    """``judgments`` records, each on its own receipt; confidence predicts relevance."""
    rng = random.Random(seed)
    pool = _candidate_pool(rng)
    queries = max(1, judgments // REQUESTS_PER_QUERY)
    execution = RetrievalExecution(
        inputs={"ranking_multipliers": None}, outcomes={}, features={"feature_schema": 1}
    )
    receipts, records = [], []
    for i in range(judgments):
        returned = sorted(
            rng.sample(pool, CANDIDATES),
            key=lambda c: ranking_key(c.score, c.trace.path_score, c.node_id),
        )
        receipt = RetrievalReceipt(
            request_id=uuid.UUID(int=rng.getrandbits(128)),
            user_id=OWNER,
            query=f"question number {i % queries}",
            reference_time=CLOCK,
            scopes=("project",),
            retrieval_mode="default",
            min_score=None,
            result_limit=CANDIDATES,
            time_from=None,
            time_to=None,
            scoring=WEIGHTS,
            weights=WEIGHTS,
            ranking_multipliers=None,
            packing=PackingConfig(),
            context_sha256=f"{rng.getrandbits(256):064x}",
            pack=PackIdentity(pack_id="bench", write_seq=1),
            execution=execution,
            candidates=tuple(returned),
        )
        judged = sorted(rng.sample(returned, 4), key=lambda c: -c.trace.confidence)
        records.append(
            RelevanceRecord(
                feedback_id=uuid.UUID(int=rng.getrandbits(128)),
                request_id=receipt.request_id,
                labels={c.node_id: rank < 2 for rank, c in enumerate(judged)},
                surface="results",
                method="structured_evaluation",
                user_id=OWNER,
                recorded_at=CLOCK,
                receipt_checksum=receipt.checksum,
            )
        )
        receipts.append(receipt)
    return receipts, records


def _pure(judgments: int, algorithm: str) -> dict[str, Any]:
    config = LearningConfig(algorithm=algorithm)  # type: ignore[arg-type]
    build_s, (receipts, records) = _seconds(lambda: synthetic_gate1(judgments))
    total_s, report = _seconds(
        lambda: evaluate_learning(
            receipts, records, user_id=OWNER, scopes=["project"], config=config
        )
    )
    # Where the time goes: hashing every receipt's canonical JSON (binds the evidence), the
    # bit-compatible percentile bootstrap, and the fit itself (vectorized loss + descent).
    hashing_s, _ = _seconds(lambda: [r.checksum for r in receipts])
    diffs = [q.ndcg_diff for q in report.queries if q.split == "validation"]
    bootstrap_s, _ = _seconds(
        lambda: (
            diffs
            and percentile_bootstrap_interval(
                diffs, samples=config.bootstrap_samples, seed=config.seed
            )
        )
    )
    snapshot = snapshot_from_receipts(receipts, records, OWNER)
    observations = observe(snapshot, user_id=OWNER, scopes=["project"], config=config)
    fit_s, _ = _seconds(lambda: report.queries and fit_multipliers(observations))
    return {
        "algorithm": algorithm,
        "judgments": judgments,
        "query_groups": len(observations.groups),
        "validation_groups": report.coverage["validation_queries"],
        "explicit_pairs": report.coverage["explicit_pairs"],
        "decision": report.decision,
        "build_inputs_s": build_s,
        "evaluate_learning_s": total_s,
        "of_which_receipt_checksums_s": hashing_s,
        "of_which_bootstrap_s": bootstrap_s,
        "of_which_fit_s": fit_s,
    }


def _load_pack(client: MemoryClient, judgments: int) -> float:
    """Persist the synthetic receipts and record every judgment through the client; returns
    the seconds spent recording. The in-memory inputs die with this frame, so the timings
    below measure the engine reading its pack, not the bench's own objects."""
    receipts, records = synthetic_gate1(judgments)
    for receipt in receipts:
        persist_receipt(client.engine, receipt)
    started = time.perf_counter()
    for record in records:
        submission = RelevanceSubmission(
            feedback_id=record.feedback_id,
            request_id=record.request_id,
            labels=record.labels,
            method=record.method,
        )
        client.record_relevance(submission, user_id=OWNER)
    return time.perf_counter() - started


def _engine(judgments: int, algorithm: str) -> dict[str, Any]:
    learning = LearningConfig(algorithm=algorithm)  # type: ignore[arg-type]
    with tempfile.TemporaryDirectory() as tmp:
        config = PRMEConfig(scoring=WEIGHTS, embedding=EmbeddingConfig(provider="hash"))
        with MemoryClient(Path(tmp) / "pack", config=config) as client:
            load_s = _load_pack(client, judgments)
            gc.collect()
            runs, cpu = [], []
            for _ in range(5):  # the report is persisted once; repeats are identical no-ops
                cpu_started = time.process_time()
                seconds, report = _seconds(
                    lambda: client.evaluate_learning(
                        user_id=OWNER, scopes=["project"], max_records=100_000, config=learning
                    )
                )
                runs.append(seconds)
                cpu.append(round(time.process_time() - cpu_started, 4))
            # The same steps one by one: read judgments + evidence, then the pure gate.
            with gc_paused():
                read_s, stored = _seconds(
                    lambda: read_judgments(client.engine, OWNER, limit=judgments)
                )
                gate_s, _ = _seconds(
                    lambda: evaluate_judgments(
                        stored, user_id=OWNER, scopes=["project"], config=learning
                    )
                )
    return {
        "algorithm": algorithm,
        "judgments": judgments,
        "decision": report.decision,
        "record_relevance_each_ms": round(1000 * load_s / judgments, 3),
        "evaluate_learning_s_best": min(runs),
        "evaluate_learning_s_median": sorted(runs)[len(runs) // 2],
        "evaluate_learning_s_worst": max(runs),
        # CPU time of this process (the call is single-threaded): the wall time on an idle
        # machine, whatever else shares the cores.
        "evaluate_learning_cpu_s_best": min(cpu),
        "evaluate_learning_cpu_s_median": sorted(cpu)[len(cpu) // 2],
        "of_which_read_judgments_s": read_s,
        "of_which_gate_s": gate_s,
    }


def bench_gate1(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "workload": (
            f"one record per receipt, {CANDIDATES} candidates, 4 labels (2 relevant by "
            f"confidence), {REQUESTS_PER_QUERY} requests per query group"
        ),
        "pure": [_pure(n, a) for a in args.algorithms for n in args.sizes],
        "engine": [_engine(n, a) for a in args.algorithms for n in args.engine_sizes],
    }


SECTIONS["gate1"] = bench_gate1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--engine-sizes", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--trials", type=int, default=1000, help="gate-2 holdout size")
    parser.add_argument("--only", choices=sorted(SECTIONS), nargs="+", default=None)
    parser.add_argument(
        "--algorithms", nargs="+", choices=sorted(OPTIMIZERS), default=list(OPTIMIZERS)
    )
    args = parser.parse_args()
    out: dict[str, Any] = {"python": platform.python_version(), "machine": platform.machine()}
    for name, section in SECTIONS.items():
        if args.only is None or name in args.only:
            out[name] = section(args)
    print(json.dumps(out, indent=2))


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


def _section_gate2(args: argparse.Namespace) -> dict[str, Any]:
    return bench_gate2(trials=args.trials)


SECTIONS["gate2"] = _section_gate2


if __name__ == "__main__":
    main()
