"""Applying the active profile at retrieval: every status and reason, recorded in the receipt."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import make_config
from support.golden import OWNER, SCOPES, Golden, fresh_pack

from prme import IntegrityError, InvalidInputError, MemoryClient, RankingMultipliers, Scope
from prme.canonical import canonical_json
from prme.config import RetrievalConfig
from prme.embed.hashing import HashingEmbedder
from prme.models.profiles import RankingProfile, RankingProfileState
from prme.models.retrieval import RetrievalResponse
from prme.models.scope import scope_namespace
from prme.models.scoring import ScoringWeights, adjusted_weights
from prme.retrieval.replay import replay_scores
from prme.services import profiles
from prme.storage.timeutil import to_us

QUERY = "Which database does Aster use?"
LATER = datetime(2027, 1, 1, tzinfo=UTC)


@pytest.fixture
def pack(gold: Golden, pack_path: Path) -> Path:
    return fresh_pack(gold.memories, pack_path)


@pytest.fixture
def memory(pack: Path, make_client: Callable[..., MemoryClient]) -> MemoryClient:
    return make_client()


@pytest.fixture
def active(memory: MemoryClient, gold: Golden) -> RankingProfile:
    profile = memory.create_ranking_profile(gold.proposal, gold.holdout, user_id=OWNER)
    memory.activate_ranking_profile(profile.profile_id, user_id=OWNER)
    return profile


def resolution(memory: MemoryClient, response: RetrievalResponse) -> tuple[object, ...]:
    """(status, profile id, reason, multipliers) from the metadata, checked against the receipt."""
    meta = response.metadata
    assert meta.receipt_persisted
    receipt = memory.get_retrieval_receipt(meta.request_id, user_id=OWNER)
    assert receipt is not None
    recorded = receipt.execution.inputs["ranking_profile"]
    assert recorded == {
        "status": meta.ranking_profile_status,
        "profile_id": None if meta.ranking_profile_id is None else str(meta.ranking_profile_id),
        "reason": meta.ranking_profile_reason,
    }
    assert receipt.ranking_multipliers == meta.ranking_multipliers
    return (
        meta.ranking_profile_status,
        meta.ranking_profile_id,
        meta.ranking_profile_reason,
        meta.ranking_multipliers,
    )


def test_none_without_a_pointer(memory: MemoryClient) -> None:
    response = memory.retrieve(QUERY, user_id=OWNER, scope=SCOPES)
    assert resolution(memory, response) == ("none", None, None, None)


def test_applied_uses_the_profiles_multipliers(
    memory: MemoryClient, active: RankingProfile
) -> None:
    response = memory.retrieve(QUERY, user_id=OWNER, scope=Scope.PROJECT)
    assert resolution(memory, response) == ("applied", active.profile_id, None, active.multipliers)
    receipt = memory.get_retrieval_receipt(response.metadata.request_id, user_id=OWNER)
    assert receipt is not None
    assert receipt.weights == memory.config.scoring  # pre-multiplier weights stay the base
    assert receipt.applied_weights() == adjusted_weights(memory.config.scoring, active.multipliers)
    assert [c.score for c in receipt.candidates] == replay_scores(receipt)


def test_inapplicable_under_rank_fusion(
    active: RankingProfile, make_client: Callable[..., MemoryClient]
) -> None:
    rrf = make_client(fusion="rrf")
    response = rrf.retrieve(QUERY, user_id=OWNER, scope=SCOPES)
    assert resolution(rrf, response) == (
        "inapplicable",
        active.profile_id,
        "rank_fusion_scoring",
        None,
    )
    assert response.metadata.fusion == "rrf"


def test_rank_fusion_is_checked_before_base_scoring(
    memory: MemoryClient, active: RankingProfile
) -> None:
    rrf_weights = ScoringWeights(fusion="rrf", rrf_recency_boost=0.25, rrf_tie_break="event_time")
    response = memory.retrieve(QUERY, user_id=OWNER, scope=SCOPES, weights=rrf_weights)
    assert resolution(memory, response)[2] == "rank_fusion_scoring"


def test_inapplicable_when_request_weights_differ_from_the_holdout_base(
    memory: MemoryClient, active: RankingProfile
) -> None:
    weights = ScoringWeights(w_semantic=0.3, w_lexical=0.15)
    response = memory.retrieve(QUERY, user_id=OWNER, scope=SCOPES, weights=weights)
    assert resolution(memory, response) == (
        "inapplicable",
        active.profile_id,
        "base_scoring_mismatch",
        None,
    )
    same = memory.retrieve(QUERY, user_id=OWNER, scope=SCOPES, weights=ScoringWeights())
    assert resolution(memory, same)[0] == "applied"


def test_inapplicable_when_the_engine_base_scoring_changed(
    active: RankingProfile, make_client: Callable[..., MemoryClient], memory: MemoryClient
) -> None:
    scoring = memory.config.scoring.model_copy(update={"recency_lambda": 0.03})
    shifted = make_client(config=memory.config.model_copy(update={"scoring": scoring}))
    response = shifted.retrieve(QUERY, user_id=OWNER, scope=SCOPES)
    assert resolution(shifted, response)[:3] == (
        "inapplicable",
        active.profile_id,
        "base_scoring_mismatch",
    )


def _golden_profile_applied(gold: Golden, same: MemoryClient) -> RankingProfile:
    """The golden holdout's profile appended as given to ``same`` (an empty pack binds no
    embedder) and activated; it applies there."""
    profile = RankingProfile(
        profile_id=uuid.uuid4(),
        user_id=OWNER,
        scopes=gold.holdout.scopes,
        created_at=LATER,
        multipliers=gold.holdout.candidate_multipliers,
        proposal=gold.proposal,
        holdout=gold.holdout,
    )
    profiles.store_profile(same.engine, profile)
    same.activate_ranking_profile(profile.profile_id, user_id=OWNER)
    assert resolution(same, same.retrieve(QUERY, user_id=OWNER, scope=SCOPES))[0] == "applied"
    return profile


def test_inapplicable_when_the_feature_identity_changed(
    gold: Golden, tmp_path: Path, make_client: Callable[..., MemoryClient]
) -> None:
    # An empty pack binds no embedder, so it can be opened with another one; the profile record
    # is appended as given (its reports were attested by the golden pack, not this one).
    path = tmp_path / "empty"
    profile = _golden_profile_applied(gold, make_client(path))

    other = make_client(path, embedder=HashingEmbedder(dimension=64))
    assert other.engine.feature_identity_sha256() != gold.holdout.feature_identity_sha256
    response = other.retrieve(QUERY, user_id=OWNER, scope=SCOPES)
    assert resolution(other, response) == (
        "inapplicable",
        profile.profile_id,
        "feature_identity_mismatch",
        None,
    )
    other.deactivate_ranking_profile(user_id=OWNER, scopes=SCOPES)
    with pytest.raises(InvalidInputError, match="inapplicable: feature_identity_mismatch"):
        other.activate_ranking_profile(profile.profile_id, user_id=OWNER)


def test_inapplicable_under_another_vector_index(
    gold: Golden, tmp_path: Path, make_client: Callable[..., MemoryClient]
) -> None:
    # the golden profile was evaluated with the default exact vector scan; the same pack
    # retrieving through the approximate index (at any index size) does not apply it
    path = tmp_path / "empty"
    profile = _golden_profile_applied(gold, make_client(path))
    for retrieval in (
        RetrievalConfig(vector_index="hnsw"),
        RetrievalConfig(vector_index="hnsw", vector_index_min_rows=1024),
    ):
        other = make_client(path, config=make_config(retrieval=retrieval))
        assert other.engine.feature_identity_sha256() != gold.holdout.feature_identity_sha256
        response = other.retrieve(QUERY, user_id=OWNER, scope=SCOPES)
        assert resolution(other, response) == (
            "inapplicable",
            profile.profile_id,
            "feature_identity_mismatch",
            None,
        )


def test_request_override_names_the_bypassed_profile(
    memory: MemoryClient, active: RankingProfile
) -> None:
    explicit = RankingMultipliers(lexical=2.0)
    response = memory.retrieve(QUERY, user_id=OWNER, scope=SCOPES, ranking_multipliers=explicit)
    assert resolution(memory, response) == (
        "request_override",
        active.profile_id,
        "explicit_multipliers",
        explicit,
    )
    neutral = memory.retrieve(
        QUERY, user_id=OWNER, scope=SCOPES, ranking_multipliers={"semantic": 1.0}
    )
    assert resolution(memory, neutral) == (
        "request_override",
        active.profile_id,
        "explicit_multipliers",
        RankingMultipliers(),
    )


def test_request_override_without_an_active_profile(memory: MemoryClient) -> None:
    explicit = RankingMultipliers(confidence=3.0)
    response = memory.retrieve(QUERY, user_id=OWNER, ranking_multipliers=explicit)
    assert resolution(memory, response) == (
        "request_override",
        None,
        "explicit_multipliers",
        explicit,
    )


def test_request_multipliers_under_rank_fusion(
    active: RankingProfile, make_client: Callable[..., MemoryClient]
) -> None:
    rrf = make_client(fusion="rrf")
    with pytest.raises(InvalidInputError, match="do not apply to fusion='rrf'"):
        rrf.retrieve(QUERY, user_id=OWNER, scope=SCOPES, ranking_multipliers={"lexical": 2.0})
    neutral = rrf.retrieve(QUERY, user_id=OWNER, scope=SCOPES, ranking_multipliers={})
    assert resolution(rrf, neutral)[:3] == (
        "request_override",
        active.profile_id,
        "explicit_multipliers",
    )


def append_state(memory: MemoryClient, payload: str, *, at: datetime = LATER) -> None:
    """A newer transition written straight into the log (what a corrupt writer would leave)."""
    memory.engine.store.append_op(
        op_id=f"corrupt:{uuid.uuid4()}",
        op_type=profiles.STATE_OP,
        user_id=OWNER,
        target_id=None,
        namespace=scope_namespace((Scope.PROJECT,)),
        created_at_us=to_us(at),
        payload=payload,
    )


def assert_fails_closed(memory: MemoryClient) -> None:
    response = memory.retrieve(QUERY, user_id=OWNER, scope=SCOPES)
    assert resolution(memory, response) == ("inapplicable", None, "profile_unavailable", None)
    explicit = RankingMultipliers(lexical=2.0)
    bypass = memory.retrieve(QUERY, user_id=OWNER, scope=SCOPES, ranking_multipliers=explicit)
    assert resolution(memory, bypass) == (
        "request_override",
        None,
        "explicit_multipliers",
        explicit,
    )
    with pytest.raises(IntegrityError):
        memory.get_active_ranking_profile(user_id=OWNER, scopes=SCOPES)
    # Other pointers are unaffected.
    assert resolution(memory, memory.retrieve(QUERY, user_id=OWNER))[0] == "none"


def test_unparseable_pointer_fails_closed(memory: MemoryClient, active: RankingProfile) -> None:
    append_state(memory, "{not json")
    assert_fails_closed(memory)


def test_pointer_with_mismatched_scopes_fails_closed(
    memory: MemoryClient, active: RankingProfile
) -> None:
    state = RankingProfileState(
        change_id=uuid.uuid4(),
        user_id=OWNER,
        scopes=None,
        action="deactivate",
        previous_profile_id=active.profile_id,
        active_profile_id=None,
        changed_at=LATER,
    )
    append_state(memory, canonical_json(state))
    assert_fails_closed(memory)


@pytest.mark.sqlite_only
def test_pointer_changed_on_disk_fails_closed(
    memory: MemoryClient,
    active: RankingProfile,
    pack: Path,
    make_client: Callable[..., MemoryClient],
) -> None:
    memory.close()
    with sqlite3.connect(pack / "pack.sqlite3") as db:
        db.execute("DROP TRIGGER oplog_append_only_update")
        db.execute(
            "UPDATE oplog SET payload = replace(payload, '\"confidence\":', '\"confidence\": ')"
            " WHERE op_type = ?",
            (profiles.STATE_OP,),
        )
    db.close()
    assert_fails_closed(make_client())


def test_a_change_by_another_client_is_seen_by_the_next_retrieval(
    memory: MemoryClient, gold: Golden, make_client: Callable[..., MemoryClient]
) -> None:
    reader = make_client()
    assert resolution(reader, reader.retrieve(QUERY, user_id=OWNER, scope=SCOPES))[0] == "none"
    profile = memory.create_ranking_profile(gold.proposal, gold.holdout, user_id=OWNER)
    memory.activate_ranking_profile(profile.profile_id, user_id=OWNER)
    applied = resolution(reader, reader.retrieve(QUERY, user_id=OWNER, scope=SCOPES))
    assert applied[:2] == ("applied", profile.profile_id)
    memory.deactivate_ranking_profile(user_id=OWNER, scopes=SCOPES)
    assert resolution(reader, reader.retrieve(QUERY, user_id=OWNER, scope=SCOPES))[0] == "none"


def test_another_owner_resolves_nothing(memory: MemoryClient, active: RankingProfile) -> None:
    response = memory.retrieve(QUERY, user_id="bob", scope=SCOPES)
    meta = response.metadata
    assert (meta.ranking_profile_status, meta.ranking_profile_id) == ("none", None)
    assert meta.ranking_multipliers is None
