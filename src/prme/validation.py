"""Small input checks shared by every entry point; each raises InvalidInputError naming the field."""

from __future__ import annotations

import math
import re
import uuid
from datetime import UTC, datetime

from pydantic import ValidationError

from prme.errors import InvalidInputError
from prme.limits import MAX_PAGE_SIZE, MAX_RESULT_LIMIT, MAX_TOKEN_BUDGET

# C0 and C1 control characters (Unicode category Cc), DEL included: never part of an identifier.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
UTC_RANGE = "must lie within years 1 to 9999 once converted to UTC"


def invalid_input(exc: ValidationError, field: str, *, nested: bool = True) -> InvalidInputError:
    """pydantic's first error as the InvalidInputError every entry point raises.

    The error names ``field.loc`` (the location inside the parsed value; ``loc`` alone when
    not ``nested``, for inputs whose fields are the caller's own parameters), or ``field``
    when the error has no location. Raise it ``from None``: the pydantic chain adds nothing.
    """
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    if not loc:
        name = field
    elif nested:
        name = f"{field}.{loc}"
    else:
        name = loc
    return InvalidInputError(name, err["msg"])


def invalid_value(exc: ValueError, field: str) -> InvalidInputError:
    """A whole value's failed check (an explicit verify function's ``ValueError``, run after
    parsing) as the InvalidInputError :func:`invalid_input` gives for a model-level validator's
    error: it names ``field`` and words the message as pydantic does ("Value error, ...")."""
    return InvalidInputError(field, f"Value error, {exc}")


def require_text(value: str, field: str, *, identifier: bool = False) -> str:
    """``value`` if it is valid Unicode (UTF-8 encodable: no lone surrogates); an
    ``identifier`` (an owner, a group name) must also have no control characters."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(field, "must be valid Unicode text (no lone surrogates)") from None
    if identifier and _CONTROL.search(value):
        raise InvalidInputError(field, "must not contain control characters", value)
    return value


def require_owner(user_id: object, field: str = "user_id") -> str:
    if not isinstance(user_id, str) or not user_id.strip():
        raise InvalidInputError(field, "must be a non-blank string", user_id)
    if len(user_id) > 256:
        raise InvalidInputError(field, "must be at most 256 characters")
    return require_text(user_id, field, identifier=True)


def require_uuid(value: object, field: str) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str):
        try:
            return uuid.UUID(value)
        except ValueError:
            pass
    raise InvalidInputError(field, "must be a UUID or its string form", value)


def to_utc(value: datetime, field: str = "datetime") -> datetime:
    """An aware datetime in UTC: the one conversion every time input goes through.

    Raises:
        InvalidInputError: naive, or outside ``datetime``'s range once converted (for example
            ``9999-12-31T23:59:59-14:00`` or ``0001-01-01T00:00:00+01:00``).
    """
    if type(value) is datetime and value.tzinfo is UTC:  # what astimezone(UTC) returns
        return value
    if not isinstance(value, datetime):
        raise InvalidInputError(field, "must be a datetime", value)
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInputError(field, f"{field} must include a timezone", value)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise InvalidInputError(field, f"{field} {UTC_RANGE}", value.isoformat()) from None


def require_aware(value: datetime | None, field: str) -> datetime | None:
    return None if value is None else to_utc(value, field)


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
