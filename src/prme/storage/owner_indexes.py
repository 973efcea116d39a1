"""The owners' column indexes a store keeps in memory, and the vector-index policy they are
built under: the part of owner-index caching both backends share."""

from __future__ import annotations

import threading

from prme.index.ann import AnnPolicy
from prme.index.owner_index import OwnerIndex


class OwnerIndexCache:
    """A store's owner indexes by owner (the store sets the three attributes when it opens)."""

    _indexes: dict[str, OwnerIndex]
    _index_lock: threading.Lock
    _ann: AnnPolicy | None

    def configure_vector_index(self, policy: AnnPolicy | None) -> None:
        """Search vectors approximately past ``policy``'s size (None: exact scans only)."""
        with self._index_lock:
            if policy != self._ann:
                self._indexes.clear()
            self._ann = policy
