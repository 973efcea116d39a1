"""The weighted formula reads the graph channel by its specificity (``graph_specificity``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from prme import MemoryClient, ScoringWeights
from prme.models.scoring import product_default_scoring
from prme.retrieval.features import graph_feature, graph_specificity
from prme.retrieval.replay import replay_scores

ClientFactory = Callable[..., MemoryClient]


# ------------------------------------------------------------------ the pure function
LN = math.log


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ([1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]),  # the only one at its hop: full evidence
        ([1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]),  # a hop reaching everyone: no evidence
        # each hop by its own reach: hop 1 (proximity 1.0) reached 1 of 8, hop 2 (0.7) 3 of 8
        (
            [1.0, 0.7, 0.7, 0.7, 0.0, 0.0, 0.0, 0.0],
            [1.0, *[LN(8 / 3) / LN(8)] * 3, 1.0, 1.0, 1.0, 1.0],
        ),
        ([0.4], [1.0]),  # a single candidate: nothing to discriminate, unchanged
        ([0.0, 0.0, 0.0], [1.0, 1.0, 1.0]),  # no graph match: unchanged (all zero anyway)
        ([], []),
    ],
)
def test_graph_specificity(graph: list[float], expected: list[float]) -> None:
    assert graph_specificity(np.asarray(graph, dtype=np.float64)).tolist() == expected


def test_graph_feature_weighs_proximity_only_when_configured() -> None:
    graph = np.asarray([1.0, 0.7, 0.7, 0.0, 0.0, 0.0, 0.0, 0.0])
    weighed = graph_feature(graph, ScoringWeights())
    hop2 = 0.7 * (LN(4) / LN(8))
    assert weighed.tolist() == [1.0, hop2, hop2, 0, 0, 0, 0, 0]
    raw = graph_feature(graph, ScoringWeights(graph_specificity=None))
    assert raw.tolist() == graph.tolist()


# ------------------------------------------------------------------ identity and records
def test_default_and_recorded_scoring() -> None:
    new = ScoringWeights()
    assert new.graph_specificity == "hop_idf"
    assert new.model_dump(mode="json")["graph_specificity"] == "hop_idf"
    # A complete record written before the field existed keeps the earlier formula and its
    # bytes: settings, receipts and profiles recorded then mean what they meant.
    recorded = new.model_dump(mode="json")
    del recorded["graph_specificity"]
    old = ScoringWeights.model_validate(recorded)
    assert old.graph_specificity is None
    assert old.model_dump(mode="json") == recorded
    assert old.version_id != new.version_id and old != new
    # A partial configuration (a request's weights, keyword arguments) gets the default.
    partial = ScoringWeights.model_validate({"w_semantic": 0.45, "w_lexical": 0.1, "w_graph": 0.1})
    assert partial.graph_specificity == "hop_idf"


def test_rank_fusion_never_records_it() -> None:
    rrf = product_default_scoring()
    assert rrf.graph_specificity is None
    assert "graph_specificity" not in rrf.model_dump(mode="json")
    forced = ScoringWeights(fusion="rrf", graph_specificity="hop_idf")
    assert forced.graph_specificity is None
    assert forced.version_id == ScoringWeights(fusion="rrf").version_id


def test_invalid_value_names_the_field(make_client: ClientFactory) -> None:
    client = make_client()
    client.store("Zephyr runs on Fly.io", user_id="alice")
    with pytest.raises(Exception) as info:
        client.retrieve("Zephyr", user_id="alice", weights={"graph_specificity": "bogus"})
    assert "graph_specificity" in str(info.value)


# ------------------------------------------------------------------ through retrieval
CAROLINE = [
    "Caroline said hello to Melanie at the cafe.",
    "Caroline likes painting sunsets on weekends.",
    "Caroline adopted a small grey cat.",
    "Caroline is reading a novel about sailing.",
    "Caroline joined the chess group at the library.",
    "Caroline visited her grandmother in Ohio.",
]
OTHER = [
    "I went to the LGBTQ support group yesterday and it was powerful.",
    "Melanie ran a marathon in the rain.",
    "Melanie planted tomatoes in the garden.",
    "The weather turned cold in November.",
]
QUERY = "When did Caroline go to the support group?"


def _ranked(client: MemoryClient, **weights: Any) -> tuple[list[str], Any]:
    response = client.retrieve(
        QUERY, user_id="alice", limit=10, include_cross_scope=False, weights=weights
    )
    return [r.node.content for r in response.results], response


def test_a_shared_entity_no_longer_outranks_the_answer(make_client: ClientFactory) -> None:
    client = make_client()
    client.store_many(CAROLINE + OTHER, user_id="alice")
    answer = OTHER[0]
    # The earlier formula: six of ten candidates share the query's entity, and its full
    # proximity lifts every one of them over the memory that answers the question.
    before, _ = _ranked(client, graph_specificity=None)
    assert before.index(answer) > 0
    after, response = _ranked(client)
    assert after[0] == answer
    assert after.index("Caroline joined the chess group at the library.") == 1
    # Every candidate is returned (limit 10 of 10), so N and each hop's reach are visible in
    # the results: the six Caroline memories at hop 1, the two Melanie memories one hop on.
    raw = [r.graph_proximity for r in response.results]
    assert len(raw) == 10
    assert (raw.count(1.0), raw.count(0.7), raw.count(0.0)) == (6, 2, 2)
    factor = {1.0: LN(10 / 6) / LN(10), 0.7: LN(10 / 2) / LN(10), 0.0: 1.0}
    for result in response.results:
        weighed = result.graph_proximity * factor[result.graph_proximity]
        assert result.score_trace.graph_proximity == weighed
    receipt = client.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
    assert receipt is not None
    assert replay_scores(receipt) == [r.composite_score for r in response.results]
    assert receipt.scoring.graph_specificity == "hop_idf"
