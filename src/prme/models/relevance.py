"""Explicit relevance judgments on returned candidates (reference §D.1).

A submission labels candidates of one saved retrieval receipt; the engine admits it as a record
bound to that receipt's checksum. Unlabelled candidates never become negatives.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal
from uuid import UUID

from pydantic import Field, StrictBool, model_validator

from prme.limits import MAX_LABELS
from prme.models.base import Frozen, NonBlankStr, Sha256Hex, UTCDateTime

RelevanceSurface = Literal["results", "context"]
RelevanceMethod = Literal["explicit_user", "structured_evaluation"]


class RelevanceSubmission(Frozen):
    """Labels for candidates returned by one retrieval.

    Args:
        request_id: the retrieval's ``metadata.request_id``.
        labels: node id (a UUID or its string) → True (relevant) or False (not relevant);
            1 to 1,000 entries, values must be real booleans.
        feedback_id: reuse the same id only when retrying the same write (idempotent).
        surface: ``"results"`` judges returned results; ``"context"`` judges packed entries.
        method: ``"explicit_user"`` or ``"structured_evaluation"``.
    """

    feedback_id: UUID = Field(default_factory=uuid.uuid4)
    request_id: UUID
    labels: dict[UUID, StrictBool] = Field(min_length=1, max_length=MAX_LABELS)
    surface: RelevanceSurface = "results"
    method: RelevanceMethod = "explicit_user"

    @model_validator(mode="before")
    @classmethod
    def _distinct_label_keys(cls, data: Any) -> Any:
        # {UUID(x): ..., "x": ...} would silently collapse into one label; refuse it instead.
        labels = data.get("labels") if isinstance(data, dict) else None
        if isinstance(labels, dict):
            seen: set[str] = set()
            for key in labels:
                try:
                    text = str(key if isinstance(key, UUID) else UUID(str(key)))
                except ValueError:
                    continue  # reported by field validation
                if text in seen:
                    raise ValueError(f"labels name node {text} more than once")
                seen.add(text)
        return data


class RelevanceRecord(Frozen):
    """An admitted judgment: the submission plus owner, admission time and receipt checksum."""

    schema_version: Literal[1] = 1
    feedback_id: UUID
    request_id: UUID
    labels: dict[UUID, StrictBool] = Field(min_length=1, max_length=MAX_LABELS)
    surface: RelevanceSurface
    method: RelevanceMethod
    user_id: NonBlankStr
    recorded_at: UTCDateTime
    receipt_checksum: Sha256Hex

    def matches(self, submission: RelevanceSubmission) -> bool:
        """True when the five submission fields are equal (a retry of the same write)."""
        return (
            self.feedback_id == submission.feedback_id
            and self.request_id == submission.request_id
            and self.labels == submission.labels
            and self.surface == submission.surface
            and self.method == submission.method
        )


RANK_FUSION_WARNING = (
    "this retrieval ran under rank fusion (rrf): learning excludes its judgments "
    "(rank_fusion_receipt_records), so this one will not train a ranking profile; create a "
    "learning-ready pack with `prme init --fusion weighted`, or switch this pack with "
    "`prme pack configure --fusion weighted`"
)


class RecordedRelevance(RelevanceRecord):
    """What ``record_relevance`` returns when there is something to warn about: the stored
    record plus ``warnings`` (not stored: the saved form and checksum are those of the
    :class:`RelevanceRecord`). Without warnings it returns the plain record."""

    warnings: tuple[str, ...] = Field(
        default=(), description="Why this judgment may not count (e.g. rank fusion)."
    )
