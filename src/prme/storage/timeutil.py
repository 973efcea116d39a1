"""Storage's time columns are integer microseconds: the conversions live in :mod:`prme.timeutil`
(pure, so the retrieval features and replay can use them without importing storage)."""

from __future__ import annotations

from prme.timeutil import from_us, opt_from_us, opt_to_us, to_us

__all__ = ["from_us", "opt_from_us", "opt_to_us", "to_us"]
