"""Which multipliers a request uses: an explicit override, the active profile, or none.

Runs once per retrieval before candidate generation. It reads the newest pointer transition
(one indexed read, so a change made by another process is seen by the next retrieval; the
verified parse of a log row is cached, so an unchanged pointer costs only that read) and uses
only the compact application embedded in it, never the profile's evidence. A pointer that
cannot be read or verified fails closed to base scoring (``inapplicable`` /
``profile_unavailable``); it never fails the retrieval.
"""

from __future__ import annotations

import logging

from prme.engine import Engine
from prme.models.profiles import RankingProfileState, inapplicable_reason
from prme.models.retrieval import RankingProfileResolution
from prme.models.scope import ScopeKey
from prme.models.scoring import RankingMultipliers, ScoringWeights
from prme.services.profiles import latest_state

log = logging.getLogger("prme.profiles")
_UNREADABLE = object()


def _read_pointer(engine: Engine, user_id: str, key: ScopeKey) -> RankingProfileState | object:
    try:
        return latest_state(engine, user_id, key)
    except Exception:  # any unreadable pointer means base scoring, never a failed retrieval
        log.exception("ranking profile pointer for %r %r is unavailable", user_id, key)
        return _UNREADABLE


def resolve_multipliers(
    engine: Engine,
    user_id: str,
    key: ScopeKey,
    base: ScoringWeights,
    explicit: RankingMultipliers | None,
) -> tuple[RankingProfileResolution, RankingMultipliers | None]:
    """The request's profile resolution and the multipliers it applies (None: base scoring).

    - explicit multipliers: ``request_override`` (reason ``explicit_multipliers``), naming the
      bypassed active profile (None when nothing is active or the pointer is unreadable);
    - no pointer, or an empty one: ``none``;
    - an unreadable or unverifiable pointer: ``inapplicable`` / ``profile_unavailable``;
    - otherwise ``inapplicable`` with the first reason the profile cannot apply under ``base``
      (the request's ``weights`` or the configured scoring) and the running feature identity
      (``rank_fusion_scoring``, ``feature_identity_mismatch``, ``base_scoring_mismatch``), or
      ``applied`` with the profile's multipliers.
    """
    pointer = _read_pointer(engine, user_id, key)
    state = pointer if isinstance(pointer, RankingProfileState) else None
    active = None if state is None else state.active_profile_id
    if explicit is not None:
        resolution = RankingProfileResolution(
            status="request_override", profile_id=active, reason="explicit_multipliers"
        )
        return resolution, explicit
    if pointer is _UNREADABLE:
        return RankingProfileResolution(status="inapplicable", reason="profile_unavailable"), None
    if state is None or state.application is None:
        return RankingProfileResolution(), None
    reason = inapplicable_reason(base, engine.feature_identity_sha256(), state.application)
    if reason is not None:
        resolution = RankingProfileResolution(
            status="inapplicable", profile_id=active, reason=reason
        )
        return resolution, None
    applied = RankingProfileResolution(status="applied", profile_id=active)
    return applied, state.application.multipliers
