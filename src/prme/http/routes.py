"""Memory routes: health, store, retrieve, receipts and relevance judgments.

Each route parses its input, binds the owner, calls one public ``MemoryClient`` method and
renders the engine's model. Errors are mapped once, in ``prme.http.app``.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from uuid import UUID

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from prme.http.auth import Auth
from prme.http.render import NEXT_PAGE, Client, found, page, render
from prme.http.schemas import Body, RelevanceRequest, RetrieveRequest, StoreRequest
from prme.models.memory import StoreReceipt
from prme.models.receipt import RetrievalReceipt
from prme.models.relevance import RecordedRelevance, RelevanceRecord
from prme.models.retrieval import OwnerIndexReport, RetrievalResponse

router = APIRouter(prefix="/v1")


def _version() -> str:
    try:
        return version("prme")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


class Health(BaseModel):
    """The service is up and the pack is open."""

    status: str = Field(description="ok.")
    version: str = Field(description="The prme version.")
    fusion: str = Field(description="The configured scoring formula: weighted or rrf.")


@router.get("/health", response_model=Health, tags=["service"])
def health(client: Client) -> JSONResponse:
    """Liveness without a credential: 200 while the pack is open, 503 once it is closed."""
    try:
        fusion = client.engine.config.scoring.fusion
    except RuntimeError:
        return JSONResponse({"status": "unavailable"}, status_code=503)
    return render({"status": "ok", "version": _version(), "fusion": fusion})


@router.post("/store", response_model=StoreReceipt, tags=["memories"])
def store(body: StoreRequest, identity: Auth, client: Client) -> JSONResponse:
    """Store one memory → ``{event_id, node_id, processing_status}``."""
    owner = identity.owner(body.user_id)
    return render(client.store_with_receipt(body.content, user_id=owner, **body.fields("content")))


@router.post("/retrieve", response_model=RetrievalResponse, tags=["retrieval"])
def retrieve(body: RetrieveRequest, identity: Auth, client: Client) -> JSONResponse:
    """Hybrid retrieval; the response's ``metadata.request_id`` names the saved receipt."""
    owner = identity.owner(body.user_id)
    return render(client.retrieve(user_id=owner, **body.fields()))


@router.post("/index", response_model=OwnerIndexReport, tags=["retrieval"])
def build_index(body: Body, identity: Auth, client: Client) -> JSONResponse:
    """Prepare the owner's index now instead of in its next retrieval (``prme pack index``):
    after a bulk load; returns once it is built and saved. Results are the same either way."""
    owner = identity.owner(body.user_id)
    return render(client.build_index(user_id=owner))


@router.get("/retrievals/{request_id}", response_model=RetrievalReceipt, tags=["retrieval"])
def get_retrieval_receipt(
    request_id: UUID, identity: Auth, client: Client, user_id: str | None = None
) -> JSONResponse:
    """The owner's retrieval receipt (404 when missing or another owner's)."""
    owner = identity.owner(user_id)
    receipt = client.get_retrieval_receipt(request_id, user_id=owner)
    return found(receipt, "Retrieval receipt", request_id)


@router.post("/relevance", response_model=RecordedRelevance, tags=["relevance"])
def record_relevance(body: RelevanceRequest, identity: Auth, client: Client) -> JSONResponse:
    """Judge returned candidates of the owner's retrieval (404 without that receipt). An
    identical retry with the same ``feedback_id`` returns the original record."""
    owner = identity.owner(body.user_id)
    return render(client.record_relevance(body.submission(), user_id=owner))


@router.get(
    "/relevance", response_model=list[RelevanceRecord], responses=NEXT_PAGE, tags=["relevance"]
)
def list_relevance(
    request: Request,
    identity: Auth,
    client: Client,
    user_id: str | None = None,
    limit: int = 100,
    after_id: UUID | None = None,
) -> JSONResponse:
    """The owner's judgments ordered by feedback id, paged with ``after_id`` (``Link``)."""
    owner = identity.owner(user_id)
    records = client.list_relevance(user_id=owner, limit=limit, after_id=after_id)
    return page(records, request, limit, "after_id", lambda r: r.feedback_id)


@router.get("/relevance/{feedback_id}", response_model=RelevanceRecord, tags=["relevance"])
def get_relevance(
    feedback_id: UUID, identity: Auth, client: Client, user_id: str | None = None
) -> JSONResponse:
    """One of the owner's judgments (404 when missing or another owner's)."""
    owner = identity.owner(user_id)
    return found(client.get_relevance(feedback_id, user_id=owner), "Relevance record", feedback_id)
