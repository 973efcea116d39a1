"""Receipt retention: old receipts nothing refers to are removed, audited, on both backends."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import FakeClock, postgres_schema

from prme import InvalidInputError, MemoryClient, NotFoundError
from prme.cli import main
from prme.engine import utc_now
from prme.models.retention import ReceiptPruneRecord
from prme.services.receipts import RECEIPT_OP
from prme.services.retention import PRUNE_OP
from prme.storage.sqlite import DB_FILE

ClientFactory = Callable[..., MemoryClient]
OWNERS = ("alice", "bob")


def retrieve(memory: MemoryClient, user_id: str, query: str = "Aster database") -> Any:
    response = memory.retrieve(query, user_id=user_id, limit=3)
    assert response.metadata.receipt_persisted
    return response


def judge(memory: MemoryClient, user_id: str, response: Any) -> None:
    labels = {str(r.node.id): i == 0 for i, r in enumerate(response.results)}
    memory.record_relevance(
        {"request_id": response.metadata.request_id, "labels": labels}, user_id=user_id
    )


def receipt_ids(memory: MemoryClient) -> set[str]:
    store = memory.engine.store
    return {str(op.target_id) for owner in OWNERS for op in store.iter_ops(RECEIPT_OP, owner)}


@pytest.fixture
def memory(make_client: ClientFactory) -> MemoryClient:
    client = make_client()
    for owner in OWNERS:
        client.store_many(
            [
                "Aster keeps its records in PostgreSQL 16.",
                "Aster's database backups run nightly.",
                "The Aster team writes services in Rust.",
            ],
            user_id=owner,
        )
    return client


def test_prune_removes_only_old_unreferenced_receipts_and_audits_them(
    memory: MemoryClient, clock: FakeClock
) -> None:
    old = {owner: [retrieve(memory, owner) for _ in range(4)] for owner in OWNERS}
    judge(memory, "alice", old["alice"][0])  # a judgment holds its receipt
    clock.now += timedelta(days=40)
    fresh = retrieve(memory, "alice")
    before = receipt_ids(memory)

    dry = memory.prune_receipts(older_than=30, dry_run=True)
    assert (dry.examined, dry.removed, dry.kept_referenced, dry.audit_op_ids) == (8, 7, 1, ())
    assert receipt_ids(memory) == before  # a dry run writes nothing

    summary = memory.prune_receipts(older_than=timedelta(days=30))
    assert (summary.examined, summary.removed, summary.kept_referenced) == (8, 7, 1)
    assert summary.owners == 2 and summary.cutoff == summary.pruned_at - timedelta(days=30)
    kept = {str(old["alice"][0].metadata.request_id), str(fresh.metadata.request_id)}
    assert receipt_ids(memory) == kept
    for owner in OWNERS:
        for response in old[owner][1:]:
            rid = response.metadata.request_id
            assert memory.get_retrieval_receipt(rid, user_id=owner) is None
            with pytest.raises(NotFoundError):  # a removed receipt can no longer be judged
                judge(memory, owner, response)
    # the audit record: which receipts, with the checksums they had, per owner
    audited: dict[str, set[str]] = {}
    for owner in OWNERS:
        for op in memory.engine.store.find_ops(PRUNE_OP, owner):
            record = ReceiptPruneRecord.model_validate_json(op.payload)
            assert (record.prune_id, record.user_id) == (summary.prune_id, owner)
            assert all(len(r.checksum) == 64 for r in record.receipts)
            audited.setdefault(owner, set()).update(str(r.request_id) for r in record.receipts)
    assert sorted(op_id for op_id in summary.audit_op_ids) == sorted(
        op.op_id for owner in OWNERS for op in memory.engine.store.find_ops(PRUNE_OP, owner)
    )
    assert audited == {
        owner: {str(r.metadata.request_id) for r in old[owner]} - kept for owner in OWNERS
    }
    again = memory.prune_receipts(older_than=30)
    assert (again.removed, again.kept_referenced, again.audit_op_ids) == (0, 1, ())
    assert memory.retrieve("Aster", user_id="alice").metadata.receipt_persisted  # still appends


def paired_trials(memory: MemoryClient, clock: FakeClock) -> list[dict[str, Any]]:
    """Two holdout groups, each a baseline and a candidate retrieval of alice's."""
    trials = []
    at = clock.now
    for i, query in enumerate(("Aster database", "Aster backups")):
        arms = [
            memory.retrieve(query, user_id="alice", reference_time=at, ranking_multipliers=m)
            for m in (None, {"lexical": 2.0})
        ]
        relevant = [str(arms[0].results[0].node.id)]
        trials.append(
            {
                "group_id": f"g{i}",
                "baseline_request_id": arms[0].metadata.request_id,
                "candidate_request_id": arms[1].metadata.request_id,
                "relevant_node_ids": relevant,
            }
        )
    return trials


def evaluate(memory: MemoryClient, trials: list[dict[str, Any]]) -> Any:
    return memory.evaluate_full_retrieval(
        trials,
        user_id="alice",
        scopes=None,
        proposal_input_checksum="0" * 64,
        memory_artifact_sha256=memory.pack_digest(),
        candidate_multipliers={"lexical": 2.0},
        config={"min_query_groups": 2, "bootstrap_samples": 100},
    )


def test_receipts_named_by_a_gate2_report_are_kept(memory: MemoryClient, clock: FakeClock) -> None:
    trials = paired_trials(memory, clock)
    evaluate(memory, trials)
    unreferenced = retrieve(memory, "alice")
    clock.now += timedelta(days=10)
    summary = memory.prune_receipts(older_than=1)
    assert (summary.removed, summary.kept_referenced) == (1, 4)
    named = {str(t[k]) for t in trials for k in ("baseline_request_id", "candidate_request_id")}
    assert receipt_ids(memory) == named
    assert unreferenced.metadata.request_id not in receipt_ids(memory)


@pytest.mark.parametrize("value", [-1, -0.5, 36526, float("nan"), True, "30", None])
def test_bad_retention_names_the_field_and_removes_nothing(
    memory: MemoryClient, clock: FakeClock, value: Any
) -> None:
    retrieve(memory, "alice")
    clock.now += timedelta(days=400)
    with pytest.raises(InvalidInputError) as info:
        memory.prune_receipts(older_than=value)
    assert info.value.field == "older_than"
    assert len(receipt_ids(memory)) == 1


@pytest.mark.sqlite_only
def test_sqlite_log_stays_append_only_and_pack_check_clean(
    memory: MemoryClient, clock: FakeClock, pack_path: Path
) -> None:
    judged = retrieve(memory, "alice")
    judge(memory, "alice", judged)
    retrieve(memory, "bob")
    clock.now += timedelta(days=2)
    assert memory.prune_receipts(older_than=1).removed == 1
    report = memory.check_pack()
    assert report.ok, report.problems
    assert (report.receipts, report.pruned_receipts, report.relevance_records) == (1, 1, 1)
    with sqlite3.connect(pack_path / DB_FILE) as db:  # the guard is back in place
        for sql in ("DELETE FROM oplog WHERE op_type = ?", "UPDATE oplog SET payload = 'x'"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                db.execute(sql, (RECEIPT_OP,) if "?" in sql else ())
    db.close()


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_postgres_log_admits_receipt_deletes_only_through_retention(
    memory: MemoryClient, clock: FakeClock, pack_path: Path, postgres_url: str
) -> None:
    import psycopg

    judge(memory, "alice", retrieve(memory, "alice"))
    retrieve(memory, "alice")
    schema = postgres_schema(pack_path)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for sql in (
            f"DELETE FROM {schema}.oplog WHERE op_type = 'retrieval_receipt'",
            f"UPDATE {schema}.oplog SET payload = 'x'",
            f"TRUNCATE {schema}.oplog",
        ):
            with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                conn.execute(sql)
        # the setting admits receipt deletes and nothing else (here: the judgment's rows)
        with (
            pytest.raises(psycopg.errors.RaiseException, match="append-only"),
            conn.transaction(),
        ):
            conn.execute("SET LOCAL prme.receipt_retention = 'on'")
            conn.execute(f"DELETE FROM {schema}.oplog WHERE op_type != 'retrieval_receipt'")
    clock.now += timedelta(days=2)
    assert memory.prune_receipts(older_than=1).removed == 1
    assert len(receipt_ids(memory)) == 1
    assert len(memory.list_relevance(user_id="alice")) == 1


def memory_config() -> Any:
    from conftest import make_config

    return make_config()


@pytest.mark.sqlite_only
def test_cli_prune_and_check(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    config = memory_config()
    with MemoryClient(pack, config=config, clock=utc_now) as memory:
        memory.store("Aster keeps its records in PostgreSQL 16.", user_id="alice")
        judge(memory, "alice", retrieve(memory, "alice"))
        retrieve(memory, "alice")
        retrieve(memory, "alice")
    runner = CliRunner()
    env = {"PRME_EMBEDDING__PROVIDER": "hash", "PRME_SCORING__FUSION": "weighted"}
    args = ["pack", "prune", "--receipts-older-than", "0", "--path", str(pack), "--json"]
    result = runner.invoke(main, args, env=env)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert (summary["removed"], summary["kept_referenced"]) == (2, 1)
    assert len(summary["audit_op_ids"]) == 1
    check = runner.invoke(main, ["pack", "check", "--path", str(pack), "--json"], env=env)
    assert check.exit_code == 0 and json.loads(check.output)["pruned_receipts"] == 2
    bad = runner.invoke(main, [*args[:3], "-1", *args[4:]], env=env)
    assert bad.exit_code == 1 and bad.output.startswith("error: older_than: ")


@pytest.mark.sqlite_only
def test_a_pruned_pack_exports_and_imports_with_its_audit(
    memory: MemoryClient, clock: FakeClock, tmp_path: Path, make_client: ClientFactory
) -> None:
    judge(memory, "alice", retrieve(memory, "alice"))
    retrieve(memory, "bob")
    clock.now += timedelta(days=2)
    summary = memory.prune_receipts(older_than=1)
    memory.export_pack(tmp_path / "pack.jsonl")
    copy = make_client(tmp_path / "copy")
    copy.import_pack(tmp_path / "pack.jsonl")
    report = copy.check_pack()
    assert report.ok, report.problems
    assert (report.receipts, report.pruned_receipts) == (1, summary.removed)
    assert [op.op_id for op in copy.engine.store.find_ops(PRUNE_OP, "bob")] == list(
        summary.audit_op_ids
    )


def test_a_judgment_racing_a_prune_is_refused_not_left_dangling(
    make_client: ClientFactory, clock: FakeClock
) -> None:
    armed: list[MemoryClient] = []

    def prune_first(sql: str) -> None:
        # Runs just before the judgment's write transaction begins, after it read the receipt:
        # another client prunes that receipt in between.
        if armed and sql.lstrip().upper().startswith("BEGIN"):
            armed.pop().prune_receipts(older_than=1)

    judging = make_client(tracer=prune_first)
    judging.store("Aster keeps its records in PostgreSQL 16.", user_id="alice")
    response = retrieve(judging, "alice")
    clock.now += timedelta(days=2)
    armed.append(make_client())
    with pytest.raises(NotFoundError, match="receipt"):
        judge(judging, "alice", response)
    assert not armed  # the prune ran in between
    assert judging.list_relevance(user_id="alice") == []
    assert judging.get_retrieval_receipt(response.metadata.request_id, user_id="alice") is None
    if judging.engine.store.backend_name == "sqlite":
        report = judging.check_pack()
        assert report.ok, report.problems


def test_a_gate2_report_racing_a_prune_is_refused(
    make_client: ClientFactory, clock: FakeClock
) -> None:
    armed: list[MemoryClient] = []

    def prune_first(sql: str) -> None:
        if armed and sql.lstrip().upper().startswith("BEGIN"):
            armed.pop().prune_receipts(older_than=1)

    gate = make_client(tracer=prune_first)
    gate.store_many(["Aster keeps its records in PostgreSQL 16.", "Aster backups"], user_id="alice")
    trials = paired_trials(gate, clock)
    digest = gate.pack_digest()
    clock.now += timedelta(days=2)
    armed.append(make_client())
    with pytest.raises(InvalidInputError, match="removed by receipt retention") as info:
        gate.evaluate_full_retrieval(
            trials,
            user_id="alice",
            scopes=None,
            proposal_input_checksum="0" * 64,
            memory_artifact_sha256=digest,
            candidate_multipliers={"lexical": 2.0},
            config={"min_query_groups": 2, "bootstrap_samples": 100},
        )
    assert info.value.field == "trials" and not armed
    assert gate.engine.store.find_ops("full_retrieval_evaluation", "alice") == []
