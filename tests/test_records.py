"""The registry of stored record kinds (``prme.services.records``): every operation type the
engine writes is registered, each stored record obeys its kind's id and owner rules, reads are
the owner's, and ``pack check`` reports an operation type no kind knows."""

from __future__ import annotations

import ast
import dataclasses
import json
import sqlite3
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import get_args

import pytest
from conftest import FakeClock
from support.golden import OWNER, SCOPES, Golden, fresh_pack

import prme
from prme import MemoryClient
from prme.canonical import canonical_json
from prme.errors import IntegrityError
from prme.learning.verify_reports import ReportVerificationError
from prme.models.retention import ReceiptPruneSummary
from prme.services import records
from prme.services.integrity import CheckName, IntegrityProblem
from prme.storage.timeutil import to_us

SRC = Path(prme.__file__).parent


@pytest.fixture
def pack(gold: Golden, pack_path: Path) -> Path:
    """The golden pack after both holdouts ran (judgments, evidence, gate-1 and gate-2 reports)."""
    return fresh_pack(gold.root / "frozen", pack_path)


@pytest.fixture
def written(
    pack: Path, make_client: Callable[..., MemoryClient], gold: Golden, clock: FakeClock
) -> tuple[MemoryClient, ReceiptPruneSummary]:
    """The pack with one record of every other kind added: a profile, two pointer transitions,
    a memory version link and a receipt prune."""
    memory = make_client()
    profile = memory.create_ranking_profile(gold.proposal, gold.holdout, user_id=OWNER)
    memory.activate_ranking_profile(profile.profile_id, user_id=OWNER)
    memory.deactivate_ranking_profile(user_id=OWNER, scopes=SCOPES)
    node_id = memory.store("Aster moved its ledger to PostgreSQL 17.", user_id=OWNER)
    memory.update(node_id, user_id=OWNER, content="Aster moved its ledger to PostgreSQL 18.")
    memory.retrieve("Aster ledger database", user_id=OWNER)  # unjudged: the prune removes it
    clock.now += timedelta(days=2)
    summary = memory.prune_receipts(older_than=1)
    assert summary.removed >= 1 and summary.audit_op_ids
    return memory, summary


def test_the_table_is_keyed_by_op_type_and_names_pack_checks() -> None:
    assert all(op_type == kind.op_type for op_type, kind in records.KINDS.items())
    assert len(records.KINDS) == 8
    assert not set(records.KINDS) & records.LINK_OP_TYPES
    kinds_checks = {kind.check for kind in records.KINDS.values()}
    assert kinds_checks == set(get_args(records.RecordCheck))
    assert kinds_checks <= set(get_args(CheckName))


def op_type_constants() -> dict[str, str]:
    """Every ``*_OP = "..."`` string constant in the source: the operation types it writes."""
    found: dict[str, str] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id.endswith("_OP"):
                        found[f"{path.relative_to(SRC)}:{target.id}"] = node.value.value
    return found


def test_every_op_type_constant_in_the_source_is_registered() -> None:
    constants = op_type_constants()
    assert len(constants) >= 10
    known = set(records.KINDS) | records.LINK_OP_TYPES
    assert {where: value for where, value in constants.items() if value not in known} == {}
    assert known == set(constants.values())


@pytest.mark.sqlite_only
def test_every_op_type_written_is_registered(
    written: tuple[MemoryClient, ReceiptPruneSummary], pack_path: Path
) -> None:
    written[0].close()
    with sqlite3.connect(pack_path / "pack.sqlite3") as db:
        stored = {row[0] for row in db.execute("SELECT DISTINCT op_type FROM oplog")}
    # The fixture writes every kind, so the registry has no kind the engine never writes.
    assert stored == set(records.KINDS) | records.LINK_OP_TYPES


def test_every_stored_record_obeys_its_kinds_id_and_owner_rules(
    written: tuple[MemoryClient, ReceiptPruneSummary],
) -> None:
    memory, _ = written
    for kind in records.KINDS.values():
        ops = list(memory.engine.store.iter_ops(kind.op_type, OWNER))
        assert ops, kind.op_type
        for op in ops:
            record = kind.verified(op, OWNER)
            assert isinstance(record, kind.model)
            assert kind.op_id(record) == op.op_id
            assert kind.owner(record) == OWNER
            assert canonical_json(record) == op.payload  # stored bytes are the model's


def test_generic_reads_are_the_owners(
    written: tuple[MemoryClient, ReceiptPruneSummary], gold: Golden
) -> None:
    memory, _ = written
    engine = memory.engine
    (profile,) = memory.list_ranking_profiles(user_id=OWNER)
    pid = profile.profile_id
    own = records.get(engine, records.PROFILES, OWNER, records.profile_op_id(OWNER, pid), str(pid))
    assert own == profile
    foreign = records.profile_op_id("bob", pid)
    assert records.get(engine, records.PROFILES, "bob", foreign, str(pid)) is None
    checksum = gold.proposal.input_checksum
    assert records.find(engine, records.LEARNING_REPORTS, OWNER, checksum) == gold.proposal
    assert records.find(engine, records.LEARNING_REPORTS, "bob", checksum) is None
    # A record handed to another owner's verification fails it: never read as theirs.
    judgment = next(iter(engine.store.iter_ops(records.RELEVANCE_OP, OWNER)))
    with pytest.raises(IntegrityError, match="owner or identity mismatch"):
        records.JUDGMENTS.verified(judgment, "bob")


@pytest.mark.sqlite_only
def test_pack_check_counts_every_kind_and_reports_an_unknown_op_type(
    written: tuple[MemoryClient, ReceiptPruneSummary],
) -> None:
    memory, summary = written
    store = memory.engine.store
    sound = memory.check_pack()
    assert sound.ok, sound.problems
    assert sound.pruned_receipts == summary.removed
    assert sound.profiles == 1 and sound.pointer_states == 2 and sound.pointers == 1
    assert sound.receipts == len(list(store.iter_ops(records.RECEIPT_OP, OWNER)))
    assert sound.reports == len(list(store.iter_ops(records.LEARNING_REPORT_OP, OWNER))) + len(
        list(store.iter_ops(records.HOLDOUT_REPORT_OP, OWNER))
    )
    assert sound.other_operations == 2  # the version link's two halves
    store.append_op(
        op_id="mystery:1",
        op_type="mystery_record",
        user_id=OWNER,
        target_id=None,
        namespace=None,
        created_at_us=to_us(memory.engine.clock()),
        payload="{}",
    )
    seq = store.get_op("mystery:1").seq  # type: ignore[union-attr]
    report = memory.check_pack()
    assert report.problems == (
        IntegrityProblem(
            check="oplog",
            ref="mystery:1",
            message=f"unknown operation type 'mystery_record' (seq {seq})",
        ),
    )
    assert report.other_operations == sound.other_operations + 1
    assert report.operations == sound.operations + 1


def test_a_stored_report_or_profile_that_contradicts_itself_is_refused_when_read(
    written: tuple[MemoryClient, ReceiptPruneSummary], gold: Golden
) -> None:
    """Reports are data: reading a stored report (or a profile's embedded reports) verifies it
    (``learning.verify_reports``), so an edited one is refused even with a matching log
    checksum: a report with its own error, a profile as an IntegrityError."""
    memory, _ = written
    store = memory.engine.store
    (report_op,) = store.find_ops(records.LEARNING_REPORT_OP, OWNER, gold.proposal.input_checksum)
    (profile_op,) = store.iter_ops(records.PROFILE_OP, OWNER)
    data = json.loads(report_op.payload)
    for change, message in (
        ({"decision": "no_improvement"}, "decision does not match its metrics"),
        ({"validation_ndcg_gain": 0.5}, "aggregate metrics do not match"),
        ({"input_checksum": "0" * 64}, "input checksum does not match"),
    ):
        edited = dataclasses.replace(report_op, payload=canonical_json({**data, **change}))
        with pytest.raises(ReportVerificationError, match=message):
            records.LEARNING_REPORTS.verified(edited, OWNER)
    # Edits the profile's own evidence rules do not see (those fail its parse, as before).
    for name, change, message in (
        ("proposal", {"validation_ndcg_gain": 0.5}, "aggregate metrics do not match"),
        ("proposal", {"training_loss_after": 1e6}, "aggregate metrics: training losses"),
        ("holdout", {"ndcg_gain": 0.5}, "Full retrieval evaluation aggregate metrics"),
    ):
        profile = json.loads(profile_op.payload)
        profile[name] = {**profile[name], **change}
        edited = dataclasses.replace(profile_op, payload=canonical_json(profile))
        with pytest.raises(IntegrityError, match=f"does not parse \\({message}"):
            records.PROFILES.verified(edited, OWNER)


def test_pack_check_reports_a_stored_report_that_contradicts_itself(
    written: tuple[MemoryClient, ReceiptPruneSummary], gold: Golden
) -> None:
    memory, _ = written
    store = memory.engine.store
    forged = {**json.loads(canonical_json(gold.holdout)), "input_checksum": "0" * 64}
    op_id = records.report_op_id(records.HOLDOUT_REPORT_OP, OWNER, "0" * 64)
    store.append_op(
        op_id=op_id,
        op_type=records.HOLDOUT_REPORT_OP,
        user_id=OWNER,
        target_id="0" * 64,
        namespace=None,
        created_at_us=to_us(memory.engine.clock()),
        payload=canonical_json(forged),
    )
    report = memory.check_pack()
    assert report.problems == (
        IntegrityProblem(
            check="report",
            ref=op_id,
            message="ReportVerificationError: Full retrieval evaluation input checksum does not "
            "match its inputs",
        ),
    )
