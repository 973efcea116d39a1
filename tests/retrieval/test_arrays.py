"""The shared array operations equal numpy's own; a scan cut in halves equals the whole."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from prme.index import arrays
from prme.index.arrays import (
    ROW_BLOCK,
    SPLIT_ROWS,
    best_positions,
    distinct,
    exact_dot,
    group_of_each,
    offsets_of,
    split_point,
)


@given(st.lists(st.integers(-(2**40), 2**40) | st.integers(0, 20), max_size=300))
def test_distinct_is_numpys_unique(values: list[int]) -> None:
    array = np.asarray(values, dtype=np.int64)
    result = distinct(array)
    assert result.dtype == np.int64
    assert result.tolist() == np.unique(array).tolist()


@given(st.lists(st.integers(0, 30), max_size=200), st.integers(0, 5))
def test_offsets_and_groups_are_inverse(keys: list[int], extra: int) -> None:
    """``offsets_of`` gives each group's start among entries sorted by group, and
    ``group_of_each`` gives back each sorted entry's group (empty groups included)."""
    ordered = np.sort(np.asarray(keys, dtype=np.int64))
    groups = (int(ordered.max()) + 1 if ordered.size else 0) + extra
    offsets = offsets_of(ordered, groups)
    assert offsets.dtype == np.int64 and len(offsets) == groups + 1
    assert offsets.tolist() == np.searchsorted(ordered, np.arange(groups + 1)).tolist()
    assert group_of_each(offsets).tolist() == ordered.tolist()


@given(st.lists(st.sampled_from([0.0, 0.5, -0.25, 1.0]), max_size=200), st.integers(1, 220))
def test_best_positions_break_ties_at_the_kth_value_by_the_lowest_index(
    values: list[float], k: int
) -> None:
    array = np.asarray(values, dtype=np.float32)
    # the reference: a full stable sort by value descending, then by index
    want = np.lexsort((np.arange(array.size), -array))[:k]
    assert sorted(best_positions(array, k).tolist()) == sorted(want.tolist())


def _matrix(rows: int, dimension: int) -> tuple[Any, Any]:
    matrix = np.random.default_rng(rows).normal(size=(rows, dimension)).astype(np.float32)
    query = np.random.default_rng(dimension).normal(size=dimension).astype(np.float32)
    return matrix, query


@pytest.mark.parametrize("dimension", [13, 384])
def test_a_row_has_the_same_cosine_bits_whatever_rows_surround_it(dimension: int) -> None:
    """A rescoring of gathered candidates gives each row the bits of the whole scan (a BLAS
    kernel's ragged last rows used to sum differently)."""
    matrix, query = _matrix(1003, dimension)
    whole = exact_dot(matrix, query)
    rng = np.random.default_rng(7)
    for count in (1, 3, 5, 63, 64, 65, 130):
        for _ in range(20):
            some = np.sort(rng.choice(len(matrix), count, replace=False))
            assert exact_dot(matrix[some], query).tobytes() == whole[some].tobytes()


@pytest.mark.parametrize("dimension", [2, 3, 5, 8, 9, 384])
def test_a_long_scan_gives_every_row_the_bits_of_a_short_one(dimension: int) -> None:
    """However many rows one scan covers, a row's cosine has the same bits (OpenBLAS's
    SkylakeX kernel for up to 8 columns used to sum differently from about 32k rows on)."""
    matrix, query = _matrix(70_000, dimension)
    whole = exact_dot(matrix, query)
    rng = np.random.default_rng(dimension)
    for _ in range(8):
        start, count = int(rng.integers(0, 30_000)), int(rng.integers(1, 40_000))
        part = exact_dot(matrix[start : start + count], query)
        assert part.tobytes() == whole[start : start + count].tobytes()


@pytest.mark.parametrize("rows", [SPLIT_ROWS, SPLIT_ROWS + 1, 2 * SPLIT_ROWS + 771])
@pytest.mark.parametrize("dimension", [8, 384])
def test_a_scan_cut_in_halves_gives_every_row_the_bits_of_the_whole(
    monkeypatch: pytest.MonkeyPatch, rows: int, dimension: int
) -> None:
    matrix, query = _matrix(rows, dimension)
    submitted: list[int] = []
    submit = arrays._HALF_WORKER.submit

    def counted(fn: Any, *args: Any) -> Any:
        submitted.append(len(args[0]))
        return submit(fn, *args)

    monkeypatch.setattr(arrays, "usable_cpus", lambda: 2)
    monkeypatch.setattr(arrays._HALF_WORKER, "submit", counted)
    cut = exact_dot(matrix, query)
    assert submitted == [rows - split_point(rows, 2)]  # the second half ran on the worker
    monkeypatch.setattr(arrays, "usable_cpus", lambda: 1)
    whole = exact_dot(matrix, query)
    assert len(submitted) == 1  # one CPU: not cut
    assert cut.dtype == whole.dtype == np.float32
    assert cut.tobytes() == whole.tobytes()


def test_small_scans_and_single_cpus_are_not_cut() -> None:
    assert split_point(SPLIT_ROWS - 1, 8) == 0
    assert split_point(10**6, 1) == 0
    assert split_point(SPLIT_ROWS, 2) == SPLIT_ROWS // 2
    assert split_point(100_000, 2) % ROW_BLOCK == 0
