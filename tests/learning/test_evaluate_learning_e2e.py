"""evaluate_learning through MemoryClient on a real pack: store → retrieve → judge → gate 1."""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from seed_blocks import BLOCK_2 as SEED_SECOND_BLOCK

from prme import MemoryClient, PRMEConfig, Scope, ScoringWeights
from prme.canonical import canonical_json, sha256_hex
from prme.config import EmbeddingConfig
from prme.errors import IntegrityError, InvalidInputError
from prme.learning.gate1 import evaluate_learning
from prme.learning.groups import group_id, is_validation, normalize_query
from prme.models.evidence import JudgmentEvidence
from prme.models.learning import LearningConfig
from prme.models.relevance import RelevanceRecord, RelevanceSubmission
from prme.services import reports
from prme.services.relevance import EVIDENCE_OP, RELEVANCE_OP

GROUPS = 100
FILLER = ("alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta", "lambda", "zeta")
SMALL = LearningConfig(min_training_queries=2, min_validation_queries=2, bootstrap_samples=100)


class StepClock:
    def __init__(self) -> None:
        self.now = datetime(2026, 9, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


def open_pack(path: Path) -> MemoryClient:
    config = PRMEConfig(scoring=ScoringWeights(), embedding=EmbeddingConfig(provider="hash"))
    return MemoryClient(path, config=config, clock=StepClock())


def confidence_workload(
    client: MemoryClient, user_id: str, *, groups: int = GROUPS, reverse_validation: bool = False
) -> None:
    """Ten memories per topic with random confidence; a memory is relevant iff its confidence
    is at least 0.6. Each topic is one query, retrieved once with limit 10 and fully judged.
    With ``reverse_validation`` the validation groups are judged the other way round."""
    rng = random.Random(3)
    items = [
        {
            "content": f"topic{g} " + " ".join(rng.sample(FILLER, rng.randint(1, 5))) + f" {j}",
            "confidence": round(0.2 + 0.75 * rng.random(), 3),
            "scope": "project",
            "node_type": "fact",
        }
        for g in range(groups)
        for j in range(10)
    ]
    client.store_many(items, user_id=user_id)
    for g in range(groups):
        query = f"what about topic{g} alpha beta"
        response = client.retrieve(query, user_id=user_id, scope=Scope.PROJECT, limit=10)
        held_out = is_validation(42, group_id(["query", normalize_query(query)]), 0.3)
        flip = reverse_validation and held_out
        labels = {r.node.id: (r.node.confidence >= 0.6) != flip for r in response.results}
        submission = RelevanceSubmission(request_id=response.metadata.request_id, labels=labels)
        client.record_relevance(submission, user_id=user_id)


@pytest.fixture(scope="module")
def workload_pack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("learning") / "pack"
    with open_pack(path) as client:
        confidence_workload(client, "alice")
        confidence_workload(client, "carol", reverse_validation=True)
    yield path


def test_a_feature_that_predicts_relevance_is_learned(workload_pack: Path) -> None:
    with open_pack(workload_pack) as client:
        report = client.evaluate_learning(user_id="alice", scopes=[Scope.PROJECT])
        assert report.decision == "improved_on_observed_candidates"
        assert report.multipliers.confidence > 1.0
        assert report.multipliers.confidence == max(report.multipliers.as_tuple())
        assert report.coverage["requests_with_pairs"] == GROUPS
        assert report.coverage["training_queries"] >= 20
        assert report.coverage["validation_queries"] >= 20
        assert report.validation_gain_interval is not None
        assert report.validation_gain_interval[0] > 0
        assert report.training_loss_after < report.training_loss_before  # type: ignore[operator]
        assert report.scopes == (Scope.PROJECT,)
        # Persisted and attested with the pack secret; the same evaluation is idempotent.
        assert reports.verify(client.engine, report)
        assert client.get_learning_evaluation(report.input_checksum, user_id="alice") == report
        again = client.evaluate_learning(user_id="alice", scopes="project")
        assert canonical_json(again) == canonical_json(report)


def test_reversed_validation_labels_give_no_improvement(tmp_path: Path) -> None:
    # Each owner in a pack of its own, written from the same clock start: every feature the
    # fit reads (lexical statistics, recency) is then identical, and only the validation
    # labels differ. (In one shared pack the second owner is stored later and, while lexical
    # statistics are table-wide, sees the first owner's documents: a different fit.)
    by_owner = {}
    for owner, reverse in (("alice", False), ("carol", True)):
        with open_pack(tmp_path / owner) as client:
            confidence_workload(client, owner, reverse_validation=reverse)
            by_owner[owner] = client.evaluate_learning(user_id=owner, scopes=[Scope.PROJECT])
    original, control = by_owner["alice"], by_owner["carol"]
    # Same training judgments → same fit; the reversed validation groups get worse.
    assert control.multipliers == original.multipliers
    # Equal up to summation order, which follows the owners' (random) memory ids.
    assert control.training_loss_after == pytest.approx(original.training_loss_after, rel=1e-12)
    assert original.decision == "improved_on_observed_candidates"
    assert control.decision == "no_improvement"
    assert control.validation_ndcg_gain is not None and control.validation_ndcg_gain < 0


def test_owners_are_isolated(workload_pack: Path) -> None:
    with open_pack(workload_pack) as client:
        alice = client.evaluate_learning(user_id="alice", scopes=[Scope.PROJECT])
        bob = client.evaluate_learning(user_id="bob", scopes=[Scope.PROJECT])
        assert bob.decision == "insufficient_data"
        assert bob.coverage["feedback_records"] == 0 and bob.receipt_checksums == {}
        assert client.get_learning_evaluation(alice.input_checksum, user_id="bob") is None
        assert not set(alice.feedback_ids) & set(
            client.evaluate_learning(user_id="carol", scopes=[Scope.PROJECT]).feedback_ids
        )


def test_other_scope_sets_are_excluded(workload_pack: Path) -> None:
    with open_pack(workload_pack) as client:
        unfiltered = client.evaluate_learning(user_id="alice")
        wider = client.evaluate_learning(user_id="alice", scopes=["project", "personal"])
    assert unfiltered.exclusions["other_scope_records"] == GROUPS
    assert wider.exclusions["other_scope_records"] == GROUPS
    assert unfiltered.decision == wider.decision == "insufficient_data"
    assert unfiltered.snapshot_checksum == wider.snapshot_checksum
    assert unfiltered.input_checksum != wider.input_checksum


def test_rank_fused_receipts_are_counted_not_fitted(
    make_client: Callable[..., MemoryClient],
) -> None:
    weighted = make_client()
    confidence_workload(weighted, "alice", groups=12)
    fused = make_client(fusion="rrf")
    for g in range(3):
        response = fused.retrieve(f"topic{g} gamma", user_id="alice", scope="project", limit=4)
        assert response.metadata.fusion == "rrf"
        labels = {r.node.id: i == 0 for i, r in enumerate(response.results)}
        fused.record_relevance(
            RelevanceSubmission(request_id=response.metadata.request_id, labels=labels),
            user_id="alice",
        )
    report = weighted.evaluate_learning(user_id="alice", scopes=["project"], config=SMALL)
    assert report.exclusions["rank_fusion_receipt_records"] == 3
    assert report.coverage["feedback_records"] == 15
    assert report.coverage["requests_with_pairs"] == 12
    assert len(report.receipt_checksums) == 15


def test_insufficient_data_below_minimums(client: MemoryClient) -> None:
    confidence_workload(client, "alice", groups=8)
    report = client.evaluate_learning(user_id="alice", scopes=["project"])
    assert report.decision == "insufficient_data"
    assert report.multipliers.is_neutral and report.queries == ()
    assert report.coverage["requests_with_pairs"] == 8
    assert client.get_learning_evaluation(report.input_checksum, user_id="alice") == report


def test_max_records_is_a_hard_bound(client: MemoryClient) -> None:
    confidence_workload(client, "alice", groups=3)
    with pytest.raises(InvalidInputError, match="Feedback exceeds max_records") as info:
        client.evaluate_learning(user_id="alice", scopes=["project"], max_records=2)
    assert info.value.field == "max_records"
    assert client.evaluate_learning(user_id="alice", scopes=["project"], max_records=3)
    for bad in (0, 100_001, True, 2.5):
        with pytest.raises(InvalidInputError) as info:
            client.evaluate_learning(user_id="alice", max_records=bad)  # type: ignore[arg-type]
        assert info.value.field == "max_records"


def test_bad_arguments_write_nothing(client: MemoryClient) -> None:
    confidence_workload(client, "alice", groups=3)
    cases: list[tuple[dict[str, object], str]] = [
        ({"scopes": []}, "scopes"),
        ({"surface": "answers"}, "surface"),
        ({"config": {"ndcg_k": 0}}, "config.ndcg_k"),
        ({"query_groups": {"00000000-0000-0000-0000-000000000001": "x"}}, "query_groups"),
    ]
    for kwargs, field in cases:
        with pytest.raises(InvalidInputError) as info:
            client.evaluate_learning(user_id="alice", **kwargs)  # type: ignore[arg-type]
        assert info.value.field == field
    assert client.engine.store.find_ops("learning_evaluation", "alice") == []
    with pytest.raises(InvalidInputError):
        client.get_learning_evaluation("not-a-checksum", user_id="alice")


def test_seed_second_code_block_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PRME_EMBEDDING__PROVIDER", "hash")
    monkeypatch.setenv("PRME_SCORING__FUSION", "weighted")
    with MemoryClient("./memories") as memory:  # the seed's first block, in short
        memory.store("Aster uses PostgreSQL", user_id="alice", scope=Scope.PROJECT)
        response = memory.retrieve(
            "Which database does Aster use?", user_id="alice", scope=Scope.PROJECT
        )
        assert response.metadata.receipt_persisted
        memory.record_relevance(
            RelevanceSubmission(
                request_id=response.metadata.request_id,
                labels={response.results[0].node.id: True},
            ),
            user_id="alice",
        )
    exec(SEED_SECOND_BLOCK, {"MemoryClient": MemoryClient, "Scope": Scope})
    printed = capsys.readouterr().out
    assert printed.startswith("insufficient_data {'feedback_records': 1")
    assert "'requests_without_explicit_pairs': 1" in printed


# ------------------------------------------------------------------ stored judgment evidence
def all_judgments(client: MemoryClient, user_id: str) -> list[RelevanceRecord]:
    records: list[RelevanceRecord] = []
    while page := client.list_relevance(
        user_id=user_id, limit=100, after_id=records[-1].feedback_id if records else None
    ):
        records += page
    return records


def test_the_engine_report_equals_the_pure_gate_over_the_judged_receipts(
    workload_pack: Path,
) -> None:
    # The engine reads each judgment's stored evidence; the pure gate cuts it from whole
    # receipts. Same judgments → the same report, byte for byte (attestation aside).
    with open_pack(workload_pack) as client:
        engine_report = client.evaluate_learning(user_id="alice", scopes=[Scope.PROJECT])
        records = all_judgments(client, "alice")
        receipts = [client.get_retrieval_receipt(r.request_id, user_id="alice") for r in records]
    assert engine_report.decision == "improved_on_observed_candidates"
    pure = evaluate_learning(receipts, records, user_id="alice", scopes=[Scope.PROJECT])
    assert canonical_json(engine_report.model_copy(update={"attestation": None})) == (
        canonical_json(pure)
    )


def test_each_judgment_stores_its_evidence_once_in_the_same_transaction(tmp_path: Path) -> None:
    with open_pack(tmp_path / "pack") as client:
        confidence_workload(client, "dave", groups=3)
        store = client.engine.store
        records = list(store.iter_ops(RELEVANCE_OP, "dave"))
        evidence = {op.target_id: op for op in store.iter_ops(EVIDENCE_OP, "dave")}
        assert len(records) == len(evidence) == 3
        for op in records:
            record = RelevanceRecord.model_validate_json(op.payload)
            receipt = client.get_retrieval_receipt(record.request_id, user_id="dave")
            assert receipt is not None
            cut = JudgmentEvidence.from_receipt(
                receipt, record.feedback_id, record.labels, record.surface
            )
            assert evidence[op.target_id].payload == canonical_json(cut)
            assert evidence[op.target_id].op_id == f"{EVIDENCE_OP}:{op.op_id}"
        # A retry adds nothing; a conflicting reuse of the feedback id adds nothing either.
        first = RelevanceRecord.model_validate_json(records[0].payload)
        retry = RelevanceSubmission(
            feedback_id=first.feedback_id, request_id=first.request_id, labels=first.labels
        )
        assert client.record_relevance(retry, user_id="dave") == first
        flipped = {node: not relevant for node, relevant in first.labels.items()}
        with pytest.raises(InvalidInputError, match="feedback_id"):
            client.record_relevance(retry.model_copy(update={"labels": flipped}), user_id="dave")
        assert len(list(store.iter_ops(EVIDENCE_OP, "dave"))) == 3
        assert len(list(store.iter_ops(RELEVANCE_OP, "dave"))) == 3


def test_judgments_without_stored_evidence_are_evaluated_from_their_receipts(
    workload_pack: Path, tmp_path: Path
) -> None:
    # A pack written before evidence was stored: the engine cuts it from the receipts and
    # reaches the same, identically attested report.
    legacy = tmp_path / "legacy"
    shutil.copytree(workload_pack, legacy)
    conn = sqlite3.connect(legacy / "pack.sqlite3")
    conn.execute("DROP TRIGGER oplog_append_only_delete")
    deleted = conn.execute("DELETE FROM oplog WHERE op_type = ?", (EVIDENCE_OP,)).rowcount
    conn.commit()
    conn.close()
    assert deleted == 2 * GROUPS
    with open_pack(workload_pack) as client:
        current = client.evaluate_learning(user_id="alice", scopes=[Scope.PROJECT])
    with open_pack(legacy) as client:
        assert list(client.engine.store.iter_ops(EVIDENCE_OP, "alice")) == []
        recovered = client.evaluate_learning(user_id="alice", scopes=[Scope.PROJECT])
    assert canonical_json(recovered) == canonical_json(current)


def test_evidence_edited_behind_the_engine_is_reported_or_refused(
    workload_pack: Path, tmp_path: Path
) -> None:
    with open_pack(workload_pack) as client:
        honest = client.evaluate_learning(user_id="alice", scopes=[Scope.PROJECT])
        op = next(client.engine.store.iter_ops(EVIDENCE_OP, "alice"))
    data = json.loads(op.payload)
    # A well-formed edit (checksum recomputed) parses, but the report it would give is not
    # the one stored under the same judgments and receipts; pack check names the evidence.
    edited = canonical_json({**data, "query": "a question nobody asked"})
    # A malformed edit: a relevant candidate listed after an irrelevant one.
    disordered = canonical_json(
        {**data, "relevant": [False, *data["relevant"][1:], True][: len(data["relevant"])]}
    )
    update = "UPDATE oplog SET payload = ?, checksum = ? WHERE op_id = ?"
    packs = {
        name: tampered_copy(
            workload_pack, tmp_path / name, (update, (text, sha256_hex(text), op.op_id))
        )
        for name, text in (("edited", edited), ("disordered", disordered))
    }
    with open_pack(packs["edited"]) as client:
        with pytest.raises(
            IntegrityError,
            match=f"different learning_evaluation report is stored under {honest.input_checksum}",
        ):
            client.evaluate_learning(user_id="alice", scopes=[Scope.PROJECT])
        report = client.check_pack()
    assert {p.check for p in report.problems} == {"evidence"}
    assert [p.ref for p in report.problems] == [op.op_id]
    assert "differs from receipt" in report.problems[0].message
    with open_pack(packs["disordered"]) as client:
        with pytest.raises(IntegrityError, match="relevant candidates first"):
            client.evaluate_learning(user_id="alice", scopes=[Scope.PROJECT])
        assert {p.check for p in client.check_pack().problems} == {"evidence"}


def tampered_copy(source: Path, target: Path, *statements: tuple[str, tuple[object, ...]]) -> Path:
    """A copy of the pack edited behind the engine's back (append-only triggers dropped)."""
    shutil.copytree(source, target)
    conn = sqlite3.connect(target / "pack.sqlite3")
    conn.execute("DROP TRIGGER oplog_append_only_update")
    conn.execute("DROP TRIGGER oplog_append_only_delete")
    for sql, params in statements:
        conn.execute(sql, params)
    conn.commit()
    conn.close()
    return target


def test_a_judged_receipt_that_is_gone_or_replaced_fails_loudly(
    workload_pack: Path, tmp_path: Path
) -> None:
    # The stored evidence alone would suffice to learn; the receipts it names must still be
    # there, under the checksum the judgments bind, or nothing is evaluated.
    with open_pack(workload_pack) as client:
        judged = all_judgments(client, "alice")[0]
        receipt = client.get_retrieval_receipt(judged.request_id, user_id="alice")
    assert receipt is not None
    op_id = f"receipt:{judged.request_id}"
    gone = tampered_copy(
        workload_pack, tmp_path / "gone", ("DELETE FROM oplog WHERE op_id = ?", (op_id,))
    )
    data = json.loads(canonical_json(receipt))
    data["query"] = "a different question"  # no longer replays the group it was judged in
    forged = canonical_json(data)
    replaced = tampered_copy(
        workload_pack,
        tmp_path / "replaced",
        (
            "UPDATE oplog SET payload = ?, checksum = ? WHERE op_id = ?",
            (forged, sha256_hex(forged), op_id),
        ),
    )
    for pack, message in ((gone, "missing retrieval receipt"), (replaced, "checksum mismatch")):
        with open_pack(pack) as client, pytest.raises(IntegrityError, match=message):
            client.evaluate_learning(user_id="alice", scopes=[Scope.PROJECT])
