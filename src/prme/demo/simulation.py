"""Gate reliability by simulation: how often the two learning gates pass without a real signal.

Each run stores a generated workload (:mod:`prme.demo.workload`) in a fresh pack and walks the seed's
workflow through public :class:`~prme.client.MemoryClient` methods only: weighted retrievals of the
learning queries, explicit judgments of every returned candidate, gate 1
(``evaluate_learning``), then paired baseline/candidate retrievals of the holdout queries on the
frozen pack and gate 2 (``evaluate_full_retrieval``).

The labels carry a signal of size ``signal`` in [0, 1]: each judged request and each holdout query
keeps its true labels with probability ``signal``; otherwise its labels are permuted within the
request. For a judged request the permutation shuffles the labels over the returned candidates;
for a holdout query it shuffles the relevant labels over the union of the candidates the two arms
returned (relevant memories neither arm returned stay as they are). ``signal=0`` is the null (no
information about relevance, so every pass is a false pass); ``signal=1`` is the workload's own
planted signal (confidence separates the current fact from stale ones).

All randomness comes from ``random.Random`` seeded by the run's seed. Node and request ids are
random UUIDs, so exactly tied scores may order differently between repeats; labels are assigned
in workload-key order so that such ties do not move them.
"""

from __future__ import annotations

import math
import multiprocessing
import random
import shutil
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from prme.client import MemoryClient
from prme.config import EmbeddingConfig, PRMEConfig
from prme.demo.workload import Workload, generate_confirmation_workload, generate_workload
from prme.models.enums import Scope
from prme.models.holdout import FullRetrievalTrial
from prme.models.learning import DEFAULT_ALGORITHM, Algorithm, LearningConfig
from prme.models.relevance import RelevanceSubmission
from prme.models.scoring import RankingMultipliers, ScoringWeights

OWNER = "simulated-user"
SCOPES = (Scope.PROJECT,)
STORE_TIME = datetime(2026, 1, 1, tzinfo=UTC)
REFERENCE_TIME = datetime(2026, 1, 2, tzinfo=UTC)
GATE1_PASS = "improved_on_observed_candidates"
GATE2_PASS = "improved_full_retrieval"
# Generated workloads by name: (seed, projects) → Workload.
WORKLOADS: dict[str, Callable[..., Workload]] = {
    "stale_facts": generate_workload,
    "confirmation": generate_confirmation_workload,
}


@dataclass(frozen=True, slots=True)
class SimulationSettings:
    """The workload size and the retrieval depths of one simulated workflow.

    Args:
        projects: projects in the generated workload (3 judged groups and 1 holdout group each).
        judged_limit: ``limit`` of the judged retrievals.
        holdout_limit: ``limit`` of both holdout arms (gate 2 scores the first ``k`` = 10).
        embedding: the embedding provider (``"hash"`` keeps a run well under a second).
        algorithm: gate 1's fitting algorithm (``LearningConfig.algorithm``).
        workload: the generator, a key of :data:`WORKLOADS`.
        validation_fraction: gate 1's ``LearningConfig.validation_fraction``.
    """

    projects: int = 40
    judged_limit: int = 10
    holdout_limit: int = 10
    embedding: str = "hash"
    algorithm: Algorithm = DEFAULT_ALGORITHM
    workload: str = "stale_facts"
    validation_fraction: float = LearningConfig.model_fields["validation_fraction"].default


@dataclass(frozen=True, slots=True)
class RunResult:
    """One simulated workflow: both decisions and their headline numbers.

    ``gate2_decision`` is None when gate 1 left the multipliers neutral (insufficient data): the
    candidate arm would equal the baseline, so gate 2 is not run and cannot pass.
    """

    seed: int
    signal: float
    gate1_decision: str
    gate1_gain: float | None
    gate1_validation_groups: int
    gate2_decision: str | None
    gate2_gain: float | None
    multipliers: dict[str, float]
    gate2_regression_fraction: float | None = None
    gate2_baseline_ndcg: float | None = None
    gate2_candidate_ndcg: float | None = None

    @property
    def gate1_passed(self) -> bool:
        return self.gate1_decision == GATE1_PASS

    @property
    def gate2_passed(self) -> bool:
        return self.gate2_decision == GATE2_PASS

    @property
    def both_passed(self) -> bool:
        return self.gate1_passed and self.gate2_passed


class _TickingClock:
    """A reproducible engine clock: one millisecond later on every call."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


def _permuted(candidates: Sequence[str], relevant: set[str], rng: random.Random) -> set[str]:
    """The relevant labels shuffled over ``candidates`` (their count is kept)."""
    hits = sum(1 for c in candidates if c in relevant)
    return set(rng.sample(list(candidates), hits))


def _labels(
    returned: Sequence[str],
    relevant: set[str],
    keys: dict[str, str],
    keep: bool,
    rng: random.Random,
) -> dict[str, bool]:
    ordered = sorted(returned, key=lambda node: keys[node])
    positives = relevant if keep else _permuted(ordered, relevant, rng)
    return {node: node in positives for node in ordered}


def _judge(
    memory: MemoryClient,
    workload: Workload,
    ids: dict[str, str],
    keys: dict[str, str],
    signal: float,
    rng: random.Random,
    limit: int,
) -> None:
    for query in workload.learning:
        response = memory.retrieve(
            query.text,
            user_id=OWNER,
            scope=list(SCOPES),
            reference_time=REFERENCE_TIME,
            limit=limit,
            include_cross_scope=False,
        )
        returned = [str(c.node.id) for c in response.results]
        keep = rng.random() < signal
        if not returned:
            continue
        relevant = {ids[k] for k in query.relevant_keys}
        labels = _labels(returned, relevant, keys, keep, rng)
        memory.record_relevance(
            RelevanceSubmission(
                request_id=response.metadata.request_id,
                labels=labels,
                method="structured_evaluation",
            ),
            user_id=OWNER,
        )


def _holdout_trials(
    memory: MemoryClient,
    workload: Workload,
    ids: dict[str, str],
    keys: dict[str, str],
    multipliers: RankingMultipliers,
    signal: float,
    rng: random.Random,
    limit: int,
) -> list[FullRetrievalTrial]:
    trials: list[FullRetrievalTrial] = []
    for query in workload.holdout:
        arms = [
            memory.retrieve(
                query.text,
                user_id=OWNER,
                scope=list(SCOPES),
                reference_time=REFERENCE_TIME,
                limit=limit,
                include_cross_scope=False,
                ranking_multipliers=chosen,
            )
            for chosen in (None, multipliers)
        ]
        relevant = {ids[k] for k in query.relevant_keys}
        if rng.random() >= signal:
            union = sorted(
                {str(c.node.id) for arm in arms for c in arm.results}, key=lambda n: keys[n]
            )
            relevant = _permuted(union, relevant, rng) | (relevant - set(union))
        trials.append(
            FullRetrievalTrial(
                group_id=query.group,
                baseline_request_id=arms[0].metadata.request_id,
                candidate_request_id=arms[1].metadata.request_id,
                relevant_node_ids=tuple(sorted(relevant, key=lambda n: keys[n])),
            )
        )
    return trials


def run_workflow(
    pack: Path, *, seed: int, signal: float, settings: SimulationSettings | None = None
) -> RunResult:
    """Store the workload for ``seed`` in a new pack at ``pack`` and run both gates once.

    Args:
        pack: a directory that does not exist yet (the pack is created there).
        seed: the workload seed and the label-permutation seed.
        signal: probability that a request keeps its true labels (0 = null, 1 = planted signal).
        settings: workload size and retrieval depths.

    Raises:
        ValueError: ``signal`` outside [0, 1], or ``pack`` already exists.
    """
    if not 0.0 <= signal <= 1.0:
        raise ValueError(f"signal must be in [0, 1], got {signal!r}")
    if pack.exists():
        raise ValueError(f"pack directory {pack} already exists")
    cfg = settings or SimulationSettings()
    if cfg.workload not in WORKLOADS:
        raise ValueError(f"workload must be one of {sorted(WORKLOADS)}, got {cfg.workload!r}")
    workload = WORKLOADS[cfg.workload](seed, projects=cfg.projects)
    config = PRMEConfig(scoring=ScoringWeights(), embedding=EmbeddingConfig(provider=cfg.embedding))
    clock = _TickingClock(STORE_TIME)
    with MemoryClient(pack, config=config, clock=clock) as writer:
        stored = writer.store_many(workload.store_items(), user_id=OWNER)
    ids = {m.key: node for m, node in zip(workload.memories, stored, strict=True)}
    keys = {node: key for key, node in ids.items()}
    rng = random.Random(f"prme-simulation:{seed}:{signal!r}")
    with MemoryClient(pack, config=config, clock=clock, frozen=True) as memory:
        _judge(memory, workload, ids, keys, signal, rng, cfg.judged_limit)
        proposal = memory.evaluate_learning(
            user_id=OWNER,
            scopes=list(SCOPES),
            config=LearningConfig(
                algorithm=cfg.algorithm, validation_fraction=cfg.validation_fraction
            ),
        )
        holdout = None
        if not proposal.multipliers.is_neutral:
            trials = _holdout_trials(
                memory, workload, ids, keys, proposal.multipliers, signal, rng, cfg.holdout_limit
            )
            holdout = memory.evaluate_full_retrieval(
                trials,
                user_id=OWNER,
                scopes=list(SCOPES),
                proposal_input_checksum=proposal.input_checksum,
                memory_artifact_sha256=memory.pack_digest(),
                candidate_multipliers=proposal.multipliers,
            )
    return RunResult(
        seed=seed,
        signal=signal,
        gate1_decision=proposal.decision,
        gate1_gain=proposal.validation_ndcg_gain,
        gate1_validation_groups=proposal.coverage["validation_queries"],
        gate2_decision=None if holdout is None else holdout.decision,
        gate2_gain=None if holdout is None else holdout.ndcg_gain,
        multipliers=proposal.multipliers.model_dump(mode="json"),
        gate2_regression_fraction=None if holdout is None else holdout.regression_fraction,
        gate2_baseline_ndcg=None if holdout is None else holdout.baseline_ndcg,
        gate2_candidate_ndcg=None if holdout is None else holdout.candidate_ndcg,
    )


def _run_in_pack(
    workdir: Path, seed: int, signal: float, settings: SimulationSettings
) -> RunResult:
    pack = workdir / f"run-{seed}-{signal!r}"
    try:
        return run_workflow(pack, seed=seed, signal=signal, settings=settings)
    finally:
        shutil.rmtree(pack, ignore_errors=True)


def simulate(
    workdir: Path,
    *,
    runs: int,
    signal: float,
    first_seed: int = 0,
    settings: SimulationSettings | None = None,
    workers: int = 1,
    progress: Callable[[RunResult], None] | None = None,
) -> list[RunResult]:
    """``runs`` independent workflows (seeds ``first_seed …``), each in its own pack under
    ``workdir`` (removed after the run), on ``workers`` processes; results in seed order.

    Raises:
        ValueError: ``runs`` or ``workers`` < 1, or ``signal`` outside [0, 1].
    """
    if runs < 1 or workers < 1:
        raise ValueError(f"runs and workers must be >= 1, got {runs!r} and {workers!r}")
    if not 0.0 <= signal <= 1.0:
        raise ValueError(f"signal must be in [0, 1], got {signal!r}")
    cfg = settings or SimulationSettings()
    seeds = range(first_seed, first_seed + runs)
    results: list[RunResult] = []
    if workers == 1:
        for seed in seeds:
            results.append(_run_in_pack(workdir, seed, signal, cfg))
            if progress is not None:
                progress(results[-1])
        return results
    # spawn, not fork: the parent may already run onnxruntime threads (the MiniLM embedder).
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = [pool.submit(_run_in_pack, workdir, seed, signal, cfg) for seed in seeds]
        for future in futures:
            results.append(future.result())
            if progress is not None:
                progress(results[-1])
    return results


def wilson_interval(passes: int, runs: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """95 % Wilson score interval of a pass rate ``passes / runs``.

    ``(p + z²/2n ± z·sqrt(p(1−p)/n + z²/4n²)) / (1 + z²/n)`` with ``p = passes/runs``.
    """
    if runs < 1 or not 0 <= passes <= runs:
        raise ValueError("need 0 <= passes <= runs and runs >= 1")
    p = passes / runs
    denominator = 1 + z * z / runs
    centre = p + z * z / (2 * runs)
    spread = z * math.sqrt(p * (1 - p) / runs + z * z / (4 * runs * runs))
    low = 0.0 if passes == 0 else max(0.0, (centre - spread) / denominator)
    high = 1.0 if passes == runs else min(1.0, (centre + spread) / denominator)
    return low, high


def _rate(flags: Iterator[bool], runs: int) -> dict[str, Any]:
    passes = sum(flags)
    low, high = wilson_interval(passes, runs)
    return {"passes": passes, "rate": passes / runs, "interval95": [low, high]}


def pass_rates(results: Sequence[RunResult]) -> dict[str, Any]:
    """How often gate 1, gate 2 and both passed, with 95 % Wilson intervals and decision counts.

    Raises:
        ValueError: ``results`` is empty.
    """
    runs = len(results)
    if runs == 0:
        raise ValueError("no simulation results")
    gate1: dict[str, int] = {}
    gate2: dict[str, int] = {}
    for r in results:
        gate1[r.gate1_decision] = gate1.get(r.gate1_decision, 0) + 1
        name = r.gate2_decision or "not_run"
        gate2[name] = gate2.get(name, 0) + 1
    gains = [r.gate2_gain for r in results if r.gate2_gain is not None]
    return {
        "runs": runs,
        "gate1": _rate((r.gate1_passed for r in results), runs),
        "gate2": _rate((r.gate2_passed for r in results), runs),
        "both": _rate((r.both_passed for r in results), runs),
        "gate1_decisions": dict(sorted(gate1.items())),
        "gate2_decisions": dict(sorted(gate2.items())),
        "mean_holdout_ndcg_gain": sum(gains) / len(gains) if gains else None,
    }
