"""Typed exceptions. Every error carries the values it names, and all derive from PRMEError."""

from __future__ import annotations

from typing import Any


class PRMEError(Exception):
    """Base class of every error prme raises on purpose."""


class InvalidInputError(PRMEError, ValueError):
    """Input failed validation; ``field`` names the offending parameter."""

    def __init__(self, field: str, message: str, value: Any = None) -> None:
        self.field = field
        self.value = value
        super().__init__(f"{field}: {message}")


class NotFoundError(PRMEError, ValueError):
    """An id that does not exist for this owner (foreign ids look exactly like missing ones)."""

    def __init__(self, kind: str, id: object, *, field: str | None = None) -> None:
        self.kind = kind
        self.id = str(id)
        self.field = field
        named = f"{field}: " if field else ""
        super().__init__(f"{named}{kind} not found: {self.id}")


class PackNotFoundError(NotFoundError):
    """No memory pack at ``location``: opening for reading never creates one."""

    def __init__(self, location: object, *, postgres: bool = False) -> None:
        super().__init__("Memory pack", location)
        how = (
            "`prme init --postgres URL` (or `prme db upgrade`)"
            if postgres
            else f"`prme init --path {self.id}` (or MemoryClient(path, create=True))"
        )
        self.args = (f"no memory pack at {self.id}; create one with {how}",)


def serve_hint(exc: PackNotFoundError) -> str:
    """What ``prme serve`` and ``prme mcp`` print when they refuse a missing pack: how to
    create it, or to serve a new, empty one with ``--create``."""
    return f"{exc}; or serve a new, empty pack with --create"


class StaleRankingProfileError(PRMEError, ValueError):
    """The active-profile pointer is not what the caller expected; inspect state and retry."""

    def __init__(self, expected: object, actual: object, message: str | None = None) -> None:
        self.expected = None if expected is None else str(expected)
        self.actual = None if actual is None else str(actual)
        text = message or "Active ranking profile changed; inspect and retry"
        super().__init__(f"{text} (expected {self.expected}, actual {self.actual})")


class IntegrityError(PRMEError, ValueError):
    """Stored evidence failed a checksum, owner or identity check; nothing was trusted."""


class FrozenPackError(PRMEError, RuntimeError):
    """A content write was attempted on a pack opened with ``frozen=True``."""

    def __init__(self, operation: str) -> None:
        self.operation = operation
        super().__init__(
            f"{operation}: the pack is open frozen; content writes are refused "
            "(retrieval, receipts, judgments and reports still append)"
        )


class ReadOnlyPackError(FrozenPackError):
    """A write to a pack opened read-only (read-only media, or no write permission).

    Retrieval still answers (with ``metadata.receipt_persisted=False``); every write, receipts
    and judgments included, is refused. ``path`` names the pack, ``reason`` why it is
    read-only or cannot be opened."""

    def __init__(self, operation: str, path: str, reason: str) -> None:
        self.operation = operation
        self.path = path
        self.reason = reason
        RuntimeError.__init__(
            self,
            f"{operation}: the pack at {path} is read-only ({reason}); retrievals are answered "
            "without saving receipts and every write is refused. To write, fix the permissions "
            "or copy the pack directory somewhere writable and open the copy",
        )


class OwnerMismatchError(PRMEError, PermissionError):
    """A request named a ``user_id`` different from the owner bound to its credential."""

    def __init__(self, bound: str, requested: str) -> None:
        self.bound = bound
        self.requested = requested
        super().__init__("User does not match authenticated identity")


class AuthenticationError(PRMEError, PermissionError):
    """A missing or wrong credential."""

    def __init__(self) -> None:
        super().__init__("Invalid or missing API key")


class StorageUnavailableError(PRMEError, ConnectionError):
    """The storage is temporarily unusable: the server cannot be reached, the pack stayed
    locked past the busy timeout, or the disk is full. Nothing was written; retry after
    ``retry_after`` seconds (HTTP 503 with ``Retry-After``). ``storage`` names it (never with a
    password)."""

    def __init__(self, storage: str, detail: str, retry_after: int = 1) -> None:
        self.storage = storage
        self.detail = detail
        self.retry_after = retry_after
        super().__init__(f"storage unavailable: {storage}: {detail}")


# One table, resolved along the exception's MRO, maps errors to HTTP status; MCP and the CLI
# reuse it so the same mistake reads the same on every surface.
HTTP_STATUS: dict[type[BaseException], int] = {
    AuthenticationError: 401,
    OwnerMismatchError: 403,
    PermissionError: 403,
    NotFoundError: 404,
    StaleRankingProfileError: 409,
    FrozenPackError: 409,
    StorageUnavailableError: 503,
    IntegrityError: 500,
    ValueError: 422,
}


def http_status_for(exc: BaseException) -> int:
    """The HTTP status of an exception (500 for anything unexpected)."""
    for cls in type(exc).__mro__:
        if cls in HTTP_STATUS:
            return HTTP_STATUS[cls]
    return 500


def is_expected(exc: BaseException) -> bool:
    """An error a caller can act on: invalid input, not found, stale, or temporary (503)."""
    status = http_status_for(exc)
    return status < 500 or status == 503


def public_message(exc: BaseException) -> str:
    """What a surface may show: the message of an expected error, nothing internal otherwise."""
    return str(exc) if is_expected(exc) else "Internal server error"
