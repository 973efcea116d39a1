"""evaluate_learning (engine side): snapshot the owner's judgments and receipts, run the pure gate,
attest and persist the report. get_learning_evaluation reads a persisted report back."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from prme.bulk import gc_paused
from prme.engine import Engine
from prme.errors import InvalidInputError
from prme.learning.gate1 import evaluate_judgments
from prme.limits import MAX_RECORDS_LIMIT
from prme.models.learning import LearningConfig, LearningEvaluation
from prme.models.scope import ScopeInput, normalize_scope_key
from prme.services import records, reports
from prme.services.records import LEARNING_REPORTS
from prme.services.relevance import read_judgments
from prme.validation import require_int, require_owner, require_text

TOO_MANY_RECORDS = "Feedback exceeds max_records; increase the bound or export a deliberate dataset"


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
    if isinstance(query_groups, Mapping) and len(query_groups) > MAX_RECORDS_LIMIT:
        raise InvalidInputError(
            "query_groups", f"must name at most {MAX_RECORDS_LIMIT} requests", len(query_groups)
        )
    if isinstance(query_groups, Mapping):  # gate 1 checks the rest of the mapping
        for name in query_groups.values():
            if isinstance(name, str):
                require_text(name, "query_groups", identifier=True)
    with gc_paused():
        judgments = read_judgments(engine, owner, limit=bound + 1)
        if len(judgments) > bound:
            raise InvalidInputError("max_records", TOO_MANY_RECORDS, bound)
        report = evaluate_judgments(
            judgments,
            user_id=owner,
            scopes=scopes,
            surface=surface,
            config=config,
            query_groups=query_groups,
        )
        del judgments
        # Still paused: encoding the megabyte report allocates tens of thousands of containers,
        # which would otherwise trigger full collections over everything alive.
        return reports.attest_and_persist(
            engine, LEARNING_REPORTS, owner, report.input_checksum, report
        )


def get_learning_evaluation(
    engine: Engine, input_checksum: str, *, user_id: str
) -> LearningEvaluation | None:
    """The owner's persisted gate-1 report with this input checksum, or None."""
    owner = require_owner(user_id)
    if not isinstance(input_checksum, str) or not re.fullmatch(r"[0-9a-f]{64}", input_checksum):
        raise InvalidInputError("input_checksum", "must be a SHA-256 hex digest", input_checksum)
    return records.find(engine, LEARNING_REPORTS, owner, input_checksum)
