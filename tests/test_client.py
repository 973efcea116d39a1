"""MemoryClient lifecycle, ids, embedder binding, frozen packs and AsyncMemoryClient."""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import FakeClock, make_config

from prme import (
    AsyncMemoryClient,
    FrozenPackError,
    InvalidInputError,
    MemoryClient,
    PRMEConfig,
    ScoringWeights,
)
from prme.config import EmbeddingConfig
from prme.embed.hashing import HashingEmbedder
from prme.storage.sqlite import DB_FILE

ClientFactory = Callable[..., MemoryClient]
GENERATOR = Path(__file__).resolve().parents[1] / ".ci" / "gen_async_client.py"


def test_context_manager_closes(pack_path: Path) -> None:
    with MemoryClient(pack_path, config=make_config()) as client:
        node_id = client.store("Aster uses PostgreSQL", user_id="alice")
    with pytest.raises(RuntimeError, match="MemoryClient is closed"):
        client.get(node_id, user_id="alice")
    client.close()  # closing twice is fine
    with MemoryClient(pack_path, config=make_config()) as again:
        assert again.get(node_id, user_id="alice") is not None


def test_use_after_close_raises(client: MemoryClient) -> None:
    node_id = client.store("Aster", user_id="alice")
    client.close()
    calls: list[Callable[[], object]] = [
        lambda: client.store("x", user_id="alice"),
        lambda: client.store_with_receipt("x", user_id="alice"),
        lambda: client.store_many(["x"], user_id="alice"),
        lambda: client.get(node_id, user_id="alice"),
        lambda: client.list(user_id="alice"),
        lambda: client.delete(node_id, user_id="alice"),
        lambda: client.retrieve("x", user_id="alice"),
        lambda: client.get_retrieval_receipt(uuid.uuid4(), user_id="alice"),
        lambda: client.pack_digest(),
    ]
    for call in calls:
        with pytest.raises(RuntimeError, match="MemoryClient is closed"):
            call()


def test_pack_directory_is_created(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "memories"
    with MemoryClient(str(target), config=make_config()) as client:
        client.store("Aster", user_id="alice")
    assert (target / DB_FILE).is_file()


def test_uuid_or_str_ids_everywhere(client: MemoryClient) -> None:
    text_id = client.store("Aster uses PostgreSQL", user_id="alice")
    as_uuid = uuid.UUID(text_id)
    assert client.get(as_uuid, user_id="alice") == client.get(text_id, user_id="alice")
    assert client.get(text_id.upper(), user_id="alice") is not None
    other = client.store("Kepler telescope", user_id="alice")
    page = client.list(user_id="alice", after_id=uuid.UUID(min(text_id, other)))
    assert [str(n.id) for n in page] == [max(text_id, other)]
    response = client.retrieve("Aster", user_id="alice")
    request = response.metadata.request_id
    assert client.get_retrieval_receipt(request, user_id="alice") is not None
    assert client.get_retrieval_receipt(str(request), user_id="alice") is not None
    assert client.delete(as_uuid, user_id="alice")
    assert client.get(text_id, user_id="alice") is None
    for bad in ("not-a-uuid", 42, None):
        with pytest.raises(InvalidInputError) as info:
            client.get(bad, user_id="alice")
        assert info.value.field == "node_id"
    with pytest.raises(InvalidInputError) as info:
        client.get_retrieval_receipt("nope", user_id="alice")
    assert info.value.field == "request_id"
    with pytest.raises(InvalidInputError) as info:
        client.list(user_id="alice", after_id="nope")
    assert info.value.field == "after_id"


def test_list_limit_bounds(client: MemoryClient) -> None:
    for bad in (0, 1001, True, "5"):
        with pytest.raises(InvalidInputError, match="limit must be an integer from 1 to 1000"):
            client.list(user_id="alice", limit=bad)  # type: ignore[arg-type]
    assert client.list(user_id="alice", limit=1000) == []


@pytest.mark.sqlite_only
def test_pack_keeps_its_embedder(make_client: ClientFactory, pack_path: Path) -> None:
    first = make_client()
    first.store("Aster uses PostgreSQL", user_id="alice")
    first.close()
    minilm = PRMEConfig(scoring=ScoringWeights(), embedding=EmbeddingConfig(provider="minilm"))
    with pytest.raises(InvalidInputError, match=r"embedding\.provider") as info:
        MemoryClient(pack_path, config=minilm)
    assert info.value.field == "embedding.provider"
    with pytest.raises(InvalidInputError, match=r"embedding\.provider"):
        MemoryClient(pack_path, config=make_config(), embedder=HashingEmbedder(64))
    # the failed opens left the pack usable with its own embedder
    again = make_client()
    assert len(again.list(user_id="alice")) == 1


def test_unknown_provider_lists_valid_ones(pack_path: Path) -> None:
    config = PRMEConfig(embedding=EmbeddingConfig(provider="word2vec"))
    with pytest.raises(InvalidInputError, match="'hash'") as info:
        MemoryClient(pack_path, config=config)
    assert info.value.field == "embedding.provider"


def _oplog_rows(pack_path: Path) -> int:
    conn = sqlite3.connect(pack_path / DB_FILE)
    count = int(conn.execute("SELECT COUNT(*) FROM oplog").fetchone()[0])
    conn.close()
    return count


@pytest.mark.sqlite_only
def test_frozen_pack(make_client: ClientFactory, pack_path: Path) -> None:
    writer = make_client()
    kept = writer.store("Aster uses PostgreSQL", user_id="alice")
    writer.close()
    frozen = make_client(frozen=True)
    assert frozen.frozen
    seq = frozen.engine.store.pack_identity().write_seq
    digest = frozen.pack_digest()
    with pytest.raises(FrozenPackError, match="frozen") as info:
        frozen.store("new", user_id="alice")
    assert info.value.operation == "store"
    with pytest.raises(FrozenPackError):
        frozen.store_with_receipt("new", user_id="alice")
    with pytest.raises(FrozenPackError):
        frozen.store_many(["new", "newer"], user_id="alice")
    with pytest.raises(FrozenPackError, match="delete"):
        frozen.delete(kept, user_id="alice")
    assert isinstance(FrozenPackError("store"), RuntimeError)
    response = frozen.retrieve("Aster", user_id="alice")
    assert response.metadata.receipt_persisted
    assert len(response.results) == 1
    assert frozen.get_retrieval_receipt(response.metadata.request_id, user_id="alice") is not None
    assert _oplog_rows(pack_path) == 1
    assert frozen.engine.store.pack_identity().write_seq == seq
    assert frozen.pack_digest() == digest
    assert [str(n.id) for n in frozen.list(user_id="alice")] == [kept]


def test_frozen_fresh_pack_refuses_first_store(make_client: ClientFactory) -> None:
    frozen = make_client(frozen=True)
    with pytest.raises(FrozenPackError):
        frozen.store("first", user_id="alice")
    assert frozen.engine.store.embedder_identity() is None
    assert frozen.retrieve("anything", user_id="alice").results == []


def test_pack_digest_tracks_content(make_client: ClientFactory, tmp_path: Path) -> None:
    client = make_client()
    empty = client.pack_digest()
    node = client.store("Aster uses PostgreSQL", user_id="alice")
    one = client.pack_digest()
    assert len(one) == 64 and one != empty
    client.retrieve("Aster", user_id="alice")
    assert client.pack_digest() == one  # receipts are not content
    client.delete(node, user_id="alice")
    assert client.pack_digest() != one


def test_async_client(pack_path: Path) -> None:
    async def main() -> tuple[str, int, bool]:
        async with AsyncMemoryClient(pack_path, config=make_config(), clock=FakeClock()) as client:
            ids = await asyncio.gather(
                *(client.store(f"Aster fact {i}", user_id="alice") for i in range(5))
            )
            batch = await client.store_many(["Kepler", "Orion"], user_id="alice")
            response = await client.retrieve("Aster", user_id="alice", limit=10)
            receipt = await client.get_retrieval_receipt(
                response.metadata.request_id, user_id="alice"
            )
            assert client.frozen is False  # plain attributes pass through
            listed = await client.list(user_id="alice")
            return ids[0], len(listed) + len(batch) - 2, receipt is not None

    first, count, has_receipt = asyncio.run(main())
    assert count == 7 and has_receipt
    with MemoryClient(pack_path, config=make_config()) as client:
        assert client.get(first, user_id="alice") is not None


def _methods(cls: type) -> dict[str, Callable[..., object]]:
    """The public methods of ``cls`` in definition order, its own before those it inherits."""
    found: dict[str, Callable[..., object]] = {}
    for owner in cls.__mro__[:-1]:
        for n, v in vars(owner).items():
            if not n.startswith("_") and inspect.isfunction(v):
                found.setdefault(n, v)
    return found


def test_async_client_has_every_method_with_the_same_signature() -> None:
    sync, async_ = _methods(MemoryClient), _methods(AsyncMemoryClient)
    assert list(async_) == list(sync)  # the same names, in the same order
    assert len(sync) >= 30
    for name, method in sync.items():
        assert not inspect.iscoroutinefunction(method), name
        assert inspect.iscoroutinefunction(async_[name]), name
        expected, actual = inspect.signature(method), inspect.signature(async_[name])
        # names, kinds, defaults and annotations; the coroutine returns what the method does
        assert list(actual.parameters.values()) == list(expected.parameters.values()), name
        assert actual.return_annotation == expected.return_annotation, name
        assert actual.return_annotation is not inspect.Signature.empty, name


def test_async_client_exposes_the_same_attributes(client: MemoryClient) -> None:
    def properties(cls: type) -> set[str]:
        return {n for n, v in vars(cls).items() if isinstance(v, property)}

    plain = {n for n in vars(client) if not n.startswith("_")}
    assert plain == {"config", "path", "frozen"}
    assert properties(AsyncMemoryClient) == properties(MemoryClient) | plain


def test_async_client_source_is_what_the_generator_writes() -> None:
    spec = importlib.util.spec_from_file_location("gen_async_client", GENERATOR)
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    source = generator.CLIENT.read_text("utf-8")
    assert generator.updated(source) == source, "run .ci/gen_async_client.py"
    assert generator.main(["--check"]) == 0
