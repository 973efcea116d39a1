"""Gate 1: fit bounded weight multipliers from explicit judgments on observed candidates (§E).

Everything here is pure: no storage, clock, environment or global RNG, and the same inputs in
any order give the same report. Two entry points share one core:

- :func:`evaluate_learning` takes whole receipts and relevance records (tests, notebooks);
- :func:`evaluate_judgments` takes each record with its :class:`JudgmentEvidence` — the columns
  of the labelled candidates the engine cut from the verified receipt when it admitted the
  judgment — so the engine never re-parses thousands of whole receipts.

Both reduce to a :class:`Snapshot` and produce byte-identical reports for the same judgments.
Rescoring uses each receipt's **pre-multiplier** weights: ``adjusted_weights(weights, m)``. The
baseline is neutral multipliers over those weights (base scoring); multipliers recorded at
retrieval time are only used to check that the judged scores replay (DESIGN §6.4).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import numpy as np
import numpy.typing as npt
from pydantic import TypeAdapter, ValidationError

from prme.bulk import gc_paused
from prme.canonical import canonical_json, checksum, sha256_hex
from prme.errors import InvalidInputError
from prme.learning.groups import group_id, group_identity, group_label, is_validation
from prme.learning.groups import normalize_query as normalized
from prme.learning.metrics import discount
from prme.learning.stats import (
    mean,
    percentile_bootstrap_interval,
    sign_flip_p_value,
    win_tie_loss,
)
from prme.models.base import uuid_text_order
from prme.models.evidence import TRACE_COLUMNS, JudgmentEvidence
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
from prme.retrieval.scoring import weighted_scores

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
SURFACES = ("results", "context")
STEP_SIZES = (0.5, 0.25, 0.125, 0.0625)
LOG_MIN = math.log(MULTIPLIER_MIN)
LOG_MAX = math.log(MULTIPLIER_MAX)
_EPISTEMIC, _TEMPORAL, _BOOST, _PATH = (
    TRACE_COLUMNS.index(name)
    for name in ("epistemic_weight", "temporal_affinity", "node_type_boost", "path_score")
)


# {UUID: str} with canonical-text keys, converted inside pydantic-core (tens of thousands).
_TEXT_KEYS = TypeAdapter(dict[UUID, str])


def _fail(field_name: str, message: str, value: Any = None) -> InvalidInputError:
    return InvalidInputError(field_name, message, value)


# --------------------------------------------------------------------------- the snapshot
@dataclass(frozen=True, slots=True)
class Judgment:
    """One relevance judgment as gate 1 reads it: its evidence (identity, surface, labels,
    receipt binding and the labelled candidates' columns) and the SHA-256 of the record's
    canonical JSON, which the snapshot checksum binds."""

    evidence: JudgmentEvidence
    record_checksum: str


@dataclass(frozen=True)
class Snapshot:
    """Identity-checked gate-1 inputs: distinct judgments and the receipts they may name."""

    judgments: tuple[Judgment, ...]  # ascending str(feedback_id)
    receipts: dict[UUID, tuple[str, str]]  # request id → (receipt checksum, query)


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


def _check_record_owner(record: object, owner: str) -> RelevanceRecord:
    if not isinstance(record, RelevanceRecord):
        raise _fail("records", "must contain RelevanceRecord models", type(record).__name__)
    if record.user_id != owner:
        raise _fail("records", "Learning inputs must belong to the requested owner")
    return record


def _record_conflict(fid: UUID) -> InvalidInputError:
    return _fail("records", f"Conflicting feedback identity for {fid}", str(fid))


def _distinct_records(
    records: Iterable[RelevanceRecord], owner: str
) -> tuple[list[RelevanceRecord], dict[UUID, str]]:
    by_id: dict[UUID, RelevanceRecord] = {}
    sums: dict[UUID, str] = {}
    for item in records:
        record = _check_record_owner(item, owner)
        fid = record.feedback_id
        digest = sha256_hex(canonical_json(record))
        if fid in sums:
            if sums[fid] != digest:
                raise _record_conflict(fid)
            continue
        by_id[fid] = record
        sums[fid] = digest
    ordered = sorted(by_id.values(), key=lambda r: r.feedback_id.int)
    return ordered, sums


def _receipt_for(
    record: RelevanceRecord, receipt: RetrievalReceipt | None, receipt_sum: str | None
) -> RetrievalReceipt:
    if receipt is None:
        fid = str(record.feedback_id)
        raise _fail("records", f"Every relevance record requires its saved receipt ({fid})", fid)
    if record.receipt_checksum != receipt_sum:
        fid = str(record.feedback_id)
        raise _fail("records", f"Relevance receipt checksum mismatch ({fid})", fid)
    returned = {c.node_id for c in receipt.candidates}
    if not returned.issuperset(record.labels):
        unobserved = min(str(n) for n in record.labels if n not in returned)
        raise _fail(
            "records",
            f"Relevance label refers to an unobserved candidate ({unobserved})",
            str(record.feedback_id),
        )
    return receipt


def snapshot_from_receipts(
    receipts: Iterable[RetrievalReceipt], records: Iterable[RelevanceRecord], owner: str
) -> Snapshot:
    """Whole receipts and records → a snapshot (each record's evidence cut from its receipt)."""
    by_request, receipt_sums = _distinct_receipts(receipts, owner)
    ordered, record_sums = _distinct_records(records, owner)
    judgments = []
    for record in ordered:
        rid = record.request_id
        receipt = _receipt_for(record, by_request.get(rid), receipt_sums.get(rid))
        evidence = JudgmentEvidence.from_receipt(
            receipt, record.feedback_id, record.labels, record.surface
        )
        judgments.append(Judgment(evidence, record_sums[record.feedback_id]))
    known = {rid: (receipt_sums[rid], r.query) for rid, r in by_request.items()}
    return Snapshot(tuple(judgments), known)


def snapshot_from_judgments(judgments: Iterable[Judgment], owner: str) -> Snapshot:
    """Judgments with their stored evidence → a snapshot (the receipts are the judged ones)."""
    by_id: dict[UUID, Judgment] = {}
    known: dict[UUID, tuple[str, str]] = {}
    for judgment in judgments:
        if not isinstance(judgment, Judgment):
            raise _fail("judgments", "must contain Judgment values", type(judgment).__name__)
        evidence = judgment.evidence
        if evidence.user_id != owner:
            raise _fail("records", "Learning inputs must belong to the requested owner")
        fid, rid = evidence.feedback_id, evidence.request_id
        seen = by_id.get(fid)
        if seen is not None:
            if seen.record_checksum != judgment.record_checksum:
                raise _record_conflict(fid)
            continue
        identity = (evidence.receipt_checksum, evidence.query)
        if known.setdefault(rid, identity) != identity:
            raise _fail("receipts", f"Conflicting receipt identity for request {rid}", str(rid))
        by_id[fid] = judgment
    ordered = tuple(by_id[fid] for fid in sorted(by_id, key=uuid_text_order))
    return Snapshot(ordered, known)


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


@dataclass(frozen=True)
class _Request:
    """What gate 1 was asked: owner, scope set, surface and config, validated."""

    user_id: str
    scopes: ScopeKey
    surface: str
    config: LearningConfig


def _request(
    user_id: str,
    scopes: ScopeInput,
    surface: str,
    config: LearningConfig | Mapping[str, Any] | None,
) -> _Request:
    if not isinstance(user_id, str) or not user_id.strip():
        raise _fail("user_id", "Learning requires an owner and a valid relevance surface", user_id)
    if surface not in SURFACES:
        raise _fail("surface", "Learning requires an owner and a valid relevance surface", surface)
    return _Request(user_id, normalize_scope_key(scopes, "scopes"), surface, _config(config))


def _explicit_groups(
    query_groups: Mapping[Any, Any] | None, queries: Mapping[UUID, str]
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
    for rid in sorted(mapping, key=uuid_text_order):
        text = queries.get(rid)
        if text is None:
            raise _fail("query_groups", "Query groups refer to unknown receipts", str(rid))
        query = normalized(text)
        if by_query.setdefault(query, mapping[rid]) != mapping[rid]:
            raise _fail(
                "query_groups",
                f"Repeated queries cannot use different query groups ({query!r})",
                query,
            )
    return (mapping or None), by_query


def _check_context_labels(evidence: JudgmentEvidence) -> None:
    """Context judgments label included entries, and relevant ones have content (§E.3)."""
    for i, node_id in enumerate(evidence.node_ids):
        if not evidence.in_context[i] or (evidence.relevant[i] and not evidence.has_content[i]):
            fid = str(evidence.feedback_id)
            raise _fail("records", f"Invalid context evidence label ({node_id})", fid)


# ----------------------------------------------------------------------------- observations
@dataclass(slots=True)
class _Observed:
    """One judged request: its judged candidates, positives first, each half sorted by id."""

    request_id: UUID
    weights: tuple[float, ...]  # ScoringWeights.formula() of the pre-multiplier weights
    multipliers: tuple[float, ...] | None  # recorded at retrieval
    positive_ids: list[str]
    negative_ids: list[str]
    traces: list[tuple[float, ...]]  # of the judged candidates, in that order
    scores: list[float]  # recorded, in that order
    first_row: int = 0  # of its rows in the feature table


@dataclass
class _Group:
    group_id: str
    label: str
    queries: set[str]
    validation: bool
    requests: list[_Observed]


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
    def requests(self) -> list[_Observed]:
        return [r for g in self.groups for r in g.requests]


def _conflicting_receipt(rid: UUID) -> InvalidInputError:
    return _fail("receipts", f"Conflicting receipt identity for request {rid}", str(rid))


def _votes(
    rid: UUID, entries: list[JudgmentEvidence]
) -> tuple[dict[str, bool], dict[str, tuple[int, int]], int]:
    """Collapse the labels of several judgments of one request (§E.5): the agreed label of
    each candidate, where its evidence is (entry index, column), and the conflicts dropped."""
    first = entries[0]
    seen: dict[str, set[bool]] = {}
    where: dict[str, tuple[int, int]] = {}
    for number, evidence in enumerate(entries):
        if (evidence.weights, evidence.ranking_multipliers) != (
            first.weights,
            first.ranking_multipliers,
        ):
            raise _conflicting_receipt(rid)
        for i, node_id in enumerate(evidence.node_ids):
            seen.setdefault(node_id, set()).add(evidence.relevant[i])
            known = where.setdefault(node_id, (number, i))
            other = entries[known[0]]
            if (other.traces[known[1]], other.scores[known[1]]) != (
                evidence.traces[i],
                evidence.scores[i],
            ):
                raise _conflicting_receipt(rid)
    agreed = {n: next(iter(v)) for n, v in seen.items() if len(v) == 1}
    return agreed, {n: where[n] for n in agreed}, len(seen) - len(agreed)


def _observed(rid: UUID, entries: list[JudgmentEvidence]) -> tuple[_Observed, int]:
    """The request's judged candidates (positives first) and its conflicting-label count."""
    first = entries[0]
    if len(entries) == 1:  # the common case: already in pairing order, nothing to collapse
        split = first.positives
        ids = first.node_ids
        observed = _Observed(
            rid,
            first.weights,
            first.ranking_multipliers,
            list(ids[:split]),
            list(ids[split:]),
            list(first.traces),
            list(first.scores),
        )
        return observed, 0
    agreed, where, conflicts = _votes(rid, entries)
    positive = sorted([n for n, relevant in agreed.items() if relevant])
    negative = sorted([n for n, relevant in agreed.items() if not relevant])
    cells = [where[n] for n in (*positive, *negative)]
    observed = _Observed(
        rid,
        first.weights,
        first.ranking_multipliers,
        positive,
        negative,
        [entries[e].traces[i] for e, i in cells],
        [entries[e].scores[i] for e, i in cells],
    )
    return observed, conflicts


def observe(
    snapshot: Snapshot,
    *,
    user_id: str,
    scopes: ScopeInput = None,
    surface: str = "results",
    config: LearningConfig | Mapping[str, Any] | None = None,
    query_groups: Mapping[Any, str] | None = None,
) -> Observations:
    """§E.3–E.6: check labels, count exclusions, collapse votes, group the requests."""
    return _observe(snapshot, _request(user_id, scopes, surface, config), query_groups)


def _observe(
    snapshot: Snapshot, asked: _Request, query_groups: Mapping[Any, str] | None
) -> Observations:
    cfg = asked.config
    queries = {rid: query for rid, (_, query) in snapshot.receipts.items()}
    explicit, names_by_query = _explicit_groups(query_groups, queries)

    # ---- exclusions (first matching rule wins); included judgments by request
    exclusions = dict.fromkeys(EXCLUSION_KEYS, 0)
    included: dict[UUID, list[JudgmentEvidence]] = {}
    scope_keys: dict[Any, ScopeKey] = {}
    for judgment in snapshot.judgments:
        evidence = judgment.evidence
        if evidence.surface == "context":
            _check_context_labels(evidence)
        scope_key = scope_keys.get(evidence.scopes)
        if scope_key is None:
            scope_key = scope_keys[evidence.scopes] = scope_set_key(evidence.scopes)
        if evidence.surface != asked.surface:
            exclusions["other_surface_records"] += 1
        elif scope_key != asked.scopes:
            exclusions["other_scope_records"] += 1
        # legacy_receipt_records: prme's receipt schema always carries provenance, so it stays 0.
        elif evidence.fusion != "weighted":
            exclusions["rank_fusion_receipt_records"] += 1
        else:
            included.setdefault(evidence.request_id, []).append(evidence)

    # ---- observations, in request-id order, grouped by query
    groups: dict[str, _Group] = {}
    group_of_query: dict[str, tuple[list[str], str]] = {}  # repeats share one group id
    normalized_of: dict[str, str] = {}  # repeated query texts normalize once
    for rid in sorted(included, key=uuid_text_order):
        observed, conflicts = _observed(rid, included[rid])
        exclusions["conflicting_candidate_labels"] += conflicts
        pairs = len(observed.positive_ids) * len(observed.negative_ids)
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
        text = queries[rid]
        query = normalized_of.get(text) or normalized_of.setdefault(text, normalized(text))
        known_group = group_of_query.get(query)
        if known_group is None:
            identity = group_identity(query, names_by_query.get(query))
            known_group = group_of_query[query] = (identity, group_id(identity))
        identity, gid = known_group
        group = groups.get(gid)
        if group is None:
            validation = is_validation(cfg.seed, gid, cfg.validation_fraction)
            group = groups[gid] = _Group(gid, group_label(identity), set(), validation, [])
        group.queries.add(query)
        group.requests.append(observed)
    return Observations(
        user_id=asked.user_id,
        scopes=asked.scopes,
        surface=asked.surface,
        config=cfg,
        query_groups=explicit,
        receipt_checksums={
            rid: snapshot.receipts[rid][0] for rid in sorted(snapshot.receipts, key=uuid_text_order)
        },
        record_checksums={j.evidence.feedback_id: j.record_checksum for j in snapshot.judgments},
        feedback_ids=tuple(j.evidence.feedback_id for j in snapshot.judgments),
        exclusions=exclusions,
        groups=[groups[g] for g in sorted(groups)],
    )


# --------------------------------------------------------------------------- feature table
def _columns(block: FloatArray) -> dict[str, FloatArray]:
    return {name: block[:, j] for j, name in enumerate(TRACE_COLUMNS)}


def _classes(keys: list[Any], sizes: IntArray) -> dict[Any, IntArray]:
    """Table rows of each distinct per-request key (requests own ``sizes`` rows each, in order)."""
    number: dict[Any, int] = {}
    per_request = np.asarray([number.setdefault(k, len(number)) for k in keys], dtype=np.int64)
    per_row = np.repeat(per_request, sizes)
    return {key: np.flatnonzero(per_row == n) for key, n in number.items()}


class _Table:
    """Every judged candidate of every observed request as one row of trace features, and every
    explicit (positive, negative) pair as a pair of rows.

    Rows of one request are contiguous (positives, then negatives), so a stable sort by
    (request, ranking key) keeps each request in its own row range. Pairs run request by
    request, positive-major, as the objective and the metrics define them.
    """

    def __init__(self, requests: list[_Observed]) -> None:
        traces: list[tuple[float, ...]] = []
        recorded: list[float] = []
        ids: list[str] = []
        for request in requests:
            request.first_row = len(ids)
            traces.extend(request.traces)
            recorded.extend(request.scores)
            ids.extend(request.positive_ids)
            ids.extend(request.negative_ids)
        n_pos = np.asarray([len(r.positive_ids) for r in requests], dtype=np.int64)
        n_neg = np.asarray([len(r.negative_ids) for r in requests], dtype=np.int64)
        sizes = n_pos + n_neg
        first = np.cumsum(sizes) - sizes
        self.requests = requests
        self.n_pos, self.n_neg = n_pos, n_neg
        self.features: FloatArray = np.asarray(traces, dtype=np.float64).reshape(
            -1, len(TRACE_COLUMNS)
        )
        self.recorded = recorded
        self.owner: IntArray = np.repeat(np.arange(len(requests), dtype=np.int64), sizes)
        self.first_row: IntArray = np.repeat(first, sizes)
        self.id_rank: IntArray = np.unique(np.asarray(ids, dtype=str), return_inverse=True)[
            1
        ].astype(np.int64)
        # pairs: request r owns n_pos[r]·n_neg[r] of them, t = p·n_neg[r] + q
        pairs = n_pos * n_neg
        self.pair_request: IntArray = np.repeat(np.arange(len(requests), dtype=np.int64), pairs)
        t = np.arange(int(pairs.sum()), dtype=np.int64) - np.repeat(np.cumsum(pairs) - pairs, pairs)
        width = n_neg[self.pair_request]
        self.pair_pos: IntArray = first[self.pair_request] + t // width
        self.pair_neg: IntArray = first[self.pair_request] + n_pos[self.pair_request] + t % width
        weight_keys = [r.weights for r in requests]
        replay_keys = [(r.weights, _applied(r.multipliers)) for r in requests]
        # One ScoringWeights per distinct formula: it scores exactly as the receipts' weights.
        self.weights = {key: ScoringWeights.from_formula(key) for key in set(weight_keys)}
        self.recorded_weights = {
            (key, applied): adjusted_weights(self.weights[key], _multiplier_model(applied))
            for key, applied in set(replay_keys)
        }
        self.by_weights = _classes(weight_keys, sizes)
        self.by_replay = _classes(replay_keys, sizes)

    def _scores(self, index: IntArray, weights: ScoringWeights) -> list[float]:
        return weighted_scores(_columns(self.features[index]), weights)

    def exact_scores(self, multipliers: RankingMultipliers) -> FloatArray:
        """Every row's score by the exact replay arithmetic (weighted_scores ≡ weighted_score)."""
        out = np.empty(len(self.recorded), dtype=np.float64)
        for key, index in self.by_weights.items():
            out[index] = self._scores(index, adjusted_weights(self.weights[key], multipliers))
        return out

    def check_replays(self, baseline: FloatArray) -> None:
        """The recorded multipliers over the pre-multiplier weights reproduce every judged score.

        Equivalent to ``weighted_score(trace, receipt.applied_weights()) == score`` per judged
        candidate, batched: rows with the same weights and multipliers replay in one call, and
        rows recorded without multipliers are the ``baseline`` (neutral) scores already.
        """
        recorded = np.asarray(self.recorded, dtype=np.float64)
        replayed = baseline.copy()
        for (key, applied), index in self.by_replay.items():
            if applied is not None:
                replayed[index] = self._scores(index, self.recorded_weights[(key, applied)])
        mismatched = np.unique(self.owner[np.flatnonzero(replayed != recorded)]).tolist()
        if mismatched:
            rid = min(str(self.requests[i].request_id) for i in mismatched)
            raise _fail("receipts", f"Baseline score replay mismatch for request {rid}", rid)

    def positions(self, scores: FloatArray) -> IntArray:
        """Each row's 0-based position within its request under the ranking policy
        (score desc, path score desc, node id asc)."""
        order = np.lexsort((self.id_rank, -self.features[:, _PATH], -scores, self.owner))
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        positions: IntArray = rank - self.first_row
        return positions

    def metrics(self, positions: IntArray, k: int) -> tuple[list[float], list[float]]:
        """Per request: pairwise accuracy and judged NDCG@k of its judged order.

        The same arithmetic as :func:`prme.learning.metrics.pairwise_accuracy` and
        :func:`~prme.learning.metrics.judged_ndcg`: exact integer pair counts divided once, and
        DCG summed left to right over the hit positions in ascending order (one vector step per
        hit rank, so every request adds in exactly the order ``sum(..., 0.0)`` would).
        """
        requests = len(self.requests)
        correct = np.bincount(
            self.pair_request,
            weights=(positions[self.pair_pos] < positions[self.pair_neg]).astype(np.float64),
            minlength=requests,
        )
        pairwise = correct / (self.n_pos * self.n_neg)
        is_positive = np.arange(len(positions)) - self.first_row < self.n_pos[self.owner]
        is_hit = is_positive & (positions < k)
        hit_rows = np.flatnonzero(is_hit)
        hit_owner = self.owner[hit_rows]
        hit_pos = positions[hit_rows]
        order = np.lexsort((hit_pos, hit_owner))
        hit_owner, hit_pos = hit_owner[order], hit_pos[order]
        counts = np.bincount(hit_owner, minlength=requests)
        rank = np.arange(len(hit_owner)) - np.repeat(np.cumsum(counts) - counts, counts)
        gains = np.asarray([discount(int(i)) for i in range(k)] or [0.0], dtype=np.float64)
        dcg = np.zeros(requests, dtype=np.float64)
        for step in range(int(counts.max()) if requests else 0):
            at = rank == step
            dcg[hit_owner[at]] = dcg[hit_owner[at]] + gains[hit_pos[at]]
        ideal_by_n = {
            n: sum((discount(i) for i in range(min(k, n))), 0.0) for n in set(self.n_pos.tolist())
        }
        ideal = np.asarray([ideal_by_n[n] for n in self.n_pos.tolist()], dtype=np.float64)
        ndcg: list[float] = (dcg / ideal).tolist() if requests else []
        return pairwise.tolist(), ndcg


def _applied(multipliers: tuple[float, ...] | None) -> tuple[float, ...] | None:
    """Recorded multipliers as they act on scores: neutral ones act as none."""
    return None if multipliers is None or all(m == 1.0 for m in multipliers) else multipliers


def _multiplier_model(values: tuple[float, ...] | None) -> RankingMultipliers | None:
    return None if values is None else RankingMultipliers.from_tuple(values)


# ---------------------------------------------------------------------------------- fitting
class _Objective:
    """``L(m) = mean_G mean_{r∈G} mean_{(p,n)} softplus(margin_scale·(s_n − s_p)) + λ·Σ(ln m)²``.

    Scores use the float form of the weighted formula with ``w = w0⊙m / Σ(w0⊙m)``:
    ``s = (x⊙w0)·m / (w0·m) × epistemic × boost + temporal_boost × affinity × boost``, capped at
    ``semantic + lexical`` below the relevance floor (no final rounding).
    """

    def __init__(self, table: _Table, groups: list[_Group], config: LearningConfig) -> None:
        requests = len(table.requests)
        # Each training pair weighs 1 / (|groups| · |requests of its group| · n_pos · n_neg),
        # divided in Python: exact integer products, one correctly rounded division.
        share = np.zeros(requests, dtype=np.float64)
        number = {id(r): i for i, r in enumerate(table.requests)}
        for group in groups:
            for request in group.requests:
                pairs = len(request.positive_ids) * len(request.negative_ids)
                share[number[id(request)]] = 1.0 / (len(groups) * len(group.requests) * pairs)
        training = share[table.pair_request] > 0.0
        # Only the rows of training pairs enter the loss; pairs index into that subset.
        rows = np.flatnonzero(np.repeat(share > 0.0, table.n_pos + table.n_neg))
        subset = np.full(len(table.recorded), -1, dtype=np.int64)
        subset[rows] = np.arange(len(rows))
        self.pos = subset[table.pair_pos[training]]
        self.neg = subset[table.pair_neg[training]]
        self.weight = share[table.pair_request[training]]
        base = np.empty((len(table.recorded), 8), dtype=np.float64)
        for formula, index in table.by_weights.items():
            base[index] = formula  # six additive weights, temporal_boost, relevance_floor
        base = base[rows]
        f = table.features[rows]
        w0, temporal_boost, floor = base[:, :6], base[:, 6], base[:, 7]
        scale = f[:, _EPISTEMIC] * f[:, _BOOST]
        self.numerator = [f[:, j] * w0[:, j] * scale for j in range(6)]
        self.denominator = [w0[:, j] for j in range(6)]
        affinity = f[:, _TEMPORAL]
        self.offset = np.where(affinity != 0.0, temporal_boost * affinity, 0.0) * f[:, _BOOST]
        relevance = f[:, 0] + f[:, 1]
        self.capped = (floor > 0.0) & (relevance < floor)
        self.relevance = relevance
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
    return RankingMultipliers.from_tuple(
        np.clip(np.exp(logs), MULTIPLIER_MIN, MULTIPLIER_MAX).tolist()
    )


# ---------------------------------------------------------------------------------- metrics
def _group_results(
    groups: list[_Group],
    baseline: tuple[list[float], list[float]],
    candidate: tuple[list[float], list[float]],
) -> tuple[QueryLearningResult, ...]:
    """One result per group: its requests' mean metrics, baseline vs candidate."""
    results = []
    start = 0
    for group in groups:
        end = start + len(group.requests)
        results.append(
            QueryLearningResult(
                group_id=group.group_id,
                group_label=group.label,
                normalized_queries=tuple(sorted(group.queries)),
                split="validation" if group.validation else "train",
                request_ids=tuple(r.request_id for r in group.requests),
                baseline_pairwise_accuracy=mean(baseline[0][start:end]),
                candidate_pairwise_accuracy=mean(candidate[0][start:end]),
                baseline_judged_ndcg=mean(baseline[1][start:end]),
                candidate_judged_ndcg=mean(candidate[1][start:end]),
            )
        )
        start = end
    return tuple(results)


# ------------------------------------------------------------------------------ the gate
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
    asked = _request(user_id, scopes, surface, config)
    with gc_paused():
        snapshot = snapshot_from_receipts(receipts, records, asked.user_id)
        return _evaluate(snapshot, asked, query_groups)


def evaluate_judgments(
    judgments: Iterable[Judgment],
    *,
    user_id: str,
    scopes: ScopeInput = None,
    surface: str = "results",
    config: LearningConfig | Mapping[str, Any] | None = None,
    query_groups: Mapping[Any, str] | None = None,
) -> LearningEvaluation:
    """:func:`evaluate_learning` over records with their stored evidence (the engine's path).

    The snapshot's receipts are exactly the judged ones; the report equals
    ``evaluate_learning(judged receipts, records, ...)`` byte for byte.
    """
    asked = _request(user_id, scopes, surface, config)
    with gc_paused():
        snapshot = snapshot_from_judgments(judgments, asked.user_id)
        return _evaluate(snapshot, asked, query_groups)


def _evaluate(
    snapshot: Snapshot, asked: _Request, query_groups: Mapping[Any, str] | None
) -> LearningEvaluation:
    obs = _observe(snapshot, asked, query_groups)
    cfg = obs.config
    train = obs.training
    requests = obs.requests
    table = _Table(requests)
    baseline_scores = table.exact_scores(RankingMultipliers())
    table.check_replays(baseline_scores)
    coverage = {
        "feedback_records": len(obs.feedback_ids),
        "requests_with_pairs": len(requests),
        "training_queries": len(train),
        "validation_queries": len(obs.groups) - len(train),
        "explicit_pairs": sum(len(r.positive_ids) * len(r.negative_ids) for r in requests),
    }
    explicit = obs.query_groups
    snapshot_checksum = checksum(
        {
            "receipts": _TEXT_KEYS.dump_python(obs.receipt_checksums, mode="json"),
            "records": _TEXT_KEYS.dump_python(obs.record_checksums, mode="json"),
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

    # ---- fit on training groups only, then rank every request with the exact replay
    fitted, before, after = fit_multipliers(obs, table)
    k = cfg.ndcg_k
    baseline = table.metrics(table.positions(baseline_scores), k)
    candidate = table.metrics(table.positions(table.exact_scores(fitted)), k)
    results = _group_results(obs.groups, baseline, candidate)
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
