"""build_index(): prepare an owner's index ahead of retrieval, so that no retrieval pays for it.

The first retrieval after a bulk load reads the owner's rows into the column index, tokenizes
them, saves the index and, past the approximate index's threshold, builds its HNSW segments:
seconds at 100k memories, minutes at a million. This does that work now (the same work, with
the same result: the index and graphs are functions of the owner's rows), and waits until what
is saved is saved, so a new process maps it instead of rebuilding it. The graphs searched once
the owner grows by a chunk are built too (:func:`~prme.index.ann.kept_ranges`), so none is
left to build in the background either; so are sparse vectors' postings
(:mod:`prme.index.sparse_vectors`), which the saved index keeps.
"""

from __future__ import annotations

import time

from prme.engine import Engine
from prme.index import sparse_vectors
from prme.index.ann import searched_ranges
from prme.models.retrieval import OwnerIndexReport
from prme.validation import require_owner


def build_index(engine: Engine, user_id: str) -> OwnerIndexReport:
    """Refresh, save and complete the owner's index (see the module docstring)."""
    owner = require_owner(user_id)
    started = time.perf_counter()
    store = engine.store
    with store.read_snapshot():
        index = store.owner_index(owner)
    if index is not None:
        index.complete_segments()  # those searched later included
        sparse_vectors.complete(index.derived_values, index.vectors, index.size)
    store.wait_for_index_saves()
    rows = 0 if index is None else index.size
    ranges: list[tuple[int, int]] = []
    if index is not None and index.ann is not None and index.uses_ann():
        ranges = searched_ranges(rows, index.ann)
    return OwnerIndexReport(
        user_id=owner,
        rows=rows,
        vector_search="hnsw" if ranges else "exact",
        hnsw_segments=len(ranges),
        exact_rows=rows - (ranges[-1][1] if ranges else 0),
        elapsed_ms=round((time.perf_counter() - started) * 1000, 3),
    )
