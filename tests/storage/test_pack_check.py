"""``check_pack`` / ``prme pack check`` through the Store protocol: the same checks and counts
on every backend, and each backend's own check of its lexical index."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import postgres_schema

from prme import MemoryClient
from prme.cli import main
from prme.services.integrity import IntegrityReport
from prme.storage.sqlite import DB_FILE

both = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
ClientFactory = Callable[..., MemoryClient]
Execute = Callable[[str], Any]
NOTES = [
    "Aster stores its data in PostgreSQL",
    "Bob prefers green tea in the morning",
    "The nightly job runs the database migrations",
]


@contextmanager
def raw(backend: str, pack: Path, url: str | None) -> Iterator[Execute]:
    """Statements behind the engine's back, on the pack's own tables."""
    if backend == "sqlite":
        conn = sqlite3.connect(pack / DB_FILE)
        try:
            yield conn.execute
            conn.commit()
        finally:
            conn.close()
        return
    import psycopg

    assert url is not None
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(f"SET search_path TO {postgres_schema(pack)}, public")
        yield pg.execute


def filled(make_client: ClientFactory) -> MemoryClient:
    client = make_client()
    client.store_many(NOTES, user_id="alice")
    client.store("Carol keeps bees", user_id="carol")
    client.retrieve("Which database does Aster use?", user_id="alice")
    return client


def problems(report: IntegrityReport) -> set[tuple[str, str]]:
    return {(p.check, p.message) for p in report.problems}


@pytest.fixture
def url(backend: str, request: pytest.FixtureRequest) -> str | None:
    return str(request.getfixturevalue("postgres_url")) if backend == "postgres" else None


@both
def test_a_sound_pack_passes_with_the_same_counts_on_each_backend(
    make_client: ClientFactory, backend: str
) -> None:
    client = filled(make_client)
    report = client.check_pack()
    assert report.ok and report.problems == () and report.skipped == ()
    assert report.memories == report.vectors == report.lexical_rows == len(NOTES) + 1
    assert (report.operations, report.receipts, report.other_operations) == (1, 1, 0)
    assert report.pack_id == client.engine.store.pack_identity().pack_id


@both
def test_a_missing_vector_and_an_edited_content_are_reported_on_each_backend(
    make_client: ClientFactory, backend: str, pack_path: Path, url: str | None
) -> None:
    client = filled(make_client)
    with raw(backend, pack_path, url) as execute:
        execute("DELETE FROM vectors WHERE rowid = 1")
        execute("UPDATE memories SET content_sha256 = 'x' WHERE rowid = 2")
    report = client.check_pack()
    assert not report.ok and report.vectors == len(NOTES)
    found = problems(report)
    assert ("memories", "memory without a vector") in found
    assert ("memories", "content does not match content_sha256") in found
    assert any(check == "digest" for check, _ in found)  # the kept sum no longer matches


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_postgres_checks_each_memorys_lexical_row_against_its_content(
    make_client: ClientFactory, backend: str, pack_path: Path, postgres_url: str
) -> None:
    client = filled(make_client)
    assert client.check_pack().ok
    with raw(backend, pack_path, postgres_url) as execute:
        # written around the trigger: the row's lexemes no longer follow its content
        execute("ALTER TABLE memories DISABLE TRIGGER memories_index_content")
        execute("UPDATE memories SET content = content || ' zebra' WHERE rowid = 2")
        execute("UPDATE memories SET doc_len = doc_len + 1 WHERE rowid = 3")
        execute("ALTER TABLE memories ENABLE TRIGGER memories_index_content")
    report = client.check_pack()
    assert {p.check for p in report.problems} >= {"postgres"}
    lexical = [p for p in report.problems if p.check == "postgres"]
    assert [p.message for p in lexical] == ["lexical row differs from the content"] * 2


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_prme_pack_check_runs_on_postgres(
    make_client: ClientFactory,
    backend: str,
    pack_path: Path,
    postgres_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from psycopg.conninfo import make_conninfo

    filled(make_client).close()
    pack_url = make_conninfo(postgres_url, options=f"-csearch_path={postgres_schema(pack_path)}")
    monkeypatch.setenv("PRME_EMBEDDING__PROVIDER", "hash")
    monkeypatch.setenv("PRME_SCORING__FUSION", "weighted")
    monkeypatch.setenv("PRME_STORAGE__POSTGRES_URL", pack_url)
    runner = CliRunner()
    sound = runner.invoke(main, ["pack", "check", "--json"])
    assert sound.exit_code == 0, sound.output
    report = json.loads(sound.stdout)
    assert report["ok"] is True and report["memories"] == len(NOTES) + 1
    with raw(backend, pack_path, postgres_url) as execute:
        execute("DELETE FROM vectors WHERE rowid = 1")
    broken = runner.invoke(main, ["pack", "check"])
    assert broken.exit_code == 1
    assert "memory without a vector" in broken.stdout
