"""Request bodies of the HTTP API. Extra fields are refused (422); the engine validates values.

Each body mirrors the keyword arguments of one ``MemoryClient`` method plus an optional
``user_id`` (required only when no credential binds the owner).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any
from uuid import UUID

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SkipValidation,
    StrictBool,
    StrictInt,
    model_validator,
)

from prme.models.base import Sha256Hex
from prme.models.enums import RetrievalMode, Scope
from prme.models.holdout import (
    FullRetrievalEvaluation,
    FullRetrievalEvaluationConfig,
    FullRetrievalTrial,
)
from prme.models.learning import LearningConfig, LearningEvaluation
from prme.models.relevance import RelevanceSubmission, RelevanceSurface
from prme.models.request import HTTP_ALIASES, HTTP_FILTERS, SURFACE_PARAMETERS, surface_model
from prme.models.scoring import RankingMultipliers
from prme.models.store_input import StoreFields


class Body(BaseModel):
    """A request body: unknown fields are a 422, and values are not coerced across types."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user_id: str | None = None

    def fields(self, *exclude: str) -> dict[str, Any]:
        """The fields the caller sent (as Python values), minus ``user_id`` and ``exclude``."""
        return {
            name: getattr(self, name)
            for name in self.model_fields_set
            if name not in {"user_id", *exclude}
        }


class StoreRequest(StoreFields, Body):
    """``POST /v1/store`` → ``MemoryClient.store_with_receipt``: the fields of one memory
    (:class:`~prme.models.store_input.StoreFields`, declared once) and ``dedupe``."""

    dedupe: StrictBool | None = Field(
        default=None, description="Return the owner's same memory (duplicate: true) if stored."
    )


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# Generated from RetrievalRequest (prme.models.request declares how the surfaces differ).
if TYPE_CHECKING:
    _RetrievalFilterFields = _Closed
    _RetrieveFields = Body
else:
    _RetrievalFilterFields = surface_model("RetrievalFilters", _Closed, HTTP_FILTERS)
    _RetrieveFields = surface_model(  # user_id comes with every Body
        "RetrieveRequest", Body, tuple(p for p in SURFACE_PARAMETERS if p != "user_id")
    )


class RetrievalFilters(_RetrievalFilterFields):
    """The original API's ``filters`` object: the same fields as at the top level of the body."""


class RetrieveRequest(_RetrieveFields):
    """``POST /v1/retrieve`` → ``MemoryClient.retrieve`` (no ``weights``: base scoring is the
    server's configuration).

    The original system's shape is accepted too: ``mode`` for ``retrieval_mode`` and the filter
    fields inside ``filters``; a field given both ways is a 422.
    """

    mode: RetrievalMode | None = None
    filters: RetrievalFilters | None = None

    @model_validator(mode="after")
    def _one_spelling(self) -> RetrieveRequest:
        nested = self.filters.model_fields_set if self.filters is not None else set()
        if self.mode is not None:
            nested = nested | {HTTP_ALIASES["mode"]}
        twice = sorted(nested & self.model_fields_set)
        if twice:
            raise ValueError(f"given at the top level and in filters/mode: {', '.join(twice)}")
        return self

    def fields(self, *exclude: str) -> dict[str, Any]:
        """The flat keyword arguments of ``MemoryClient.retrieve``, whichever shape was sent."""
        flat = super().fields("filters", *HTTP_ALIASES, *exclude)
        if self.filters is not None:
            flat |= {name: getattr(self.filters, name) for name in self.filters.model_fields_set}
        for alias, name in HTTP_ALIASES.items():
            if getattr(self, alias) is not None:
                flat[name] = getattr(self, alias)
        return flat


class RelevanceRequest(Body, RelevanceSubmission):
    """``POST /v1/relevance`` → ``MemoryClient.record_relevance``: a RelevanceSubmission plus
    ``user_id``."""

    def submission(self) -> RelevanceSubmission:
        return RelevanceSubmission.model_validate(self.model_dump(exclude={"user_id"}))


class LearningEvaluationRequest(Body):
    """``POST /v1/learning/evaluate`` → ``MemoryClient.evaluate_learning`` (gate 1)."""

    scopes: list[Scope] | None = None
    surface: RelevanceSurface = "results"
    config: LearningConfig | None = None
    query_groups: dict[UUID, str] | None = None
    max_records: StrictInt = 10_000


class FullRetrievalEvaluationRequest(Body):
    """``POST /v1/learning/evaluate-full-retrieval`` → ``MemoryClient.evaluate_full_retrieval``
    (gate 2). ``scopes`` null is the unfiltered scope set."""

    scopes: list[Scope] | None = None
    proposal_input_checksum: str
    memory_artifact_sha256: str
    candidate_multipliers: RankingMultipliers
    baseline_multipliers: RankingMultipliers | None = None
    config: FullRetrievalEvaluationConfig | None = None
    trials: list[FullRetrievalTrial]


class RankingProfileCreateRequest(Body):
    """``POST /v1/learning/profiles`` → ``MemoryClient.create_ranking_profile``: each report by
    its ``input_checksum`` (the server loads the owner's stored report) or whole, exactly as the
    gates returned it (e.g. a report made by a copy of this pack); exactly one of each pair.

    The whole reports are not validated here but by the service, once (``SkipValidation`` keeps
    their schema in the OpenAPI document), so a 3 MB report is parsed once, not three times."""

    proposal_input_checksum: Sha256Hex | None = None
    holdout_input_checksum: Sha256Hex | None = None
    proposal: Annotated[LearningEvaluation | None, SkipValidation] = None
    holdout: Annotated[FullRetrievalEvaluation | None, SkipValidation] = None
    profile_id: UUID | None = None
    baseline_profile_id: UUID | None = None


class RankingProfileChangeRequest(Body):
    """``POST /v1/learning/profiles/{profile_id}/activate``; ``{}`` is a valid body."""

    change_id: UUID | None = None


class RankingProfileScopeChangeRequest(RankingProfileChangeRequest):
    """``POST /v1/learning/profiles/deactivate``: the pointer of ``scopes`` (null: unfiltered)."""

    scopes: list[Scope] | None = None


class RankingProfileRollbackRequest(RankingProfileScopeChangeRequest):
    """``POST /v1/learning/profiles/rollback``; ``profile_id`` null rolls back to base scoring."""

    profile_id: UUID | None = None
