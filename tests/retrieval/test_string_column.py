"""The saved index's string columns: one blob and offsets, decoded when read."""

from __future__ import annotations

import numpy as np
import pytest

from prme.index.strings import StringColumn, encode, joined

VALUES = ["m000001", "", 'évidence ["a"]', "line\nbreak", "z" * 300]


def test_a_column_reads_back_what_was_encoded_and_appends_after_it() -> None:
    blob, offsets = encode(VALUES, len(VALUES))
    column = StringColumn(blob, offsets)
    assert len(column) == len(VALUES) and list(column) == VALUES
    assert column[2] == VALUES[2] and column[-1] == VALUES[-1] and column[1:4] == VALUES[1:4]
    column.append("later")
    assert len(column) == 6 and column[5] == "later" and column[4:] == [VALUES[4], "later"]
    assert column[-6] == VALUES[0] and column[-1] == "later"
    for outside in (6, -7):
        with pytest.raises(IndexError):
            column[outside]
    # re-encoding reuses the blob for the stored part and encodes the appended strings
    again_blob, again_offsets = encode(column, 6)
    assert list(StringColumn(again_blob, again_offsets)) == [*VALUES, "later"]
    part_blob, part_offsets = encode(column, 3)
    assert list(StringColumn(part_blob, part_offsets)) == VALUES[:3]


def test_joined_runs_are_the_same_bytes_for_a_list_and_a_column() -> None:
    ids = [f"id-{i:04d}" for i in range(50)]
    column = StringColumn(*encode(ids, 40))
    for i in range(40, 50):
        column.append(ids[i])
    for start, end in ((0, 40), (3, 17), (0, 0), (35, 50), (40, 50), (0, 50)):
        assert joined(column, start, end) == joined(ids, start, end)
        assert joined(ids, start, end) == "\n".join(ids[start:end]).encode()


def test_an_empty_column() -> None:
    blob, offsets = encode([], 0)
    assert blob.size == 0 and np.array_equal(offsets, [0])
    assert len(StringColumn(blob, offsets)) == 0
