"""Ranking profiles and the per-(owner, exact scope set) activation pointer.

A profile is one immutable operation (``ranking_profile``) keyed by
``uuid5(NAMESPACE_URL, json.dumps(["prme:ranking-profile:v1", user_id, str(profile_id)]))``.
The pointer has no mutable row: it is the ``active_profile_id`` of the newest
``ranking_profile_state`` operation in the scope set's namespace (newest ``changed_at``, then
log sequence). Every change is one compare-and-swap inside ``store.serialized(namespace)``
(``BEGIN IMMEDIATE`` on SQLite, so it holds across processes): re-read the latest state, check
that it names the expected profile, append the transition.

The work is split by concern: :mod:`prme.services.profile_store` reads and appends the records,
:mod:`prme.services.profile_creation` creates profiles from reports,
:mod:`prme.services.profile_transitions` moves the pointer; this module inspects and is the
one import for all of it.
"""

from __future__ import annotations

from prme.engine import Engine
from prme.errors import IntegrityError, NotFoundError
from prme.models.profiles import RankingProfile, RankingProfileState, RankingProfileStatus
from prme.models.scope import ScopeInput, normalize_scope_key, scope_namespace
from prme.services.profile_creation import (
    BASELINE_DIFFERS,
    BASELINE_UNAVAILABLE,
    chosen_report,
    create_from_reports,
    create_ranking_profile,
    parse_report,
)
from prme.services.profile_store import (
    DIFFERENT_PROFILE,
    latest_state,
    load_profile,
    not_found,
    store_profile,
)
from prme.services.profile_transitions import (
    DIFFERENT_TRANSITION,
    ROLLBACK_UNAVAILABLE,
    activate_ranking_profile,
    deactivate_ranking_profile,
    rollback_ranking_profile,
)
from prme.services.records import PROFILE_OP, PROFILES, STATE_OP, STATES, profile_op_id, state_op_id
from prme.validation import require_owner, require_page_limit, require_uuid

__all__ = [
    "ACTIVE_MISSING",
    "BASELINE_DIFFERS",
    "BASELINE_UNAVAILABLE",
    "DIFFERENT_PROFILE",
    "DIFFERENT_TRANSITION",
    "PROFILE_OP",
    "ROLLBACK_UNAVAILABLE",
    "STATE_OP",
    "activate_ranking_profile",
    "chosen_report",
    "create_from_reports",
    "create_ranking_profile",
    "deactivate_ranking_profile",
    "get_active_ranking_profile",
    "get_ranking_profile",
    "get_ranking_profile_status",
    "latest_state",
    "list_ranking_profile_history",
    "list_ranking_profiles",
    "load_profile",
    "parse_report",
    "profile_op_id",
    "rollback_ranking_profile",
    "state_op_id",
    "store_profile",
]

ACTIVE_MISSING = "Active ranking profile is missing or has different scopes"


def get_ranking_profile(
    engine: Engine, profile_id: object, *, user_id: str
) -> RankingProfile | None:
    """The owner's profile, or None for unknown or foreign ids.

    Raises:
        IntegrityError: the stored record fails its checksum, owner, id or scope check.
    """
    return load_profile(engine, require_owner(user_id), require_uuid(profile_id, "profile_id"))


def list_ranking_profiles(
    engine: Engine, *, user_id: str, limit: int = 100, after_id: object = None
) -> list[RankingProfile]:
    """The owner's profiles across scope sets, newest first; page on with ``after_id`` = the
    last id seen. The page is chosen in SQL: only its profiles' payloads are read.

    Raises:
        InvalidInputError: ``limit`` outside 1–1000.
        NotFoundError: ``after_id`` is not one of the owner's profiles.
    """
    owner = require_owner(user_id)
    size = require_page_limit(limit)
    before = None
    if after_id is not None:
        after = require_uuid(after_id, "after_id")
        cursor = engine.store.get_op(profile_op_id(owner, after))
        if cursor is None or cursor.op_type != PROFILE_OP or cursor.user_id != owner:
            raise not_found(after)
        before = (cursor.created_at_us, cursor.seq)
    ops = engine.store.iter_ops(PROFILE_OP, owner, newest_first=True, limit=size, before=before)
    return [PROFILES.verified(op, owner) for op in ops]


def get_active_ranking_profile(
    engine: Engine, *, user_id: str, scopes: ScopeInput = None
) -> RankingProfile | None:
    """The profile the (owner, exact scope set) pointer names, or None for base scoring.

    Raises:
        InvalidInputError: empty or invalid ``scopes``.
        IntegrityError: the pointer or the profile it names fails verification ("Active ranking
            profile is missing or has different scopes").
    """
    owner = require_owner(user_id)
    key = normalize_scope_key(scopes, "scopes")
    state = latest_state(engine, owner, key)
    if state is None or state.active_profile_id is None:
        return None
    profile = load_profile(engine, owner, state.active_profile_id)
    if profile is None or profile.scopes != key or profile.application != state.application:
        raise IntegrityError(f"{ACTIVE_MISSING}: {state.active_profile_id}")
    return profile


def get_ranking_profile_status(
    engine: Engine, profile_id: object, *, user_id: str
) -> RankingProfileStatus | None:
    """The profile, whether its own scope set's pointer names it, and that pointer's latest
    transition (which may concern another profile); None for unknown or foreign ids."""
    owner = require_owner(user_id)
    profile = load_profile(engine, owner, require_uuid(profile_id, "profile_id"))
    if profile is None:
        return None
    state = latest_state(engine, owner, profile.scopes)
    active = state is not None and state.active_profile_id == profile.profile_id
    return RankingProfileStatus(profile=profile, active=active, latest_change=state)


def list_ranking_profile_history(
    engine: Engine,
    *,
    user_id: str,
    scopes: ScopeInput = None,
    limit: int = 100,
    after_change_id: object = None,
) -> list[RankingProfileState]:
    """The pointer's transitions for the exact scope set, newest first; page on with
    ``after_change_id`` = the ``change_id`` of the last transition seen.

    Raises:
        InvalidInputError: empty or invalid ``scopes``; ``limit`` outside 1–1000; an
            ``after_change_id`` that is not a UUID.
        NotFoundError: ``after_change_id`` is not a transition of this owner's pointer for
            exactly these scopes.
        IntegrityError: a stored transition fails verification.
    """
    owner = require_owner(user_id)
    key = normalize_scope_key(scopes, "scopes")
    size = require_page_limit(limit)
    namespace = scope_namespace(key)
    before = None
    if after_change_id is not None:
        cid = require_uuid(after_change_id, "after_change_id")
        cursor = engine.store.get_op(state_op_id(owner, cid))
        if cursor is None or cursor.op_type != STATE_OP or cursor.namespace != namespace:
            raise NotFoundError("ranking profile transition", cid)
        before = (cursor.created_at_us, cursor.seq)
    ops = engine.store.iter_ops(
        STATE_OP, owner, namespace=namespace, newest_first=True, limit=size, before=before
    )
    history = [STATES.verified(op, owner) for op in ops]
    if any(state.scopes != key for state in history):
        raise IntegrityError("Ranking profile state scope mismatch")
    return history
