"""Listings page in SQL: ranking profiles read only their page, pointer history has a cursor."""

from __future__ import annotations

import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from support.golden import OWNER, SCOPES, Golden, fresh_pack

from prme import InvalidInputError, MemoryClient, NotFoundError
from prme.models.profiles import RankingProfile, RankingProfileState

PROFILES = 40
TRANSITIONS = 1003  # past one full page of 1000


@pytest.fixture
def memory(gold: Golden, pack_path: Path, make_client: Callable[..., MemoryClient]) -> MemoryClient:
    fresh_pack(gold.memories, pack_path)
    return make_client()


def _create(memory: MemoryClient, gold: Golden, count: int) -> list[RankingProfile]:
    return [
        memory.create_ranking_profile(gold.proposal, gold.holdout, user_id=OWNER)
        for _ in range(count)
    ]


def test_profile_pages_cover_every_profile_newest_first(memory: MemoryClient, gold: Golden) -> None:
    created = _create(memory, gold, 7)
    seen: list[RankingProfile] = []
    after: uuid.UUID | None = None
    while True:
        page = memory.list_ranking_profiles(user_id=OWNER, limit=3, after_id=after)
        if not page:
            break
        seen += page
        after = page[-1].profile_id
    assert [p.profile_id for p in seen] == [p.profile_id for p in reversed(created)]
    assert memory.list_ranking_profiles(user_id="bob") == []
    with pytest.raises(NotFoundError):  # another owner's cursor looks missing
        memory.list_ranking_profiles(user_id="bob", after_id=created[0].profile_id)
    with pytest.raises(NotFoundError):
        memory.list_ranking_profiles(user_id=OWNER, after_id=uuid.uuid4())


def test_a_profile_page_reads_only_its_own_payloads(memory: MemoryClient, gold: Golden) -> None:
    created = _create(memory, gold, PROFILES)
    one_payload = len(created[0].model_dump_json())
    memory.list_ranking_profiles(user_id=OWNER, limit=1)  # warm caches and statements
    tracemalloc.start()
    try:
        page = memory.list_ranking_profiles(user_id=OWNER, limit=1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [p.profile_id for p in page] == [created[-1].profile_id]
    # Parsing one profile peaks near 13 payloads; reading all 40 (the old listing) far above.
    assert peak < 25 * one_payload, (peak, one_payload)


def _flip(memory: MemoryClient, profile: RankingProfile, count: int) -> list[RankingProfileState]:
    states = []
    for i in range(count):
        if i % 2 == 0:
            states.append(memory.activate_ranking_profile(profile.profile_id, user_id=OWNER))
        else:
            state = memory.deactivate_ranking_profile(user_id=OWNER, scopes=SCOPES)
            assert state is not None
            states.append(state)
    return states


def test_pointer_history_beyond_one_page_is_listed_with_a_cursor(
    memory: MemoryClient, gold: Golden
) -> None:
    (profile,) = _create(memory, gold, 1)
    states = _flip(memory, profile, TRANSITIONS)
    first = memory.list_ranking_profile_history(user_id=OWNER, scopes=SCOPES, limit=1000)
    assert len(first) == 1000
    rest = memory.list_ranking_profile_history(
        user_id=OWNER, scopes=SCOPES, limit=1000, after_change_id=first[-1].change_id
    )
    assert [s.change_id for s in first + rest] == [s.change_id for s in reversed(states)]
    assert (
        memory.list_ranking_profile_history(
            user_id=OWNER, scopes=SCOPES, after_change_id=str(rest[-1].change_id)
        )
        == []
    )


def test_history_cursor_must_name_a_transition_of_that_pointer(
    memory: MemoryClient, gold: Golden
) -> None:
    (profile,) = _create(memory, gold, 1)
    (state,) = _flip(memory, profile, 1)
    with pytest.raises(NotFoundError):  # the unfiltered pointer is another pointer
        memory.list_ranking_profile_history(user_id=OWNER, after_change_id=state.change_id)
    with pytest.raises(NotFoundError):  # another owner's
        memory.list_ranking_profile_history(
            user_id="bob", scopes=SCOPES, after_change_id=state.change_id
        )
    with pytest.raises(NotFoundError):
        memory.list_ranking_profile_history(
            user_id=OWNER, scopes=SCOPES, after_change_id=uuid.uuid4()
        )
    with pytest.raises(InvalidInputError) as info:
        memory.list_ranking_profile_history(user_id=OWNER, scopes=SCOPES, after_change_id="x")
    assert info.value.field == "after_change_id"
