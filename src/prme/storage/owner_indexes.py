"""The owners' column indexes a store keeps in memory, and the vector-index policy they are
built under: the part of owner-index caching both backends share."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from prme.index.ann import AnnPolicy
from prme.index.changed_rows import with_rows_replaced
from prme.index.owner_index import OwnerIndex

# An owner index of at least this many rows is saved (SQLite: under the pack's index
# directory; PostgreSQL: in the pack, and a copy in this host's cache), and again after
# growing by this many rows or an eighth: reopening the pack then loads it instead of
# rebuilding it.
SAVE_INDEX_ROWS = 4096


# The steps of an owner's delete sequence after one value up to another, as the pack's
# ``owner_changes`` logs them: ``(memory rowid, whether it left the owner's rows)`` each (None
# when the pack has no such log).
Steps = Callable[[int, int], Sequence[tuple[int, bool]] | None]
# The owner's index rows of the given rowids (as an append reads them, without vectors).
IndexRows = Callable[[list[int]], list[dict[str, Any]]]


def changed_in_place(steps: Steps, after: int, upto: int) -> list[int] | None:
    """The rowids that the delete-sequence steps after ``after``, up to ``upto``, changed in
    place (ascending); None when one of them removed a row or is not logged."""
    logged = steps(after, upto)
    if logged is None or len(logged) != upto - after or any(removed for _, removed in logged):
        return None
    return sorted({int(rowid) for rowid, _ in logged})


def catches_up(steps: Steps, saved_at: int, delete_seq: int) -> bool:
    """Whether an index saved at delete sequence ``saved_at`` can be caught up to the owner's
    ``delete_seq`` (:func:`caught_up`): the same, or only rows changed in place since."""
    if saved_at == delete_seq:
        return True
    return saved_at < delete_seq and changed_in_place(steps, saved_at, delete_seq) is not None


def caught_up(
    index: OwnerIndex, delete_seq: int, steps: Steps, rows: IndexRows
) -> OwnerIndex | None:
    """``index`` brought from its delete sequence to the owner's ``delete_seq`` by re-reading
    the rows changed in place since (a supersede); None when a row was removed meanwhile, a
    step is not logged, or a row changed more than a supersede changes: it is rebuilt then.
    An index already at ``delete_seq`` is returned as it is."""
    if index.delete_seq == delete_seq:
        return index
    if not 0 <= index.delete_seq <= delete_seq:
        return None
    rowids = changed_in_place(steps, index.delete_seq, delete_seq)
    if rowids is None:
        return None
    held = [rowid for rowid in rowids if rowid <= index.max_rowid]  # later ones are appended
    found = rows(held) if held else []
    updated = with_rows_replaced(index, found) if len(found) == len(held) else None
    if updated is not None:
        updated.delete_seq = delete_seq
    return updated


def save_due(index: OwnerIndex) -> bool:
    """Whether ``index`` has grown enough since it was last saved to be saved (again)."""
    grown = index.size - index.saved_size
    return index.size >= SAVE_INDEX_ROWS and grown >= max(SAVE_INDEX_ROWS, index.saved_size // 8)


class OwnerIndexCache:
    """A store's owner indexes by owner (the store sets the three attributes when it opens)."""

    _indexes: dict[str, OwnerIndex]
    _index_lock: threading.Lock
    _ann: AnnPolicy | None

    def configure_vector_index(self, policy: AnnPolicy | None) -> None:
        """Search vectors approximately past ``policy``'s size (None: exact scans only)."""
        with self._index_lock:
            if policy != self._ann:
                self._drop_indexes()
            self._ann = policy

    def _drop_indexes(self) -> None:
        """Forget every owner index, and stop their graphs built ahead from being saved (the
        caller holds ``_index_lock``)."""
        for index in self._indexes.values():
            index.graphs.close()
        self._indexes.clear()
