"""Gate 1: fit bounded weight multipliers from explicit judgments on observed candidates (§E).

:func:`evaluate_learning` is pure: it takes receipts and relevance records (already loaded) and
returns a :class:`~prme.models.learning.LearningEvaluation`. It never reads storage, the clock,
the environment or a global RNG, and the same inputs in any order give the same report.

Rescoring uses each receipt's **pre-multiplier** weights: ``adjusted_weights(receipt.weights, m)``.
The baseline is neutral multipliers over those weights (base scoring); multipliers recorded at
retrieval time are only used to check that the receipt replays (DESIGN §6.4).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any
from uuid import UUID

import numpy as np
import numpy.typing as npt
from pydantic import ValidationError

from prme.canonical import canonical_json, checksum, sha256_hex
from prme.errors import InvalidInputError
from prme.learning.groups import group_id, group_identity, group_label, is_validation
from prme.learning.groups import normalize_query as normalized
from prme.learning.metrics import judged_ndcg, pairwise_accuracy
from prme.learning.stats import (
    mean,
    percentile_bootstrap_interval,
    sign_flip_p_value,
    win_tie_loss,
)
from prme.models.learning import (
    EXCLUSION_KEYS,
    TOLERANCE,
    LearningConfig,
    LearningEvaluation,
    QueryLearningResult,
    decide,
    learning_input_checksum,
    missing_groups,
)
from prme.models.receipt import RetrievalReceipt
from prme.models.relevance import RelevanceRecord
from prme.models.scope import ScopeInput, ScopeKey, normalize_scope_key, scope_set_key
from prme.models.scoring import (
    ADDITIVE_FEATURES,
    MULTIPLIER_MAX,
    MULTIPLIER_MIN,
    RankingMultipliers,
    ScoringWeights,
    adjusted_weights,
)
from prme.retrieval.scoring import ranking_key, weighted_scores

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
SURFACES = ("results", "context")
STEP_SIZES = (0.5, 0.25, 0.125, 0.0625)
LOG_MIN = math.log(MULTIPLIER_MIN)
LOG_MAX = math.log(MULTIPLIER_MAX)
# ScoreTrace fields the weighted formula reads, in the column order of the feature table.
TRACE_COLUMNS = (
    "semantic_similarity",
    "lexical_relevance",
    "graph_proximity",
    "recency_factor",
    "salience",
    "confidence",
    "epistemic_weight",
    "temporal_affinity",
    "node_type_boost",
    "path_score",
)
_ADDITIVE = slice(0, 6)
_EPISTEMIC, _TEMPORAL, _BOOST, _PATH = 6, 7, 8, 9


def _fail(field_name: str, message: str, value: Any = None) -> InvalidInputError:
    return InvalidInputError(field_name, message, value)


# --------------------------------------------------------------------------- input validation
def _config(config: LearningConfig | Mapping[str, Any] | None) -> LearningConfig:
    if config is None:
        return LearningConfig()
    if isinstance(config, LearningConfig):
        return config
    if isinstance(config, Mapping):
        try:
            return LearningConfig.model_validate(dict(config))
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise _fail(f"config.{loc}" if loc else "config", err["msg"]) from None
    raise _fail("config", "must be a LearningConfig or a mapping of its fields", config)


def _distinct_receipts(
    receipts: Iterable[RetrievalReceipt], owner: str
) -> tuple[dict[UUID, RetrievalReceipt], dict[UUID, str]]:
    by_id: dict[UUID, RetrievalReceipt] = {}
    sums: dict[UUID, str] = {}
    for receipt in receipts:
        if not isinstance(receipt, RetrievalReceipt):
            raise _fail("receipts", "must contain RetrievalReceipt models", type(receipt).__name__)
        if receipt.user_id != owner:
            raise _fail("receipts", "Learning inputs must belong to the requested owner")
        rid = receipt.request_id
        digest = receipt.checksum
        if rid in sums:
            if sums[rid] != digest:
                raise _fail("receipts", f"Conflicting receipt identity for request {rid}", str(rid))
            continue
        by_id[rid] = receipt
        sums[rid] = digest
    return by_id, sums


def _distinct_records(
    records: Iterable[RelevanceRecord], owner: str
) -> tuple[list[RelevanceRecord], dict[UUID, str]]:
    by_id: dict[UUID, RelevanceRecord] = {}
    sums: dict[UUID, str] = {}
    for record in records:
        if not isinstance(record, RelevanceRecord):
            raise _fail("records", "must contain RelevanceRecord models", type(record).__name__)
        if record.user_id != owner:
            raise _fail("records", "Learning inputs must belong to the requested owner")
        fid = record.feedback_id
        digest = sha256_hex(canonical_json(record))
        if fid in sums:
            if sums[fid] != digest:
                raise _fail("records", f"Conflicting feedback identity for {fid}", str(fid))
            continue
        by_id[fid] = record
        sums[fid] = digest
    ordered = sorted(by_id.values(), key=lambda r: str(r.feedback_id))
    return ordered, sums


def _explicit_groups(
    query_groups: Mapping[Any, Any] | None, receipts: Mapping[UUID, RetrievalReceipt]
) -> tuple[dict[UUID, str] | None, dict[str, str]]:
    """Validated ``{request_id: name}`` and the explicit name of each normalized query."""
    if query_groups is None:
        return None, {}
    if not isinstance(query_groups, Mapping):
        raise _fail("query_groups", "must map request ids to group names", query_groups)
    mapping: dict[UUID, str] = {}
    for key, name in query_groups.items():
        try:
            rid = key if isinstance(key, UUID) else UUID(str(key))
        except ValueError:
            raise _fail("query_groups", f"keys must be request ids (got {key!r})", key) from None
        if not isinstance(name, str) or not name.strip():
            raise _fail("query_groups", "Query group identities must be nonempty", name)
        if mapping.get(rid, name) != name:
            raise _fail(
                "query_groups", "Repeated queries cannot use different query groups", str(rid)
            )
        mapping[rid] = name
    by_query: dict[str, str] = {}
    for rid in sorted(mapping, key=str):
        receipt = receipts.get(rid)
        if receipt is None:
            raise _fail("query_groups", "Query groups refer to unknown receipts", str(rid))
        query = normalized(receipt.query)
        if by_query.setdefault(query, mapping[rid]) != mapping[rid]:
            raise _fail(
                "query_groups",
                f"Repeated queries cannot use different query groups ({query!r})",
                query,
            )
    return (mapping or None), by_query


def _check_record(
    record: RelevanceRecord, receipt: RetrievalReceipt | None, receipt_sum: str | None
) -> RetrievalReceipt:
    fid = str(record.feedback_id)
    if receipt is None:
        raise _fail("records", f"Every relevance record requires its saved receipt ({fid})", fid)
    if record.receipt_checksum != receipt_sum:
        raise _fail("records", f"Relevance receipt checksum mismatch ({fid})", fid)
    candidates = {c.node_id: c for c in receipt.candidates}
    for node_id, relevant in record.labels.items():
        candidate = candidates.get(node_id)
        if candidate is None:
            raise _fail(
                "records", f"Relevance label refers to an unobserved candidate ({node_id})", fid
            )
        if record.surface == "context" and (
            not candidate.in_context or (relevant and not candidate.has_content)
        ):
            raise _fail("records", f"Invalid context evidence label ({node_id})", fid)
    return receipt


# ----------------------------------------------------------------------------- observations
@dataclass
class _Request:
    receipt: RetrievalReceipt
    group: str
    positives: list[UUID]
    negatives: list[UUID]
    positive_ids: list[str]
    negative_ids: list[str]
    rows: list[int] = field(default_factory=list)  # feature-table rows, positives then negatives


@dataclass
class _Group:
    group_id: str
    label: str
    queries: set[str]
    validation: bool
    requests: list[_Request] = field(default_factory=list)


def _weights_key(weights: ScoringWeights) -> tuple[float, ...]:
    # Everything weighted_score reads from the weights (node-type boosts live in the trace).
    return (*weights.additive(), weights.temporal_boost, weights.relevance_floor)


class _Table:
    """Trace features of the judged candidates of every observation, one row each."""

    def __init__(self, requests: list[_Request]) -> None:
        rows: list[tuple[float, ...]] = []
        ids: list[str] = []
        classes: dict[tuple[float, ...], ScoringWeights] = {}
        class_of: list[tuple[float, ...]] = []
        for request in requests:
            candidates = {c.node_id: c for c in request.receipt.candidates}
            key = _weights_key(request.receipt.weights)
            classes.setdefault(key, request.receipt.weights)
            judged = [*request.positives, *request.negatives]
            request.rows = list(range(len(rows), len(rows) + len(judged)))
            rows.extend(_trace_rows(candidates[node_id] for node_id in judged))
            ids.extend([*request.positive_ids, *request.negative_ids])
            class_of.extend([key] * len(judged))
        self.features: FloatArray = np.asarray(rows, dtype=np.float64).reshape(-1, 10)
        self.node_ids = ids
        self.path_scores: list[float] = self.features[:, _PATH].tolist()
        self.classes = classes
        self.members: dict[tuple[float, ...], IntArray] = {
            key: np.asarray([i for i, k in enumerate(class_of) if k == key], dtype=np.int64)
            for key in classes
        }

    def exact_scores(self, multipliers: RankingMultipliers) -> list[float]:
        """Every row's score by the exact replay arithmetic (weighted_scores ≡ weighted_score)."""
        out = [0.0] * len(self.node_ids)
        for key, base in self.classes.items():
            index = self.members[key]
            block = self.features[index]
            columns = {name: block[:, j] for j, name in enumerate(TRACE_COLUMNS)}
            for i, score in zip(
                index.tolist(),
                weighted_scores(columns, adjusted_weights(base, multipliers)),
                strict=True,
            ):
                out[i] = score
        return out


_trace_values = itemgetter(*TRACE_COLUMNS)


def _trace_rows(candidates: Iterable[Any]) -> list[tuple[float, ...]]:
    return [_trace_values(c.trace.__dict__) for c in candidates]


def _columns(rows: list[tuple[float, ...]]) -> dict[str, FloatArray]:
    block = np.asarray(rows, dtype=np.float64).reshape(-1, len(TRACE_COLUMNS))
    return {name: block[:, j] for j, name in enumerate(TRACE_COLUMNS)}


def _check_replays(receipts: list[RetrievalReceipt]) -> None:
    """The recorded multipliers over the pre-multiplier weights reproduce every stored score.

    Equivalent to ``receipt.replay_scores() == [c.score ...]`` for each receipt, batched: receipts
    with the same weights and multipliers are replayed in one vectorized call (same arithmetic).
    """
    classes: dict[tuple[Any, ...], list[RetrievalReceipt]] = {}
    for receipt in receipts:
        recorded = receipt.ranking_multipliers
        applied = None if recorded is None or recorded.is_neutral else recorded.as_tuple()
        classes.setdefault((_weights_key(receipt.weights), applied), []).append(receipt)
    mismatched: list[str] = []
    for members in classes.values():
        first = members[0]
        weights = adjusted_weights(first.weights, first.ranking_multipliers)
        candidates = [c for r in members for c in r.candidates]
        replayed = weighted_scores(_columns(_trace_rows(candidates)), weights)
        if replayed != [c.score for c in candidates]:
            start = 0
            for receipt in members:
                end = start + len(receipt.candidates)
                if replayed[start:end] != [c.score for c in receipt.candidates]:
                    mismatched.append(str(receipt.request_id))
                start = end
    if mismatched:
        rid = min(mismatched)
        raise _fail("receipts", f"Baseline score replay mismatch for request {rid}", rid)


# ---------------------------------------------------------------------------------- fitting
class _Objective:
    """``L(m) = mean_G mean_{r∈G} mean_{(p,n)} softplus(margin_scale·(s_n − s_p)) + λ·Σ(ln m)²``.

    Scores use the float form of the weighted formula with ``w = w0⊙m / Σ(w0⊙m)``:
    ``s = (x⊙w0)·m / (w0·m) × epistemic × boost + temporal_boost × affinity × boost``, capped at
    ``semantic + lexical`` below the relevance floor (no final rounding).
    """

    def __init__(self, table: _Table, groups: list[_Group], config: LearningConfig) -> None:
        used: list[int] = []  # feature-table rows of the training requests
        base_rows: list[tuple[float, ...]] = []
        pos: list[int] = []
        neg: list[int] = []
        weight: list[float] = []
        for group in groups:
            for request in group.requests:
                base = request.receipt.weights
                first = len(used)
                used.extend(request.rows)
                base_rows.extend(
                    [(*base.additive(), base.relevance_floor, base.temporal_boost)]
                    * len(request.rows)
                )
                n_pos = len(request.positives)
                n_neg = len(request.negatives)
                share = 1.0 / (len(groups) * len(group.requests) * n_pos * n_neg)
                for p in range(first, first + n_pos):
                    for q in range(first + n_pos, first + n_pos + n_neg):
                        pos.append(p)
                        neg.append(q)
                        weight.append(share)
        f = table.features[np.asarray(used, dtype=np.int64)]
        b = np.asarray(base_rows, dtype=np.float64).reshape(-1, 8)
        w0, floor, temporal_boost = b[:, :6], b[:, 6], b[:, 7]
        scale = f[:, _EPISTEMIC] * f[:, _BOOST]
        self.numerator = [f[:, j] * w0[:, j] * scale for j in range(6)]
        self.denominator = [w0[:, j] for j in range(6)]
        affinity = f[:, _TEMPORAL]
        self.offset = np.where(affinity != 0.0, temporal_boost * affinity, 0.0) * f[:, _BOOST]
        relevance = f[:, 0] + f[:, 1]
        self.capped = (floor > 0.0) & (relevance < floor)
        self.relevance = relevance
        self.pos = np.asarray(pos, dtype=np.int64)
        self.neg = np.asarray(neg, dtype=np.int64)
        self.weight = np.asarray(weight, dtype=np.float64)
        self.margin_scale = config.margin_scale
        self.regularization = config.regularization

    def __call__(self, logs: FloatArray) -> float:
        m = np.clip(np.exp(logs), MULTIPLIER_MIN, MULTIPLIER_MAX).tolist()
        # Explicit left-to-right sums over the six features (no BLAS): the same bits everywhere.
        numerator = self.numerator[0] * m[0]
        denominator = self.denominator[0] * m[0]
        for j in range(1, 6):
            numerator = numerator + self.numerator[j] * m[j]
            denominator = denominator + self.denominator[j] * m[j]
        scores = numerator / denominator + self.offset
        scores = np.where(self.capped, np.minimum(scores, self.relevance), scores)
        z = self.margin_scale * (scores[self.neg] - scores[self.pos])
        softplus = np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z)))
        penalty = math.fsum(x * x for x in logs.tolist())
        return float((self.weight * softplus).sum()) + self.regularization * penalty


def _fit(objective: _Objective, passes: int) -> tuple[FloatArray, float, float]:
    """Coordinate descent in log space (§E.9): returns (log multipliers, loss before, after)."""
    current = np.zeros(len(ADDITIVE_FEATURES))
    before = best = objective(current)
    for step in STEP_SIZES:
        for _ in range(passes):
            changed = False
            for f in range(len(ADDITIVE_FEATURES)):
                winner: FloatArray | None = None
                for delta in (-step, step):
                    proposal = current.copy()
                    proposal[f] = min(LOG_MAX, max(LOG_MIN, current[f] + delta))
                    if proposal[f] == current[f]:
                        continue
                    loss = objective(proposal)
                    if loss < best - TOLERANCE:
                        best, winner = loss, proposal
                if winner is not None:
                    current, changed = winner, True
            if not changed:
                break
    return current, before, best


def _multipliers(logs: FloatArray) -> RankingMultipliers:
    values = np.clip(np.exp(logs), MULTIPLIER_MIN, MULTIPLIER_MAX).tolist()
    return RankingMultipliers(**dict(zip(ADDITIVE_FEATURES, values, strict=True)))


# ---------------------------------------------------------------------------------- metrics
def _ranked(request: _Request, table: _Table, scores: list[float]) -> list[str]:
    """The judged candidates of one request in ranking-key order under the given scores."""
    order = sorted(
        request.rows,
        key=lambda i: ranking_key(scores[i], table.path_scores[i], table.node_ids[i]),
    )
    return [table.node_ids[i] for i in order]


def _metrics(request: _Request, ranked: list[str], k: int) -> tuple[float, float]:
    """(pairwise accuracy, judged NDCG@k) of one request's judged order."""
    return (
        pairwise_accuracy(ranked, request.positive_ids, request.negative_ids),
        judged_ndcg(ranked, request.positive_ids, k),
    )


def _group_result(
    group: _Group, table: _Table, baseline: list[float], candidate: list[float], k: int
) -> QueryLearningResult:
    base: list[tuple[float, float]] = []
    cand: list[tuple[float, float]] = []
    for request in group.requests:
        before = _ranked(request, table, baseline)
        after = _ranked(request, table, candidate)
        base.append(_metrics(request, before, k))
        cand.append(base[-1] if after == before else _metrics(request, after, k))
    return QueryLearningResult(
        group_id=group.group_id,
        group_label=group.label,
        normalized_queries=tuple(sorted(group.queries)),
        split="validation" if group.validation else "train",
        request_ids=tuple(r.receipt.request_id for r in group.requests),
        baseline_pairwise_accuracy=mean([m[0] for m in base]),
        candidate_pairwise_accuracy=mean([m[0] for m in cand]),
        baseline_judged_ndcg=mean([m[1] for m in base]),
        candidate_judged_ndcg=mean([m[1] for m in cand]),
    )


# ------------------------------------------------------------------------------ the gate
@dataclass
class Observations:
    """Validated gate-1 inputs: snapshot identities, exclusion counts and the observed groups."""

    user_id: str
    scopes: ScopeKey
    surface: str
    config: LearningConfig
    query_groups: dict[UUID, str] | None
    receipt_checksums: dict[UUID, str]
    record_checksums: dict[UUID, str]
    feedback_ids: tuple[UUID, ...]
    exclusions: dict[str, int]
    groups: list[_Group]  # sorted by group id; requests in request-id order

    @property
    def training(self) -> list[_Group]:
        return [g for g in self.groups if not g.validation]

    @property
    def requests(self) -> list[_Request]:
        return [r for g in self.groups for r in g.requests]


def observe(
    receipts: Iterable[RetrievalReceipt],
    records: Iterable[RelevanceRecord],
    *,
    user_id: str,
    scopes: ScopeInput = None,
    surface: str = "results",
    config: LearningConfig | Mapping[str, Any] | None = None,
    query_groups: Mapping[Any, str] | None = None,
) -> Observations:
    """§E.3–E.6: validate every input, count exclusions, collapse votes, group the requests."""
    if not isinstance(user_id, str) or not user_id.strip():
        raise _fail("user_id", "Learning requires an owner and a valid relevance surface", user_id)
    if surface not in SURFACES:
        raise _fail("surface", "Learning requires an owner and a valid relevance surface", surface)
    key: ScopeKey = normalize_scope_key(scopes, "scopes")
    cfg = _config(config)
    by_request, receipt_sums = _distinct_receipts(receipts, user_id)
    ordered, record_sums = _distinct_records(records, user_id)
    explicit, names_by_query = _explicit_groups(query_groups, by_request)
    checked = [
        _check_record(r, by_request.get(r.request_id), receipt_sums.get(r.request_id))
        for r in ordered
    ]

    # ---- exclusions (first matching rule wins) and per-candidate votes
    exclusions = dict.fromkeys(EXCLUSION_KEYS, 0)
    votes: dict[UUID, dict[UUID, set[bool]]] = {}
    for record, receipt in zip(ordered, checked, strict=True):
        if record.surface != surface:
            exclusions["other_surface_records"] += 1
        elif scope_set_key(receipt.scopes) != key:
            exclusions["other_scope_records"] += 1
        # legacy_receipt_records: prme's receipt schema always carries provenance, so it stays 0.
        elif receipt.scoring.fusion != "weighted":
            exclusions["rank_fusion_receipt_records"] += 1
        else:
            per_node = votes.setdefault(receipt.request_id, {})
            for node_id, relevant in record.labels.items():
                per_node.setdefault(node_id, set()).add(relevant)

    # ---- observations, in request-id order, grouped by query
    groups: dict[str, _Group] = {}
    group_of_query: dict[str, tuple[list[str], str]] = {}  # repeats share one group id
    for rid in sorted(votes, key=str):
        per_node = votes[rid]
        exclusions["conflicting_candidate_labels"] += sum(
            1 for v in per_node.values() if len(v) > 1
        )
        named = sorted((str(n), n) for n in per_node)
        positive = [(t, n) for t, n in named if per_node[n] == {True}]
        negative = [(t, n) for t, n in named if per_node[n] == {False}]
        pairs = len(positive) * len(negative)
        if pairs == 0:
            exclusions["requests_without_explicit_pairs"] += 1
            continue
        if pairs > cfg.max_pairs_per_request:
            raise _fail(
                "max_pairs_per_request",
                f"Explicit pair count exceeds max_pairs_per_request ({pairs} pairs in request "
                f"{rid}, limit {cfg.max_pairs_per_request})",
                pairs,
            )
        receipt = by_request[rid]
        query = normalized(receipt.query)
        known = group_of_query.get(query)
        if known is None:
            identity = group_identity(query, names_by_query.get(query))
            known = group_of_query[query] = (identity, group_id(identity))
        identity, gid = known
        group = groups.get(gid)
        if group is None:
            validation = is_validation(cfg.seed, gid, cfg.validation_fraction)
            group = groups[gid] = _Group(gid, group_label(identity), set(), validation)
        group.queries.add(query)
        group.requests.append(
            _Request(
                receipt,
                gid,
                [n for _, n in positive],
                [n for _, n in negative],
                [t for t, _ in positive],
                [t for t, _ in negative],
            )
        )
    _check_replays([r.receipt for g in groups.values() for r in g.requests])
    return Observations(
        user_id=user_id,
        scopes=key,
        surface=surface,
        config=cfg,
        query_groups=explicit,
        receipt_checksums=dict(sorted(receipt_sums.items(), key=lambda kv: str(kv[0]))),
        record_checksums=record_sums,
        feedback_ids=tuple(r.feedback_id for r in ordered),
        exclusions=exclusions,
        groups=[groups[g] for g in sorted(groups)],
    )


def fit_multipliers(
    observations: Observations, table: _Table | None = None
) -> tuple[RankingMultipliers, float, float]:
    """§E.9 on the training groups only: (multipliers, training loss before, after)."""
    cfg = observations.config
    table = table or _Table(observations.requests)
    objective = _Objective(table, observations.training, cfg)
    logs, before, after = _fit(objective, cfg.passes_per_step)
    return _multipliers(logs), before, after


def evaluate_learning(
    receipts: Iterable[RetrievalReceipt],
    records: Iterable[RelevanceRecord],
    *,
    user_id: str,
    scopes: ScopeInput = None,
    surface: str = "results",
    config: LearningConfig | Mapping[str, Any] | None = None,
    query_groups: Mapping[Any, str] | None = None,
) -> LearningEvaluation:
    """Fit ranking multipliers on training query groups and judge them on validation groups.

    Args:
        receipts: the owner's saved receipts (at least those the records reference).
        records: the owner's relevance records; identical duplicates collapse.
        user_id: the owner every receipt and record must belong to.
        scopes: the exact scope set to learn for (normalized; None = unfiltered receipts only).
        surface: ``"results"`` or ``"context"``; records of the other surface are excluded.
        config: a LearningConfig (or its fields); defaults per reference §E.1.
        query_groups: ``{request_id: group name}`` merging paraphrases into named groups.

    Returns:
        An unattested LearningEvaluation (decision ``insufficient_data``, ``no_improvement``
        or ``improved_on_observed_candidates``).

    Raises:
        InvalidInputError: any §E.3 validation failure, a replay mismatch, or too many pairs;
            the field names the offending argument.
    """
    obs = observe(
        receipts,
        records,
        user_id=user_id,
        scopes=scopes,
        surface=surface,
        config=config,
        query_groups=query_groups,
    )
    cfg = obs.config
    train = obs.training
    requests = obs.requests
    coverage = {
        "feedback_records": len(obs.feedback_ids),
        "requests_with_pairs": len(requests),
        "training_queries": len(train),
        "validation_queries": len(obs.groups) - len(train),
        "explicit_pairs": sum(len(r.positives) * len(r.negatives) for r in requests),
    }
    explicit = obs.query_groups
    snapshot_checksum = checksum(
        {
            "receipts": {str(rid): s for rid, s in obs.receipt_checksums.items()},
            "records": {str(fid): s for fid, s in obs.record_checksums.items()},
            "query_groups": None if explicit is None else {str(k): v for k, v in explicit.items()},
        }
    )
    common: dict[str, Any] = {
        "user_id": obs.user_id,
        "scopes": obs.scopes,
        "surface": obs.surface,
        "config": cfg,
        "query_groups": explicit,
        "snapshot_checksum": snapshot_checksum,
        "input_checksum": learning_input_checksum(
            snapshot_checksum=snapshot_checksum,
            user_id=obs.user_id,
            scopes=obs.scopes,
            surface=obs.surface,
            config=cfg,
            query_groups=explicit,
        ),
        "feedback_ids": obs.feedback_ids,
        "receipt_checksums": obs.receipt_checksums,
        "coverage": coverage,
        "exclusions": obs.exclusions,
    }
    if (
        coverage["training_queries"] < cfg.min_training_queries
        or coverage["validation_queries"] < cfg.min_validation_queries
    ):
        return LearningEvaluation(
            **common,
            multipliers=RankingMultipliers(),
            decision="insufficient_data",
            training_loss_before=None,
            training_loss_after=None,
            validation_ndcg_gain=None,
            validation_pairwise_gain=None,
            validation_gain_interval=None,
            win_tie_loss=None,
            randomization_p_value=None,
            queries=(),
            missing_groups=missing_groups(coverage, cfg),
        )

    # ---- fit on training groups only, then score every group with the exact replay
    table = _Table(requests)
    fitted, before, after = fit_multipliers(obs, table)
    baseline_scores = table.exact_scores(RankingMultipliers())
    candidate_scores = table.exact_scores(fitted)
    results = tuple(
        _group_result(g, table, baseline_scores, candidate_scores, cfg.ndcg_k) for g in obs.groups
    )
    held_out = [q for q in results if q.split == "validation"]
    diffs = [q.ndcg_diff for q in held_out]
    gain = mean(diffs)
    pairwise_gain = mean([q.pairwise_diff for q in held_out])
    interval = percentile_bootstrap_interval(diffs, samples=cfg.bootstrap_samples, seed=cfg.seed)
    return LearningEvaluation(
        **common,
        multipliers=fitted,
        decision=decide(gain, interval[0], pairwise_gain, cfg.min_ndcg_gain),
        training_loss_before=before,
        training_loss_after=after,
        validation_ndcg_gain=gain,
        validation_pairwise_gain=pairwise_gain,
        validation_gain_interval=interval,
        win_tie_loss=win_tie_loss(diffs),
        randomization_p_value=sign_flip_p_value(
            diffs, samples=cfg.bootstrap_samples, seed=cfg.seed
        ),
        queries=results,
    )
