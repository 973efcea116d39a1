"""Memory management routes: list, get, update (supersede) and delete the owner's memories.

REST conventions: a list is ``{items, next_cursor}``, a delete is 204, and another owner's id is
a 404 exactly like a missing one. Each route binds the owner, calls one ``MemoryClient`` method
and renders its model; errors are mapped once, in ``prme.http.app``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Query, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, StrictBool, StrictFloat, StrictInt

from prme.errors import NotFoundError
from prme.http.auth import Auth
from prme.http.render import Client, found, render
from prme.http.schemas import Body
from prme.models.enums import EpistemicType, NodeType, Scope, SourceType
from prme.models.memory import MemoryRecord

router = APIRouter(prefix="/v1", tags=["memories"])

UserQuery = Annotated[
    str | None,
    Query(description="The owner; omit it when a bearer key binds the owner."),
]


class MemoryPage(BaseModel):
    """One page of the owner's memories, ordered by id."""

    items: list[MemoryRecord] = Field(description="The memories of this page, by id.")
    next_cursor: str | None = Field(
        description="Pass as ``cursor`` for the next page; null when this page was the last."
    )


class MemoryUpdateRequest(Body):
    """``PATCH /v1/memories/{id}`` → ``MemoryClient.update``: only the fields sent change; a
    new version supersedes the old one (which keeps its content, with ``valid_to`` = now)."""

    user_id: str | None = Field(default=None, description="The owner, unless a key binds it.")
    content: str | None = Field(default=None, description="The new text of the memory.")
    scope: Scope | None = Field(default=None, description="The new version's scope.")
    node_type: NodeType | None = Field(default=None, description="The new version's node type.")
    session_id: str | None = Field(default=None, description="The session it came from.")
    role: str | None = Field(default=None, description="Who said it: user, assistant, tool.")
    metadata: dict[str, Any] | None = Field(default=None, description="A JSON object.")
    confidence: StrictFloat | None = Field(default=None, description="Confidence in [0, 1].")
    salience: StrictFloat | None = Field(default=None, description="Salience in [0, 1].")
    epistemic_type: EpistemicType | None = Field(default=None, description="How it is known.")
    source_type: SourceType | None = Field(default=None, description="Where it came from.")
    event_time: datetime | None = Field(default=None, description="When it happened (with TZ).")
    valid_to: datetime | None = Field(default=None, description="When it stops being true.")
    pinned: StrictBool | None = Field(default=None, description="Always a retrieval candidate.")
    ttl_days: StrictInt | None = Field(default=None, description="Days until it expires.")


@router.get("/memories", response_model=MemoryPage)
def list_memories(
    identity: Auth,
    client: Client,
    user_id: UserQuery = None,
    scope: Annotated[
        list[Scope] | None, Query(description="Only these scopes (repeat); omit for all.")
    ] = None,
    limit: Annotated[int, Query(description="Page size, 1 to 1000.")] = 100,
    cursor: Annotated[
        UUID | None, Query(description="``next_cursor`` of the previous page.")
    ] = None,
) -> JSONResponse:
    """The owner's memories by id, ``limit`` at a time (expired ones marked ``expired``)."""
    owner = identity.owner(user_id)
    items = client.list(user_id=owner, scope=scope, limit=limit, after_id=cursor)
    next_cursor = str(items[-1].id) if items and len(items) == limit else None
    return render(MemoryPage(items=items, next_cursor=next_cursor))


@router.get("/memories/{node_id}", response_model=MemoryRecord)
def get_memory(
    node_id: UUID, identity: Auth, client: Client, user_id: UserQuery = None
) -> JSONResponse:
    """One of the owner's memories (404 when missing or another owner's)."""
    owner = identity.owner(user_id)
    return found(client.get(node_id, user_id=owner), "Memory", node_id)


@router.patch("/memories/{node_id}", response_model=MemoryRecord)
def update_memory(
    node_id: UUID, body: MemoryUpdateRequest, identity: Auth, client: Client
) -> JSONResponse:
    """Supersede the memory with a new version (returned; ``supersedes`` names the old id)."""
    owner = identity.owner(body.user_id)
    return render(client.update(node_id, user_id=owner, **body.fields()))


@router.delete("/memories/{node_id}", status_code=204, response_class=Response)
def delete_memory(
    node_id: UUID, identity: Auth, client: Client, user_id: UserQuery = None
) -> Response:
    """Delete the owner's memory: 204, or 404 when missing or another owner's."""
    owner = identity.owner(user_id)
    if not client.delete(node_id, user_id=owner):
        raise NotFoundError("Memory", node_id)
    return Response(status_code=204)
