"""The owners' column indexes a store keeps in memory, and the vector-index policy they are
built under: the part of owner-index caching both backends share."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from prme.index.ann import AnnPolicy
from prme.index.changed_rows import with_rows_replaced
from prme.index.owner_index import OwnerIndex
from prme.index.removed_rows import without_rows
from prme.index.scan_process import SCAN_PROCESSES

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


def logged_changes(steps: Steps, after: int, upto: int) -> tuple[list[int], list[int]] | None:
    """The rowids that the delete-sequence steps after ``after``, up to ``upto``, changed in
    place and those they removed (each ascending; a row changed, then removed, is removed);
    None when one of the steps is not logged."""
    logged = steps(after, upto)
    if logged is None or len(logged) != upto - after:
        return None
    removed = {int(rowid) for rowid, gone in logged if gone}
    changed = {int(rowid) for rowid, gone in logged if not gone} - removed
    return sorted(changed), sorted(removed)


def rows_removed_since(
    steps: Steps, saved_at: int, delete_seq: int, max_rowid: int
) -> list[int] | None:
    """The rowids up to ``max_rowid`` (those an index saved at delete sequence ``saved_at``
    holds) that the steps up to the owner's ``delete_seq`` removed; None when the index cannot
    be caught up (:func:`caught_up`): a step is not logged, or the sequence went back. A
    removed rowid may be in use again: SQLite gives a new row the largest rowid's successor."""
    if saved_at == delete_seq:
        return []
    found = logged_changes(steps, saved_at, delete_seq) if saved_at < delete_seq else None
    return None if found is None else [rowid for rowid in found[1] if rowid <= max_rowid]


def caught_up(
    index: OwnerIndex, delete_seq: int, steps: Steps, rows: IndexRows
) -> OwnerIndex | None:
    """``index`` brought from its delete sequence to the owner's ``delete_seq``: the rows
    removed since are taken out (:func:`~prme.index.removed_rows.without_rows`), and those
    changed in place (a supersede) re-read; None when a step is not logged or a row changed
    more than a supersede changes: it is rebuilt then. An index already at ``delete_seq`` is
    returned as it is."""
    if index.delete_seq == delete_seq:
        return index
    if not 0 <= index.delete_seq <= delete_seq:
        return None
    found = logged_changes(steps, index.delete_seq, delete_seq)
    if found is None:
        return None
    changed, removed = found
    remaining = without_rows(index, removed)
    held = [rowid for rowid in changed if rowid <= remaining.max_rowid]  # later ones are appended
    found_rows = rows(held) if held else []
    updated = with_rows_replaced(remaining, found_rows) if len(found_rows) == len(held) else None
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
        """Forget every owner index, stop their graphs built ahead from being saved, and stop
        the scan processes serving their saved copies (the caller holds ``_index_lock``)."""
        for index in self._indexes.values():
            index.graphs.close()
        self._indexes.clear()
        root = self._saved_index_root()
        if root is not None:
            SCAN_PROCESSES.stop_under(root)

    def _saved_index_root(self) -> Path | None:
        """Where this store saves its owners' indexes (None: nowhere yet)."""
        return None
