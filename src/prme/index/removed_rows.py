"""Rows removed from an owner index (a delete), taken out without rebuilding it from the pack.

An index rebuilt from the pack after a delete holds the same rows as the old one but the
removed ones, in the same order: every row after a removed one moves down by one position.
That index is computed here from the old one by array operations (columns, vectors, strings,
entity graph, lexical postings), instead of reading, embedding-decoding and tokenizing every row
of the pack again. The result is a new index that shares nothing the old one's snapshots may
still read and that appends write to, so a retrieval in flight keeps what it showed. The HNSW
graphs over positions before the first removed row are unchanged and kept; the later ones are
built again, over the moved positions, when next searched. Otherwise the index keeps its saved
size: a new process loads the index saved before the delete and takes the same rows out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import numpy as np

from prme.index import strings
from prme.index.lexical import POSTINGS, SharedPostings, shared_postings
from prme.index.owner_index import NUMERIC_COLUMNS, OwnerIndex
from prme.index.sparse_vectors import SPARSE_BLOCKS, shared_blocks


def without_rows(index: OwnerIndex, rowids: Iterable[int]) -> OwnerIndex:
    """``index`` without the rows of ``rowids`` it holds (the others are ignored), as the
    index rebuilt from the remaining rows would be (pure: ``index`` is not modified)."""
    positions, _ = index.positions_of(sorted(set(rowids)))
    if positions.size == 0:
        return index
    removed = positions.astype(np.int64)
    size = index.size
    kept = size - removed.size
    newest = int(removed[0]) == kept  # only the newest rows: the others keep their positions
    columns = {
        name: index.col(name)[:kept] if newest else np.delete(index.col(name), removed)
        for name, _ in NUMERIC_COLUMNS
    }
    graph = index.graph.without(removed)
    gone = set(removed.tolist())
    first_fresh = index.graph.size
    fresh_names = [
        names for offset, names in enumerate(index.fresh_names) if first_fresh + offset not in gone
    ]
    entity_positions: dict[str, list[int]] = {}
    for offset, names in enumerate(fresh_names):
        for name in names:
            entity_positions.setdefault(name, []).append(graph.size + offset)
    derived: dict[str, tuple[int, Any]] = {}
    if POSTINGS in index.derived_values:
        shared = shared_postings(index)
        with shared.lock:
            postings = shared.postings.upto(size).without(removed)
        derived[POSTINGS] = (-1, SharedPostings(postings))
    if SPARSE_BLOCKS in index.derived_values:  # the postings' blocks before the first removed row
        derived[SPARSE_BLOCKS] = (-1, shared_blocks(index.derived_values).up_to(int(removed[0])))
    graphs = index.graphs.up_to(int(removed[0]))
    # The graphs after a removed row are built again; saving the index soon (as due when
    # nothing of it is saved) deletes the files of those it no longer uses.
    saved_size = index.saved_size if len(graphs.built) == len(index.segments) else 0
    return replace(
        index,
        size=kept,
        columns=columns,
        vectors=index.vectors.without(size, removed),
        ids=strings.without(index.ids, size, removed),
        content_sha256=strings.without(index.content_sha256, size, removed),
        evidence=strings.without(index.evidence, size, removed),
        graph=graph,
        entity_positions=entity_positions,
        fresh_names=fresh_names,
        fresh_links=sum(len(names) for names in fresh_names),
        max_rowid=int(columns["rowid"][-1]) if kept else 0,
        saved_size=saved_size,
        graphs=graphs,
        nodes={},
        derived_values=derived,
    )
