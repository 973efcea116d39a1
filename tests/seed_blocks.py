"""SEED-LEARNING.md's five code blocks, verbatim (one copy, imported by every test that runs them)."""

BLOCK_1 = """
from prme import MemoryClient, RelevanceSubmission, Scope

with MemoryClient("./memories") as memory:
    response = memory.retrieve(
        "Which database does Aster use?",
        user_id="alice",
        scope=Scope.PROJECT,
    )
    if not response.metadata.receipt_persisted:
        raise RuntimeError("retrieval receipt was not saved")

    submission = RelevanceSubmission(
        request_id=response.metadata.request_id,
        labels={response.results[0].node.id: True},
    )
    memory.record_relevance(submission, user_id="alice")
"""

BLOCK_2 = """
with MemoryClient("./memories") as memory:
    proposal = memory.evaluate_learning(
        user_id="alice",
        scopes=[Scope.PROJECT],
    )

if proposal.decision != "improved_on_observed_candidates":
    print(proposal.decision, proposal.coverage, proposal.exclusions)
"""

BLOCK_3 = """
from datetime import datetime, timezone
from prme import FullRetrievalTrial

clock = datetime(2026, 9, 14, tzinfo=timezone.utc)

with MemoryClient("./frozen-holdout-pack") as memory:
    baseline = memory.retrieve(
        "What telescope do I use?",
        user_id="alice",
        scope=Scope.PROJECT,
        reference_time=clock,
        limit=20,
        include_cross_scope=False,
    )
    candidate = memory.retrieve(
        "What telescope do I use?",
        user_id="alice",
        scope=Scope.PROJECT,
        reference_time=clock,
        limit=20,
        include_cross_scope=False,
        ranking_multipliers=proposal.multipliers,
    )

    trial = FullRetrievalTrial(
        group_id="telescope-model",
        baseline_request_id=baseline.metadata.request_id,
        candidate_request_id=candidate.metadata.request_id,
        relevant_node_ids=(known_relevant_node_id,),
    )

    holdout = memory.evaluate_full_retrieval(
        [trial],
        user_id="alice",
        scopes=[Scope.PROJECT],
        proposal_input_checksum=proposal.input_checksum,
        memory_artifact_sha256=frozen_fixture_sha256,
        candidate_multipliers=proposal.multipliers,
    )
"""

BLOCK_4 = """
with MemoryClient("./memories") as memory:
    profile = memory.create_ranking_profile(
        proposal,
        holdout,
        user_id="alice",
    )
    change = memory.activate_ranking_profile(
        str(profile.profile_id),
        user_id="alice",
    )

    response = memory.retrieve(
        "What telescope do I use?",
        user_id="alice",
        scope=Scope.PROJECT,
    )
    assert response.metadata.ranking_profile_status == "applied"
    assert response.metadata.ranking_profile_id == profile.profile_id
"""

BLOCK_5 = """
with MemoryClient("./memories") as memory:
    active = memory.get_active_ranking_profile(
        user_id="alice", scopes=[Scope.PROJECT]
    )
    status = memory.get_ranking_profile_status(
        str(profile.profile_id), user_id="alice"
    )
    history = memory.list_ranking_profile_history(
        user_id="alice", scopes=[Scope.PROJECT]
    )

    memory.deactivate_ranking_profile(
        user_id="alice", scopes=[Scope.PROJECT]
    )
    memory.rollback_ranking_profile(
        str(profile.profile_id),
        user_id="alice",
        scopes=[Scope.PROJECT],
    )
"""
