"""Learning routes: both evidence gates, ranking profiles and the activation pointer.

Scopes in query strings repeat (``?scopes=project&scopes=personal``); omitted means the
unfiltered scope set, which has its own pointer. ``/profiles/active`` and ``/profiles/history``
are declared before ``/profiles/{profile_id}`` so they are not taken for ids.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from prme.http.auth import Auth
from prme.http.render import NEXT_PAGE, Client, found, page, render
from prme.http.schemas import (
    FullRetrievalEvaluationRequest,
    LearningEvaluationRequest,
    RankingProfileChangeRequest,
    RankingProfileCreateRequest,
    RankingProfileRollbackRequest,
    RankingProfileScopeChangeRequest,
)
from prme.models.enums import Scope
from prme.models.holdout import FullRetrievalEvaluation
from prme.models.learning import LearningEvaluation
from prme.models.profiles import RankingProfile, RankingProfileState, RankingProfileStatus

router = APIRouter(prefix="/v1/learning", tags=["learning"])

Scopes = Annotated[list[Scope] | None, Query(description="repeat for several scopes")]


@router.post("/evaluate", response_model=LearningEvaluation)
def evaluate_learning(
    body: LearningEvaluationRequest, identity: Auth, client: Client
) -> JSONResponse:
    """Gate 1: fit multipliers on judged candidates and validate them on held-out groups."""
    report = client.evaluate_learning(
        user_id=identity.owner(body.user_id),
        scopes=body.scopes,
        surface=body.surface,
        config=body.config,
        query_groups=body.query_groups,
        max_records=body.max_records,
    )
    return render(report)


@router.post("/evaluate-full-retrieval", response_model=FullRetrievalEvaluation)
def evaluate_full_retrieval(
    body: FullRetrievalEvaluationRequest, identity: Auth, client: Client
) -> JSONResponse:
    """Gate 2: compare paired baseline/candidate retrievals of a fixed holdout."""
    report = client.evaluate_full_retrieval(
        body.trials,
        user_id=identity.owner(body.user_id),
        scopes=body.scopes,
        proposal_input_checksum=body.proposal_input_checksum,
        memory_artifact_sha256=body.memory_artifact_sha256,
        candidate_multipliers=body.candidate_multipliers,
        baseline_multipliers=body.baseline_multipliers,
        config=body.config,
    )
    return render(report)


@router.post("/profiles", response_model=RankingProfile)
def create_ranking_profile(
    body: RankingProfileCreateRequest, identity: Auth, client: Client
) -> JSONResponse:
    """Persist an immutable profile from a passing proposal and a passing holdout, each given by
    its ``input_checksum`` (loaded from the pack; 404 when the owner has no such report) or
    whole."""
    profile = client.create_ranking_profile(
        body.proposal,
        body.holdout,
        user_id=identity.owner(body.user_id),
        profile_id=body.profile_id,
        baseline_profile_id=body.baseline_profile_id,
        proposal_input_checksum=body.proposal_input_checksum,
        holdout_input_checksum=body.holdout_input_checksum,
    )
    return render(profile)


@router.get("/profiles", response_model=list[RankingProfile], responses=NEXT_PAGE)
def list_ranking_profiles(
    request: Request,
    identity: Auth,
    client: Client,
    user_id: str | None = None,
    limit: int = 100,
    after_id: UUID | None = None,
) -> JSONResponse:
    """The owner's profiles across scopes, ordered by profile id, paged with ``after_id``
    (``Link``)."""
    owner = identity.owner(user_id)
    profiles = client.list_ranking_profiles(user_id=owner, limit=limit, after_id=after_id)
    return page(profiles, request, limit, "after_id", lambda p: p.profile_id)


@router.get("/profiles/active", response_model=RankingProfile | None)
def get_active_ranking_profile(
    identity: Auth, client: Client, user_id: str | None = None, scopes: Scopes = None
) -> JSONResponse:
    """The profile behind the pointer of exactly ``scopes``, or null."""
    owner = identity.owner(user_id)
    return render(client.get_active_ranking_profile(user_id=owner, scopes=scopes))


@router.get("/profiles/history", response_model=list[RankingProfileState], responses=NEXT_PAGE)
def list_ranking_profile_history(
    request: Request,
    identity: Auth,
    client: Client,
    user_id: str | None = None,
    scopes: Scopes = None,
    limit: int = 100,
    after_change_id: UUID | None = None,
) -> JSONResponse:
    """Transitions of the pointer of exactly ``scopes``, newest first; page on with
    ``after_change_id`` = the last ``change_id`` seen (``Link``)."""
    owner = identity.owner(user_id)
    history = client.list_ranking_profile_history(
        user_id=owner, scopes=scopes, limit=limit, after_change_id=after_change_id
    )
    return page(history, request, limit, "after_change_id", lambda s: s.change_id)


@router.get("/profiles/{profile_id}", response_model=RankingProfileStatus)
def get_ranking_profile_status(
    profile_id: UUID, identity: Auth, client: Client, user_id: str | None = None
) -> JSONResponse:
    """``{profile, active, latest_change}`` (404 when missing or another owner's)."""
    owner = identity.owner(user_id)
    status = client.get_ranking_profile_status(profile_id, user_id=owner)
    return found(status, "Ranking profile", profile_id)


@router.post("/profiles/deactivate", response_model=RankingProfileState | None)
def deactivate_ranking_profile(
    body: RankingProfileScopeChangeRequest, identity: Auth, client: Client
) -> JSONResponse:
    """Return the pointer of ``scopes`` to base scoring (null when nothing was active)."""
    state = client.deactivate_ranking_profile(
        user_id=identity.owner(body.user_id), scopes=body.scopes, change_id=body.change_id
    )
    return render(state)


@router.post("/profiles/rollback", response_model=RankingProfileState)
def rollback_ranking_profile(
    body: RankingProfileRollbackRequest, identity: Auth, client: Client
) -> JSONResponse:
    """Point ``scopes`` back at an earlier profile, or at base scoring (``profile_id`` null)."""
    state = client.rollback_ranking_profile(
        body.profile_id,
        user_id=identity.owner(body.user_id),
        scopes=body.scopes,
        change_id=body.change_id,
    )
    return render(state)


@router.post("/profiles/{profile_id}/activate", response_model=RankingProfileState)
def activate_ranking_profile(
    profile_id: UUID, body: RankingProfileChangeRequest, identity: Auth, client: Client
) -> JSONResponse:
    """Activate a profile for its scopes (409 when the pointer is not its evaluated baseline)."""
    owner = identity.owner(body.user_id)
    state = client.activate_ranking_profile(profile_id, user_id=owner, change_id=body.change_id)
    return render(state)
