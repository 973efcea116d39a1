"""The whole learning workflow on a generated workload, through MemoryClient on real packs.

:func:`golden` runs the seed's workflow once per test session: store a generated workload,
retrieve and judge the learning queries, fit proposals (gate 1), freeze a copy of the pack and
run the holdout there (gate 2). The profile tests reuse its reports on fresh copies of the pack
(:func:`fresh_pack`), so every test creates and activates profiles from real, attested evidence.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import FakeClock, copy_pack, make_config, open_pack
from seed_blocks import BLOCK_4 as SEED_BLOCK_4
from seed_blocks import BLOCK_5 as SEED_BLOCK_5

from prme import MemoryClient, Scope
from prme.learning.metrics import ndcg_at_k
from prme.models.holdout import FullRetrievalEvaluation, FullRetrievalEvaluationConfig
from prme.models.learning import LearningConfig, LearningEvaluation
from prme.models.relevance import RelevanceSubmission
from prme.workload import Workload, generate_workload

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


@pytest.fixture
def gold(tmp_path_factory: pytest.TempPathFactory) -> Golden:
    return golden(tmp_path_factory)


@pytest.fixture
def pack(gold: Golden, pack_path: Path) -> Path:
    """A fresh copy of the judged golden pack at the test's ``pack_path``."""
    return fresh_pack(gold.memories, pack_path)


def holdout_ndcg(memory: MemoryClient, gold: Golden) -> list[float]:
    """NDCG@10 of every holdout query, retrieved as the holdout's arms were (same clock, limit)."""
    values = []
    for _, text, relevant in gold.holdout_queries():
        response = memory.retrieve(
            text,
            user_id=OWNER,
            scope=SCOPES,
            reference_time=HOLDOUT_TIME,
            limit=20,
            include_cross_scope=False,
        )
        values.append(ndcg_at_k([str(r.node.id) for r in response.results], relevant, 10))
    return values


def test_golden_workflow_gates(gold: Golden) -> None:
    # Gate 1 on the judged learning queries, gate 2 in a frozen copy: both pass.
    assert gold.proposal.decision == "improved_on_observed_candidates"
    assert gold.proposal.coverage["training_queries"] >= 20
    assert gold.proposal.coverage["validation_queries"] >= 20
    assert gold.holdout.decision == "improved_full_retrieval"
    assert gold.holdout.proposal_input_checksum == gold.proposal.input_checksum
    assert gold.holdout.candidate_multipliers == gold.proposal.multipliers
    assert gold.holdout.baseline_multipliers.is_neutral
    assert gold.holdout.coverage["query_groups"] == len(gold.workload.holdout) >= 20
    # The chained holdout's baseline arm ran with the weak profile applied.
    assert gold.chained_holdout.decision == "improved_full_retrieval"
    assert gold.chained_holdout.baseline_multipliers == gold.weak_proposal.multipliers
    for proposal, holdout in (
        (gold.weak_proposal, gold.weak_holdout),
        (gold.chained_proposal, gold.chained_holdout),
        (gold.unfiltered_proposal, gold.unfiltered_holdout),
    ):
        assert proposal.decision == "improved_on_observed_candidates"
        assert holdout.decision == "improved_full_retrieval"
        assert holdout.proposal_input_checksum == proposal.input_checksum
    assert gold.unfiltered_holdout.scopes is None


def test_full_workflow_create_activate_apply_deactivate_rollback(
    gold: Golden, pack: Path, make_client: Callable[..., MemoryClient]
) -> None:
    memory = make_client()
    # The holdout ran in a frozen copy with exactly this content.
    assert memory.pack_digest() == gold.holdout.pack_digest == gold.holdout.memory_artifact_sha256
    base = holdout_ndcg(memory, gold)

    profile = memory.create_ranking_profile(gold.proposal, gold.holdout, user_id=OWNER)
    assert profile.scopes == (Scope.PROJECT,)
    assert profile.multipliers == gold.proposal.multipliers
    assert memory.get_active_ranking_profile(user_id=OWNER, scopes=SCOPES) is None

    change = memory.activate_ranking_profile(str(profile.profile_id), user_id=OWNER)
    assert (change.action, change.previous_profile_id) == ("activate", None)
    assert change.active_profile_id == profile.profile_id

    response = memory.retrieve(gold.workload.holdout[0].text, user_id=OWNER, scope=Scope.PROJECT)
    assert response.metadata.ranking_profile_status == "applied"
    assert response.metadata.ranking_profile_id == profile.profile_id
    assert response.metadata.ranking_multipliers == profile.multipliers
    receipt = memory.get_retrieval_receipt(response.metadata.request_id, user_id=OWNER)
    assert receipt is not None and receipt.ranking_multipliers == profile.multipliers
    assert receipt.execution.inputs["ranking_profile"]["status"] == "applied"

    applied = holdout_ndcg(memory, gold)
    assert sum(applied) / len(applied) > sum(base) / len(base)
    # Both passes reproduce the holdout's arms, run earlier in the frozen copy.
    assert sum(base) / len(base) == pytest.approx(gold.holdout.baseline_ndcg, abs=1e-12)
    assert sum(applied) / len(applied) == pytest.approx(gold.holdout.candidate_ndcg, abs=1e-12)

    assert memory.deactivate_ranking_profile(user_id=OWNER, scopes=SCOPES) is not None
    text = gold.workload.holdout[0].text
    off = memory.retrieve(text, user_id=OWNER, scope=SCOPES).metadata
    assert (off.ranking_profile_status, off.ranking_multipliers) == ("none", None)
    back = memory.rollback_ranking_profile(profile.profile_id, user_id=OWNER, scopes=SCOPES)
    assert (back.action, back.active_profile_id) == ("rollback", profile.profile_id)
    on = memory.retrieve(text, user_id=OWNER, scope=SCOPES).metadata
    assert (on.ranking_profile_status, on.ranking_profile_id) == ("applied", profile.profile_id)

    history = memory.list_ranking_profile_history(user_id=OWNER, scopes=SCOPES)
    assert [s.action for s in history] == ["rollback", "deactivate", "activate"]
    assert [s.active_profile_id for s in history] == [profile.profile_id, None, profile.profile_id]


# The seed's 4th and 5th code blocks, verbatim (SEED-LEARNING.md, "Persist and activate").


@pytest.fixture
def seed_directory(gold: Golden, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``./memories`` is a copy of the judged pack; the environment selects the weighted
    formula (profiles adjust it) and the pack's embedder."""
    fresh_pack(gold.memories, tmp_path / "memories")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PRME_SCORING__FUSION", "weighted")
    monkeypatch.setenv("PRME_EMBEDDING__PROVIDER", "hash")
    yield tmp_path


@pytest.mark.sqlite_only
def test_seed_blocks_4_and_5_run_as_written(gold: Golden, seed_directory: Path) -> None:
    namespace: dict[str, Any] = {
        "MemoryClient": MemoryClient,
        "Scope": Scope,
        "proposal": gold.proposal,
        "holdout": gold.holdout,
    }
    exec(textwrap.dedent(SEED_BLOCK_4), namespace)
    exec(textwrap.dedent(SEED_BLOCK_5), namespace)
    profile = namespace["profile"]
    assert namespace["active"] == profile
    assert namespace["status"].active is True
    assert [s.action for s in namespace["history"]] == ["activate"]
    with MemoryClient("./memories") as memory:
        active = memory.get_active_ranking_profile(user_id="alice", scopes=[Scope.PROJECT])
        history = memory.list_ranking_profile_history(user_id="alice", scopes=[Scope.PROJECT])
    assert active is not None and active.profile_id == profile.profile_id
    assert [s.action for s in history] == ["rollback", "deactivate", "activate"]
