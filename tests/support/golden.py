"""The golden learning workflow, built once per test session and shared by the profile tests.

:func:`golden` runs the seed's workflow once per test session: store a generated workload,
retrieve and judge the learning queries, fit proposals (gate 1), freeze a copy of the pack and
run the holdout there (gate 2). The profile tests reuse its reports on fresh copies of the pack
(:func:`fresh_pack`), so every test creates and activates profiles from real, attested evidence.
``tests/conftest.py``'s ``gold`` fixture returns it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import FakeClock, copy_pack, make_config, open_pack

from prme import MemoryClient, Scope
from prme.demo.workload import Workload, generate_workload
from prme.models.holdout import FullRetrievalEvaluation, FullRetrievalEvaluationConfig
from prme.models.learning import LearningConfig, LearningEvaluation
from prme.models.relevance import RelevanceSubmission

OWNER = "alice"
SCOPES = [Scope.PROJECT]
HOLDOUT_TIME = datetime(2026, 9, 14, tzinfo=UTC)
# Stronger regularization fits a weaker proposal; over it, the medium one still improves.
# A weak and a stronger proposal of the reference fit, whose pull to neutral grades its moves:
# the medium one still improves on a profile of the weak one (the chained holdout).
WEAK = LearningConfig(
    algorithm="pairwise_weight_multipliers_v1", regularization=0.5, bootstrap_samples=500
)
MEDIUM = LearningConfig(
    algorithm="pairwise_weight_multipliers_v1", regularization=0.1, bootstrap_samples=500
)
# The unfiltered pointer gets a small judged set of its own (16 unfiltered retrievals).
UNFILTERED_JUDGED = 16
SMALL = LearningConfig(min_training_queries=4, min_validation_queries=4, bootstrap_samples=500)
# The extra holdouts use 30 of the 40 holdout groups and fewer bootstrap samples (speed only).
EXTRA_HOLDOUT_GROUPS = 30
QUICK = FullRetrievalEvaluationConfig(bootstrap_samples=500)


@dataclass(frozen=True)
class Golden:
    """A judged pack (no profiles, no pointer) and passing reports made from it.

    - ``proposal`` / ``holdout``: default gate-1 config, holdout run in a frozen copy from base.
    - ``weak_proposal`` / ``weak_holdout``: a weaker proposal, holdout from base.
    - ``chained_proposal`` / ``chained_holdout``: a proposal whose holdout baseline arm ran with
      a profile of ``weak_proposal`` active (so it chains on such a profile).
    - ``unfiltered_proposal`` / ``unfiltered_holdout``: evidence for the unfiltered pointer.
    """

    root: Path
    workload: Workload
    ids: dict[str, str]
    proposal: LearningEvaluation
    holdout: FullRetrievalEvaluation
    weak_proposal: LearningEvaluation
    weak_holdout: FullRetrievalEvaluation
    chained_proposal: LearningEvaluation
    chained_holdout: FullRetrievalEvaluation
    unfiltered_proposal: LearningEvaluation
    unfiltered_holdout: FullRetrievalEvaluation

    @property
    def memories(self) -> Path:
        return self.root / "memories"

    @property
    def before_gate1(self) -> Path:
        """A copy taken after judging, before any report existed (same pack secret)."""
        return self.root / "before-gate1"

    def holdout_queries(self) -> list[tuple[str, str, list[str]]]:
        return holdout_queries(self.workload, self.ids)


def holdout_queries(workload: Workload, ids: dict[str, str]) -> list[tuple[str, str, list[str]]]:
    """``(group_id, query, relevant ids)`` of every holdout query."""
    return [(q.group, q.text, [ids[k] for k in q.relevant_keys]) for q in workload.holdout]


def open_client(path: Path, clock: Callable[[], datetime], **kwargs: Any) -> MemoryClient:
    kwargs.setdefault("config", make_config())
    return open_pack(path, clock=clock, **kwargs)


def judge_learning_queries(
    memory: MemoryClient, workload: Workload, *, unfiltered: bool = False, count: int | None = None
) -> None:
    """Retrieve learning queries and label the returned facts about the asked aspect."""
    for query in workload.learning[:count]:
        scope = None if unfiltered else workload.scope
        response = memory.retrieve(query.text, user_id=OWNER, scope=scope, limit=10)
        assert response.metadata.receipt_persisted
        labels = {}
        for result in response.results:
            key = str((result.node.metadata or {}).get("workload_key"))
            project, _, rest = key.partition("/")
            if f"{project.lower()}/{rest.split('/')[0]}" == query.group:  # same project, aspect
                labels[result.node.id] = key in query.relevant_keys
        if labels:
            submission = RelevanceSubmission(request_id=response.metadata.request_id, labels=labels)
            memory.record_relevance(submission, user_id=OWNER)


def _build(root: Path) -> Golden:
    clock = FakeClock()
    workload = generate_workload(0)
    with open_client(root / "memories", clock) as memory:
        stored = memory.store_many(workload.store_items(), user_id=OWNER)
        ids = {m.key: node_id for m, node_id in zip(workload.memories, stored, strict=True)}
        judge_learning_queries(memory, workload)
        judge_learning_queries(memory, workload, unfiltered=True, count=UNFILTERED_JUDGED)
    copy_pack(root / "memories", root / "before-gate1")
    with open_client(root / "memories", clock) as memory:
        proposal = memory.evaluate_learning(user_id=OWNER, scopes=SCOPES)
        weak = memory.evaluate_learning(user_id=OWNER, scopes=SCOPES, config=WEAK)
        medium = memory.evaluate_learning(user_id=OWNER, scopes=SCOPES, config=MEDIUM)
        unfiltered = memory.evaluate_learning(user_id=OWNER, scopes=None, config=SMALL)
    queries = holdout_queries(workload, ids)
    extra = queries[:EXTRA_HOLDOUT_GROUPS]
    copy_pack(root / "memories", root / "frozen")
    with open_client(root / "frozen", clock, frozen=True) as memory:
        digest = memory.pack_digest()
        holdout = memory.run_full_retrieval_holdout(
            queries,
            user_id=OWNER,
            scopes=SCOPES,
            proposal=proposal,
            reference_time=HOLDOUT_TIME,
            memory_artifact_sha256=digest,
        )
        weak_holdout = memory.run_full_retrieval_holdout(
            extra,
            user_id=OWNER,
            scopes=SCOPES,
            proposal=weak,
            reference_time=HOLDOUT_TIME,
            memory_artifact_sha256=digest,
            config=QUICK,
        )
        unfiltered_holdout = memory.run_full_retrieval_holdout(
            extra,
            user_id=OWNER,
            scopes=None,
            proposal=unfiltered,
            reference_time=HOLDOUT_TIME,
            memory_artifact_sha256=digest,
            config=QUICK,
        )
    copy_pack(root / "memories", root / "chain")  # the same content: the same digest
    with open_client(root / "chain", clock) as memory:
        weak_profile = memory.create_ranking_profile(weak, weak_holdout, user_id=OWNER)
        memory.activate_ranking_profile(weak_profile.profile_id, user_id=OWNER)
        chained_holdout = memory.run_full_retrieval_holdout(
            extra,
            user_id=OWNER,
            scopes=SCOPES,
            proposal=medium,
            reference_time=HOLDOUT_TIME,
            memory_artifact_sha256=digest,
            config=QUICK,
        )
    return Golden(
        root=root,
        workload=workload,
        ids=ids,
        proposal=proposal,
        holdout=holdout,
        weak_proposal=weak,
        weak_holdout=weak_holdout,
        chained_proposal=medium,
        chained_holdout=chained_holdout,
        unfiltered_proposal=unfiltered,
        unfiltered_holdout=unfiltered_holdout,
    )


_GOLDEN: dict[str, Golden] = {}


def golden(tmp_path_factory: pytest.TempPathFactory) -> Golden:
    """The session's golden workflow (built on first use, shared by every profile test)."""
    if "golden" not in _GOLDEN:
        _GOLDEN["golden"] = _build(tmp_path_factory.mktemp("golden"))
    return _GOLDEN["golden"]


def fresh_pack(source: Path, target: Path) -> Path:
    """A byte copy of a pack directory (it shares the source's secret, like a frozen copy)."""
    copy_pack(source, target)
    return target
