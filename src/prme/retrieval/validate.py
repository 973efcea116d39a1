"""A retrieval request checked once, before any work: every bad value is an
``InvalidInputError`` naming its field, and nothing has been read or written yet."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from prme.errors import InvalidInputError
from prme.models.enums import NodeType, RetrievalMode, Scope, SourceType
from prme.models.request import RetrievalRequest
from prme.models.scope import normalize_scope
from prme.models.scoring import RankingMultipliers, ScoringWeights
from prme.retrieval.features import FilterSettings
from prme.retrieval.fusion_methods import fusion_method
from prme.retrieval.settings import RetrievalSettings
from prme.validation import (
    invalid_input,
    require_aware,
    require_cap,
    require_finite_nonnegative,
    require_owner,
    require_result_limit,
    require_text,
    require_token_budget,
)

MAX_QUERY_CHARS = 10_000
RRF_MULTIPLIER_ERROR = (
    "Ranking multipliers adjust the weighted formula and do not apply to fusion='rrf'"
)


@dataclass(frozen=True, slots=True)
class ValidRequest:
    """A :class:`RetrievalRequest`'s values after validation and defaults (the engine's
    configured limit, token budget and base scoring fill what the caller left out)."""

    owner: str
    query: str
    scopes: list[Scope] | None
    reference_time: datetime | None  # None: the engine's clock
    time_from: datetime | None
    time_to: datetime | None
    knowledge_at: datetime | None
    event_time_from: datetime | None
    event_time_to: datetime | None
    result_limit: int
    token_budget: int
    min_score: float | None
    max_per_source: int | None
    max_per_evidence: int | None
    exclude_node_types: frozenset[str] | None
    source_types: frozenset[str] | None
    base: ScoringWeights
    multipliers: RankingMultipliers | None  # the explicit ones (the profile's come later)
    mode: RetrievalMode
    include_cross_scope: bool

    def filter_settings(self, unverified_threshold: float, clock_us: int) -> FilterSettings:
        """The candidate filters of this request at the request's clock (``clock_us``)."""
        return FilterSettings(
            mode=self.mode.value,
            time_from=self.time_from,
            time_to=self.time_to,
            knowledge_at=self.knowledge_at,
            event_time_from=self.event_time_from,
            event_time_to=self.event_time_to,
            exclude_node_types=self.exclude_node_types or frozenset(),
            source_types=self.source_types,
            unverified_threshold=unverified_threshold,
            clock_us=clock_us,
        )


def parse_model(cls: type[Any], value: Any, field: str) -> Any:
    """``value`` as a ``cls`` (None and instances pass); the first error names its location."""
    if value is None or isinstance(value, cls):
        return value
    try:
        return cls.model_validate(value)
    except ValidationError as exc:
        raise invalid_input(exc, field) from None


def enum_set(cls: type[Any], values: Collection[Any] | None, field: str) -> frozenset[str] | None:
    """The enum values named in ``values`` (None stays None)."""
    if values is None:
        return None
    if isinstance(values, str) or not isinstance(values, Collection):
        raise InvalidInputError(field, "must be a collection of names", values)
    out: set[str] = set()
    for value in values:
        try:
            out.add(cls(value).value)
        except ValueError:
            valid = ", ".join(m.value for m in cls)
            raise InvalidInputError(field, f"invalid value {value!r} (valid: {valid})") from None
    return frozenset(out)


def check_rank_fusion_request(base: ScoringWeights, multipliers: RankingMultipliers | None) -> None:
    """Under rrf, non-neutral multipliers are rejected before any retrieval work."""
    adjustable = fusion_method(base).adjusts_weights
    if not adjustable and multipliers is not None and not multipliers.is_neutral:
        raise InvalidInputError("ranking_multipliers", RRF_MULTIPLIER_ERROR)


def _optional(value: Any, check: Any, field: str) -> Any:
    return None if value is None else check(value, field)


def validate_request(
    r: RetrievalRequest, cfg: RetrievalSettings, default_scoring: ScoringWeights
) -> ValidRequest:
    """Every parameter of ``r`` checked, in signature order after the owner and the query."""
    owner = require_owner(r.user_id)
    query: Any = r.query
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("query", "must be a non-blank string", query)
    require_text(query, "query")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInputError("query", f"must be at most {MAX_QUERY_CHARS} characters")
    scopes = normalize_scope(r.scope, "scope")
    clock = require_aware(r.reference_time, "reference_time")
    t_from = require_aware(r.time_from, "time_from")
    t_to = require_aware(r.time_to, "time_to")
    k_at = require_aware(r.knowledge_at, "knowledge_at")
    e_from = require_aware(r.event_time_from, "event_time_from")
    e_to = require_aware(r.event_time_to, "event_time_to")
    limit = cfg.default_limit if r.limit is None else require_result_limit(r.limit)
    budget = cfg.token_budget if r.token_budget is None else require_token_budget(r.token_budget)
    floor = _optional(r.min_score, require_finite_nonnegative, "min_score")
    per_source = _optional(r.max_per_source, require_cap, "max_per_source")
    per_evidence = _optional(r.max_per_evidence, require_cap, "max_per_evidence")
    excluded = enum_set(NodeType, r.exclude_node_types, "exclude_node_types")
    sources = enum_set(SourceType, r.source_types, "source_types")
    base: ScoringWeights = parse_model(ScoringWeights, r.weights, "weights") or default_scoring
    explicit: RankingMultipliers | None = parse_model(
        RankingMultipliers, r.ranking_multipliers, "ranking_multipliers"
    )
    try:
        mode = RetrievalMode(r.retrieval_mode)
    except ValueError:
        raise InvalidInputError(
            "retrieval_mode", "must be 'default' or 'explicit'", r.retrieval_mode
        ) from None
    if not isinstance(r.include_cross_scope, bool):
        raise InvalidInputError("include_cross_scope", "must be a boolean", r.include_cross_scope)
    check_rank_fusion_request(base, explicit)
    return ValidRequest(
        owner=owner,
        query=query,
        scopes=scopes,
        reference_time=clock,
        time_from=t_from,
        time_to=t_to,
        knowledge_at=k_at,
        event_time_from=e_from,
        event_time_to=e_to,
        result_limit=limit,
        token_budget=budget,
        min_score=floor,
        max_per_source=per_source,
        max_per_evidence=per_evidence,
        exclude_node_types=excluded,
        source_types=sources,
        base=base,
        multipliers=explicit,
        mode=mode,
        include_cross_scope=r.include_cross_scope,
    )
