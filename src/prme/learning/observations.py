"""Gate-1 observations (§E.3–E.6): validate the request, count exclusions, collapse votes and
group the judged requests by query."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from pydantic import ValidationError

from prme.errors import InvalidInputError
from prme.learning.groups import group_id, group_identity, group_label, is_validation
from prme.learning.groups import normalize_query as normalized
from prme.learning.snapshot import Snapshot
from prme.models.base import uuid_text_order
from prme.models.evidence import JudgmentEvidence
from prme.models.learning import (
    EXCLUSION_KEYS,
    LearningConfig,
)
from prme.models.scope import ScopeInput, ScopeKey, normalize_scope_key, scope_set_key
from prme.validation import invalid_input

SURFACES = ("results", "context")


# --------------------------------------------------------------------------- input validation
def learning_config(config: LearningConfig | Mapping[str, Any] | None) -> LearningConfig:
    if config is None:
        return LearningConfig()
    if isinstance(config, LearningConfig):
        return config
    if isinstance(config, Mapping):
        try:
            return LearningConfig.model_validate(dict(config))
        except ValidationError as exc:
            raise invalid_input(exc, "config") from None
    raise InvalidInputError("config", "must be a LearningConfig or a mapping of its fields", config)


@dataclass(frozen=True)
class GateRequest:
    """What gate 1 was asked: owner, scope set, surface and config, validated."""

    user_id: str
    scopes: ScopeKey
    surface: str
    config: LearningConfig


def gate_request(
    user_id: str,
    scopes: ScopeInput,
    surface: str,
    config: LearningConfig | Mapping[str, Any] | None,
) -> GateRequest:
    if not isinstance(user_id, str) or not user_id.strip():
        raise InvalidInputError(
            "user_id", "Learning requires an owner and a valid relevance surface", user_id
        )
    if surface not in SURFACES:
        raise InvalidInputError(
            "surface", "Learning requires an owner and a valid relevance surface", surface
        )
    return GateRequest(
        user_id, normalize_scope_key(scopes, "scopes"), surface, learning_config(config)
    )


def _explicit_groups(
    query_groups: Mapping[Any, Any] | None, queries: Mapping[UUID, str]
) -> tuple[dict[UUID, str] | None, dict[str, str]]:
    """Validated ``{request_id: name}`` and the explicit name of each normalized query."""
    if query_groups is None:
        return None, {}
    if not isinstance(query_groups, Mapping):
        raise InvalidInputError("query_groups", "must map request ids to group names", query_groups)
    mapping: dict[UUID, str] = {}
    for key, name in query_groups.items():
        try:
            rid = key if isinstance(key, UUID) else UUID(str(key))
        except ValueError:
            raise InvalidInputError(
                "query_groups", f"keys must be request ids (got {key!r})", key
            ) from None
        if not isinstance(name, str) or not name.strip():
            raise InvalidInputError("query_groups", "Query group identities must be nonempty", name)
        if mapping.get(rid, name) != name:
            raise InvalidInputError(
                "query_groups", "Repeated queries cannot use different query groups", str(rid)
            )
        mapping[rid] = name
    by_query: dict[str, str] = {}
    for rid in sorted(mapping, key=uuid_text_order):
        text = queries.get(rid)
        if text is None:
            raise InvalidInputError(
                "query_groups", "Query groups refer to unknown receipts", str(rid)
            )
        query = normalized(text)
        if by_query.setdefault(query, mapping[rid]) != mapping[rid]:
            raise InvalidInputError(
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
            raise InvalidInputError("records", f"Invalid context evidence label ({node_id})", fid)


# ----------------------------------------------------------------------------- observations
@dataclass(slots=True)
class ObservedRequest:
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
class ObservedGroup:
    group_id: str
    label: str
    queries: set[str]
    validation: bool
    requests: list[ObservedRequest]


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
    groups: list[ObservedGroup]  # sorted by group id; requests in request-id order

    @property
    def training(self) -> list[ObservedGroup]:
        return [g for g in self.groups if not g.validation]

    @property
    def requests(self) -> list[ObservedRequest]:
        return [r for g in self.groups for r in g.requests]


def _conflicting_receipt(rid: UUID) -> InvalidInputError:
    return InvalidInputError(
        "receipts", f"Conflicting receipt identity for request {rid}", str(rid)
    )


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


def _observed(rid: UUID, entries: list[JudgmentEvidence]) -> tuple[ObservedRequest, int]:
    """The request's judged candidates (positives first) and its conflicting-label count."""
    first = entries[0]
    if len(entries) == 1:  # the common case: already in pairing order, nothing to collapse
        split = first.positives
        ids = first.node_ids
        observed = ObservedRequest(
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
    observed = ObservedRequest(
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
    return observe_request(snapshot, gate_request(user_id, scopes, surface, config), query_groups)


def observe_request(
    snapshot: Snapshot, asked: GateRequest, query_groups: Mapping[Any, str] | None
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
    groups: dict[str, ObservedGroup] = {}
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
            raise InvalidInputError(
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
            group = groups[gid] = ObservedGroup(gid, group_label(identity), set(), validation, [])
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
