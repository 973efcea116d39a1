"""Small input checks shared by every entry point; each raises InvalidInputError naming the field."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime

from prme.errors import InvalidInputError
from prme.limits import MAX_PAGE_SIZE, MAX_RESULT_LIMIT, MAX_TOKEN_BUDGET


def require_owner(user_id: object, field: str = "user_id") -> str:
    if not isinstance(user_id, str) or not user_id.strip():
        raise InvalidInputError(field, "must be a non-blank string", user_id)
    if len(user_id) > 256:
        raise InvalidInputError(field, "must be at most 256 characters")
    return user_id


def require_uuid(value: object, field: str) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str):
        try:
            return uuid.UUID(value)
        except ValueError:
            pass
    raise InvalidInputError(field, "must be a UUID or its string form", value)


def require_aware(value: datetime | None, field: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidInputError(field, "must be a datetime", value)
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInputError(field, f"{field} must include a timezone", value)
    return value.astimezone(UTC)


def require_int(value: object, field: str, *, minimum: int, maximum: int | None = None) -> int:
    # The message repeats the field name so the reference's fragments match exactly
    # ("limit must be a nonnegative integer", "limit must be an integer from 1 to 1000").
    if maximum is not None and minimum == 0:
        message = f"{field} must be a nonnegative integer at most {maximum}"
    elif maximum is not None:
        message = f"{field} must be an integer from {minimum} to {maximum}"
    elif minimum == 0:
        message = f"{field} must be a nonnegative integer"
    else:
        message = f"{field} must be an integer >= {minimum}"
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(field, message, value)
    if value < minimum or (maximum is not None and value > maximum):
        raise InvalidInputError(field, message, value)
    return value


def require_page_limit(limit: object, field: str = "limit") -> int:
    return require_int(limit, field, minimum=1, maximum=MAX_PAGE_SIZE)


def require_result_limit(limit: object, field: str = "limit") -> int:
    """A retrieval's result count: 0 to ``MAX_RESULT_LIMIT`` (0 returns no results)."""
    return require_int(limit, field, minimum=0, maximum=MAX_RESULT_LIMIT)


def require_token_budget(budget: object, field: str = "token_budget") -> int:
    """A packed context's token budget: 0 to ``MAX_TOKEN_BUDGET``."""
    return require_int(budget, field, minimum=0, maximum=MAX_TOKEN_BUDGET)


def require_cap(cap: object, field: str) -> int:
    """A per-group result cap (``max_per_source``, ``max_per_evidence``): 1 to the result limit."""
    return require_int(cap, field, minimum=1, maximum=MAX_RESULT_LIMIT)


def require_finite_nonnegative(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(field, f"{field} must be a finite nonnegative number", value)
    if value < 0:
        raise InvalidInputError(field, f"{field} must be a finite nonnegative number", value)
    return float(value)
