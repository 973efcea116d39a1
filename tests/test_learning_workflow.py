"""The whole learning workflow on a generated workload, through MemoryClient on real packs.

The golden workflow itself (store, judge, gate 1, frozen holdout) is built once per session by
:mod:`support.golden`; these tests check its reports and run the profile lifecycle on a fresh
copy of its judged pack.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from seed_blocks import BLOCK_4 as SEED_BLOCK_4
from seed_blocks import BLOCK_5 as SEED_BLOCK_5
from support.golden import HOLDOUT_TIME, OWNER, SCOPES, Golden, fresh_pack

from prme import MemoryClient, Scope
from prme.learning.metrics import ndcg_at_k


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


def test_golden_workflow_gates(gold: Golden, backend: str) -> None:
    # ``backend``: the golden workflow is built on the session's backend (the backends marker).
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
