"""Response rendering: the engine's models as ``model_dump(mode="json")``, the same canonical
dump the CLI's ``--json`` prints."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from prme.client import MemoryClient
from prme.errors import NotFoundError


def client_of(request: Request) -> MemoryClient:
    """FastAPI dependency: the MemoryClient the app was created with."""
    client: MemoryClient = request.app.state.client
    return client


Client = Annotated[MemoryClient, Depends(client_of)]


def render(value: BaseModel | Sequence[BaseModel] | dict[str, Any] | None) -> JSONResponse:
    """A model, a list of models, a plain JSON object or ``null`` as a 200 JSON response."""
    if isinstance(value, BaseModel):
        return JSONResponse(value.model_dump(mode="json"))
    if isinstance(value, dict) or value is None:
        return JSONResponse(value)
    return JSONResponse([item.model_dump(mode="json") for item in value])


def found(value: BaseModel | None, kind: str, id: object) -> JSONResponse:
    """Render ``value``, or 404 (NotFoundError) when the owner has no such object."""
    if value is None:
        raise NotFoundError(kind, id)
    return render(value)
