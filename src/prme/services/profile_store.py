"""Reading and appending ranking profiles and pointer transitions (the record kinds are
:data:`prme.services.records.PROFILES` and :data:`~prme.services.records.STATES`).

A profile is one immutable operation (``ranking_profile``) keyed by
``uuid5(NAMESPACE_URL, json.dumps(["prme:ranking-profile:v1", user_id, str(profile_id)]))``.
The pointer has no mutable row: it is the ``active_profile_id`` of the newest
``ranking_profile_state`` operation in the scope set's namespace (newest ``changed_at``, then
log sequence).
"""

from __future__ import annotations

import uuid

from prme.canonical import canonical_json
from prme.engine import Engine
from prme.errors import IntegrityError, InvalidInputError, NotFoundError
from prme.models.profiles import RankingProfile, RankingProfileState
from prme.models.scope import ScopeKey, scope_namespace
from prme.services import records
from prme.services.records import PROFILE_OP, PROFILES, STATE_OP, STATES, profile_op_id, state_op_id
from prme.storage.timeutil import to_us

DIFFERENT_PROFILE = "profile_id already identifies a different ranking profile"


def not_found(profile_id: uuid.UUID, prefix: str = "") -> NotFoundError:
    """The error for an unknown (or another owner's) profile id."""
    error = NotFoundError("ranking profile", profile_id)
    error.args = (f"{prefix}Ranking profile not found: {profile_id}",)
    return error


def load_profile(engine: Engine, user_id: str, profile_id: uuid.UUID) -> RankingProfile | None:
    """The owner's verified profile, or None (foreign ids look exactly like missing ones)."""
    return records.get(
        engine, PROFILES, user_id, profile_op_id(user_id, profile_id), str(profile_id)
    )


def latest_state(engine: Engine, user_id: str, key: ScopeKey) -> RankingProfileState | None:
    """The newest verified transition of the pointer for (owner, exact key): one indexed read."""
    ops = engine.store.iter_ops(
        STATE_OP, user_id, namespace=scope_namespace(key), newest_first=True, limit=1
    )
    op = next(iter(ops), None)
    if op is None:
        return None
    state = STATES.verified(op, user_id)
    if state.scopes != key:
        raise IntegrityError(f"Ranking profile state scope mismatch: {op.op_id}")
    return state


def state_by_change_id(
    engine: Engine, user_id: str, change_id: uuid.UUID
) -> RankingProfileState | None:
    """The owner's transition with this change id, verified, or None."""
    return records.get(engine, STATES, user_id, state_op_id(user_id, change_id))


def current_profile_id(engine: Engine, user_id: str, key: ScopeKey) -> uuid.UUID | None:
    """The profile the (owner, exact key) pointer names now (None: base scoring)."""
    state = latest_state(engine, user_id, key)
    return None if state is None else state.active_profile_id


def store_profile(engine: Engine, profile: RankingProfile) -> RankingProfile:
    """Append ``profile`` if its id is new and return the stored profile (internal).

    This is creation's last step and does no evidence, attestation or disjointness checks of its
    own (the model re-checks the evidence rules). A new profile is returned as given (its
    canonical JSON is what was stored: no read-back parse); a stored profile with the same
    evidence is returned as stored, with its first ``created_at``.

    Raises:
        InvalidInputError: the id already names a profile with different evidence.
    """
    inserted = engine.store.append_op(
        op_id=profile_op_id(profile.user_id, profile.profile_id),
        op_type=PROFILE_OP,
        user_id=profile.user_id,
        target_id=str(profile.profile_id),
        namespace=scope_namespace(profile.scopes),
        created_at_us=to_us(profile.created_at),
        payload=canonical_json(profile),
    )
    if inserted:  # stored as given: the payload is this profile's canonical JSON
        return profile
    stored = load_profile(engine, profile.user_id, profile.profile_id)
    if stored is None:
        raise IntegrityError(f"Ranking profile {profile.profile_id} was not stored")
    if not stored.matches_evidence(profile):
        raise InvalidInputError("profile_id", DIFFERENT_PROFILE, str(profile.profile_id))
    return stored
