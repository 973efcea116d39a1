"""The shared array operations equal numpy's own."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from prme.index.arrays import distinct


@given(st.lists(st.integers(-(2**40), 2**40) | st.integers(0, 20), max_size=300))
def test_distinct_is_numpys_unique(values: list[int]) -> None:
    array = np.asarray(values, dtype=np.int64)
    result = distinct(array)
    assert result.dtype == np.int64
    assert result.tolist() == np.unique(array).tolist()
