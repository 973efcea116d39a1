"""The per-(owner, exact scope set) activation pointer: transitions, chaining, rollback, history."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.golden import OWNER, SCOPES, Golden, fresh_pack

from prme import InvalidInputError, MemoryClient, NotFoundError, Scope, StaleRankingProfileError
from prme.models.profiles import RankingProfile
from prme.services import profile_transitions


@pytest.fixture
def pack(gold: Golden, pack_path: Path) -> Path:
    return fresh_pack(gold.memories, pack_path)


@pytest.fixture
def memory(pack: Path, make_client: Callable[..., MemoryClient]) -> MemoryClient:
    return make_client()


@pytest.fixture
def weak(memory: MemoryClient, gold: Golden) -> RankingProfile:
    """A base-evaluated profile (the chained profile's baseline)."""
    return memory.create_ranking_profile(gold.weak_proposal, gold.weak_holdout, user_id=OWNER)


@pytest.fixture
def chained(memory: MemoryClient, gold: Golden, weak: RankingProfile) -> RankingProfile:
    """Evaluated with ``weak`` active, so it names ``weak`` as its baseline."""
    return memory.create_ranking_profile(
        gold.chained_proposal,
        gold.chained_holdout,
        user_id=OWNER,
        baseline_profile_id=weak.profile_id,
    )


@pytest.fixture
def main(memory: MemoryClient, gold: Golden) -> RankingProfile:
    """Another base-evaluated profile for the same scope set."""
    return memory.create_ranking_profile(gold.proposal, gold.holdout, user_id=OWNER)


def active_id(memory: MemoryClient, scopes: object = SCOPES) -> uuid.UUID | None:
    profile = memory.get_active_ranking_profile(user_id=OWNER, scopes=scopes)  # type: ignore[arg-type]
    return None if profile is None else profile.profile_id


def test_activation_records_previous_and_application(
    memory: MemoryClient, weak: RankingProfile
) -> None:
    state = memory.activate_ranking_profile(weak.profile_id, user_id=OWNER)
    assert state.action == "activate"
    assert (state.previous_profile_id, state.active_profile_id) == (None, weak.profile_id)
    assert state.scopes == (Scope.PROJECT,) and state.user_id == OWNER
    assert state.application == weak.application
    assert state.application is not None
    assert state.application.multipliers == weak.multipliers
    assert state.application.feature_identity_sha256 == memory.engine.feature_identity_sha256()
    assert active_id(memory) == weak.profile_id


def test_chained_profile_activates_only_over_its_baseline(
    memory: MemoryClient, weak: RankingProfile, chained: RankingProfile
) -> None:
    assert chained.baseline_profile_id == weak.profile_id
    with pytest.raises(StaleRankingProfileError, match="evaluated baseline") as stale:
        memory.activate_ranking_profile(chained.profile_id, user_id=OWNER)
    assert (stale.value.expected, stale.value.actual) == (str(weak.profile_id), None)

    memory.activate_ranking_profile(weak.profile_id, user_id=OWNER)
    state = memory.activate_ranking_profile(chained.profile_id, user_id=OWNER)
    assert (state.previous_profile_id, state.active_profile_id) == (
        weak.profile_id,
        chained.profile_id,
    )
    # A base-evaluated profile activates only from base scoring.
    with pytest.raises(StaleRankingProfileError, match="evaluated baseline"):
        memory.activate_ranking_profile(weak.profile_id, user_id=OWNER)
    memory.deactivate_ranking_profile(user_id=OWNER, scopes=SCOPES)
    with pytest.raises(StaleRankingProfileError, match="evaluated baseline"):
        memory.activate_ranking_profile(chained.profile_id, user_id=OWNER)


def test_history_activate_activate_rollback_deactivate(
    memory: MemoryClient, weak: RankingProfile, chained: RankingProfile
) -> None:
    memory.activate_ranking_profile(weak.profile_id, user_id=OWNER)
    memory.activate_ranking_profile(chained.profile_id, user_id=OWNER)
    memory.rollback_ranking_profile(weak.profile_id, user_id=OWNER, scopes=SCOPES)
    memory.deactivate_ranking_profile(user_id=OWNER, scopes=SCOPES)

    history = memory.list_ranking_profile_history(user_id=OWNER, scopes=SCOPES)
    assert [s.action for s in history] == ["deactivate", "rollback", "activate", "activate"]
    a, b = weak.profile_id, chained.profile_id
    assert [(s.previous_profile_id, s.active_profile_id) for s in history] == [
        (a, None),
        (b, a),
        (a, b),
        (None, a),
    ]
    times = [s.changed_at for s in history]
    assert times == sorted(times, reverse=True) and len(set(times)) == 4
    assert [s.action for s in memory.list_ranking_profile_history(user_id=OWNER, limit=2)] == []
    limited = memory.list_ranking_profile_history(user_id=OWNER, scopes="project", limit=2)
    assert [s.action for s in limited] == ["deactivate", "rollback"]
    with pytest.raises(InvalidInputError, match="limit"):
        memory.list_ranking_profile_history(user_id=OWNER, scopes=SCOPES, limit=0)


def test_pointer_survives_close_and_reopen(
    memory: MemoryClient, weak: RankingProfile, make_client: Callable[..., MemoryClient]
) -> None:
    memory.activate_ranking_profile(weak.profile_id, user_id=OWNER)
    memory.close()
    reopened = make_client()
    assert active_id(reopened) == weak.profile_id
    response = reopened.retrieve("Which database does Aster use?", user_id=OWNER, scope=SCOPES)
    assert response.metadata.ranking_profile_status == "applied"
    assert response.metadata.ranking_profile_id == weak.profile_id


def test_unfiltered_and_project_pointers_are_independent(
    memory: MemoryClient, gold: Golden, main: RankingProfile
) -> None:
    unfiltered = memory.create_ranking_profile(
        gold.unfiltered_proposal, gold.unfiltered_holdout, user_id=OWNER
    )
    assert unfiltered.scopes is None
    memory.activate_ranking_profile(main.profile_id, user_id=OWNER)
    assert active_id(memory, None) is None
    assert memory.list_ranking_profile_history(user_id=OWNER) == []
    assert memory.deactivate_ranking_profile(user_id=OWNER) is None

    memory.activate_ranking_profile(unfiltered.profile_id, user_id=OWNER)
    assert active_id(memory, None) == unfiltered.profile_id
    assert active_id(memory, SCOPES) == main.profile_id
    assert active_id(memory, [Scope.PERSONAL, Scope.PROJECT]) is None
    query = "Which database does Aster use?"
    by_scope = {
        "unfiltered": memory.retrieve(query, user_id=OWNER).metadata,
        "project": memory.retrieve(query, user_id=OWNER, scope=Scope.PROJECT).metadata,
        "two": memory.retrieve(query, user_id=OWNER, scope=["project", "personal"]).metadata,
    }
    assert by_scope["unfiltered"].ranking_profile_id == unfiltered.profile_id
    assert by_scope["unfiltered"].ranking_multipliers == unfiltered.multipliers
    assert by_scope["project"].ranking_profile_id == main.profile_id
    assert by_scope["project"].ranking_multipliers == main.multipliers
    assert by_scope["two"].ranking_profile_status == "none"

    memory.deactivate_ranking_profile(user_id=OWNER, scopes=["project", "project"])
    assert active_id(memory, None) == unfiltered.profile_id
    assert active_id(memory, SCOPES) is None


def test_deactivate_with_nothing_active_returns_none_and_writes_nothing(
    memory: MemoryClient, main: RankingProfile
) -> None:
    assert memory.deactivate_ranking_profile(user_id=OWNER, scopes=SCOPES) is None
    assert memory.list_ranking_profile_history(user_id=OWNER, scopes=SCOPES) == []
    memory.activate_ranking_profile(main.profile_id, user_id=OWNER)
    state = memory.deactivate_ranking_profile(user_id=OWNER, scopes=Scope.PROJECT)
    assert state is not None and state.action == "deactivate"
    assert (state.previous_profile_id, state.active_profile_id, state.application) == (
        main.profile_id,
        None,
        None,
    )
    assert memory.deactivate_ranking_profile(user_id=OWNER, scopes=SCOPES) is None
    assert len(memory.list_ranking_profile_history(user_id=OWNER, scopes=SCOPES)) == 2


def test_rollback_targets_only_profiles_this_pointer_had_active(
    memory: MemoryClient, weak: RankingProfile, chained: RankingProfile, main: RankingProfile
) -> None:
    memory.activate_ranking_profile(weak.profile_id, user_id=OWNER)
    with pytest.raises(InvalidInputError, match="unavailable for these scopes") as never:
        memory.rollback_ranking_profile(main.profile_id, user_id=OWNER, scopes=SCOPES)
    assert never.value.field == "profile_id"
    with pytest.raises(NotFoundError, match="unavailable for these scopes"):
        memory.rollback_ranking_profile(uuid.uuid4(), user_id=OWNER, scopes=SCOPES)
    with pytest.raises(InvalidInputError, match="unavailable for these scopes"):
        memory.rollback_ranking_profile(weak.profile_id, user_id=OWNER, scopes=None)
    with pytest.raises(InvalidInputError, match="rollback cannot be a no-op"):
        memory.rollback_ranking_profile(str(weak.profile_id), user_id=OWNER, scopes=SCOPES)

    memory.activate_ranking_profile(chained.profile_id, user_id=OWNER)
    back = memory.rollback_ranking_profile(str(weak.profile_id), user_id=OWNER, scopes="project")
    assert (back.previous_profile_id, back.active_profile_id) == (
        chained.profile_id,
        weak.profile_id,
    )
    assert back.application == weak.application
    to_base = memory.rollback_ranking_profile(None, user_id=OWNER, scopes=SCOPES)
    assert (to_base.action, to_base.active_profile_id, to_base.application) == (
        "rollback",
        None,
        None,
    )
    with pytest.raises(InvalidInputError, match="rollback cannot be a no-op"):
        memory.rollback_ranking_profile(None, user_id=OWNER, scopes=SCOPES)
    # The chained profile was active here before, so rollback may skip its baseline rule.
    again = memory.rollback_ranking_profile(chained.profile_id, user_id=OWNER, scopes=SCOPES)
    assert (again.previous_profile_id, again.active_profile_id) == (None, chained.profile_id)


def test_rollback_target_must_be_applicable(
    memory: MemoryClient, main: RankingProfile, make_client: Callable[..., MemoryClient]
) -> None:
    memory.activate_ranking_profile(main.profile_id, user_id=OWNER)
    rrf = make_client(fusion="rrf")
    # Rolling back to base scoring needs no applicability, even under rank fusion.
    to_base = rrf.rollback_ranking_profile(None, user_id=OWNER, scopes=SCOPES)
    assert to_base.previous_profile_id == main.profile_id
    with pytest.raises(
        InvalidInputError, match="Rollback ranking profile is inapplicable: rank_fusion_scoring"
    ):
        rrf.rollback_ranking_profile(main.profile_id, user_id=OWNER, scopes=SCOPES)
    assert active_id(memory) is None


def test_activation_is_refused_when_inapplicable_to_the_running_engine(
    memory: MemoryClient, main: RankingProfile, make_client: Callable[..., MemoryClient]
) -> None:
    rrf = make_client(fusion="rrf")
    with pytest.raises(InvalidInputError, match="inapplicable: rank_fusion_scoring") as refused:
        rrf.activate_ranking_profile(main.profile_id, user_id=OWNER)
    assert refused.value.field == "profile_id"
    config = memory.config.model_copy(
        update={"scoring": memory.config.scoring.model_copy(update={"w_salience": 0.1 + 1e-9})}
    )
    shifted = make_client(config=config)
    with pytest.raises(InvalidInputError, match="inapplicable: base_scoring_mismatch"):
        shifted.activate_ranking_profile(main.profile_id, user_id=OWNER)
    assert memory.list_ranking_profile_history(user_id=OWNER, scopes=SCOPES) == []


def test_activation_of_unknown_or_foreign_profile_is_not_found(
    memory: MemoryClient, main: RankingProfile
) -> None:
    missing = uuid.uuid4()
    with pytest.raises(NotFoundError, match="Ranking profile not found") as unknown:
        memory.activate_ranking_profile(missing, user_id=OWNER)
    assert (unknown.value.kind, unknown.value.id) == ("ranking profile", str(missing))
    with pytest.raises(NotFoundError, match="Ranking profile not found"):
        memory.activate_ranking_profile(str(main.profile_id), user_id="bob")
    with pytest.raises(InvalidInputError, match="profile_id"):
        memory.activate_ranking_profile("not-a-uuid", user_id=OWNER)


def test_scopes_accept_none_a_name_or_a_list_and_reject_empty(
    memory: MemoryClient, main: RankingProfile
) -> None:
    memory.activate_ranking_profile(main.profile_id, user_id=OWNER)
    for scopes in ("project", Scope.PROJECT, ["project"], ("project", Scope.PROJECT)):
        assert active_id(memory, scopes) == main.profile_id
    for bad in ([], "galaxy", [1]):
        with pytest.raises(InvalidInputError) as rejected:
            memory.get_active_ranking_profile(user_id=OWNER, scopes=bad)  # type: ignore[arg-type]
        assert rejected.value.field == "scopes"
    with pytest.raises(InvalidInputError, match="must not be empty"):
        memory.deactivate_ranking_profile(user_id=OWNER, scopes=[])


def test_change_id_retry_returns_the_stored_transition_across_restart(
    memory: MemoryClient,
    weak: RankingProfile,
    chained: RankingProfile,
    make_client: Callable[..., MemoryClient],
) -> None:
    change = uuid.uuid4()
    first = memory.activate_ranking_profile(weak.profile_id, user_id=OWNER, change_id=change)
    assert first.change_id == change
    assert (
        memory.activate_ranking_profile(weak.profile_id, user_id=OWNER, change_id=str(change))
        == first
    )
    memory.close()
    reopened = make_client()
    # The pointer moved on; the retry still returns the original transition, writing nothing.
    reopened.activate_ranking_profile(chained.profile_id, user_id=OWNER)
    assert (
        reopened.activate_ranking_profile(weak.profile_id, user_id=OWNER, change_id=change) == first
    )
    assert len(reopened.list_ranking_profile_history(user_id=OWNER, scopes=SCOPES)) == 2

    off = uuid.uuid4()
    stored = reopened.deactivate_ranking_profile(user_id=OWNER, scopes=SCOPES, change_id=off)
    assert (
        reopened.deactivate_ranking_profile(user_id=OWNER, scopes=SCOPES, change_id=off) == stored
    )
    back = uuid.uuid4()
    rolled = reopened.rollback_ranking_profile(
        weak.profile_id, user_id=OWNER, scopes=SCOPES, change_id=back
    )
    assert (
        reopened.rollback_ranking_profile(
            weak.profile_id, user_id=OWNER, scopes=SCOPES, change_id=back
        )
        == rolled
    )


def test_change_id_reused_for_a_different_transition_is_rejected(
    memory: MemoryClient, weak: RankingProfile, main: RankingProfile
) -> None:
    change = uuid.uuid4()
    memory.activate_ranking_profile(weak.profile_id, user_id=OWNER, change_id=change)
    different = "change_id already identifies a different ranking profile transition"
    with pytest.raises(InvalidInputError, match=different) as other_profile:
        memory.activate_ranking_profile(main.profile_id, user_id=OWNER, change_id=change)
    assert other_profile.value.field == "change_id"
    with pytest.raises(InvalidInputError, match=different):
        memory.deactivate_ranking_profile(user_id=OWNER, scopes=SCOPES, change_id=change)
    with pytest.raises(InvalidInputError, match=different):
        memory.rollback_ranking_profile(
            weak.profile_id, user_id=OWNER, scopes=None, change_id=change
        )
    # Another owner's change ids are its own.
    assert memory.deactivate_ranking_profile(user_id="bob", scopes=SCOPES, change_id=change) is None
    assert len(memory.list_ranking_profile_history(user_id=OWNER, scopes=SCOPES)) == 1


def test_compare_and_swap_rejects_a_moved_pointer(
    memory: MemoryClient, main: RankingProfile
) -> None:
    memory.activate_ranking_profile(main.profile_id, user_id=OWNER)
    # The primitive every transition uses, called with a stale expectation.
    with pytest.raises(StaleRankingProfileError, match="inspect and retry") as stale:
        profile_transitions._change(
            memory.engine,
            OWNER,
            (Scope.PROJECT,),
            action="deactivate",
            application=None,
            expected=None,
            change_id=uuid.uuid4(),
        )
    assert (stale.value.expected, stale.value.actual) == (None, str(main.profile_id))
    assert active_id(memory) == main.profile_id


def test_changed_at_is_strictly_increasing_when_the_clock_stands_still(
    pack: Path, gold: Golden, make_client: Callable[..., MemoryClient]
) -> None:
    frozen_time = datetime(2026, 9, 20, tzinfo=UTC)
    memory = make_client(clock=lambda: frozen_time)
    profile = memory.create_ranking_profile(gold.proposal, gold.holdout, user_id=OWNER)
    memory.activate_ranking_profile(profile.profile_id, user_id=OWNER)
    memory.deactivate_ranking_profile(user_id=OWNER, scopes=SCOPES)
    memory.rollback_ranking_profile(profile.profile_id, user_id=OWNER, scopes=SCOPES)
    history = memory.list_ranking_profile_history(user_id=OWNER, scopes=SCOPES)
    step = timedelta(microseconds=1)
    assert [s.changed_at for s in history] == [
        frozen_time + 2 * step,
        frozen_time + step,
        frozen_time,
    ]
    assert [s.action for s in history] == ["rollback", "deactivate", "activate"]


def test_status_reports_the_profiles_own_pointer(
    memory: MemoryClient, weak: RankingProfile, chained: RankingProfile
) -> None:
    status = memory.get_ranking_profile_status(weak.profile_id, user_id=OWNER)
    assert status is not None
    assert (status.profile, status.active, status.latest_change) == (weak, False, None)
    activation = memory.activate_ranking_profile(weak.profile_id, user_id=OWNER)
    status = memory.get_ranking_profile_status(str(weak.profile_id), user_id=OWNER)
    assert status is not None and status.active and status.latest_change == activation
    chained_on = memory.activate_ranking_profile(chained.profile_id, user_id=OWNER)
    status = memory.get_ranking_profile_status(weak.profile_id, user_id=OWNER)
    assert status is not None and not status.active
    assert status.latest_change == chained_on  # the latest change concerns another profile
    assert memory.get_ranking_profile_status(uuid.uuid4(), user_id=OWNER) is None
    assert memory.get_ranking_profile_status(weak.profile_id, user_id="bob") is None


def test_another_owner_sees_none_of_it(memory: MemoryClient, main: RankingProfile) -> None:
    memory.activate_ranking_profile(main.profile_id, user_id=OWNER)
    assert memory.get_ranking_profile(main.profile_id, user_id="bob") is None
    assert memory.list_ranking_profiles(user_id="bob") == []
    assert memory.get_active_ranking_profile(user_id="bob", scopes=SCOPES) is None
    assert memory.list_ranking_profile_history(user_id="bob", scopes=SCOPES) == []
    assert memory.deactivate_ranking_profile(user_id="bob", scopes=SCOPES) is None
    with pytest.raises(NotFoundError):
        memory.rollback_ranking_profile(main.profile_id, user_id="bob", scopes=SCOPES)
    response = memory.retrieve("Which database does Aster use?", user_id="bob", scope=SCOPES)
    assert response.metadata.ranking_profile_status == "none"
    assert response.metadata.ranking_profile_id is None
    assert active_id(memory) == main.profile_id
