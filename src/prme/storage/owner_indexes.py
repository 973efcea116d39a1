"""The owners' column indexes a store keeps in memory, and the vector-index policy they are
built under: the part of owner-index caching both backends share."""

from __future__ import annotations

import threading

from prme.index.ann import AnnPolicy
from prme.index.owner_index import OwnerIndex

# An owner index of at least this many rows is saved (SQLite: under the pack's index
# directory; PostgreSQL: in the pack, and a copy in this host's cache), and again after
# growing by this many rows or an eighth: reopening the pack then loads it instead of
# rebuilding it.
SAVE_INDEX_ROWS = 4096


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
