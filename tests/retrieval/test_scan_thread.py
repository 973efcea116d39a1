"""The vector scan on the worker thread gives the same retrieval as the scan inline."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from prme import MemoryClient
from prme.models.scoring import ScoringWeights, product_default_scoring
from prme.services import retrieval

TOPICS = ("latency", "budget", "roadmap", "migration", "outage", "pricing", "security")
PROJECTS = ("Aster", "Basalt", "Cobalt", "Dunmore")


def _outcome(client: MemoryClient, query: str, **kwargs: Any) -> list[Any]:
    response = client.retrieve(
        query, user_id="alice", limit=15, reference_time=datetime(2031, 1, 1, tzinfo=UTC), **kwargs
    )
    return [
        (
            str(c.node.id),
            c.composite_score,
            c.semantic_score,
            c.paths,
            c.score_trace.model_dump(mode="json"),
        )
        for c in response.results
    ] + [(str(h.node_id), h.semantic_score) for h in response.cross_scope_hints]


@pytest.mark.parametrize("weights", [ScoringWeights(), product_default_scoring()])
def test_threaded_scan_equals_inline_scan(
    client: MemoryClient, monkeypatch: pytest.MonkeyPatch, weights: ScoringWeights
) -> None:
    client.store_many(
        [
            {
                "content": f"{p} {t} review {i}: {TOPICS[(i + 3) % len(TOPICS)]} looks fine",
                "scope": "project" if i % 2 else "personal",
            }
            for i in range(40)
            for p, t in [(PROJECTS[i % len(PROJECTS)], TOPICS[i % len(TOPICS)])]
        ],
        user_id="alice",
    )
    queries = [("Aster latency", None), ("budget for Cobalt", "project"), ("security", None)]
    monkeypatch.setattr(retrieval, "PARALLEL_SCAN_ROWS", 10**9)
    inline = [_outcome(client, q, scope=s, weights=weights) for q, s in queries]
    monkeypatch.setattr(retrieval, "PARALLEL_SCAN_ROWS", 1)
    threaded = [_outcome(client, q, scope=s, weights=weights) for q, s in queries]
    assert threaded == inline
    assert all(inline)
