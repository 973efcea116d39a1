"""Response rendering: the engine's models as JSON, the values of ``model_dump(mode="json")``
(what the CLI's ``--json`` prints), written by pydantic's own JSON serializer."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from pydantic_core import to_json

from prme.client import MemoryClient
from prme.errors import NotFoundError


def client_of(request: Request) -> MemoryClient:
    """FastAPI dependency: the MemoryClient the app was created with."""
    client: MemoryClient = request.app.state.client
    return client


Client = Annotated[MemoryClient, Depends(client_of)]


class ModelResponse(JSONResponse):
    """A JSON response of a model or a list of models, written by pydantic's serializer (not
    dumped to Python values for the json module to encode: a retrieval's response, 20 results
    and 28 KB, in 0.13 ms, not 0.46)."""

    def render(self, content: Any) -> bytes:
        return to_json(content, by_alias=False)


def render(value: BaseModel | Sequence[BaseModel] | dict[str, Any] | None) -> JSONResponse:
    """A model, a list of models, a plain JSON object or ``null`` as a 200 JSON response."""
    if isinstance(value, dict) or value is None:
        return JSONResponse(value)
    return ModelResponse(value)


ItemT = TypeVar("ItemT", bound=BaseModel)
NEXT_PAGE: dict[int | str, dict[str, Any]] = {
    200: {
        "headers": {
            "Link": {
                "description": 'The next page, as <url>; rel="next", when this page is full.',
                "schema": {"type": "string"},
            }
        }
    }
}


def page(
    items: Sequence[ItemT], request: Request, limit: int, cursor: str, key: Callable[[ItemT], Any]
) -> JSONResponse:
    """A page rendered as the bare list it always was, plus a ``Link: <...>; rel="next"``
    header naming the next page (``cursor`` = the last item's ``key``) when this one is full."""
    response = render(items)
    if items and len(items) >= limit:
        url = request.url.include_query_params(**{cursor: str(key(items[-1]))})
        response.headers["Link"] = f'<{url.path}?{url.query}>; rel="next"'
    return response


def found(value: BaseModel | None, kind: str, id: object) -> JSONResponse:
    """Render ``value``, or 404 (NotFoundError) when the owner has no such object."""
    if value is None:
        raise NotFoundError(kind, id)
    return render(value)
