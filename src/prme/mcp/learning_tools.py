"""The MCP tools over the learning gates and ranking profiles: :class:`MemoryTools` is every
tool, the record tools of :mod:`prme.mcp.tools` and these (learning reports are named by their
input checksums; the server loads the reports it persisted)."""

from __future__ import annotations

from typing import (
    Annotated,
    Any,
    Literal,
)
from uuid import UUID

from pydantic import Field, StrictInt

from prme.errors import (
    InvalidInputError,
)
from prme.mcp.tools import (
    Limit,
    RecordTools,
    Scopes,
    UserId,
    tool_errors,
)
from prme.models.base import Sha256Hex
from prme.models.holdout import (
    FullRetrievalEvaluation,
    FullRetrievalEvaluationConfig,
    FullRetrievalTrial,
)
from prme.models.learning import LearningConfig, LearningEvaluation
from prme.models.profiles import RankingProfile, RankingProfileState, RankingProfileStatus
from prme.models.scoring import RankingMultipliers


class MemoryTools(RecordTools):
    """Every tool handler: bind the owner, call one MemoryClient method, return its result."""

    # ------------------------------------------------------------- learning gate 1
    def memory_evaluate_learning(
        self,
        user_id: UserId = None,
        scopes: Scopes = None,
        surface: Literal["results", "context"] = "results",
        config: LearningConfig | None = None,
        query_groups: Annotated[
            dict[str, str] | None,
            Field(description="Request id → group name, to merge paraphrased queries."),
        ] = None,
        max_records: StrictInt = 10_000,
    ) -> LearningEvaluation:
        """Gate 1: fit ranking multipliers from the owner's judgments and validate them on held-out query groups; appends the attested report and changes no ranking."""
        with tool_errors():
            return self.client.evaluate_learning(
                user_id=self.owner(user_id),
                scopes=scopes,
                surface=surface,
                config=config,
                query_groups=query_groups,
                max_records=max_records,
            )

    # ------------------------------------------------------------- learning gate 2
    def memory_evaluate_full_retrieval(
        self,
        trials: list[FullRetrievalTrial],
        proposal_input_checksum: Sha256Hex,
        memory_artifact_sha256: Sha256Hex,
        candidate_multipliers: Annotated[
            RankingMultipliers | None,
            Field(
                description="The multipliers every candidate arm applied; omitted: the proposal's."
            ),
        ] = None,
        user_id: UserId = None,
        scopes: Scopes = None,
        baseline_multipliers: RankingMultipliers | None = None,
        config: FullRetrievalEvaluationConfig | None = None,
    ) -> FullRetrievalEvaluation:
        """Gate 2: evaluate paired baseline/candidate retrievals of a fixed holdout against complete relevance; appends the attested report and changes no ranking."""
        with tool_errors():
            owner = self.owner(user_id)
            if candidate_multipliers is None:
                proposal = self.client.get_learning_evaluation(
                    proposal_input_checksum, user_id=owner
                )
                if proposal is None:
                    raise InvalidInputError(
                        "candidate_multipliers",
                        f"required: the proposal {proposal_input_checksum} is not in this pack",
                    )
                candidate_multipliers = proposal.multipliers
            return self.client.evaluate_full_retrieval(
                trials,
                user_id=owner,
                scopes=scopes,
                proposal_input_checksum=proposal_input_checksum,
                memory_artifact_sha256=memory_artifact_sha256,
                candidate_multipliers=candidate_multipliers,
                baseline_multipliers=baseline_multipliers,
                config=config,
            )

    # ------------------------------------------------- ranking profiles and the pointer
    def memory_create_ranking_profile(
        self,
        proposal_input_checksum: Sha256Hex | None = None,
        holdout_input_checksum: Sha256Hex | None = None,
        proposal: Annotated[
            dict[str, Any] | None,
            Field(description="The whole gate-1 report, only if it is not in this pack."),
        ] = None,
        holdout: Annotated[
            dict[str, Any] | None,
            Field(description="The whole gate-2 report, only if it is not in this pack."),
        ] = None,
        user_id: UserId = None,
        profile_id: Annotated[
            UUID | None, Field(description="A UUID making creation idempotent; new by default.")
        ] = None,
        baseline_profile_id: UUID | None = None,
    ) -> RankingProfile:
        """Create an immutable ranking profile from a passing proposal and holdout (by input_checksum, or whole reports made by another pack); appends the profile and activates nothing."""
        with tool_errors():
            return self.client.create_ranking_profile(
                proposal,
                holdout,
                user_id=self.owner(user_id),
                profile_id=profile_id,
                baseline_profile_id=baseline_profile_id,
                proposal_input_checksum=proposal_input_checksum,
                holdout_input_checksum=holdout_input_checksum,
            )

    def memory_get_ranking_profile(
        self, profile_id: UUID, user_id: UserId = None
    ) -> RankingProfileStatus | None:
        """Return {profile, active, latest_change} for the owner's profile, or null; changes nothing."""
        with tool_errors():
            return self.client.get_ranking_profile_status(profile_id, user_id=self.owner(user_id))

    def memory_list_ranking_profiles(
        self, user_id: UserId = None, limit: Limit = 100, after_id: UUID | None = None
    ) -> list[RankingProfile]:
        """List the owner's ranking profiles with their evidence (page with after_id); changes nothing."""
        with tool_errors():
            return self.client.list_ranking_profiles(
                user_id=self.owner(user_id), limit=limit, after_id=after_id
            )

    def memory_get_active_ranking_profile(
        self, user_id: UserId = None, scopes: Scopes = None
    ) -> RankingProfile | None:
        """Return the profile active for the exact scope set, or null; changes nothing."""
        with tool_errors():
            return self.client.get_active_ranking_profile(
                user_id=self.owner(user_id), scopes=scopes
            )

    def memory_list_ranking_profile_history(
        self,
        user_id: UserId = None,
        scopes: Scopes = None,
        limit: Limit = 100,
        after_change_id: Annotated[
            UUID | None,
            Field(description="The change_id of the last transition seen: the next older page."),
        ] = None,
    ) -> list[RankingProfileState]:
        """List the activation, deactivation and rollback transitions of the exact scope set, newest first (page with after_change_id); changes nothing."""
        with tool_errors():
            return self.client.list_ranking_profile_history(
                user_id=self.owner(user_id),
                scopes=scopes,
                limit=limit,
                after_change_id=after_change_id,
            )

    def memory_activate_ranking_profile(
        self, profile_id: UUID, user_id: UserId = None, change_id: UUID | None = None
    ) -> RankingProfileState:
        """Activate a ranking profile for its owner and exact scope set; appends one transition that changes later retrievals."""
        with tool_errors():
            return self.client.activate_ranking_profile(
                profile_id, user_id=self.owner(user_id), change_id=change_id
            )

    def memory_deactivate_ranking_profile(
        self, user_id: UserId = None, scopes: Scopes = None, change_id: UUID | None = None
    ) -> RankingProfileState | None:
        """Return the exact scope set to base scoring; appends one transition (null and nothing written when no profile is active)."""
        with tool_errors():
            return self.client.deactivate_ranking_profile(
                user_id=self.owner(user_id), scopes=scopes, change_id=change_id
            )

    def memory_rollback_ranking_profile(
        self,
        profile_id: Annotated[
            UUID | None,
            Field(description="A profile this scope set had active before; null = base scoring."),
        ] = None,
        user_id: UserId = None,
        scopes: Scopes = None,
        change_id: UUID | None = None,
    ) -> RankingProfileState:
        """Point the exact scope set back at a previously active profile or base scoring; appends one transition that changes later retrievals."""
        with tool_errors():
            return self.client.rollback_ranking_profile(
                profile_id, user_id=self.owner(user_id), scopes=scopes, change_id=change_id
            )
