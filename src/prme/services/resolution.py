"""Which multipliers a request uses: an explicit override, the active profile, or none."""

from __future__ import annotations

from prme.engine import Engine
from prme.models.retrieval import RankingProfileResolution
from prme.models.scope import ScopeKey
from prme.models.scoring import RankingMultipliers, ScoringWeights


def resolve_multipliers(
    engine: Engine,
    user_id: str,
    key: ScopeKey,
    base: ScoringWeights,
    explicit: RankingMultipliers | None,
) -> tuple[RankingProfileResolution, RankingMultipliers | None]:
    """Explicit multipliers always win (``request_override``); otherwise no profile applies."""
    del engine, user_id, key, base
    if explicit is not None:
        return RankingProfileResolution(
            status="request_override", reason="explicit_multipliers"
        ), explicit
    return RankingProfileResolution(), None
