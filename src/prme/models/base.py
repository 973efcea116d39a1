"""Base model and shared field types."""

from __future__ import annotations

import math
from datetime import datetime
from operator import attrgetter
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from prme.validation import to_utc

SHA256_PATTERN = r"^[0-9a-f]{64}$"


class Frozen(BaseModel):
    """Frozen, extra-forbidding model: what every core value is built from."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def require_utc(value: datetime) -> datetime:
    """Aware datetimes only; converted to UTC so canonical JSON always ends in ``Z``.

    Raises ValueError (``InvalidInputError``), never OverflowError: see ``prme.validation.to_utc``.
    """
    return to_utc(value)


def require_finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


UTCDateTime = Annotated[datetime, AfterValidator(require_utc)]
# allow_inf_nan=False is checked inside pydantic-core: no Python callback per float, which
# matters when a learning snapshot parses thousands of receipts with hundreds of floats each.
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
UnitFloat = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
Sha256Hex = Annotated[str, Field(pattern=SHA256_PATTERN)]
NonBlankStr = Annotated[str, Field(min_length=1, pattern=r"\S")]

# str(UUID) is the fixed-width lowercase hex of UUID.int, so sorting by .int is sorting by the
# canonical text, without formatting thousands of strings.
uuid_text_order = attrgetter("int")
