"""evaluate_learning (engine side): snapshot the owner's judgments and receipts, run the pure gate,
attest and persist the report. get_learning_evaluation reads a persisted report back."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from uuid import UUID

from prme.engine import Engine
from prme.errors import IntegrityError, InvalidInputError
from prme.learning.gate1 import evaluate_learning as evaluate_gate1
from prme.models.learning import LearningConfig, LearningEvaluation
from prme.models.receipt import RetrievalReceipt
from prme.models.scope import ScopeInput, normalize_scope_key
from prme.services import reports
from prme.services.receipts import gc_paused, get_receipt
from prme.services.relevance import iter_relevance
from prme.validation import require_int, require_owner

LEARNING_REPORT_OP = "learning_evaluation"
MAX_RECORDS_LIMIT = 100_000
TOO_MANY_RECORDS = "Feedback exceeds max_records; increase the bound or export a deliberate dataset"
MISSING_RECEIPT = "Feedback references a missing retrieval receipt"


def evaluate_learning(
    engine: Engine,
    *,
    user_id: str,
    scopes: ScopeInput = None,
    surface: str = "results",
    config: LearningConfig | Mapping[str, Any] | None = None,
    query_groups: Mapping[Any, str] | None = None,
    max_records: int = 10_000,
) -> LearningEvaluation:
    """Gate 1 over everything the owner has judged; returns the attested, persisted report."""
    owner = require_owner(user_id)
    bound = require_int(max_records, "max_records", minimum=1, maximum=MAX_RECORDS_LIMIT)
    normalize_scope_key(scopes, "scopes")  # fail on bad scopes before reading anything
    records = list(iter_relevance(engine, owner, limit=bound + 1))
    if len(records) > bound:
        raise InvalidInputError("max_records", TOO_MANY_RECORDS, bound)
    receipts: dict[UUID, RetrievalReceipt] = {}
    with gc_paused():
        for rid in sorted({r.request_id for r in records}, key=str):
            receipt = get_receipt(engine, rid, user_id=owner, verify_canonical=False)
            if receipt is None:
                raise IntegrityError(f"{MISSING_RECEIPT} ({rid})")
            receipts[rid] = receipt
        report = evaluate_gate1(
            receipts.values(),
            records,
            user_id=owner,
            scopes=scopes,
            surface=surface,
            config=config,
            query_groups=query_groups,
        )
    attested = reports.attest(engine, report)
    reports.persist(engine, LEARNING_REPORT_OP, owner, attested.input_checksum, attested)
    return attested


def get_learning_evaluation(
    engine: Engine, input_checksum: str, *, user_id: str
) -> LearningEvaluation | None:
    """The owner's persisted gate-1 report with this input checksum, or None."""
    owner = require_owner(user_id)
    if not isinstance(input_checksum, str) or not re.fullmatch(r"[0-9a-f]{64}", input_checksum):
        raise InvalidInputError("input_checksum", "must be a SHA-256 hex digest", input_checksum)
    return reports.load(engine, LEARNING_REPORT_OP, LearningEvaluation, owner, input_checksum)
