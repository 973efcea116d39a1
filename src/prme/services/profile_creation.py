"""Creating a ranking profile from a passing gate-1 proposal and a passing gate-2 holdout."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from prme.engine import Engine
from prme.errors import InvalidInputError, NotFoundError
from prme.learning.verify_reports import ReportVerificationError, verify_report
from prme.models.base import SHA256_PATTERN
from prme.models.holdout import FullRetrievalEvaluation
from prme.models.learning import LearningEvaluation
from prme.models.profiles import RankingProfile, evidence_problem
from prme.services import reports
from prme.services.profile_store import load_profile, store_profile
from prme.validation import invalid_input, invalid_value, require_owner, require_uuid

BASELINE_UNAVAILABLE = "Ranking profile holdout baseline is unavailable"
BASELINE_DIFFERS = "Ranking profile holdout baseline multipliers differ"

ReportT = TypeVar("ReportT", LearningEvaluation, FullRetrievalEvaluation)


def parse_report(model: type[ReportT], value: object, field: str) -> ReportT:
    """Deep re-parse a report (model, mapping or JSON text) once, so every field is checked
    again, then verify it (:func:`prme.learning.verify_reports.verify_report`: its aggregates,
    decision, refusal and input checksum follow from its own fields); errors name ``field`` and
    the offending path (a report that contradicts itself names ``field`` alone)."""
    report: ReportT
    try:
        if isinstance(value, BaseModel):
            report = model.model_validate_json(value.model_dump_json())
        elif isinstance(value, str | bytes):
            report = model.model_validate_json(value)
        elif isinstance(value, Mapping):
            report = model.model_validate(dict(value))
        else:
            raise InvalidInputError(field, f"must be a {model.__name__} or its JSON", value)
    except ValidationError as exc:
        raise invalid_input(exc, field) from None
    try:
        verify_report(report)
    except ReportVerificationError as exc:
        raise invalid_value(exc, field) from None
    return report


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

    Both reports are re-parsed and verified (:func:`parse_report`), then checked in order:
    owner, exact scope set, ``results`` surface, both positive decisions, the holdout naming the
    proposal's ``input_checksum``, multiplier agreement, the baseline rule (a non-neutral
    holdout baseline needs ``baseline_profile_id``, an existing profile of this owner and scope
    set whose multipliers the baseline arm used), both attestations (made by this pack's secret
    over this exact content), and disjointness of the holdout's groups from the proposal's.
    Creation never checks applicability and never activates.

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
