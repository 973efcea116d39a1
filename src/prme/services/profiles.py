"""Ranking profiles and the per-(owner, exact scope set) activation pointer.

A profile is one immutable operation (``ranking_profile``) keyed by
``uuid5(NAMESPACE_URL, json.dumps(["prme:ranking-profile:v1", user_id, str(profile_id)]))``.
The pointer has no mutable row: it is the ``active_profile_id`` of the newest
``ranking_profile_state`` operation in the scope set's namespace (newest ``changed_at``, then
log sequence). Every change is one compare-and-swap inside ``store.serialized(namespace)``
(``BEGIN IMMEDIATE`` on SQLite, so it holds across processes): re-read the latest state, check
that it names the expected profile, append the transition.
"""

from __future__ import annotations

import functools
import json
import re
import uuid
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from prme.canonical import canonical_json
from prme.engine import Engine
from prme.errors import IntegrityError, InvalidInputError, NotFoundError, StaleRankingProfileError
from prme.models.base import SHA256_PATTERN
from prme.models.holdout import FullRetrievalEvaluation
from prme.models.learning import LearningEvaluation
from prme.models.profiles import (
    RankingProfile,
    RankingProfileApplication,
    RankingProfileState,
    RankingProfileStatus,
    TransitionAction,
    evidence_problem,
    inapplicable_reason,
)
from prme.models.scope import ScopeInput, ScopeKey, normalize_scope_key, scope_namespace
from prme.services import reports
from prme.storage.base import OpRecord
from prme.storage.timeutil import to_us
from prme.validation import invalid_input, require_owner, require_page_limit, require_uuid

PROFILE_OP = "ranking_profile"
STATE_OP = "ranking_profile_state"
DIFFERENT_PROFILE = "profile_id already identifies a different ranking profile"
DIFFERENT_TRANSITION = "change_id already identifies a different ranking profile transition"
BASELINE_UNAVAILABLE = "Ranking profile holdout baseline is unavailable"
BASELINE_DIFFERS = "Ranking profile holdout baseline multipliers differ"
ROLLBACK_UNAVAILABLE = "Rollback ranking profile is unavailable for these scopes"
ACTIVE_MISSING = "Active ranking profile is missing or has different scopes"
_ONE_MICROSECOND = timedelta(microseconds=1)

ReportT = TypeVar("ReportT", LearningEvaluation, FullRetrievalEvaluation)


def profile_op_id(user_id: str, profile_id: uuid.UUID) -> str:
    """The operation id of a profile (reference §G.1 step 5, §M.7)."""
    name = json.dumps(["prme:ranking-profile:v1", user_id, str(profile_id)])
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


def state_op_id(user_id: str, change_id: uuid.UUID) -> str:
    """The operation id of a pointer transition (reference §H.1, §M.7)."""
    name = json.dumps(["prme:ranking-profile-state:v1", user_id, str(change_id)])
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


def _not_found(profile_id: uuid.UUID, prefix: str = "") -> NotFoundError:
    error = NotFoundError("ranking profile", profile_id)
    error.args = (f"{prefix}Ranking profile not found: {profile_id}",)
    return error


# ------------------------------------------------------------------------- reading records
def _parse_profile(op: OpRecord, user_id: str, profile_id: uuid.UUID) -> RankingProfile:
    try:
        profile = RankingProfile.model_validate_json(op.payload)
    except ValidationError as exc:
        raise IntegrityError(
            f"Ranking profile record checksum mismatch: {profile_id} does not parse ({exc})"
        ) from None
    if canonical_json(profile) != op.payload:
        raise IntegrityError(f"Ranking profile record checksum mismatch: {profile_id}")
    if op.user_id != user_id or profile.user_id != user_id:
        raise IntegrityError(f"Ranking profile owner or canonical checksum mismatch: {profile_id}")
    if (
        profile.profile_id != profile_id
        or op.target_id != str(profile_id)
        or op.op_id != profile_op_id(user_id, profile_id)
    ):
        raise IntegrityError(f"Ranking profile identity mismatch: {profile_id}")
    if op.namespace != scope_namespace(profile.scopes):
        raise IntegrityError(f"Ranking profile scope mismatch: {profile_id}")
    return profile


def load_profile(engine: Engine, user_id: str, profile_id: uuid.UUID) -> RankingProfile | None:
    """The owner's verified profile, or None (foreign ids look exactly like missing ones)."""
    op = engine.store.get_op(profile_op_id(user_id, profile_id))
    return None if op is None else _parse_profile(op, user_id, profile_id)


@functools.lru_cache(maxsize=1024)
def _parse_state(op: OpRecord, user_id: str) -> RankingProfileState:
    # Cached: the verified state is a pure function of the (immutable) log row and the owner, so
    # retrieval re-parses a pointer only when its latest transition changes. Failures re-raise.
    try:
        state = RankingProfileState.model_validate_json(op.payload)
    except ValidationError as exc:
        raise IntegrityError(
            f"Ranking profile state checksum mismatch: {op.op_id} ({exc})"
        ) from None
    if canonical_json(state) != op.payload:
        raise IntegrityError(f"Ranking profile state checksum mismatch: {op.op_id}")
    active = None if state.active_profile_id is None else str(state.active_profile_id)
    if (
        op.user_id != user_id
        or state.user_id != user_id
        or op.op_id != state_op_id(user_id, state.change_id)
        or op.target_id != active
        or op.created_at_us != to_us(state.changed_at)
    ):
        raise IntegrityError(f"Ranking profile state identity mismatch: {op.op_id}")
    if op.namespace != scope_namespace(state.scopes):
        raise IntegrityError(f"Ranking profile state scope mismatch: {op.op_id}")
    return state


def latest_state(engine: Engine, user_id: str, key: ScopeKey) -> RankingProfileState | None:
    """The newest verified transition of the pointer for (owner, exact key): one indexed read."""
    ops = engine.store.iter_ops(
        STATE_OP, user_id, namespace=scope_namespace(key), newest_first=True, limit=1
    )
    op = next(iter(ops), None)
    if op is None:
        return None
    state = _parse_state(op, user_id)
    if state.scopes != key:
        raise IntegrityError(f"Ranking profile state scope mismatch: {op.op_id}")
    return state


def _state_by_change_id(
    engine: Engine, user_id: str, change_id: uuid.UUID
) -> RankingProfileState | None:
    op = engine.store.get_op(state_op_id(user_id, change_id))
    return None if op is None else _parse_state(op, user_id)


def _current_profile_id(engine: Engine, user_id: str, key: ScopeKey) -> uuid.UUID | None:
    state = latest_state(engine, user_id, key)
    return None if state is None else state.active_profile_id


# ------------------------------------------------------------------------------ creation
def parse_report(model: type[ReportT], value: object, field: str) -> ReportT:
    """Deep re-parse a report (model, mapping or JSON text) once, so its own validators run
    again; errors name ``field`` and the offending path."""
    try:
        if isinstance(value, BaseModel):
            return model.model_validate_json(value.model_dump_json())
        if isinstance(value, str | bytes):
            return model.model_validate_json(value)
        if isinstance(value, Mapping):
            return model.model_validate(dict(value))
    except ValidationError as exc:
        raise invalid_input(exc, field) from None
    raise InvalidInputError(field, f"must be a {model.__name__} or its JSON", value)


def chosen_report(
    model: type[ReportT],
    name: str,
    checksum: object,
    whole: object,
    load: Callable[[str], ReportT | None],
) -> ReportT:
    """The report named by exactly one of its input checksum (``load`` reads the owner's stored,
    verified report: nothing is parsed twice) or ``whole`` (parsed once, see :func:`parse_report`).

    Raises:
        InvalidInputError: both or neither given (naming ``{name}_input_checksum``), a checksum
            that is not SHA-256 hex, or a whole report that does not parse.
        NotFoundError: no stored report of this owner has that checksum (another owner's report
            looks exactly like a missing one), naming ``{name}_input_checksum``.
    """
    field = f"{name}_input_checksum"
    if (checksum is None) == (whole is None):
        raise InvalidInputError(field, f"give exactly one of {field} and {name}")
    if checksum is None:
        return parse_report(model, whole, name)
    if not isinstance(checksum, str) or not re.fullmatch(SHA256_PATTERN, checksum):
        raise InvalidInputError(field, "must be a SHA-256 hex digest", checksum)
    report = load(checksum)
    if report is None:
        raise NotFoundError(f"{name.capitalize()} report", checksum, field=field)
    return report


def _check_baseline(
    engine: Engine, owner: str, holdout: FullRetrievalEvaluation, baseline_id: uuid.UUID
) -> None:
    baseline = load_profile(engine, owner, baseline_id)
    if baseline is None or baseline.scopes != holdout.scopes:
        raise InvalidInputError(
            "baseline_profile_id",
            f"{BASELINE_UNAVAILABLE}: {baseline_id} is not this owner's profile for these scopes",
            str(baseline_id),
        )
    if baseline.multipliers != holdout.baseline_multipliers:
        raise InvalidInputError(
            "baseline_profile_id",
            f"{BASELINE_DIFFERS}: the holdout's baseline arm did not use {baseline_id}",
            str(baseline_id),
        )


def _check_disjoint(proposal: LearningEvaluation, holdout: FullRetrievalEvaluation) -> None:
    fitted = {q.group_label for q in proposal.queries}
    fitted.update(text for q in proposal.queries for text in q.normalized_queries)
    overlap = sorted(
        {name for q in holdout.queries for name in (q.group_id, *q.normalized_queries)} & fitted
    )
    if overlap:
        raise InvalidInputError(
            "holdout.queries",
            "Ranking profile holdout groups must be disjoint from the proposal's query groups; "
            f"{len(overlap)} overlap (first: {overlap[0]!r})",
        )


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


def create_ranking_profile(
    engine: Engine,
    proposal: LearningEvaluation | Mapping[str, Any] | str,
    holdout: FullRetrievalEvaluation | Mapping[str, Any] | str,
    *,
    user_id: str,
    profile_id: object = None,
    baseline_profile_id: object = None,
) -> RankingProfile:
    """Create an immutable profile from a passing proposal and a passing holdout.

    Both reports are re-parsed (their own validators run), then checked in order: owner, exact
    scope set, ``results`` surface, both positive decisions, the holdout naming the proposal's
    ``input_checksum``, multiplier agreement, the baseline rule (a non-neutral holdout baseline
    needs ``baseline_profile_id``, an existing profile of this owner and scope set whose
    multipliers the baseline arm used), both attestations (made by this pack's secret over this
    exact content), and disjointness of the holdout's groups from the proposal's. Creation never
    checks applicability and never activates.

    Raises:
        InvalidInputError: any rule above, naming the field; or ``profile_id`` already names a
            profile with different evidence ("profile_id already identifies a different ranking
            profile"). A retry with the same evidence returns the stored profile.
    """
    owner = require_owner(user_id)
    return create_from_reports(
        engine,
        parse_report(LearningEvaluation, proposal, "proposal"),
        parse_report(FullRetrievalEvaluation, holdout, "holdout"),
        user_id=owner,
        profile_id=profile_id,
        baseline_profile_id=baseline_profile_id,
    )


def create_from_reports(
    engine: Engine,
    prop: LearningEvaluation,
    hold: FullRetrievalEvaluation,
    *,
    user_id: str,
    profile_id: object = None,
    baseline_profile_id: object = None,
) -> RankingProfile:
    """:func:`create_ranking_profile` for reports parsed moments ago (by :func:`chosen_report`:
    loaded from this pack, or sent whole and parsed once); they are not parsed again. The same
    rules, in the same order, raise the same errors."""
    owner = require_owner(user_id)
    pid = uuid.uuid4() if profile_id is None else require_uuid(profile_id, "profile_id")
    baseline_id = (
        None
        if baseline_profile_id is None
        else require_uuid(baseline_profile_id, "baseline_profile_id")
    )
    if baseline_id == pid:
        raise InvalidInputError("baseline_profile_id", "a profile cannot be its own baseline")
    problem = evidence_problem(
        user_id=owner, proposal=prop, holdout=hold, baseline_profile_id=baseline_id
    )
    if problem is not None:
        raise InvalidInputError(*problem)
    if baseline_id is not None:
        _check_baseline(engine, owner, hold, baseline_id)
    for field, report in (("proposal", prop), ("holdout", hold)):
        if not reports.verify(engine, report):
            raise InvalidInputError(
                f"{field}.attestation",
                f"Ranking profile {field} attestation does not verify with this pack: the report "
                "was not produced by this pack (or a copy of it) or was edited",
            )
    _check_disjoint(prop, hold)
    profile = RankingProfile(
        profile_id=pid,
        user_id=owner,
        scopes=hold.scopes,
        created_at=engine.clock(),
        baseline_profile_id=baseline_id,
        multipliers=hold.candidate_multipliers,
        proposal=prop,
        holdout=hold,
    )
    return store_profile(engine, profile)


# ---------------------------------------------------------------------------- transitions
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
        existing = _state_by_change_id(engine, owner, change_id)
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
        raise _not_found(pid)
    if cid is not None:
        existing = _state_by_change_id(engine, owner, cid)
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
        existing = _state_by_change_id(engine, owner, cid)
        if existing is not None:
            return _same_transition(existing, "deactivate", None, key)
    try:
        return _change(
            engine,
            owner,
            key,
            action="deactivate",
            application=None,
            expected=_current_profile_id(engine, owner, key),
            change_id=cid or uuid.uuid4(),
            check=_require_active,
        )
    except _NothingActive:
        return None


def _was_active(engine: Engine, owner: str, key: ScopeKey, profile_id: uuid.UUID) -> bool:
    namespace = scope_namespace(key)
    for op in engine.store.find_ops(STATE_OP, owner, str(profile_id)):
        if op.namespace == namespace and _parse_state(op, owner).active_profile_id == profile_id:
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
        existing = _state_by_change_id(engine, owner, cid)
        if existing is not None:
            return _same_transition(existing, "rollback", target, key)
    current = _current_profile_id(engine, owner, key)
    application = None
    if target is not None:
        profile = load_profile(engine, owner, target)
        if profile is None:
            raise _not_found(target, f"{ROLLBACK_UNAVAILABLE}: ")
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


# ----------------------------------------------------------------------------- inspection
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
            raise _not_found(after)
        before = (cursor.created_at_us, cursor.seq)
    ops = engine.store.iter_ops(PROFILE_OP, owner, newest_first=True, limit=size, before=before)
    return [_parse_profile(op, owner, uuid.UUID(str(op.target_id))) for op in ops]


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
    history = [_parse_state(op, owner) for op in ops]
    if any(state.scopes != key for state in history):
        raise IntegrityError("Ranking profile state scope mismatch")
    return history
