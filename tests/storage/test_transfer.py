"""Moving a pack between SQLite and PostgreSQL: lossless, verified, all-or-nothing."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import (
    BACKENDS,
    FakeClock,
    make_config,
    open_pack,
    postgres_schema,
    session_postgres_url,
)
from support.golden import OWNER, SCOPES, Golden, golden

from prme import FrozenPackError, IntegrityError, MemoryClient
from prme.errors import InvalidInputError
from prme.models.relevance import RelevanceSubmission
from prme.services import reports
from prme.storage import owner_indexes
from prme.storage.postgres import PostgresStore, drop_schema
from prme.storage.transfer import export_pack, import_pack

both = pytest.mark.parametrize("backend", BACKENDS, indirect=True)


@pytest.fixture
def packs(tmp_path: Path) -> Iterator[Callable[..., MemoryClient]]:
    """Clients on fresh packs of either backend (postgres schemas are dropped afterwards)."""
    opened: list[tuple[MemoryClient, str, Path]] = []

    def make(name: str, backend: str = "sqlite", **kwargs: object) -> MemoryClient:
        kwargs.setdefault("config", make_config())
        kwargs.setdefault("clock", FakeClock())
        client = open_pack(tmp_path / name, backend=backend, **kwargs)
        opened.append((client, backend, tmp_path / name))
        return client

    yield make
    for client, backend, path in opened:
        client.close()
        if backend == "postgres":
            drop_schema(session_postgres_url(), postgres_schema(path))


def seeded(client: MemoryClient) -> list[str]:
    """A small pack: varied fields, entities, receipts and a judgment. Returns request ids."""
    client.store_many(
        [
            {"content": "Aster stores its data in PostgreSQL", "scope": "project"},
            {"content": "Bob prefers green tea", "metadata": {"mood": "calm", "n": 1.5}},
            {
                "content": "Café Naïve opened in Lisbon",
                "event_time": datetime(2026, 3, 1, 12, tzinfo=UTC),
                "pinned": True,
            },
        ],
        user_id="alice",
    )
    client.store("Carol runs the Aster migration", user_id="carol", scope="project")
    deleted = client.store("temporary note", user_id="alice")
    client.delete(deleted, user_id="alice")
    requests = []
    for query in ("Where does Aster keep data?", "tea", "Lisbon café"):
        response = client.retrieve(query, user_id="alice", scope=["project", "personal"])
        requests.append(str(response.metadata.request_id))
    first = client.get_retrieval_receipt(requests[0], user_id="alice")
    assert first is not None
    top = first.candidates[0].node_id
    client.record_relevance(
        RelevanceSubmission(request_id=first.request_id, labels={top: True}), user_id="alice"
    )
    return requests


def dump(client: MemoryClient) -> list[dict[str, object]]:
    out = io.StringIO()
    export_pack(client.engine.store, out)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    records[0].pop("source_backend")
    return records


def move(source: MemoryClient, target: MemoryClient) -> None:
    buffer = io.StringIO()
    export_pack(source.engine.store, buffer)
    buffer.seek(0)
    import_pack(target.engine.store, buffer)


def test_sqlite_to_postgres_and_back_is_lossless(
    packs: Callable[..., MemoryClient], postgres_url: str
) -> None:
    source = packs("source")
    requests = seeded(source)
    on_postgres = packs("pg", "postgres")
    move(source, on_postgres)
    back = packs("back")
    move(on_postgres, back)
    original = dump(source)
    assert dump(on_postgres) == original
    assert dump(back) == original
    kinds = [r["kind"] for r in original]
    assert kinds.count("memory") == 4 and kinds.count("vector") == 4 and kinds[-1] == "end"
    assert original[0]["write_seq"] == str(source.engine.store.pack_identity().write_seq)
    assert original[0]["owner_sequences"] == {"alice": 3, "carol": 1}
    for client in (on_postgres, back):
        store = client.engine.store
        assert store.pack_identity() == source.engine.store.pack_identity()
        for owner in ("alice", "carol", "dave"):  # the owners' sequences move too
            assert store.owner_write_seq(owner) == source.engine.store.owner_write_seq(owner)
        assert client.pack_digest() == source.pack_digest()
        assert store.attest({"x": 1}) == source.engine.store.attest({"x": 1})
        for request_id in requests:
            moved = client.get_retrieval_receipt(request_id, user_id="alice")
            assert moved == source.get_retrieval_receipt(request_id, user_id="alice")
            assert moved is not None and moved.checksum
        assert client.list_relevance(user_id="alice") == source.list_relevance(user_id="alice")
    # the imported pack keeps working: lexical statistics and rowids continue from the source
    assert source.engine.store.lexical_search("alice", None, ["tea"], 5) == (
        on_postgres.engine.store.lexical_search("alice", None, ["tea"], 5)
    )
    on_postgres.store("Aster also uses Redis", user_id="alice", scope="project")
    response = on_postgres.retrieve("Aster Redis", user_id="alice", scope="project")
    assert response.results[0].node.content == "Aster also uses Redis"


@pytest.mark.sqlite_only  # the golden packs are SQLite directories unless --backend postgres
def test_learning_reports_and_profiles_verify_after_the_move(
    packs: Callable[..., MemoryClient], tmp_path_factory: pytest.TempPathFactory
) -> None:
    gold: Golden = golden(tmp_path_factory)
    with MemoryClient(gold.root / "chain", config=make_config(), clock=FakeClock()) as chain:
        active = chain.get_active_ranking_profile(user_id=OWNER, scopes=SCOPES)
        digest = chain.pack_digest()
        moved = packs("gold", "postgres")
        move(chain, moved)
    engine = moved.engine
    for report in (gold.proposal, gold.holdout, gold.weak_proposal, gold.chained_holdout):
        assert reports.verify(engine, report)
    assert moved.pack_digest() == digest == gold.holdout.memory_artifact_sha256
    assert moved.get_active_ranking_profile(user_id=OWNER, scopes=SCOPES) == active
    # evidence made on SQLite is attested here, but its feature identity names the SQLite
    # lexical backend: a profile never crosses backends silently
    profile = moved.create_ranking_profile(gold.proposal, gold.holdout, user_id=OWNER)
    assert profile.application.feature_identity_sha256 != engine.feature_identity_sha256()
    response = moved.retrieve("Which database does Aster use?", user_id=OWNER, scope=SCOPES)
    assert response.metadata.ranking_profile_status == "inapplicable"
    assert response.metadata.ranking_profile_reason == "feature_identity_mismatch"
    with pytest.raises(InvalidInputError, match="feature_identity_mismatch"):
        moved.activate_ranking_profile(profile.profile_id, user_id=OWNER)


@both
def test_import_refuses_a_non_empty_target(
    packs: Callable[..., MemoryClient], backend: str
) -> None:
    source = packs("source")
    seeded(source)
    target = packs("target", backend)
    target.retrieve("anything", user_id="alice")  # one receipt: not empty any more
    before = dump(target)
    with pytest.raises(InvalidInputError, match="not empty"):
        move(source, target)
    assert dump(target) == before


@both
def test_a_truncated_or_tampered_file_writes_nothing(
    packs: Callable[..., MemoryClient], backend: str
) -> None:
    source = packs("source")
    seeded(source)
    buffer = io.StringIO()
    export_pack(source.engine.store, buffer)
    lines = buffer.getvalue().splitlines(keepends=True)
    target = packs("target", backend)
    empty = dump(target)
    with pytest.raises(IntegrityError, match="truncated"):
        import_pack(target.engine.store, io.StringIO("".join(lines[:-1])))
    tampered = [
        line.replace('\\"alice\\"', '\\"mallory\\"') if '"kind":"op"' in line else line
        for line in lines
    ]
    with pytest.raises(IntegrityError, match="checksum mismatch"):
        import_pack(target.engine.store, io.StringIO("".join(tampered)))
    with pytest.raises(InvalidInputError, match="not a prme pack"):
        import_pack(target.engine.store, io.StringIO('{"kind":"memory"}\n'))
    header = json.loads(lines[0])
    header["owner_sequences"] = {"alice": -1}
    with pytest.raises(InvalidInputError, match="owner_sequences") as info:
        import_pack(
            target.engine.store, io.StringIO("".join([json.dumps(header) + "\n", *lines[1:]]))
        )
    assert info.value.field == "source"
    assert dump(target) == empty
    assert (
        target.engine.store.pack_identity().pack_id != source.engine.store.pack_identity().pack_id
    )
    import_pack(target.engine.store, io.StringIO("".join(lines)))  # still empty: importable
    assert target.engine.store.pack_identity() == source.engine.store.pack_identity()


@both
def test_a_frozen_target_is_refused(packs: Callable[..., MemoryClient], backend: str) -> None:
    source = packs("source")
    seeded(source)
    packs("target", backend).close()
    frozen = packs("target", backend, frozen=True)
    with pytest.raises(FrozenPackError, match="import"):
        move(source, frozen)


def test_export_to_a_file_path(packs: Callable[..., MemoryClient], tmp_path: Path) -> None:
    source = packs("source")
    seeded(source)
    started = time.perf_counter()
    summary = export_pack(source.engine.store, tmp_path / "pack.jsonl")
    assert time.perf_counter() - started < 5
    # ops: three receipts, one judgment and its evidence
    assert (summary.counts["memory"], summary.counts["vector"], summary.counts["op"]) == (4, 4, 5)
    assert summary.pack_id == source.engine.store.pack_identity().pack_id
    target = packs("target")
    assert import_pack(target.engine.store, tmp_path / "pack.jsonl") == summary
    assert isinstance(target.engine.store, type(source.engine.store))
    assert not isinstance(target.engine.store, PostgresStore)


@pytest.mark.sqlite_only
def test_an_import_never_serves_an_index_left_in_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pack's database removed and its own export imported in its place: the owner index
    files left in ``index/`` carry the same pack id, owner and delete count (an import starts
    every owner's count at 0) and as many rows, but predate the export's update (the old
    version superseded), so the import drops them."""
    from prme.storage.sqlite import DB_FILE, INDEX_DIR

    monkeypatch.setattr(owner_indexes, "SAVE_INDEX_ROWS", 8)  # save small owners' indexes too
    path = tmp_path / "pack"
    texts = [f"Aster deployment note number {i}" for i in range(20)]
    client = MemoryClient(path, config=make_config(), clock=FakeClock())
    ids = client.store_many([{"content": t, "scope": "project"} for t in texts], user_id="alice")
    client.retrieve("Aster deployment", user_id="alice", scope="project")  # saves alice's index
    assert any((path / INDEX_DIR).iterdir())
    client.update(ids[0], user_id="alice", content="Aster deployment moved to Lisbon")
    exported = io.StringIO()
    client.export_pack(exported)
    client.close()
    for leftover in path.glob(f"{DB_FILE}*"):
        leftover.unlink()
    exported.seek(0)
    with MemoryClient(path, config=make_config(), clock=FakeClock()) as imported:
        imported.import_pack(exported)
        response = imported.retrieve("Aster deployment", user_id="alice", scope="project", limit=50)
        returned = {str(r.node.id) for r in response.results}
        assert str(ids[0]) not in returned and len(returned) == len(ids)  # the new version
        index = imported.engine.store.owner_index("alice")  # rebuilt: both versions
        assert index is not None and index.size == len(ids) + 1
