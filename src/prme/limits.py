"""The size bounds of one request: each is defined here once and checked by the engine.

The engine validates every size a caller supplies (``InvalidInputError`` naming the field,
HTTP 422, MCP tool error, CLI ``error:``); configuration fields use the same constants, so a
configured default can never exceed what a request may ask for. The models import their
bounds from here (this module imports nothing, so every layer may use it); the LearningConfig
and FullRetrievalEvaluationConfig fields carry their own ranges.
"""

from __future__ import annotations

# Labels of one judgment (``RelevanceSubmission.labels``).
MAX_LABELS = 1000
# Trials of one gate-2 evaluation, and relevant ids of one holdout query.
MAX_TRIALS = 10_000
MAX_RELEVANT = 10_000

# Results of one retrieval (``limit``); also bounds ``max_per_source``/``max_per_evidence``
# (a cap above the limit cannot change anything) and ``retrieval.default_limit``.
MAX_RESULT_LIMIT = 1000
# Tokens of one packed context (``token_budget``, ``retrieval.token_budget``).
MAX_TOKEN_BUDGET = 1_000_000
# Candidates one channel may contribute (``retrieval.vector_k``, ``lexical_k``,
# ``graph_max_candidates``): configuration only, never per request.
MAX_CHANNEL_CANDIDATES = 10_000
# One page of a listing (memories, judgments, ranking profiles, pointer history).
MAX_PAGE_SIZE = 1000
# Judgments one gate-1 evaluation may read (``max_records``) and entries of ``query_groups``.
MAX_RECORDS_LIMIT = 100_000
# Receipt retention (``prune_receipts(older_than=...)``, ``prme pack prune``), in days.
MAX_RETENTION_DAYS = 36_525

__all__ = [
    "MAX_CHANNEL_CANDIDATES",
    "MAX_LABELS",
    "MAX_PAGE_SIZE",
    "MAX_RECORDS_LIMIT",
    "MAX_RELEVANT",
    "MAX_RESULT_LIMIT",
    "MAX_RETENTION_DAYS",
    "MAX_TOKEN_BUDGET",
    "MAX_TRIALS",
]
