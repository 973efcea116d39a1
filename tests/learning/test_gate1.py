"""Gate 1 as a pure function over hand-built receipts and records (reference §E, §M.9)."""

from __future__ import annotations

import math
import random
import uuid
from typing import Any

import pytest
from pydantic import ValidationError
from support.gate1 import (
    REFERENCE,
    fact,
    receipt,
    record,
    reference_fixture,
    rrf_receipt,
    run,
)

from prme.canonical import canonical_json
from prme.errors import InvalidInputError
from prme.learning.gate1 import evaluate_learning
from prme.learning.groups import group_id, is_validation
from prme.learning.metrics import judged_ndcg
from prme.learning.verify_reports import ReportVerificationError, verify_report
from prme.models.learning import (
    EXCLUSION_KEYS,
    LearningConfig,
    LearningEvaluation,
    learning_input_checksum,
)
from prme.models.receipt import (
    RetrievalReceipt,
)
from prme.models.relevance import RelevanceRecord
from prme.models.scoring import (
    RankingMultipliers,
)

SMALL = LearningConfig(min_training_queries=2, min_validation_queries=2, bootstrap_samples=100)
ALGORITHMS = ("listwise_ndcg_multipliers_v1", "pairwise_weight_multipliers_v1")


# ----------------------------------------------------------------------- the reference vector
def test_reference_end_to_end_vector() -> None:
    receipts, records = reference_fixture()
    report = run(receipts, records, config=REFERENCE)

    assert report.decision == "improved_on_observed_candidates"
    assert report.coverage == {
        "feedback_records": 100,
        "requests_with_pairs": 100,
        "training_queries": 68,
        "validation_queries": 32,
        "explicit_pairs": 100,
    }
    expected = {
        "semantic": 0.26612,
        "lexical": 4.0,
        "graph": 0.26612,
        "recency": 0.60653,
        "salience": 0.60653,
        "confidence": 0.50283,
    }
    for name, value in expected.items():
        assert getattr(report.multipliers, name) == pytest.approx(value, abs=1e-4)
    # Coordinate descent in log space: each factor is exp of a path of ±0.5/0.25/0.125/0.0625
    # steps, clamped at ln 0.25 and ln 4.
    assert report.multipliers.semantic == pytest.approx(math.exp(math.log(0.25) + 0.0625))
    assert report.multipliers.recency == pytest.approx(math.exp(-0.5))
    assert report.multipliers.confidence == pytest.approx(math.exp(-11 * 0.0625))
    assert report.training_loss_before == pytest.approx(1.39682, abs=1e-5)
    assert report.training_loss_after == pytest.approx(0.14259, abs=1e-5)
    # Every validation group flips from [negative, positive] to [positive, negative].
    gain = 1.0 - judged_ndcg(["n", "p"], ["p"], 10)
    assert gain == pytest.approx(1 - 1 / math.log2(3))
    assert report.validation_ndcg_gain == pytest.approx(gain, abs=1e-12)
    assert report.validation_ndcg_gain == pytest.approx(0.36907, abs=1e-5)
    assert report.validation_pairwise_gain == 1.0
    assert report.validation_gain_interval == pytest.approx((gain, gain), abs=1e-12)
    assert report.win_tie_loss == {"wins": 32, "ties": 0, "losses": 0}
    assert report.randomization_p_value == pytest.approx(1 / 2001)  # every flip is less extreme
    assert report.exclusions == dict.fromkeys(EXCLUSION_KEYS, 0)
    assert report.optimizer == "coordinate_descent_log_space_v1"
    assert report.attestation is None
    assert [q.group_id for q in report.queries] == sorted(q.group_id for q in report.queries)
    first = next(q for q in report.queries if q.group_label == "query 0")
    assert first.group_id == "fdfbfea67a22fb5ca88fe5ecfbf8cf798c2392eea069bd62228808ff2a66fba8"
    assert first.split == "validation"  # §M.5: u = 0.03953
    assert first.normalized_queries == ("query 0",)
    assert first.request_ids == (uuid.UUID(int=10000),)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_fit_uses_pre_multiplier_weights_not_the_recorded_multipliers(algorithm: str) -> None:
    # The same judgments collected while a profile (lexical ×4) was active.
    active = RankingMultipliers(lexical=4.0)
    config = LearningConfig(algorithm=algorithm)  # type: ignore[arg-type]
    plain = run(*reference_fixture(), config=config)
    under_profile = run(*reference_fixture(multipliers=active), config=config)
    assert under_profile.multipliers == plain.multipliers
    assert under_profile.training_loss_after == plain.training_loss_after
    # The baseline is base scoring, so the gain is measured against neutral multipliers.
    assert under_profile.validation_ndcg_gain == plain.validation_ndcg_gain
    assert under_profile.input_checksum != plain.input_checksum


# ------------------------------------------------------------------------- decision rules
def test_insufficient_data_below_minimums() -> None:
    receipts, records = reference_fixture(30)
    report = run(receipts, records)
    assert report.decision == "insufficient_data"
    assert report.multipliers == RankingMultipliers()
    assert report.queries == ()
    assert report.training_loss_before is None and report.training_loss_after is None
    assert report.validation_ndcg_gain is None and report.validation_pairwise_gain is None
    assert report.validation_gain_interval is None
    assert report.win_tie_loss is None and report.randomization_p_value is None
    assert report.coverage["training_queries"] + report.coverage["validation_queries"] == 30
    assert report.coverage["training_queries"] >= 2 and report.coverage["validation_queries"] < 20
    assert len(report.receipt_checksums) == 30 and len(report.feedback_ids) == 30
    # The report says how far each split is from its minimum of 20 groups.
    assert report.missing_groups == {
        "training_queries": max(0, 20 - report.coverage["training_queries"]),
        "validation_queries": 20 - report.coverage["validation_queries"],
    }
    misstated = report.model_dump(mode="json") | {
        "missing_groups": {"training_queries": 0, "validation_queries": 0}
    }
    with pytest.raises(ReportVerificationError, match="missing groups"):
        verify_report(LearningEvaluation.model_validate(misstated))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_reversed_validation_labels_keep_the_fit_and_give_no_improvement(algorithm: str) -> None:
    receipts, records = reference_fixture()
    held_out = {i for i in range(100) if is_validation(42, group_id(["query", f"query {i}"]), 0.3)}
    config = LearningConfig(algorithm=algorithm)  # type: ignore[arg-type]
    control = run(*reference_fixture(flip=held_out), config=config)
    original = run(receipts, records, config=config)
    assert control.multipliers == original.multipliers
    assert control.training_loss_after == original.training_loss_after
    assert control.decision == "no_improvement"
    assert control.validation_ndcg_gain == pytest.approx(-original.validation_ndcg_gain)  # type: ignore[operator]
    assert control.win_tie_loss == {"wins": 0, "ties": 0, "losses": 32}
    # The report says why: the gain, its interval and the pairwise gain all fail, and every
    # validation group regressed from 1 to 1/log2(3) (listed by label).
    assert original.refusal is None and "refusal" not in original.model_dump(mode="json")
    assert control.refusal is not None
    assert [r.rule for r in control.refusal.rules] == [
        "validation_ndcg_gain",
        "validation_gain_interval.low",
        "validation_pairwise_gain",
    ]
    assert control.refusal.rules[0].observed == control.validation_ndcg_gain
    assert control.refusal.rules[0].required == ">= 0.01"
    labels = sorted(f"query {i}" for i in held_out)
    assert [g.group_label for g in control.refusal.regressed_groups] == labels
    fallen = judged_ndcg(["n", "p"], ["p"], 10)  # = 1/log2(3)
    assert all(
        (g.baseline_ndcg, g.candidate_ndcg) == (1.0, fallen)
        for g in control.refusal.regressed_groups
    )
    edited = control.model_dump(mode="json")
    edited["refusal"]["regressed_groups"] = []
    with pytest.raises(ReportVerificationError, match="refusal does not match"):
        verify_report(LearningEvaluation.model_validate(edited))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_reversed_labels_everywhere_give_no_improvement(algorithm: str) -> None:
    # Base scoring already ranks the (now relevant) semantic match first: nothing to gain.
    config = LearningConfig(algorithm=algorithm)  # type: ignore[arg-type]
    report = run(*reference_fixture(flip=set(range(100))), config=config)
    assert report.decision == "no_improvement"
    assert report.validation_ndcg_gain == 0.0
    assert report.win_tie_loss == {"wins": 0, "ties": 32, "losses": 0}
    assert report.training_loss_after <= report.training_loss_before  # type: ignore[operator]


# ------------------------------------------------------------------ determinism and splits
def test_shuffled_and_retried_inputs_give_a_byte_identical_report() -> None:
    receipts, records = reference_fixture()
    expected = canonical_json(run(receipts, records))
    rng = random.Random(7)
    for _ in range(3):
        shuffled_receipts = receipts + receipts[:10]  # repeated receipts collapse
        shuffled_records = records + records[:10]  # retried records collapse
        rng.shuffle(shuffled_receipts)
        rng.shuffle(shuffled_records)
        assert canonical_json(run(shuffled_receipts, shuffled_records)) == expected


def test_adding_judgments_never_moves_an_existing_group_between_splits() -> None:
    receipts, records = reference_fixture()
    small = run(receipts[:40], records[:40], config=SMALL)
    large = run(receipts, records, config=SMALL)
    before = {q.group_id: q.split for q in small.queries}
    after = {q.group_id: q.split for q in large.queries}
    assert before and set(before) < set(after)
    assert all(after[g] == split for g, split in before.items())
    # A second judgment on an existing query joins that query's group and split.
    extra = receipt(20000, "  QUERY 0 ", [fact(7, sem=0.2, lex=0.9), fact(8, sem=0.9, lex=0.1)])
    grown = run(
        [*receipts, extra], [*records, record(60000, extra, {7: True, 8: False})], config=SMALL
    )
    query0 = next(q for q in grown.queries if q.group_label == "query 0")
    assert query0.request_ids == (uuid.UUID(int=10000), uuid.UUID(int=20000))
    assert {q.group_id: q.split for q in grown.queries} == after


# ------------------------------------------------------------------ exclusions and votes
def test_exclusions_are_counted_per_record_with_every_key_present() -> None:
    receipts, records = reference_fixture(10)
    other_scope = receipt(
        30001, "other scope", [fact(1, sem=0.2, lex=0.9), fact(2, sem=0.9, lex=0.1)], scopes=None
    )
    fused = rrf_receipt(30002, "fused", [3, 4])
    first = receipts[0]
    extra = [
        record(70001, first, {1: True}, surface="context"),
        record(70002, other_scope, {1: True, 2: False}),
        record(70003, fused, {3: True, 4: False}),
        record(70004, fused, {3: False}),
    ]
    only_positive = receipt(30003, "only positives", [fact(5, sem=0.2, lex=0.9)])
    extra.append(record(70005, only_positive, {5: True}))
    report = run([*receipts, other_scope, fused, only_positive], [*records, *extra], config=SMALL)
    assert report.exclusions == {
        "other_surface_records": 1,
        "other_scope_records": 1,
        "legacy_receipt_records": 0,
        "rank_fusion_receipt_records": 2,
        "conflicting_candidate_labels": 0,
        "requests_without_explicit_pairs": 1,
    }
    assert report.coverage["feedback_records"] == 15  # excluded records still count
    assert report.coverage["requests_with_pairs"] == 10
    fitted = {r for q in report.queries for r in q.request_ids}
    assert uuid.UUID(int=30002) not in fitted and uuid.UUID(int=30001) not in fitted
    # The unfiltered scope set sees only the unfiltered receipt.
    unfiltered = run([*receipts, other_scope], [*records, extra[1]], scopes=None, config=SMALL)
    assert unfiltered.exclusions["other_scope_records"] == 10
    assert unfiltered.scopes is None


def test_conflicting_labels_are_dropped_and_repeated_labels_collapse() -> None:
    receipts, records = reference_fixture(40)
    r0 = receipts[0]
    extra = [
        record(80001, r0, {1: False}),  # contradicts the original positive on node 1
        record(80002, receipts[1], {11: True, 12: False}),  # repeats the original exactly
    ]
    report = run(receipts, [*records, *extra], config=SMALL)
    baseline = run(receipts, records, config=SMALL)
    assert report.exclusions["conflicting_candidate_labels"] == 1
    assert report.exclusions["requests_without_explicit_pairs"] == 1  # request 0 lost its pair
    assert report.coverage["explicit_pairs"] == baseline.coverage["explicit_pairs"] - 1
    assert report.coverage["feedback_records"] == 42


def test_query_groups_merge_paraphrases_under_a_readable_label() -> None:
    receipts, records = reference_fixture(40)
    names = {receipts[0].request_id: "paraphrases", str(receipts[1].request_id): "paraphrases"}
    report = run(receipts, records, config=SMALL, query_groups=names)
    merged = next(q for q in report.queries if q.group_label == "paraphrases")
    assert merged.group_id == group_id(["explicit", "paraphrases"])
    assert merged.normalized_queries == ("query 0", "query 1")
    assert merged.request_ids == (uuid.UUID(int=10000), uuid.UUID(int=10001))
    assert report.coverage["training_queries"] + report.coverage["validation_queries"] == 39
    assert report.query_groups == {
        uuid.UUID(int=10000): "paraphrases",
        uuid.UUID(int=10001): "paraphrases",
    }


@pytest.mark.parametrize(
    ("groups", "fragment"),
    [
        ({uuid.UUID(int=99): "x"}, "Query groups refer to unknown receipts"),
        ({uuid.UUID(int=10000): "  "}, "Query group identities must be nonempty"),
        ({uuid.UUID(int=10000): "a", str(uuid.UUID(int=10000)): "b"}, "different query groups"),
        ({"not-a-uuid": "a"}, "request ids"),
    ],
)
def test_bad_query_groups_name_the_field(groups: dict[Any, str], fragment: str) -> None:
    receipts, records = reference_fixture(5)
    with pytest.raises(InvalidInputError, match=fragment) as info:
        run(receipts, records, query_groups=groups)
    assert info.value.field == "query_groups"


def test_two_names_for_one_normalized_query_are_rejected() -> None:
    a = receipt(1, "Same  Query", [fact(1, sem=0.2, lex=0.9)])
    b = receipt(2, "same query", [fact(2, sem=0.2, lex=0.9)])
    with pytest.raises(InvalidInputError, match="Repeated queries cannot use different"):
        run([a, b], [], query_groups={a.request_id: "one", b.request_id: "two"})


# ------------------------------------------------------------------------ input validation
def _break(kind: str) -> tuple[list[RetrievalReceipt], list[RelevanceRecord], str, str]:
    receipts, records = reference_fixture(3)
    r0 = receipts[0]
    if kind == "owner":
        return receipts, [*records, record(9, r0, {1: True}, user_id="bob")], "records", "owner"
    if kind == "receipt identity":
        other = receipt(10000, "query 0 changed", list(r0.candidates))
        return [*receipts, other], records, "receipts", "Conflicting receipt identity"
    if kind == "feedback identity":
        clash = record(50000, r0, {1: False})
        return receipts, [*records, clash], "records", "Conflicting feedback identity"
    if kind == "missing receipt":
        return receipts[1:], records, "records", "requires its saved receipt"
    if kind == "checksum":
        stale = records[0].model_copy(update={"receipt_checksum": "f" * 64})
        return receipts, [stale, *records[1:]], "records", "Relevance receipt checksum mismatch"
    if kind == "candidate":
        return receipts, [*records, record(9, r0, {999: True})], "records", "unobserved candidate"
    assert kind == "context"
    hidden = receipt(40000, "hidden", [fact(1, sem=0.2, lex=0.9, in_context=False)])
    bad = record(9, hidden, {1: False}, surface="context")
    return [*receipts, hidden], [*records, bad], "records", "Invalid context evidence label"


@pytest.mark.parametrize(
    "kind",
    [
        "owner",
        "receipt identity",
        "feedback identity",
        "missing receipt",
        "checksum",
        "candidate",
        "context",
    ],
)
def test_every_record_is_validated_before_any_exclusion(kind: str) -> None:
    receipts, records, field, fragment = _break(kind)
    with pytest.raises(InvalidInputError, match=fragment) as info:
        run(receipts, records)
    assert info.value.field == field


def test_context_labels_on_included_entries_are_accepted() -> None:
    reference_only = receipt(
        40000, "refs", [fact(1, sem=0.2, lex=0.9), fact(2, sem=0.9, lex=0.1, has_content=False)]
    )
    ok = record(9, reference_only, {1: True, 2: False}, surface="context")
    report = run([reference_only], [ok], surface="context")
    assert report.coverage["requests_with_pairs"] == 1 and report.surface == "context"
    positive_without_content = record(10, reference_only, {2: True}, surface="context")
    with pytest.raises(InvalidInputError, match="Invalid context evidence label"):
        run([reference_only], [positive_without_content], surface="context")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"user_id": " "}, "user_id"),
        ({"surface": "answers"}, "surface"),
        ({"scopes": []}, "scopes"),
        ({"scopes": ["galaxy"]}, "scopes"),
        ({"config": {"validation_fraction": 1.0}}, "config.validation_fraction"),
        ({"config": {"regularization": 0.0}}, "config.regularization"),
        ({"config": {"margin_scale": float("inf")}}, "config.margin_scale"),
        ({"config": {"bootstrap_samples": 99}}, "config.bootstrap_samples"),
        ({"config": {"seed": True}}, "config.seed"),
        ({"config": {"surprise": 1}}, "config.surprise"),
    ],
)
def test_bad_arguments_name_the_field(kwargs: dict[str, Any], field: str) -> None:
    receipts, records = reference_fixture(3)
    arguments: dict[str, Any] = {"user_id": "alice", "scopes": ["project"], **kwargs}
    with pytest.raises(InvalidInputError) as info:
        evaluate_learning(receipts, records, **arguments)
    assert info.value.field == field


def test_learning_config_bounds() -> None:
    assert LearningConfig().model_dump() == {
        "algorithm": "listwise_ndcg_multipliers_v1",
        "seed": 42,
        "validation_fraction": 0.3,
        "min_training_queries": 20,
        "min_validation_queries": 20,
        "regularization": 0.01,
        "margin_scale": 5.0,
        "passes_per_step": 4,
        "ndcg_k": 10,
        "bootstrap_samples": 2000,
        "min_ndcg_gain": 0.01,
        "max_pairs_per_request": 10000,
    }
    for bad in (
        {"algorithm": "newton"},
        {"validation_fraction": 0.0},
        {"min_training_queries": 1},
        {"margin_scale": 100.5},
        {"passes_per_step": 21},
        {"ndcg_k": 0},
        {"bootstrap_samples": 10001},
        {"min_ndcg_gain": float("nan")},
        {"max_pairs_per_request": 1_000_001},
    ):
        with pytest.raises(ValidationError):
            LearningConfig(**bad)


def test_pair_budget_fails_the_whole_evaluation() -> None:
    receipts, records = reference_fixture(3)
    tight = LearningConfig(max_pairs_per_request=1)
    assert run(receipts, records, config=tight).coverage["explicit_pairs"] == 3
    wide = receipt(
        40000,
        "four pairs",
        [fact(n, sem=0.1 * n, lex=0.5) for n in (1, 2, 3, 4)],
    )
    two_by_two = record(9, wide, {1: True, 2: True, 3: False, 4: False})
    with pytest.raises(InvalidInputError, match="pair count exceeds") as info:
        run([*receipts, wide], [*records, two_by_two], config=tight)
    assert info.value.field == "max_pairs_per_request"


@pytest.mark.parametrize(
    "recorded", [None, RankingMultipliers(confidence=2.0, lexical=0.5)], ids=["base", "profile"]
)
def test_a_receipt_that_does_not_replay_is_rejected(recorded: RankingMultipliers | None) -> None:
    # Both replay paths: scores recorded under base weights, and under a profile's multipliers.
    receipts, records = reference_fixture(3, multipliers=recorded)
    assert run(receipts, records).exclusions == dict.fromkeys(EXCLUSION_KEYS, 0)
    honest = receipts[0]
    forged_candidate = honest.candidates[0].model_copy(update={"score": 0.9})
    forged = RetrievalReceipt.model_construct(
        **{**dict(honest), "candidates": (forged_candidate, honest.candidates[1])}
    )
    stamped = records[0].model_copy(update={"receipt_checksum": forged.checksum})
    with pytest.raises(InvalidInputError, match="Baseline score replay mismatch"):
        run([forged, *receipts[1:]], [stamped, *records[1:]])


# ---------------------------------------------------------------------- report integrity
def test_input_checksum_binds_scopes_surface_config_and_groups() -> None:
    receipts, records = reference_fixture(30)
    base = run(receipts, records)
    variants = [
        run(receipts, records, config=LearningConfig(seed=7)),
        run(receipts, records, surface="context"),
        run(receipts, records, scopes=["project", "personal"]),
        run(receipts, records, query_groups={receipts[0].request_id: "zero"}),
    ]
    assert len({base.input_checksum, *(v.input_checksum for v in variants)}) == 5
    assert {v.snapshot_checksum for v in variants[:3]} == {base.snapshot_checksum}
    assert base.input_checksum == learning_input_checksum(
        snapshot_checksum=base.snapshot_checksum,
        user_id="alice",
        scopes=base.scopes,
        surface="results",
        config=LearningConfig(),
        query_groups=None,
    )


def _edited(report: LearningEvaluation, **changes: Any) -> dict[str, Any]:
    data = report.model_dump(mode="json")
    data.update(changes)
    return data


def test_a_tampered_report_fails_verification() -> None:
    good = run(*reference_fixture())
    assert LearningEvaluation.model_validate_json(canonical_json(good)) == good
    verify_report(good)
    edits: list[tuple[dict[str, Any], str]] = [
        (_edited(good, decision="no_improvement"), "decision does not match"),
        (_edited(good, validation_ndcg_gain=0.5), "aggregate metrics"),
        (_edited(good, input_checksum="0" * 64), "input checksum"),
        (_edited(good, queries=[]), "lacks required validation evidence"),
        (_edited(good, training_loss_after=2.0), "aggregate metrics"),
        (_edited(good, coverage={**good.coverage, "extra": 1}), "coverage"),
        (_edited(good, exclusions={"conflicting_candidate_labels": 0}), "exclusions"),
        (
            _edited(good, decision="insufficient_data"),
            "Insufficient learning evaluation is inconsistent",
        ),
    ]
    for data, fragment in edits:
        with pytest.raises(ReportVerificationError, match=fragment):
            verify_report(LearningEvaluation.model_validate(data))
    few = run(*reference_fixture(10))
    verify_report(few)
    edited = LearningEvaluation.model_validate(_edited(few, multipliers={"lexical": 2.0}))
    with pytest.raises(ReportVerificationError, match="Insufficient learning evaluation is"):
        verify_report(edited)


# -------------------------------------------------------------------- explicit verification
def _flipped_validation() -> set[int]:
    return {i for i in range(100) if is_validation(42, group_id(["query", f"query {i}"]), 0.3)}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_verification_accepts_every_report_gate1_produces(algorithm: str) -> None:
    config = LearningConfig(algorithm=algorithm)  # type: ignore[arg-type]
    made = {
        "insufficient_data": run(*reference_fixture(10), config=config),
        "no_improvement": run(*reference_fixture(flip=_flipped_validation()), config=config),
        "improved_on_observed_candidates": run(*reference_fixture(), config=config),
    }
    for decision, report in made.items():
        assert report.decision == decision
        assert (report.refusal is not None) == (decision == "no_improvement")
        verify_report(report)
        # What is stored or sent is the canonical JSON: it parses back and verifies too.
        again = LearningEvaluation.model_validate_json(canonical_json(report))
        assert again == report
        verify_report(again)


def test_the_model_is_data_and_verification_refuses_each_kind_of_tampering() -> None:
    """Parsing checks fields only: every edit below parses, and verification refuses it with
    the message the model's own check gave before verification was explicit."""
    good = run(*reference_fixture())
    refused = run(*reference_fixture(flip=_flipped_validation()))
    few = run(*reference_fixture(10))
    assert refused.refusal is not None and good.validation_ndcg_gain is not None
    no_rule = {"rule": "validation_ndcg_gain", "observed": 0.0, "required": ">= 0.5"}
    tampered: list[tuple[LearningEvaluation, dict[str, Any], str]] = [
        # aggregates
        (good, {"validation_ndcg_gain": good.validation_ndcg_gain + 1e-6}, "aggregate metrics"),
        (good, {"win_tie_loss": {"wins": 0, "ties": 0, "losses": 32}}, "win_tie_loss"),
        (good, {"coverage": {**good.coverage, "training_queries": 1}}, "coverage"),
        # decisions
        (good, {"decision": "no_improvement"}, "decision does not match"),
        (refused, {"decision": "improved_on_observed_candidates"}, "decision does not match"),
        (few, {"missing_groups": {"training_queries": 0, "validation_queries": 0}}, "missing"),
        # refusals
        (good, {"refusal": refused.refusal.model_dump(mode="json")}, "refusal does not match"),
        (
            refused,
            {"refusal": {"rules": [no_rule], "regressed_groups": []}},
            "refusal does not match",
        ),
        # the input checksum and what it binds
        (good, {"input_checksum": "0" * 64}, "input checksum"),
        (good, {"snapshot_checksum": "1" * 64}, "input checksum"),
        (good, {"user_id": "mallory"}, "input checksum"),
        (good, {"config": {**good.config.model_dump(mode="json"), "seed": 7}}, "input checksum"),
    ]
    for report, change, fragment in tampered:
        edited = LearningEvaluation.model_validate(_edited(report, **change))
        with pytest.raises(ReportVerificationError, match=fragment):
            verify_report(edited)
