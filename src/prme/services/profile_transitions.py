"""The activation pointer's transitions: activate, deactivate and roll back.

Every change is one compare-and-swap inside ``store.serialized(namespace)`` (``BEGIN
IMMEDIATE`` on SQLite, so it holds across processes): re-read the latest state, check that it
names the expected profile, append the transition.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta

from prme.canonical import canonical_json
from prme.engine import Engine
from prme.errors import InvalidInputError, StaleRankingProfileError
from prme.models.profiles import (
    RankingProfileApplication,
    RankingProfileState,
    TransitionAction,
    inapplicable_reason,
)
from prme.models.scope import ScopeInput, ScopeKey, normalize_scope_key, scope_namespace
from prme.services.profile_store import (
    current_profile_id,
    latest_state,
    load_profile,
    not_found,
    state_by_change_id,
)
from prme.services.records import STATE_OP, STATES, state_op_id
from prme.storage.timeutil import to_us
from prme.validation import require_owner, require_uuid

DIFFERENT_TRANSITION = "change_id already identifies a different ranking profile transition"
ROLLBACK_UNAVAILABLE = "Rollback ranking profile is unavailable for these scopes"
_ONE_MICROSECOND = timedelta(microseconds=1)


def _same_transition(
    existing: RankingProfileState,
    action: TransitionAction,
    target: uuid.UUID | None,
    key: ScopeKey,
) -> RankingProfileState:
    if (existing.action, existing.active_profile_id, existing.scopes) != (action, target, key):
        raise InvalidInputError("change_id", DIFFERENT_TRANSITION, str(existing.change_id))
    return existing


class _NothingActive(Exception):
    """Raised by a deactivation's check inside the lock: nothing is active, nothing written."""


def _require_active(current: uuid.UUID | None) -> None:
    if current is None:
        raise _NothingActive


def _change(
    engine: Engine,
    owner: str,
    key: ScopeKey,
    *,
    action: TransitionAction,
    application: RankingProfileApplication | None,
    expected: uuid.UUID | None,
    change_id: uuid.UUID,
    stale_message: str | None = None,
    check: Callable[[uuid.UUID | None], None] | None = None,
) -> RankingProfileState:
    """The one serialized compare-and-swap every transition goes through (reference §H.2).

    Inside the lock, in this order: a stored transition with ``change_id`` is returned (so every
    concurrent copy of one request returns the one stored transition, whatever it changed);
    then the pointer must name ``expected`` (else ``StaleRankingProfileError`` with
    ``stale_message``); then ``check(current)`` may refuse the change; then it is appended.
    Every check that depends on the pointer runs here, never before the ``change_id`` re-read.
    """
    target = None if application is None else application.profile_id
    namespace = scope_namespace(key)
    with engine.store.serialized(namespace):
        existing = state_by_change_id(engine, owner, change_id)
        if existing is not None:
            return _same_transition(existing, action, target, key)
        latest = latest_state(engine, owner, key)
        current = None if latest is None else latest.active_profile_id
        if current != expected:
            raise StaleRankingProfileError(expected, current, stale_message)
        if check is not None:
            check(current)
        changed_at = engine.clock()
        if latest is not None and to_us(changed_at) <= to_us(latest.changed_at):
            changed_at = latest.changed_at + _ONE_MICROSECOND
        state = RankingProfileState(
            change_id=change_id,
            user_id=owner,
            scopes=key,
            action=action,
            previous_profile_id=current,
            active_profile_id=target,
            application=application,
            changed_at=changed_at,
        )
        engine.store.append_op(
            op_id=state_op_id(owner, change_id),
            op_type=STATE_OP,
            user_id=owner,
            target_id=None if target is None else str(target),
            namespace=namespace,
            created_at_us=to_us(state.changed_at),
            payload=canonical_json(state),
        )
    return state


def _optional_change_id(change_id: object) -> uuid.UUID | None:
    return None if change_id is None else require_uuid(change_id, "change_id")


def activate_ranking_profile(
    engine: Engine, profile_id: object, *, user_id: str, change_id: object = None
) -> RankingProfileState:
    """Point the profile's (owner, scope set) at it, if it is applicable and its baseline is current.

    A retried ``change_id`` returns the stored transition with no further checks.

    Raises:
        NotFoundError: unknown or foreign ``profile_id`` ("Ranking profile not found").
        InvalidInputError: "change_id already identifies a different ranking profile
            transition"; "Ranking profile is inapplicable: <reason>" (rank_fusion_scoring,
            feature_identity_mismatch, base_scoring_mismatch, checked against the engine).
        StaleRankingProfileError: the pointer does not name the profile's
            ``baseline_profile_id`` ("evaluated baseline"), or it moved during the change
            ("inspect and retry").
    """
    owner = require_owner(user_id)
    pid = require_uuid(profile_id, "profile_id")
    cid = _optional_change_id(change_id)
    profile = load_profile(engine, owner, pid)
    if profile is None:
        raise not_found(pid)
    if cid is not None:
        existing = state_by_change_id(engine, owner, cid)
        if existing is not None:
            return _same_transition(existing, "activate", pid, profile.scopes)
    reason = inapplicable_reason(
        engine.config.scoring, engine.feature_identity_sha256(), profile.application
    )
    if reason is not None:
        raise InvalidInputError(
            "profile_id", f"Ranking profile is inapplicable: {reason}", str(pid)
        )
    return _change(
        engine,
        owner,
        profile.scopes,
        action="activate",
        application=profile.application,
        expected=profile.baseline_profile_id,
        change_id=cid or uuid.uuid4(),
        stale_message="Active ranking profile differs from the evaluated baseline",
    )


def deactivate_ranking_profile(
    engine: Engine, *, user_id: str, scopes: ScopeInput = None, change_id: object = None
) -> RankingProfileState | None:
    """Return the (owner, scope set) to base scoring; None (nothing written) when none is active.

    Raises:
        InvalidInputError: an empty or invalid ``scopes``; a ``change_id`` naming a different
            transition.
        StaleRankingProfileError: the pointer moved during the change ("inspect and retry").
    """
    owner = require_owner(user_id)
    key = normalize_scope_key(scopes, "scopes")
    cid = _optional_change_id(change_id)
    if cid is not None:
        existing = state_by_change_id(engine, owner, cid)
        if existing is not None:
            return _same_transition(existing, "deactivate", None, key)
    try:
        return _change(
            engine,
            owner,
            key,
            action="deactivate",
            application=None,
            expected=current_profile_id(engine, owner, key),
            change_id=cid or uuid.uuid4(),
            check=_require_active,
        )
    except _NothingActive:
        return None


def _was_active(engine: Engine, owner: str, key: ScopeKey, profile_id: uuid.UUID) -> bool:
    namespace = scope_namespace(key)
    for op in engine.store.find_ops(STATE_OP, owner, str(profile_id)):
        if op.namespace == namespace and STATES.verified(op, owner).active_profile_id == profile_id:
            return True
    return False


def rollback_ranking_profile(
    engine: Engine,
    profile_id: object,
    *,
    user_id: str,
    scopes: ScopeInput = None,
    change_id: object = None,
) -> RankingProfileState:
    """Point the (owner, scope set) back at base scoring (None) or at a profile it had active.

    Raises:
        NotFoundError: unknown or foreign ``profile_id`` (the message also says the rollback
            target is unavailable).
        InvalidInputError: the profile was never active in this pointer or has other scopes
            ("Rollback ranking profile is unavailable for these scopes"); it is not applicable
            ("Rollback ranking profile is inapplicable: <reason>"); the pointer already names
            the target ("rollback cannot be a no-op"); a ``change_id`` naming a different
            transition; empty or invalid ``scopes``.
        StaleRankingProfileError: the pointer moved during the change ("inspect and retry").
    """
    owner = require_owner(user_id)
    key = normalize_scope_key(scopes, "scopes")
    target = None if profile_id is None else require_uuid(profile_id, "profile_id")
    cid = _optional_change_id(change_id)
    if cid is not None:
        existing = state_by_change_id(engine, owner, cid)
        if existing is not None:
            return _same_transition(existing, "rollback", target, key)
    current = current_profile_id(engine, owner, key)
    application = None
    if target is not None:
        profile = load_profile(engine, owner, target)
        if profile is None:
            raise not_found(target, f"{ROLLBACK_UNAVAILABLE}: ")
        if profile.scopes != key or not _was_active(engine, owner, key, target):
            raise InvalidInputError(
                "profile_id",
                f"{ROLLBACK_UNAVAILABLE}: {target} was never active for them",
                str(target),
            )
        application = profile.application
        reason = inapplicable_reason(
            engine.config.scoring, engine.feature_identity_sha256(), application
        )
        if reason is not None:
            raise InvalidInputError(
                "profile_id", f"Rollback ranking profile is inapplicable: {reason}", str(target)
            )

    def not_a_no_op(now_active: uuid.UUID | None) -> None:
        if now_active == target:
            raise InvalidInputError(
                "profile_id",
                f"Ranking profile rollback cannot be a no-op: the pointer already names {target}",
                None if target is None else str(target),
            )

    return _change(
        engine,
        owner,
        key,
        action="rollback",
        application=application,
        expected=current,
        change_id=cid or uuid.uuid4(),
        check=not_a_no_op,
    )
