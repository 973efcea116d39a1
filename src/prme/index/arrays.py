"""Small array operations the hot paths share (pure numpy)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def distinct(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The distinct values, ascending: ``np.unique(values)``, by one sort. numpy 2's
    ``np.unique`` hashes first and then sorts, about 15 times slower on the few thousand
    positions of a candidate pool."""
    ordered = np.sort(values)
    if ordered.size < 2:
        return ordered
    keep = np.empty(ordered.size, dtype=np.bool_)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    result: npt.NDArray[np.int64] = ordered[keep]
    return result


def comma_integers(text: str | None) -> npt.NDArray[np.int64]:
    """The integers of comma-separated ``text`` (as SQL's ``group_concat`` and ``string_agg``
    give them; none for NULL or empty text)."""
    if not text:
        return np.zeros(0, np.int64)
    return np.fromstring(text, dtype=np.int64, sep=",")
