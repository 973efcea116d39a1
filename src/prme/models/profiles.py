"""Ranking profiles (immutable, evidence embedded) and the transitions of the activation pointer.

A profile is created once from a passing gate-1 proposal and a passing gate-2 holdout and never
changes. Which profile a (owner, exact scope set) uses is derived from append-only
:class:`RankingProfileState` transitions; retrieval reads only the compact
:class:`RankingProfileApplication` embedded in the latest one.
"""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from pydantic import model_validator

from prme.canonical import checksum
from prme.models.base import Frozen, NonBlankStr, Sha256Hex, UTCDateTime
from prme.models.enums import Scope
from prme.models.holdout import FullRetrievalEvaluation
from prme.models.learning import LearningEvaluation
from prme.models.scope import ScopeKey, scope_set_key
from prme.models.scoring import RankingMultipliers, ScoringWeights

TransitionAction = Literal["activate", "deactivate", "rollback"]

OWNER = "Ranking profile evidence must belong to its owner"
SCOPES = "Ranking profile evidence must match its scopes"
SURFACE = "Ranking profile evidence must match its surface"
POSITIVE_PROPOSAL = "Ranking profile requires a positive proposal evaluation"
POSITIVE_HOLDOUT = "Ranking profile requires a positive full-retrieval holdout"
IDENTIFY_PROPOSAL = "Ranking profile holdout does not identify its proposal"
AGREE_MULTIPLIERS = "Ranking profile evidence does not agree on multipliers"
NEEDS_BASELINE = "A non-unity holdout baseline requires baseline_profile_id"


def _require_scope_key(scopes: ScopeKey, what: str) -> None:
    if scopes is not None and scope_set_key(scopes) != scopes:
        raise ValueError(f"{what} scopes must be a non-empty, sorted, unique scope set")


def evidence_problem(
    *,
    user_id: str,
    proposal: LearningEvaluation,
    holdout: FullRetrievalEvaluation,
    baseline_profile_id: UUID | None,
) -> tuple[str, str] | None:
    """The first way the two reports fail to support one profile, as ``(field, message)``.

    The rules, in order (reference §G.1 step 4): both reports belong to ``user_id``; they cover
    the same normalized scope set; both are ``results``-surface; the proposal is
    ``improved_on_observed_candidates`` and the holdout ``improved_full_retrieval``; the holdout
    names the proposal's ``input_checksum``; the candidate multipliers are the proposal's; and a
    holdout baseline other than neutral names ``baseline_profile_id``. None when all hold.
    """
    if proposal.user_id != user_id:
        return "proposal.user_id", OWNER
    if holdout.user_id != user_id:
        return "holdout.user_id", OWNER
    if proposal.scopes != holdout.scopes:
        return "holdout.scopes", SCOPES
    if proposal.surface != "results":
        return "proposal.surface", SURFACE
    if holdout.surface != "results":
        return "holdout.surface", SURFACE
    if proposal.decision != "improved_on_observed_candidates":
        return "proposal.decision", POSITIVE_PROPOSAL
    if holdout.decision != "improved_full_retrieval":
        return "holdout.decision", POSITIVE_HOLDOUT
    if holdout.proposal_input_checksum != proposal.input_checksum:
        return "holdout.proposal_input_checksum", IDENTIFY_PROPOSAL
    if holdout.candidate_multipliers != proposal.multipliers:
        return "holdout.candidate_multipliers", AGREE_MULTIPLIERS
    if baseline_profile_id is None and not holdout.baseline_multipliers.is_neutral:
        return "baseline_profile_id", NEEDS_BASELINE
    return None


class RankingProfileApplication(Frozen):
    """What retrieval needs to apply a profile: its multipliers and the conditions it was proven
    under (the holdout's feature identity and base scoring)."""

    schema_version: Literal[1] = 1
    profile_id: UUID
    multipliers: RankingMultipliers
    feature_identity_sha256: Sha256Hex
    base_scoring: ScoringWeights


class RankingProfile(Frozen):
    """An immutable ranking profile for one owner and one exact scope set, with its evidence.

    ``multipliers`` are the holdout's candidate multipliers (equal to the proposal's);
    ``baseline_profile_id`` names the profile that was active when the holdout ran (None: base
    scoring). The evidence rules of :func:`evidence_problem` are re-checked on every parse; the
    embedded reports are data, verified where a stored profile is read
    (``services.records.parse_profile``) and where reports are received (``parse_report``).
    """

    schema_version: Literal[1] = 1
    profile_id: UUID
    user_id: NonBlankStr
    scopes: tuple[Scope, ...] | None
    surface: Literal["results"] = "results"
    created_at: UTCDateTime
    baseline_profile_id: UUID | None = None
    multipliers: RankingMultipliers
    proposal: LearningEvaluation
    holdout: FullRetrievalEvaluation

    @model_validator(mode="after")
    def _supported_by_evidence(self) -> RankingProfile:
        _require_scope_key(self.scopes, "Ranking profile")
        if self.baseline_profile_id == self.profile_id:
            raise ValueError("A ranking profile cannot be its own baseline")
        problem = evidence_problem(
            user_id=self.user_id,
            proposal=self.proposal,
            holdout=self.holdout,
            baseline_profile_id=self.baseline_profile_id,
        )
        if problem is not None:
            raise ValueError(problem[1])
        if self.scopes != self.holdout.scopes:
            raise ValueError(SCOPES)
        if self.multipliers != self.holdout.candidate_multipliers:
            raise ValueError(AGREE_MULTIPLIERS)
        return self

    @property
    def checksum(self) -> str:
        """SHA-256 of the profile's canonical JSON."""
        return checksum(self)

    @property
    def application(self) -> RankingProfileApplication:
        return RankingProfileApplication(
            profile_id=self.profile_id,
            multipliers=self.multipliers,
            feature_identity_sha256=self.holdout.feature_identity_sha256,
            base_scoring=self.holdout.base_scoring,
        )

    def matches_evidence(self, other: RankingProfile) -> bool:
        """True when ``other`` is this profile up to ``created_at`` (an idempotent retry)."""
        return self.model_dump(mode="json", exclude={"created_at"}) == other.model_dump(
            mode="json", exclude={"created_at"}
        )


class RankingProfileState(Frozen):
    """One append-only transition of the pointer for (``user_id``, exact ``scopes``).

    ``previous_profile_id`` is what the pointer named before, ``active_profile_id`` what it names
    after (None: base scoring); ``application`` is the active profile's compact application.
    """

    schema_version: Literal[1] = 1
    change_id: UUID
    user_id: NonBlankStr
    scopes: tuple[Scope, ...] | None
    action: TransitionAction
    previous_profile_id: UUID | None
    active_profile_id: UUID | None
    application: RankingProfileApplication | None = None
    changed_at: UTCDateTime

    @model_validator(mode="after")
    def _valid_transition(self) -> RankingProfileState:
        _require_scope_key(self.scopes, "Ranking profile state")
        if self.action == "activate" and self.active_profile_id is None:
            raise ValueError("Activation requires a profile")
        if self.action == "deactivate" and self.active_profile_id is not None:
            raise ValueError("Deactivation must restore baseline scoring")
        if (self.application is None) != (self.active_profile_id is None):
            raise ValueError("A transition carries an application exactly when a profile is active")
        if self.application is not None and self.application.profile_id != self.active_profile_id:
            raise ValueError("The transition's application must name its active profile")
        if self.previous_profile_id == self.active_profile_id:
            raise ValueError("Ranking profile transitions cannot be no-ops")
        return self

    @property
    def checksum(self) -> str:
        """SHA-256 of the transition's canonical JSON."""
        return checksum(self)


def inapplicable_reason(
    base: ScoringWeights, feature_identity_sha256: str, application: RankingProfileApplication
) -> Literal["rank_fusion_scoring", "feature_identity_mismatch", "base_scoring_mismatch"] | None:
    """Why ``application`` cannot adjust scoring under ``base`` and this feature identity, or None.

    Checked in this order: ``base`` must use the weighted formula (multipliers reweight its
    additive weights); the running feature identity must be the holdout's; ``base`` must equal the
    holdout's base scoring (compared by canonical checksum).
    """
    if base.fusion != "weighted":
        return "rank_fusion_scoring"
    if application.feature_identity_sha256 != feature_identity_sha256:
        return "feature_identity_mismatch"
    if base != application.base_scoring and checksum(base) != checksum(application.base_scoring):
        return "base_scoring_mismatch"
    return None


class RankingProfileStatus(Frozen):
    """A profile, whether its own pointer names it now, and that pointer's latest transition."""

    profile: RankingProfile
    active: bool
    latest_change: RankingProfileState | None
