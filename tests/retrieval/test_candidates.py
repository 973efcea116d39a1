"""Candidate generation over an in-memory owner index: channel hits → one filtered pool."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support.owner_index import STAGE_NOW, build_index, memory

from prme.models.enums import Scope
from prme.retrieval.candidates import (
    HINT_LIMIT,
    PINNED_LIMIT,
    candidate_pool,
    channel_hits,
    cross_scope_hints,
)
from prme.retrieval.features import FilterSettings
from prme.retrieval.scan import scan
from prme.storage.timeutil import to_us

QUERY = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)


def settings(mode: str = "default") -> FilterSettings:
    return FilterSettings(
        mode, None, None, None, None, None, frozenset(), None, 0.3, to_us(STAGE_NOW)
    )


def corpus() -> list[dict[str, Any]]:
    return [
        memory(vector=(0.9, 0.1, 0, 0), entities=("aster",)),  # 0 vector, graph
        memory(vector=(-0.5, 0.5, 0, 0)),  # 1 negative cosine
        memory(vector=(0.4, 0.6, 0, 0), lifecycle="superseded"),  # 2 hidden by default
        memory(vector=(0, 1, 0, 0), pinned=True),  # 3 pinned
        memory(vector=(0.8, 0, 0.2, 0), scope="project"),  # 4 other scope
        memory(vector=(0.1, 0, 0, 0.9), entities=("aster",), scope="project"),  # 5
    ]


def test_channel_hits_keep_only_known_rows_and_scope() -> None:
    ix = build_index(corpus())
    in_scope = ix.scope_mask([Scope.PERSONAL])
    lexical = [(4, 2.0), (1, 7.5), (99, 3.0)]  # rowid 99 is not in the index
    hits = channel_hits(ix, in_scope, scan(ix, QUERY, in_scope, 3), lexical, ["aster"], 3, 150)
    assert hits.vector_pos.tolist() == [0, 2, 3]
    assert hits.lexical_pos.tolist() == [3, 0]  # rowids 4 and 1, in the search's order
    assert hits.lexical_raw.tolist() == [2.0, 7.5]
    assert hits.graph == {0: 1}  # the project memory naming aster is out of scope
    assert hits.pinned_pos.tolist() == [3]
    assert len(hits.cosines) == ix.size
    assert hits.generated(9) == {"vector": 3, "lexical": 2, "graph": 1, "pinned": 1, "merged": 9}


def test_pool_merges_flags_and_filters() -> None:
    ix = build_index(corpus())
    in_scope = np.ones(ix.size, dtype=np.bool_)
    lexical = [(2, 1.0), (3, 4.0), (4, 3.0)]
    hits = channel_hits(ix, in_scope, scan(ix, QUERY, in_scope, 6), lexical, ["aster"], 3, 150)
    pool = candidate_pool(ix, hits, settings())
    assert pool.merged == 6 and pool.pos.tolist() == [0, 1, 3, 4, 5]  # 2 is superseded
    assert pool.filtered == 1
    assert pool.on_vector.all()
    assert pool.on_lexical.tolist() == [False, True, True, False, False]
    assert pool.on_graph.tolist() == [True, False, False, False, True]
    assert pool.on_pinned.tolist() == [False, False, True, False, False]
    # the lexical score is min-max normalized over the kept candidates on the channel
    assert pool.lexical.tolist() == [0.0, 0.0, 1.0, 0.0, 0.0]  # rowid 3's 4.0 was dropped
    assert pool.raw_cosine[1] == pytest.approx(-0.5)
    assert pool.semantic[1] == 0.0 and pool.semantic[0] == pytest.approx(0.9)
    assert pool.graph.tolist() == [1.0, 0.0, 0.0, 0.0, 1.0]
    assert pool.path_counts.tolist() == [2, 2, 3, 1, 2]
    assert pool.paths(0) == ("GRAPH", "VECTOR")
    assert pool.paths(1) == ("LEXICAL", "VECTOR")
    assert pool.paths(2) == ("LEXICAL", "PINNED", "VECTOR")
    assert pool.paths(3) == ("VECTOR",)
    # explicit mode keeps the superseded memory
    assert candidate_pool(ix, hits, settings("explicit")).pos.tolist() == [0, 1, 2, 3, 4, 5]


def test_empty_index_gives_an_empty_pool() -> None:
    ix = build_index([])
    in_scope = ix.scope_mask(None)
    hits = channel_hits(ix, in_scope, scan(ix, QUERY, in_scope, 5), [], [], 3, 150)
    pool = candidate_pool(ix, hits, settings())
    assert pool.merged == 0 and len(pool.pos) == 0
    assert pool.generated == {"vector": 0, "lexical": 0, "graph": 0, "pinned": 0, "merged": 0}


def test_pinned_channel_is_capped() -> None:
    ix = build_index([memory(pinned=True) for _ in range(PINNED_LIMIT + 3)])
    in_scope = ix.scope_mask(None)
    hits = channel_hits(ix, in_scope, scan(ix, QUERY, in_scope, 1), [], [], 3, 150)
    assert hits.pinned_pos.tolist() == list(range(PINNED_LIMIT))


@pytest.mark.parametrize("scope_every", [1, 2, 7, 50])
def test_pinned_channel_takes_the_first_pinned_rows_in_scope(scope_every: int) -> None:
    # pinned rows spread over many blocks, and scopes that keep few of them: the channel is
    # the first PINNED_LIMIT pinned rows in scope, in position order
    rows = [
        memory(pinned=i % 3 == 0, scope="personal" if i % scope_every == 0 else "project")
        for i in range(3 * PINNED_LIMIT * 7)
    ]
    ix = build_index(rows)
    in_scope = ix.scope_mask([Scope.PERSONAL])
    hits = channel_hits(ix, in_scope, scan(ix, QUERY, in_scope, 3), [], [], 3, 100)
    pinned = np.array([i % 3 == 0 for i in range(len(rows))])
    assert hits.pinned_pos.tolist() == np.flatnonzero(pinned & in_scope)[:PINNED_LIMIT].tolist()


def test_cross_scope_hints_are_positive_filtered_and_capped() -> None:
    rows = [memory(vector=(1, 0, 0, 0))]  # in scope
    rows += [memory(scope="project", vector=(1.0 - i / 10, 0.1, 0, 0)) for i in range(8)]
    rows += [memory(scope="project", vector=(-1, 0, 0, 0))]  # negative similarity
    rows += [memory(scope="project", vector=(1, 0, 0, 0), lifecycle="archived")]  # filtered
    ix = build_index(rows)
    in_scope = ix.scope_mask([Scope.PERSONAL])
    cosines = ix.cosines(QUERY)
    hints = cross_scope_hints(ix, cosines, in_scope, settings())
    assert len(hints) == HINT_LIMIT
    assert [p for p, _ in hints] == [1, 2, 3, 4, 5]
    assert all(score > 0 for _, score in hints)
