"""Compact receipts: stored compressed, read back as the exact canonical text, old ones too."""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import FakeClock, make_config

from prme import IntegrityError, MemoryClient
from prme.canonical import canonical_json, sha256_hex
from prme.services.integrity import check_pack
from prme.storage import payloads
from prme.storage.receipt_dictionary import RECEIPT_DICTIONARY_V1
from prme.storage.sqlite import DB_FILE

NOW = datetime(2026, 9, 1, tzinfo=UTC)
PEOPLE = ("Alice Moreau", "Bruno Keller", "Chen Wei", "Dana Okafor", "Elif Yilmaz")
DICTIONARY_V1_ADLER32 = 616309932  # RECEIPT_DICTIONARY_V1, as receipts name it
TOOLS = ("PostgreSQL", "Redis", "Kafka", "Terraform", "Grafana", "Airflow")


def _fill(client: MemoryClient, count: int = 300) -> None:
    client.store_many(
        [
            f"{PEOPLE[i % 5]} moved the Aster {TOOLS[i % 6]} pipeline to {TOOLS[(i + 1) % 6]}"
            f" after review {i}"
            for i in range(count)
        ],
        user_id="alice",
    )


def _stored(path: Path) -> list[tuple[str, Any, str]]:
    conn = sqlite3.connect(path / DB_FILE)
    rows = conn.execute(
        "SELECT op_type, payload, checksum FROM oplog WHERE op_type = 'retrieval_receipt'"
    ).fetchall()
    conn.close()
    return [(str(t), p, str(c)) for t, p, c in rows]


def test_the_stored_form_round_trips_and_only_receipts_are_compressed() -> None:
    text = canonical_json({"candidates": [{"node_id": "x" * 36, "score": 0.5}] * 20})
    stored = payloads.encode("retrieval_receipt", text)
    assert isinstance(stored, bytes) and len(stored) < len(text) / 4
    assert payloads.decode(stored) == text
    assert payloads.encode("retrieval_receipt", text) == stored  # deterministic
    assert payloads.encode("ranking_profile", text) == text
    assert payloads.decode(payloads.encode_bytes("ranking_profile", text)) == text
    for damaged in (stored[:-3], stored + b" "):  # truncated, or bytes after the stream
        with pytest.raises(zlib.error):
            payloads.decode(damaged)


def test_receipts_name_the_preset_dictionary_and_it_never_changes() -> None:
    text = canonical_json({"candidates": [{"node_id": "x" * 36, "score": 0.5}] * 20})
    stored = payloads.encode("retrieval_receipt", text)
    assert isinstance(stored, bytes) and stored[1] & 0x20  # FDICT: a dictionary is named
    # Receipts already stored name this dictionary by its Adler-32: editing it would make
    # them unreadable, so its checksum is pinned (a new dictionary is a new entry).
    assert int.from_bytes(stored[2:6], "big") == zlib.adler32(RECEIPT_DICTIONARY_V1)
    assert zlib.adler32(RECEIPT_DICTIONARY_V1) == DICTIONARY_V1_ADLER32
    assert payloads.decode(stored) == text
    # a stream naming a dictionary prme does not have is refused, not misread
    deflater = zlib.compressobj(3, zdict=b"another dictionary")
    foreign = deflater.compress(text.encode()) + deflater.flush()
    with pytest.raises(zlib.error, match="unknown preset dictionary"):
        payloads.decode(foreign)


@pytest.mark.sqlite_only  # measures the SQLite file's stored bytes
def test_a_limit_20_receipt_is_stored_in_at_most_5_kb(pack_path: Path) -> None:
    with MemoryClient(pack_path, config=make_config(), clock=FakeClock()) as client:
        _fill(client)
        response = client.retrieve(
            "Who moved the Aster Kafka pipeline?", user_id="alice", reference_time=NOW, limit=20
        )
        assert len(response.results) == 20
        receipt = client.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
        assert receipt is not None
        text = canonical_json(receipt)
    [(_, stored, checksum)] = _stored(pack_path)
    assert isinstance(stored, bytes) and len(stored) <= 5000 < len(text.encode())
    assert payloads.decode(stored) == text and checksum == sha256_hex(text)


def _text(stored: bytes) -> str | bytes:
    return payloads.decode(stored)  # how receipts were stored before compression


def _zlib_without_dictionary(stored: bytes) -> str | bytes:
    older = zlib.compress(payloads.decode(stored).encode("utf-8"), 6)  # before the dictionary
    assert not older[1] & 0x20
    return older


@pytest.mark.sqlite_only  # rewrites the SQLite file's oplog
@pytest.mark.parametrize("older_form", [_text, _zlib_without_dictionary])
def test_a_receipt_stored_in_an_older_form_still_reads_and_checks(
    pack_path: Path, older_form: Callable[[bytes], str | bytes]
) -> None:
    with MemoryClient(pack_path, config=make_config(), clock=FakeClock()) as client:
        _fill(client, 40)
        response = client.retrieve("Aster Kafka", user_id="alice", reference_time=NOW)
        before = client.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
    [(_, stored, _)] = _stored(pack_path)
    conn = sqlite3.connect(pack_path / DB_FILE, isolation_level=None)
    conn.execute("DROP TRIGGER oplog_append_only_update")
    conn.execute("UPDATE oplog SET payload = ?", (older_form(stored),))
    conn.close()
    with MemoryClient(pack_path, config=make_config(), clock=FakeClock()) as client:
        again = client.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
        assert again == before and again is not None
        report = check_pack(client.engine)
    assert report.receipts == 1 and {p.check for p in report.problems} <= {"sqlite"}


@pytest.mark.sqlite_only  # damages the SQLite file's stored bytes
def test_damaged_compressed_bytes_are_a_checksum_failure(pack_path: Path) -> None:
    with MemoryClient(pack_path, config=make_config(), clock=FakeClock()) as client:
        _fill(client, 40)
        response = client.retrieve("Aster Kafka", user_id="alice", reference_time=NOW)
    [(_, stored, _)] = _stored(pack_path)
    conn = sqlite3.connect(pack_path / DB_FILE, isolation_level=None)
    conn.execute("DROP TRIGGER oplog_append_only_update")
    conn.execute("UPDATE oplog SET payload = ?", (stored + b"\x00",))
    conn.close()
    with MemoryClient(pack_path, config=make_config(), clock=FakeClock()) as client:
        with pytest.raises(IntegrityError, match="checksum mismatch"):
            client.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
        report = check_pack(client.engine)
    assert [p.check for p in report.problems] == ["oplog"]
    assert "cannot be read" in report.problems[0].message


def test_receipts_replay_after_compression_on_every_backend(client: MemoryClient) -> None:
    _fill(client, 60)
    response = client.retrieve("Aster Kafka", user_id="alice", reference_time=NOW, limit=20)
    receipt = client.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
    assert receipt is not None and receipt.checksum
    assert [c.node_id for c in receipt.candidates if c.in_context][:3] == [
        r.node.id for r in response.results
    ][:3]
    listed = client.engine.store.find_ops("retrieval_receipt", "alice")
    assert [op.payload for op in listed] == [canonical_json(receipt)]
