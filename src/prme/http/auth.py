"""Bearer-key authentication for the HTTP API (owner binding lives in :mod:`prme.auth`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from prme.auth import OWNER_REQUIRED, Identity, KeyRing
from prme.errors import AuthenticationError

__all__ = ["OWNER_REQUIRED", "Auth", "Identity", "KeyRing", "authenticate"]

_bearer = HTTPBearer(auto_error=False, description="A per-user key from PRME_API__USER_KEYS")


def authenticate(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Identity:
    """FastAPI dependency: binds the owner from the bearer key (raises AuthenticationError)."""
    keys: KeyRing = request.app.state.keys
    if not keys.enabled:
        return Identity(None)
    user_id = keys.match(None if credentials is None else credentials.credentials)
    if user_id is None:
        raise AuthenticationError()
    return Identity(user_id)


Auth = Annotated[Identity, Depends(authenticate)]
