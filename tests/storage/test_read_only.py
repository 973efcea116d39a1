"""A pack that cannot be written (read-only media, no permission) opens read-only.

The checks run in a forked child that, when the tests run as root, first drops to an
unprivileged user: root ignores file modes, so only then is ``chmod`` a real restriction.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.read_only import read_only, unprivileged

from prme import MemoryClient, PRMEConfig, ReadOnlyPackError
from prme.cli import main
from prme.config import EmbeddingConfig
from prme.storage.sqlite import DB_FILE

CONFIG = PRMEConfig(embedding=EmbeddingConfig(provider="hash"))
HASH_ENV = {"PRME_EMBEDDING__PROVIDER": "hash"}


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory the unprivileged child can traverse (pytest's own temp dirs are 0700)."""
    root = Path(tempfile.mkdtemp(prefix="prme-ro-"))
    root.chmod(0o755)
    yield root
    for path in [root, *root.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)
        else:
            path.chmod(0o644)
    shutil.rmtree(root)


def make_pack(path: Path) -> str:
    """A pack with a memory and one saved receipt; returns that retrieval's request id."""
    with MemoryClient(path, config=CONFIG) as memory:
        memory.store("Aster keeps its records in PostgreSQL.", user_id="alice")
        response = memory.retrieve("Aster records", user_id="alice")
    return str(response.metadata.request_id)


def counts(path: Path) -> tuple[int, int]:
    with sqlite3.connect(f"{(path / DB_FILE).as_uri()}?mode=ro", uri=True) as db:
        memories = db.execute("SELECT count(*) FROM memories").fetchone()[0]
        ops = db.execute("SELECT count(*) FROM oplog").fetchone()[0]
    db.close()
    return int(memories), int(ops)


def serve_reads(path: Path, request_id: str) -> dict[str, Any]:
    """What a read-only open answers, and what it refuses (run in the unprivileged child)."""
    assert not os.access(path, os.W_OK), "the child can still write the pack directory"
    out: dict[str, Any] = {}
    for frozen in (False, True):
        with MemoryClient(path, config=CONFIG, frozen=frozen) as memory:
            response = memory.retrieve("Aster records", user_id="alice")
            out[f"read_only_{frozen}"] = memory.read_only
            out[f"results_{frozen}"] = [r.node.content for r in response.results]
            out[f"persisted_{frozen}"] = response.metadata.receipt_persisted
            receipt = memory.get_retrieval_receipt(request_id, user_id="alice")
            out["receipt"] = None if receipt is None else str(receipt.request_id)
            refused = {}
            labels = {str(response.results[0].node.id): True}
            writes: dict[str, Callable[[MemoryClient], object]] = {
                "store": lambda m: m.store("more", user_id="alice"),
                "judge": lambda m, labels=labels: m.record_relevance(  # type: ignore[misc]
                    {"request_id": request_id, "labels": labels}, user_id="alice"
                ),
            }
            for name, write in writes.items():
                try:
                    write(memory)
                    refused[name] = "accepted"
                except ReadOnlyPackError as exc:
                    refused[name] = str(exc)
            out[f"refused_{frozen}"] = refused
            report = memory.check_pack()
            out["check"] = (report.ok, report.skipped, report.memories, report.receipts)
    runner = CliRunner()
    check = runner.invoke(main, ["pack", "check", "--path", str(path), "--json"], env=HASH_ENV)
    out["cli_check"] = (check.exit_code, json.loads(check.output)["ok"] if check.output else None)
    cli = runner.invoke(
        main,
        ["retrieve", "Aster", "--path", str(path), "--user-id", "alice"],
        env=HASH_ENV,
    )
    out["cli_retrieve"] = (cli.exit_code, cli.output)
    stored = runner.invoke(
        main, ["store", "x", "--path", str(path), "--user-id", "alice"], env=HASH_ENV
    )
    out["cli_store"] = (stored.exit_code, stored.output)
    return out


def test_a_read_only_directory_serves_retrievals_without_receipts(shared_dir: Path) -> None:
    pack = shared_dir / "pack"
    request_id = make_pack(pack)
    before = counts(pack)
    read_only(pack)
    out = unprivileged(lambda: serve_reads(pack, request_id))
    for frozen in (False, True):
        assert out[f"read_only_{frozen}"] is True
        assert out[f"results_{frozen}"] == ["Aster keeps its records in PostgreSQL."]
        assert out[f"persisted_{frozen}"] is False
        for message in out[f"refused_{frozen}"].values():
            assert "is read-only" in message and "copy the pack directory" in message
    assert out["receipt"] == request_id
    ok, skipped, memories, receipts = out["check"]
    assert (ok, memories, receipts) == (True, 1, 1)
    assert skipped and "read-only" in skipped[0]
    assert out["cli_check"] == [0, True]
    code, text = out["cli_retrieve"]
    assert code == 0 and "receipt saved: False" in text, text
    code, text = out["cli_store"]
    assert code == 1 and text.startswith("error: ") and "is read-only" in text, text
    assert counts(pack) == before  # nothing was written


def test_a_read_only_file_in_a_writable_directory_opens_read_only(shared_dir: Path) -> None:
    pack = shared_dir / "pack"
    request_id = make_pack(pack)
    read_only(pack, directory=False)
    (pack).chmod(0o777)  # the child may create SQLite's WAL index next to the file

    def check() -> dict[str, Any]:
        with MemoryClient(pack, config=CONFIG) as memory:
            response = memory.retrieve("Aster records", user_id="alice")
            store = memory.engine.store
            return {
                "mode": getattr(store, "read_only_mode", None),
                "persisted": response.metadata.receipt_persisted,
                "receipt": memory.get_retrieval_receipt(request_id, user_id="alice") is not None,
            }

    assert unprivileged(check) == {"mode": "ro", "persisted": False, "receipt": True}


def test_unread_write_ahead_log_on_read_only_media_is_a_typed_error(shared_dir: Path) -> None:
    live = shared_dir / "live"
    make_pack(live)
    writer = sqlite3.connect(live / DB_FILE)  # keeps the log: no checkpoint while it is open
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("SELECT count(*) FROM memories").fetchone()  # joins the WAL
    with MemoryClient(live, config=CONFIG) as memory:
        memory.store("Committed only to the write-ahead log.", user_id="alice")
    copy = shared_dir / "copy"  # a copy of a live pack, without SQLite's WAL index
    copy.mkdir()
    for name in (DB_FILE, DB_FILE + "-wal"):
        shutil.copyfile(live / name, copy / name)
    writer.close()
    assert (copy / (DB_FILE + "-wal")).stat().st_size > 0
    read_only(copy)

    def check() -> str:
        try:
            MemoryClient(copy, config=CONFIG)
        except ReadOnlyPackError as exc:
            return str(exc)
        return "opened"

    message = unprivileged(check)
    assert "write-ahead log" in message and "is read-only" in message
    assert stat.S_IMODE(copy.stat().st_mode) == 0o555


def test_http_serves_a_read_only_pack(shared_dir: Path) -> None:
    from fastapi.testclient import TestClient

    from prme.config import APIConfig
    from prme.http import create_app

    pack = shared_dir / "pack"
    make_pack(pack)
    warm = shared_dir / "warm"  # imports everything a request needs while still privileged
    with MemoryClient(warm, config=CONFIG) as memory, TestClient(create_app(memory)) as api:
        api.post("/v1/retrieve", json={"query": "x", "user_id": "alice"})
        api.post("/v1/store", json={"content": "x", "user_id": "alice"})
    before = counts(pack)
    read_only(pack)

    def check() -> dict[str, Any]:
        with (
            MemoryClient(pack, config=CONFIG) as memory,
            TestClient(create_app(memory, APIConfig())) as api,
        ):
            found = api.post("/v1/retrieve", json={"query": "Aster records", "user_id": "alice"})
            stored = api.post("/v1/store", json={"content": "more", "user_id": "alice"})
            return {
                "retrieve": (found.status_code, found.json()["metadata"]["receipt_persisted"]),
                "store": (stored.status_code, stored.json()["detail"]),
            }

    out = unprivileged(check)
    assert out["retrieve"] == [200, False]
    status, detail = out["store"]
    assert status == 409 and "is read-only" in detail
    assert counts(pack) == before


def test_a_read_only_pack_from_before_owner_delete_sequences_serves_retrievals(
    shared_dir: Path,
) -> None:
    # A pack written before the owners' delete sequences has no owner_deletes table, and a
    # read-only open cannot create it: the owner index is keyed by the pack-wide sequences.
    pack = shared_dir / "pack"
    make_pack(pack)
    with sqlite3.connect(pack / DB_FILE) as db:
        db.execute("DROP TRIGGER memories_owner_delete")
        db.execute("DROP TRIGGER memories_owner_update")
        db.execute("DROP TABLE owner_deletes")
    db.close()
    read_only(pack)

    def check() -> list[str]:
        with MemoryClient(pack, config=CONFIG) as memory:
            assert memory.read_only
            response = memory.retrieve("Aster records", user_id="alice")
            again = memory.retrieve("Aster records", user_id="alice")
            assert [r.node.id for r in again.results] == [r.node.id for r in response.results]
            return [r.node.content for r in response.results]

    assert unprivileged(check) == ["Aster keeps its records in PostgreSQL."]
