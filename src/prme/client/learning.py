"""The learning half of :class:`~prme.client.MemoryClient`: gate 1, gate 2, ranking profiles
and the activation pointer (``MemoryClient`` inherits these methods from
:class:`LearningMethods`; use them through a ``MemoryClient``)."""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from prme.engine import Engine
from prme.models.holdout import (
    FullRetrievalEvaluation,
    FullRetrievalEvaluationConfig,
    FullRetrievalTrial,
)
from prme.models.learning import LearningConfig, LearningEvaluation
from prme.models.profiles import (
    RankingProfile,
    RankingProfileState,
    RankingProfileStatus,
)
from prme.models.scope import ScopeInput
from prme.models.scoring import RankingMultipliers
from prme.services import holdout as gate2_service
from prme.services import learning as gate1_service
from prme.services import profiles as profile_service
from prme.validation import require_owner


class LearningMethods:
    """MemoryClient's methods over the learning gates, ranking profiles and the activation
    pointer; they act on the client's open pack (:attr:`MemoryClient.engine`)."""

    if TYPE_CHECKING:

        @property
        def engine(self) -> Engine: ...

    # ---- learning gate 1 (services/learning.py) ---------------------------------------
    def evaluate_learning(
        self,
        *,
        user_id: str,
        scopes: ScopeInput = None,
        surface: str = "results",
        config: LearningConfig | Mapping[str, Any] | None = None,
        query_groups: Mapping[Any, str] | None = None,
        max_records: int = 10_000,
    ) -> LearningEvaluation:
        """Gate 1: fit ranking multipliers from the owner's judgments and validate them offline.

        Args:
            user_id: the owner whose judgments and receipts are used.
            scopes: the exact scope set to learn for (None = unfiltered retrievals only).
            surface: ``"results"`` or ``"context"``.
            config: LearningConfig (seed, split, minimum groups, thresholds, ...).
            query_groups: ``{request_id: name}`` to merge paraphrased queries into one group.
            max_records: fail (rather than truncate) above this many judgments, 1–100000.

        Returns the attested report, also persisted under its ``input_checksum``. It never
        changes retrieval.

        Raises:
            InvalidInputError: invalid arguments or evidence, naming the field.
            IntegrityError: stored judgments or receipts fail verification.
        """
        return gate1_service.evaluate_learning(
            self.engine,
            user_id=user_id,
            scopes=scopes,
            surface=surface,
            config=config,
            query_groups=query_groups,
            max_records=max_records,
        )

    def get_learning_evaluation(
        self, input_checksum: str, *, user_id: str
    ) -> LearningEvaluation | None:
        """The owner's persisted gate-1 report with this ``input_checksum``, or None.

        Raises:
            InvalidInputError: ``input_checksum`` is not a SHA-256 hex digest.
        """
        return gate1_service.get_learning_evaluation(self.engine, input_checksum, user_id=user_id)

    # ---- learning gate 2 (services/holdout.py) ----------------------------------------
    def evaluate_full_retrieval(
        self,
        trials: Sequence[FullRetrievalTrial | Mapping[str, Any]],
        *,
        user_id: str,
        scopes: ScopeInput,
        proposal_input_checksum: str,
        memory_artifact_sha256: str,
        candidate_multipliers: RankingMultipliers | Mapping[str, Any],
        baseline_multipliers: RankingMultipliers | Mapping[str, Any] | None = None,
        config: FullRetrievalEvaluationConfig | Mapping[str, Any] | None = None,
    ) -> FullRetrievalEvaluation:
        """Gate 2: compare paired baseline/candidate retrievals of a fixed holdout.

        Loads both saved receipts of every trial, checks that the arms differ only in their
        multipliers and ran on one frozen pack (same ``pack_id`` and content write sequence),
        that the holdout is disjoint from the proposal's groups when that report is in this
        pack, scores recall/NDCG/MRR against the complete relevant sets, and persists the
        attested report (read it back with :meth:`get_full_retrieval_evaluation`).

        Args:
            trials: 1–10000 FullRetrievalTrial; each receipt may enter only one trial.
            user_id: the owner of every receipt.
            scopes: the exact scope set the retrievals used (None = unfiltered).
            proposal_input_checksum: the gate-1 report's ``input_checksum``.
            memory_artifact_sha256: your SHA-256 of the frozen fixture (``pack_digest()`` works).
            candidate_multipliers: the multipliers every candidate arm applied.
            baseline_multipliers: the multipliers every baseline arm applied (None = neutral).
            config: FullRetrievalEvaluationConfig (k, minimum groups, bootstrap, thresholds).

        Raises:
            InvalidInputError: any gate-2 rule, naming the field that differs.
        """
        return gate2_service.evaluate(
            self.engine,
            trials,
            user_id=user_id,
            scopes=scopes,
            proposal_input_checksum=proposal_input_checksum,
            memory_artifact_sha256=memory_artifact_sha256,
            candidate_multipliers=candidate_multipliers,
            baseline_multipliers=baseline_multipliers,
            config=config,
        )

    def get_full_retrieval_evaluation(
        self, input_checksum: str, *, user_id: str
    ) -> FullRetrievalEvaluation | None:
        """The owner's stored gate-2 report with this ``input_checksum``, or None.

        Raises:
            InvalidInputError: a malformed checksum or owner.
            IntegrityError: the stored report fails its checksum or attestation.
        """
        return gate2_service.get_evaluation(self.engine, input_checksum, user_id=user_id)

    def run_full_retrieval_holdout(
        self,
        queries: Sequence[Any],
        *,
        user_id: str,
        scopes: ScopeInput,
        proposal: gate2_service.Proposal,
        reference_time: datetime,
        limit: int = 20,
        baseline_multipliers: RankingMultipliers | Mapping[str, Any] | None = None,
        memory_artifact_sha256: str | None = None,
        config: FullRetrievalEvaluationConfig | Mapping[str, Any] | None = None,
        **retrieve_kwargs: Any,
    ) -> FullRetrievalEvaluation:
        """Run both arms of every ``(group_id, query, relevant_ids)`` and evaluate them (gate 2).

        The baseline arm uses ``baseline_multipliers`` (or nothing explicit, so an active profile
        applies), the candidate arm ``proposal.multipliers``; everything else is identical
        (``include_cross_scope`` defaults to False). ``proposal`` is the gate-1 report;
        ``memory_artifact_sha256`` defaults to :meth:`pack_digest`.

        Raises:
            InvalidInputError: a malformed query, a retrieval error, or any gate-2 rule.
        """
        return gate2_service.run_holdout(
            self.engine,
            queries,
            user_id=user_id,
            scopes=scopes,
            proposal=proposal,
            reference_time=reference_time,
            limit=limit,
            baseline_multipliers=baseline_multipliers,
            memory_artifact_sha256=memory_artifact_sha256,
            config=config,
            **retrieve_kwargs,
        )

    # ---- ranking profiles and the activation pointer (services/profiles.py) -----------
    def create_ranking_profile(
        self,
        proposal: LearningEvaluation | Mapping[str, Any] | None = None,
        holdout: FullRetrievalEvaluation | Mapping[str, Any] | None = None,
        *,
        user_id: str,
        profile_id: object = None,
        baseline_profile_id: object = None,
        proposal_input_checksum: str | None = None,
        holdout_input_checksum: str | None = None,
    ) -> RankingProfile:
        """Create an immutable ranking profile from a passing proposal and a passing holdout.

        Each report is given whole or by its ``input_checksum`` (the pack loads the owner's
        stored, verified report), exactly one of the two.

        Args:
            proposal: the gate-1 report (``evaluate_learning``), a model or its JSON dict.
            holdout: the gate-2 report (``evaluate_full_retrieval``) for that proposal.
            user_id: the owner; both reports must belong to it.
            profile_id: a UUID (or its string) making creation idempotent; new by default.
            baseline_profile_id: the profile that was active when the holdout ran (required
                when the holdout's baseline multipliers are not neutral).
            proposal_input_checksum: the stored gate-1 report's ``input_checksum``, instead of
                ``proposal``.
            holdout_input_checksum: the stored gate-2 report's ``input_checksum``, instead of
                ``holdout``.

        Raises:
            InvalidInputError: owner, scopes, surface, decisions, proposal checksum, multipliers,
                baseline, attestation (reports made by another pack, hand-built or edited) or
                overlapping holdout groups; a ``profile_id`` naming different evidence; both or
                neither of a report and its checksum.
            NotFoundError: no stored report of this owner has the given checksum (naming
                ``proposal_input_checksum`` or ``holdout_input_checksum``).
        """
        owner = require_owner(user_id)
        prop = profile_service.chosen_report(
            LearningEvaluation,
            "proposal",
            proposal_input_checksum,
            proposal,
            lambda checksum: self.get_learning_evaluation(checksum, user_id=owner),
        )
        hold = profile_service.chosen_report(
            FullRetrievalEvaluation,
            "holdout",
            holdout_input_checksum,
            holdout,
            lambda checksum: self.get_full_retrieval_evaluation(checksum, user_id=owner),
        )
        return profile_service.create_from_reports(
            self.engine,
            prop,
            hold,
            user_id=owner,
            profile_id=profile_id,
            baseline_profile_id=baseline_profile_id,
        )

    def activate_ranking_profile(
        self, profile_id: object, *, user_id: str, change_id: object = None
    ) -> RankingProfileState:
        """Make a profile active for its owner and exact scope set (one append-only transition).

        Args:
            profile_id: the profile (UUID or string).
            user_id: its owner.
            change_id: a stable UUID to retry a lost acknowledgement safely.

        Raises:
            NotFoundError: unknown or foreign profile.
            InvalidInputError: inapplicable under the running engine (``rank_fusion_scoring``,
                ``feature_identity_mismatch``, ``base_scoring_mismatch``); a reused change_id.
            StaleRankingProfileError: the pointer is not the profile's evaluated baseline, or it
                moved concurrently; inspect the current state and retry deliberately.
        """
        return profile_service.activate_ranking_profile(
            self.engine, profile_id, user_id=user_id, change_id=change_id
        )

    def deactivate_ranking_profile(
        self, *, user_id: str, scopes: ScopeInput = None, change_id: object = None
    ) -> RankingProfileState | None:
        """Return the exact scope set (None: unfiltered) to base scoring.

        Returns None and writes nothing when no profile is active.

        Raises:
            InvalidInputError: empty or invalid ``scopes``; a reused change_id.
            StaleRankingProfileError: the pointer moved concurrently.
        """
        return profile_service.deactivate_ranking_profile(
            self.engine, user_id=user_id, scopes=scopes, change_id=change_id
        )

    def rollback_ranking_profile(
        self,
        profile_id: object,
        *,
        user_id: str,
        scopes: ScopeInput = None,
        change_id: object = None,
    ) -> RankingProfileState:
        """Point the exact scope set back at a profile it had active before, or None (base).

        Raises:
            NotFoundError: unknown or foreign profile.
            InvalidInputError: a profile this pointer never had active ("unavailable for these
                scopes"), an inapplicable one, a no-op rollback, a reused change_id, bad scopes.
            StaleRankingProfileError: the pointer moved concurrently.
        """
        return profile_service.rollback_ranking_profile(
            self.engine, profile_id, user_id=user_id, scopes=scopes, change_id=change_id
        )

    def get_ranking_profile(self, profile_id: object, *, user_id: str) -> RankingProfile | None:
        """The owner's profile with its evidence, or None (unknown and foreign ids look alike).

        Raises:
            IntegrityError: the stored record failed verification.
        """
        return profile_service.get_ranking_profile(self.engine, profile_id, user_id=user_id)

    def list_ranking_profiles(
        self, *, user_id: str, limit: int = 100, after_id: object = None
    ) -> builtins.list[RankingProfile]:
        """The owner's profiles (all scope sets), newest first; ``after_id`` = last id seen.

        Raises:
            InvalidInputError: ``limit`` outside 1–1000.
            NotFoundError: ``after_id`` is not one of the owner's profiles.
        """
        return profile_service.list_ranking_profiles(
            self.engine, user_id=user_id, limit=limit, after_id=after_id
        )

    def get_active_ranking_profile(
        self, *, user_id: str, scopes: ScopeInput = None
    ) -> RankingProfile | None:
        """The profile active for the exact scope set (None: unfiltered), or None.

        Raises:
            InvalidInputError: empty or invalid ``scopes``.
            IntegrityError: the pointer or its profile failed verification.
        """
        return profile_service.get_active_ranking_profile(
            self.engine, user_id=user_id, scopes=scopes
        )

    def get_ranking_profile_status(
        self, profile_id: object, *, user_id: str
    ) -> RankingProfileStatus | None:
        """``{profile, active, latest_change}`` for the profile's own scope set, or None."""
        return profile_service.get_ranking_profile_status(self.engine, profile_id, user_id=user_id)

    def list_ranking_profile_history(
        self,
        *,
        user_id: str,
        scopes: ScopeInput = None,
        limit: int = 100,
        after_change_id: object = None,
    ) -> builtins.list[RankingProfileState]:
        """The exact scope set's transitions, newest first; page on with ``after_change_id``
        = the ``change_id`` of the last transition seen (an empty page: no older ones).

        Raises:
            InvalidInputError: empty or invalid ``scopes``; ``limit`` outside 1–1000.
            NotFoundError: ``after_change_id`` is not a transition of this pointer.
        """
        return profile_service.list_ranking_profile_history(
            self.engine,
            user_id=user_id,
            scopes=scopes,
            limit=limit,
            after_change_id=after_change_id,
        )
