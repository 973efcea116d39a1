"""Who a tool call acts for: the owner bound by the transport (``--user-id`` over stdio, a
bearer key over HTTP), the key verifier the SDK calls, and the start-up checks that refuse a
server binding nobody or an unauthenticated HTTP server off loopback."""

from __future__ import annotations

import ipaddress
from typing import (
    Literal,
)

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken

from prme.auth import Identity, KeyRing
from prme.config import MCPConfig

Transport = Literal["stdio", "http"]
IDENTITY_REQUIRED = "Authenticated MCP identity required"
LOOPBACK_NAMES = frozenset({"localhost"})
LOOPBACK_ONLY = "without PRME_MCP__USER_KEYS the HTTP transport only listens on loopback"
OWNER_UNBOUND = (
    "no owner is bound: pass --user-id (PRME_MCP__USER_ID), or bearer keys over HTTP "
    "(PRME_MCP__USER_KEYS); --multi-owner (PRME_MCP__MULTI_OWNER=true) serves every owner, "
    "each call naming its user_id"
)


class Owner:
    """Resolves the owner of the current call from the transport's binding."""

    def __init__(self, fixed: str | None, keys: KeyRing | None) -> None:
        self.fixed = fixed
        self.keys = keys

    def __call__(self, requested: str | None) -> str:
        if self.keys is not None and self.keys.enabled:
            token = get_access_token()
            if token is None:
                raise PermissionError(IDENTITY_REQUIRED)
            return Identity(token.client_id).owner(requested)
        return Identity(self.fixed).owner(requested)


class KeyVerifier:
    """The SDK's token-verifier hook over the configured per-user keys (constant-time compare)."""

    def __init__(self, keys: KeyRing) -> None:
        self.keys = keys

    async def verify_token(self, token: str) -> AccessToken | None:
        user_id = self.keys.match(token)
        if user_id is None:
            return None
        return AccessToken(token=token, client_id=user_id, scopes=[])


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def owner_problem(config: MCPConfig, transport: Transport) -> str | None:
    """Why a server with ``config`` must not start (it would bind nobody), or None."""
    bound = config.user_id is not None or (transport == "http" and bool(config.user_keys))
    return None if bound or config.multi_owner else OWNER_UNBOUND
