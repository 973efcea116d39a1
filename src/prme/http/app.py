"""The FastAPI app over one MemoryClient: routes, the body-size limit and the error mapping.

Errors are rendered in one place through ``prme.errors.http_status_for`` and
``public_message``: not found 404, stale pointer 409, invalid input 422 (the message names the
field), owner mismatch 403, missing or wrong key 401, anything unexpected 500 with no internals.

The app documents itself offline: ``/docs`` (Swagger UI) and ``/redoc`` load their scripts and
styles from the app (``/docs/assets``, shipped by ``fastapi-offline``), every property of
``/openapi.json`` has a description (:mod:`prme.glossary`), and every route declares the error
responses it can give with their body model.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel, Field
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from prme.client import MemoryClient
from prme.config import APIConfig
from prme.errors import PRMEError, StorageUnavailableError, http_status_for, public_message
from prme.glossary import describe, description
from prme.http import learning_routes, memory_routes, routes
from prme.http.auth import KeyRing

log = logging.getLogger("prme.http")


def _error_response(request: Request, exc: Exception) -> JSONResponse:
    status = http_status_for(exc)
    if status >= 500:
        log.error(
            "unhandled %s on %s %s",
            type(exc).__name__,
            request.method,
            request.url.path,
            exc_info=exc,
        )
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if isinstance(exc, StorageUnavailableError):  # temporary: the client may retry
        headers = {"Retry-After": str(exc.retry_after)}
    return JSONResponse({"detail": public_message(exc)}, status_code=status, headers=headers)


async def _handle_error(request: Request, exc: Exception) -> JSONResponse:
    return _error_response(request, exc)


class BodySizeLimit:
    """Refuses request bodies over ``max_bytes`` with 413, by Content-Length and by the bytes
    actually streamed (the body is buffered, then replayed to the app)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._refuse(send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message], receive), send)
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body: Message = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, _replay([body], receive), send)

    async def _refuse(self, send: Send) -> None:
        response = JSONResponse(
            {"detail": f"Request body exceeds {self.max_bytes} bytes (api.max_body_bytes)"},
            status_code=413,
        )
        await response({"type": "http"}, _no_receive, send)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay


async def _no_receive() -> Message:  # pragma: no cover - a response never reads the request
    return {"type": "http.disconnect"}


def _json_safe(value: Any) -> Any:
    """Validation details echo the offending input; non-finite floats cannot be JSON, and
    text with lone surrogates cannot be UTF-8 (they are shown escaped, as ``\\ud800``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_json_safe(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


async def _handle_validation(request: Request, exc: Exception) -> JSONResponse:
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    return JSONResponse({"detail": _json_safe(jsonable_encoder(errors))}, status_code=422)


class ErrorBody(BaseModel):
    """An error body: ``detail`` is the message (a 422 names the field, ``"field: message"``),
    or pydantic's list of errors for a body or parameter that does not parse."""

    detail: str | list[dict[str, Any]]


ERRORS: dict[int, str] = {
    401: "Missing or wrong bearer key (only when PRME_API__USER_KEYS is set).",
    403: "user_id names someone other than the owner the key binds.",
    404: "No such object for this owner (another owner's looks the same).",
    409: "Conflict: the activation pointer changed since it was read, or the pack is read-only.",
    413: "Request body over api.max_body_bytes.",
    422: "Invalid input; the detail names the field.",
    503: "Storage temporarily unavailable; retry after Retry-After seconds.",
}
_HEADERS: dict[int, dict[str, Any]] = {
    401: {"WWW-Authenticate": {"description": "Bearer", "schema": {"type": "string"}}},
    503: {
        "Retry-After": {"description": "Seconds to wait", "schema": {"type": "integer"}},
    },
}
# Routes whose body names an object that must exist (the path parameters say so of the rest).
_LOOKS_UP = frozenset(
    {
        ("POST", "/v1/relevance"),
        ("POST", "/v1/learning/profiles/rollback"),
        ("POST", "/v1/learning/profiles"),  # reports by input_checksum
    }
)
# A read-only pack still retrieves (200, receipt_persisted false): no conflict to declare.
_NEVER_CONFLICTS = frozenset({("POST", "/v1/retrieve")})

VALIDATION_RESPONSE: dict[int | str, dict[str, Any]] = {
    422: {"model": ErrorBody, "description": ERRORS[422]}
}


class Unavailable(BaseModel):
    """The health body once the pack is closed."""

    status: str = Field(description="unavailable.")


def _error_codes(method: str, path: str) -> set[int]:
    """The error statuses the route ``method path`` can answer with."""
    if path == "/v1/health":
        return {503}
    codes = {401, 403, 422, 503}
    if method != "GET":
        codes |= {413} | (set() if (method, path) in _NEVER_CONFLICTS else {409})
    if "{" in path or (method, path) in _LOOKS_UP:
        codes.add(404)
    return codes


def _declare_errors(document: dict[str, Any]) -> None:
    """Declare every operation's error responses (description, body model, headers)."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for model in (ErrorBody, Unavailable):
        schemas.setdefault(model.__name__, model.model_json_schema())
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            codes = _error_codes(method.upper(), path)
            responses: dict[str, Any] = operation.setdefault("responses", {})
            for key in [k for k in responses if k >= "400" and int(k) not in codes]:
                del responses[key]  # e.g. the 422 FastAPI adds to a route without input
            model = Unavailable if path == "/v1/health" else ErrorBody
            ref = {"$ref": f"#/components/schemas/{model.__name__}"}
            for status in sorted(codes):
                declared = responses.setdefault(str(status), {})
                declared["description"] = ERRORS[status]
                declared["content"] = {"application/json": {"schema": ref}}
                if status in _HEADERS:
                    declared["headers"] = _HEADERS[status]


def _described_openapi(app: FastAPI) -> dict[str, Any]:
    """``app.openapi()`` with every schema property and parameter described from the glossary."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    document = FastAPI.openapi(app)
    _declare_errors(document)
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        describe(schema, name.split("-")[0])
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                text = description(parameter["name"])
                if "description" not in parameter and text is not None:
                    parameter["description"] = text
    app.openapi_schema = document
    return document


def create_app(client: MemoryClient, config: APIConfig | None = None) -> FastAPI:
    """The HTTP API over ``client`` (OpenAPI at ``/openapi.json``, docs at ``/docs``).

    Args:
        client: an open MemoryClient; routes call its public methods from FastAPI's threadpool.
        config: API settings (user keys, body limit); defaults to ``client.config.api``.

    Raises:
        InvalidInputError: ``api.user_keys`` has an empty or shared key.
    """
    api = config or client.config.api
    app = FastAPIOffline(
        title="prme",
        summary="Local-first memory with safely learned ranking",
        version="1",
        static_url="/docs/assets",
        # Swagger UI's validator badge would call validator.swagger.io: none, offline.
        swagger_ui_parameters={"validatorUrl": None},
    )
    app.state.client = client
    app.state.keys = KeyRing(api.user_keys)
    app.include_router(routes.router, responses=VALIDATION_RESPONSE)
    app.include_router(learning_routes.router, responses=VALIDATION_RESPONSE)
    app.include_router(memory_routes.router, responses=VALIDATION_RESPONSE)
    for error in (PRMEError, ValueError, PermissionError, Exception):
        app.add_exception_handler(error, _handle_error)
    app.add_exception_handler(RequestValidationError, _handle_validation)
    app.add_middleware(BodySizeLimit, max_bytes=api.max_body_bytes)
    app.openapi = lambda: _described_openapi(app)  # type: ignore[method-assign]
    return app
