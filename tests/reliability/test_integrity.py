"""check_pack / ``prme pack check``: a sound pack passes, and each kind of damage is reported."""

from __future__ import annotations

import json
import shutil
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FakeClock, make_config

from prme import MemoryClient
from prme.canonical import canonical_json, sha256_hex
from prme.cli import main
from prme.services.integrity import IntegrityReport
from prme.services.profiles import STATE_OP, state_op_id
from prme.storage.payloads import decode
from prme.storage.timeutil import to_us

from .conftest import ProfilePack
from .harness import OWNER

pytestmark = pytest.mark.reliability


@pytest.fixture
def pack(profile_pack: ProfilePack, tmp_path: Path) -> Path:
    """The judged golden pack with profiles, a pointer history and fresh receipts."""
    path = tmp_path / "pack"
    shutil.copytree(profile_pack.path, path)
    first, second = profile_pack.profiles[:2]
    with MemoryClient(path, config=make_config(), clock=FakeClock()) as memory:
        memory.activate_ranking_profile(first, user_id=OWNER)
        memory.deactivate_ranking_profile(user_id=OWNER, scopes=["project"])
        memory.activate_ranking_profile(second, user_id=OWNER)
        memory.rollback_ranking_profile(first, user_id=OWNER, scopes=["project"])
    return path


@pytest.fixture
def memory(pack: Path) -> Iterator[MemoryClient]:
    with MemoryClient(pack, config=make_config(), clock=FakeClock()) as client:
        yield client


def tamper(pack: Path, *statements: str) -> None:
    """Raw edits behind the engine's back (the append-only triggers dropped first)."""
    conn = sqlite3.connect(pack / "pack.sqlite3")
    conn.execute("DROP TRIGGER oplog_append_only_update")
    conn.execute("DROP TRIGGER oplog_append_only_delete")
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


def checks(report: IntegrityReport) -> set[str]:
    return {p.check for p in report.problems}


def test_a_sound_pack_passes_with_counts(memory: MemoryClient, profile_pack: ProfilePack) -> None:
    report = memory.check_pack()
    assert report.ok and report.problems == ()
    assert (
        report.memories
        == report.vectors
        == report.lexical_rows
        == len(profile_pack.gold.workload.memories)
    )
    assert report.pointer_states == 4 and report.pointers == 1
    assert report.profiles == len(profile_pack.profiles)
    assert report.receipts > 0 and report.relevance_records > 0 and report.reports > 0
    assert report.relevance_evidence == report.relevance_records
    assert report.operations == (
        report.receipts
        + report.relevance_records
        + report.relevance_evidence
        + report.profiles
        + report.pointer_states
        + report.reports
        + report.other_operations
    )
    assert IntegrityReport.model_validate_json(report.model_dump_json()) == report


def test_an_edited_payload_fails_its_checksum(pack: Path) -> None:
    tamper(pack, "UPDATE oplog SET payload = payload || ' ' WHERE seq = 1")
    with MemoryClient(pack, config=make_config()) as memory:
        report = memory.check_pack()
    # The edited operation, and any judgment bound to it if it was a receipt.
    assert not report.ok and "oplog" in checks(report) <= {"oplog", "relevance"}
    assert "checksum mismatch" in report.problems[0].message


def test_a_forged_receipt_with_a_matching_checksum_fails_replay(pack: Path) -> None:
    with MemoryClient(pack, config=make_config()) as memory:
        conn = memory.engine.store.conn  # type: ignore[attr-defined]
        seq, payload = conn.execute(
            "SELECT seq, payload FROM oplog WHERE op_type = 'retrieval_receipt' LIMIT 1"
        ).fetchone()
    data = json.loads(decode(payload))
    data["candidates"][0]["score"] += 0.125  # the trace no longer yields this score
    forged = canonical_json(data)
    tamper(
        pack,
        f"UPDATE oplog SET payload = '{forged.replace(chr(39), chr(39) * 2)}',"
        f" checksum = '{sha256_hex(forged)}' WHERE seq = {seq}",
    )
    with MemoryClient(pack, config=make_config()) as memory:
        report = memory.check_pack()
    # The receipt fails replay, and the judgments bound to it no longer find it.
    assert "receipt" in checks(report) and checks(report) <= {"receipt", "relevance"}
    assert any("replay" in p.message for p in report.problems)


def test_a_transition_off_the_chain_is_reported(memory: MemoryClient) -> None:
    # A well-formed, correctly keyed transition whose previous profile is not the active one:
    # it verifies on its own, but the history is no longer one chain.
    latest = memory.list_ranking_profile_history(user_id=OWNER, scopes=["project"])[0]
    change_id = uuid.uuid4()
    forged = latest.model_copy(
        update={
            "change_id": change_id,
            "action": "deactivate",
            "previous_profile_id": uuid.uuid4(),
            "active_profile_id": None,
            "application": None,
            "changed_at": memory.engine.clock(),
        }
    )
    assert memory.engine.store.append_op(
        op_id=state_op_id(OWNER, change_id),
        op_type=STATE_OP,
        user_id=OWNER,
        target_id=None,
        namespace=memory.engine.store.find_ops(STATE_OP, OWNER, None)[0].namespace,
        created_at_us=to_us(forged.changed_at),
        payload=canonical_json(forged),
    )
    report = memory.check_pack()
    assert checks(report) == {"pointer"}
    assert "not one chain" in report.problems[0].message


def test_a_pointer_naming_a_missing_profile_is_reported(pack: Path) -> None:
    tamper(pack, "DELETE FROM oplog WHERE op_type = 'ranking_profile'")
    with MemoryClient(pack, config=make_config()) as memory:
        report = memory.check_pack()
    assert checks(report) == {"pointer"}
    assert any("missing or has other scopes" in p.message for p in report.problems)


def test_memories_vectors_and_lexical_rows_must_agree(pack: Path) -> None:
    tamper(
        pack,
        "DELETE FROM vectors WHERE rowid = 1",
        "INSERT INTO memories_fts(memories_fts, rowid, content)"
        " SELECT 'delete', rowid, content FROM memories WHERE rowid = 2",
        "UPDATE memories SET content_sha256 = 'x' WHERE rowid = 3",
    )
    with MemoryClient(pack, config=make_config()) as memory:
        report = memory.check_pack()
    messages = {p.message for p in report.problems}
    assert "memory without a vector" in messages
    assert "memory without a lexical row" in messages
    assert "content does not match content_sha256" in messages
    # the FTS5 check sees the missing row too, and the kept digest no longer matches the rows
    assert checks(report) == {"memories", "sqlite", "digest"}


def test_a_report_with_a_foreign_attestation_is_reported(pack: Path) -> None:
    tamper(
        pack,
        "UPDATE meta SET value = '" + "ab" * 32 + "' WHERE key = 'secret'",  # another pack's
    )
    with MemoryClient(pack, config=make_config()) as memory:
        report = memory.check_pack()
    assert checks(report) == {"report", "profile"}
    assert any("attestation" in p.message for p in report.problems)


def test_prme_pack_check_exits_non_zero_on_problems(
    pack: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRME_EMBEDDING__PROVIDER", "hash")
    monkeypatch.setenv("PRME_SCORING__FUSION", "weighted")
    runner = CliRunner()
    sound = runner.invoke(main, ["pack", "check", "--path", str(pack), "--json"])
    assert sound.exit_code == 0, sound.output
    assert json.loads(sound.stdout)["ok"] is True
    tamper(pack, "DELETE FROM vectors WHERE rowid = 1")
    broken = runner.invoke(main, ["pack", "check", "--path", str(pack)])
    assert broken.exit_code == 1
    assert "memory without a vector" in broken.stdout
