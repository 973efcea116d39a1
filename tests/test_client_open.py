"""A MemoryClient that fails to open releases everything it opened (no leaked descriptors)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from prme import InvalidInputError, MemoryClient, PRMEConfig
from prme.bulk import gc_paused
from prme.config import EmbeddingConfig
from prme.errors import IntegrityError
from prme.storage.sqlite import DB_FILE

ATTEMPTS = 50


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def hash_config(dimension: int | None = None) -> PRMEConfig:
    return PRMEConfig(embedding=EmbeddingConfig(provider="hash", dimension=dimension))


def unknown_provider(pack: Path) -> type[Exception]:
    MemoryClient(pack, config=hash_config()).close()
    return InvalidInputError


def other_embedder(pack: Path) -> type[Exception]:
    with MemoryClient(pack, config=hash_config()) as memory:
        memory.store("Aster uses PostgreSQL.", user_id="alice")  # binds the embedder
    return InvalidInputError


def not_a_database(pack: Path) -> type[Exception]:
    pack.mkdir(parents=True)
    (pack / DB_FILE).write_bytes(b"not a database, " * 512)
    return sqlite3.DatabaseError


def unsupported_schema(pack: Path) -> type[Exception]:
    MemoryClient(pack, config=hash_config()).close()
    with sqlite3.connect(pack / DB_FILE) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'store_schema_version'")
    db.close()
    return IntegrityError


CONFIGS: dict[str, PRMEConfig] = {
    "unknown_provider": PRMEConfig(embedding=EmbeddingConfig(provider="no-such-model")),
    "other_embedder": hash_config(dimension=64),
    "not_a_database": hash_config(),
    "unsupported_schema": hash_config(),
}


@pytest.mark.parametrize(
    "prepare", [unknown_provider, other_embedder, not_a_database, unsupported_schema]
)
def test_failed_opens_leak_no_descriptors(
    tmp_path: Path, prepare: Callable[[Path], type[Exception]]
) -> None:
    pack = tmp_path / "pack"
    error = prepare(pack)
    config = CONFIGS[prepare.__name__]
    # Connections must be closed by the code, not by a garbage collection that may not run.
    with gc_paused():
        before = open_fds()
        for _ in range(ATTEMPTS):
            with pytest.raises(error):
                MemoryClient(pack, config=config)
        leaked = open_fds() - before
    assert leaked == 0
