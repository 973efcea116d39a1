"""Exact datetime <-> integer microseconds (UTC) conversion for storage columns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def to_us(value: datetime) -> int:
    return (value - EPOCH) // _US


def from_us(value: int) -> datetime:
    return EPOCH + timedelta(microseconds=value)


def opt_to_us(value: datetime | None) -> int | None:
    return None if value is None else to_us(value)


def opt_from_us(value: int | None) -> datetime | None:
    return None if value is None else from_us(value)
