"""JudgmentEvidence: the columns gate 1 reads, cut from a receipt and validated when read back."""

from __future__ import annotations

import json
import uuid

import pytest
from pydantic import ValidationError

from prme import MemoryClient
from prme.canonical import canonical_json
from prme.models.evidence import TRACE_COLUMNS, JudgmentEvidence
from prme.models.receipt import RetrievalReceipt


@pytest.fixture
def judged_receipt(client: MemoryClient) -> RetrievalReceipt:
    client.store_many(
        [f"Aster keeps its data in store number {n}" for n in range(4)], user_id="alice"
    )
    response = client.retrieve("where does Aster keep data", user_id="alice", limit=4)
    receipt = client.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
    assert receipt is not None and len(receipt.candidates) >= 3
    return receipt


def evidence_json(**changes: object) -> str:
    base: dict[str, object] = {
        "feedback_id": str(uuid.UUID(int=1)),
        "request_id": str(uuid.UUID(int=2)),
        "user_id": "alice",
        "surface": "results",
        "receipt_checksum": "a" * 64,
        "query": "where is the data",
        "scopes": ["project"],
        "fusion": "weighted",
        "weights": [0.25, 0.2, 0.2, 0.1, 0.1, 0.15, 0.15, 0.35],
        "ranking_multipliers": None,
        "node_ids": [str(uuid.UUID(int=11)), str(uuid.UUID(int=10))],
        "relevant": [True, False],
        "scores": [0.5, 0.25],
        "in_context": [True, False],
        "has_content": [True, True],
        "traces": [[0.5] * len(TRACE_COLUMNS), [0.25] * len(TRACE_COLUMNS)],
    }
    return json.dumps({**base, **changes})


def test_stored_evidence_round_trips_canonically() -> None:
    evidence = JudgmentEvidence.model_validate_json(evidence_json())
    assert JudgmentEvidence.model_validate_json(canonical_json(evidence)) == evidence


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"scores": [0.5]}, "one entry per candidate"),
        ({"traces": [[0.5] * len(TRACE_COLUMNS)] * 3}, "one entry per candidate"),
        ({"relevant": [True]}, "one entry per candidate"),
        ({"relevant": [False, True]}, "relevant candidates first"),
        ({"relevant": [True, True]}, "each part by node id"),
        ({"node_ids": [str(uuid.UUID(int=10))] * 2}, "unique"),
        ({"relevant": [1, 0]}, "boolean"),
        ({"node_ids": ["A0000000-0000-0000-0000-000000000000", str(uuid.UUID(int=11))]}, "pattern"),
        ({"traces": [[0.5] * 9, [0.25] * len(TRACE_COLUMNS)]}, "at least 10"),
        ({"weights": [0.25] * 7}, "at least 8"),
        ({"ranking_multipliers": [1.0, 1.0, 1.0, 1.0, 1.0, 9.0]}, "less than or equal to 4"),
        ({"fusion": "max"}, "weighted"),
    ],
)
def test_malformed_evidence_is_refused(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        JudgmentEvidence.model_validate_json(evidence_json(**changes))


def test_evidence_lists_relevant_candidates_first_each_part_by_id(
    judged_receipt: RetrievalReceipt,
) -> None:
    returned = [c.node_id for c in judged_receipt.candidates]
    labels = {returned[2]: True, returned[0]: False, returned[1]: True}
    cut = JudgmentEvidence.from_receipt(judged_receipt, uuid.UUID(int=5), labels, "context")
    relevant = sorted(str(n) for n in (returned[1], returned[2]))
    assert cut.node_ids == (*relevant, str(returned[0]))
    assert cut.relevant == (True, True, False) and cut.positives == 2
    assert cut.surface == "context"
    last = judged_receipt.candidates[0]
    assert cut.scores[2] == last.score
    assert cut.traces[2] == tuple(getattr(last.trace, name) for name in TRACE_COLUMNS)
    assert cut.weights == judged_receipt.weights.formula()
    assert cut.receipt_checksum == judged_receipt.checksum
    # what the engine stores validates as it is read back
    assert JudgmentEvidence.model_validate_json(canonical_json(cut)) == cut
