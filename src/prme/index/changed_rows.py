"""Rows of an owner index changed in place (a supersede), applied without rebuilding it.

A supersede changes some of a memory's columns (lifecycle, ``updated_at``, ``valid_to``) and
never its content, id, evidence, vector or entities. The index that holds such a row is
therefore the same index with those columns' values replaced at the row's position: the new
index shares everything else with the old one (vectors, strings, entity graph, HNSW graphs,
lexical postings) and copies only the columns whose values changed, so the snapshots that
retrievals in flight hold keep what they showed. A row whose content, id or evidence differs
is not a supersede; the caller rebuilds the index from the rows instead (None).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from prme.index.lexical import POSTINGS
from prme.index.owner_index import NUMERIC_COLUMNS, OwnerIndex
from prme.index.sparse_vectors import SPARSE_BLOCKS

# What a supersede never changes: a row re-read with other values here is another row.
FIXED_STRINGS = ("ids", "content_sha256", "evidence")
_ROW_KEYS = {"ids": "id", "content_sha256": "content_sha256", "evidence": "evidence_refs"}


def with_rows_replaced(index: OwnerIndex, rows: Sequence[Mapping[str, Any]]) -> OwnerIndex | None:
    """``index`` with the numeric columns of ``rows`` (owner-index rows as an append reads
    them, each already in ``index``) replaced; None when a row is not in it or its id, content
    or evidence changed (pure: ``index`` and its snapshots are not modified)."""
    if not rows:
        return index
    positions, found = index.positions_of([int(row["rowid"]) for row in rows])
    if not found.all():
        return None
    for name in FIXED_STRINGS:
        held = getattr(index, name)
        key = _ROW_KEYS[name]
        if any(held[p] != row[key] for p, row in zip(positions.tolist(), rows, strict=True)):
            return None
    columns = dict(index.columns)
    for name, dtype in NUMERIC_COLUMNS:
        values = np.array([row[name] for row in rows], dtype=dtype)
        if np.array_equal(columns[name][positions], values):
            continue
        column = np.array(columns[name])  # a copy: the old index and its snapshots keep theirs
        column[positions] = values
        columns[name] = column
    changed = set(positions.tolist())
    # the lexical postings (of the content) and the vectors' postings are the same
    derived = {k: v for k, v in index.derived_values.items() if k in (POSTINGS, SPARSE_BLOCKS)}
    return replace(
        index,
        columns=columns,
        nodes={p: node for p, node in index.nodes.items() if p not in changed},
        derived_values=derived,
    )
