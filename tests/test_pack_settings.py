"""A pack remembers how it was made: settings recorded at creation, enforced on open, changed
only by configure_pack; opening never creates a pack unless asked. Both backends."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import make_config

from prme import MemoryClient, PRMEConfig, ScoringWeights
from prme.config import EmbeddingConfig, RetrievalConfig
from prme.errors import FrozenPackError, InvalidInputError, PackNotFoundError
from prme.models.relevance import RecordedRelevance


@pytest.fixture(autouse=True)
def _no_prme_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in [n for n in os.environ if n.startswith("PRME_")]:
        monkeypatch.delenv(name)


def test_created_pack_records_and_uses_its_settings(
    make_client: Callable[..., MemoryClient],
) -> None:
    created = make_client(create=True)  # weighted fusion, hashing embedder
    settings = created.pack_settings()
    assert settings is not None
    assert settings["scoring"]["fusion"] == "weighted"
    assert settings["embedding"]["provider"] == "hash"
    created.store("Aster uses PostgreSQL", user_id="alice")
    # No configuration at all: the pack's own settings apply.
    reopened = make_client(config=PRMEConfig())
    assert reopened.config.scoring.fusion == "weighted"
    assert reopened.config.embedding.provider == "hash"
    response = reopened.retrieve("what does Aster use", user_id="alice")
    assert response.metadata.fusion == "weighted" and response.results


def test_a_disagreeing_configuration_is_an_error_naming_both_values(
    make_client: Callable[..., MemoryClient],
) -> None:
    make_client(create=True).store("Aster uses PostgreSQL", user_id="alice")
    with pytest.raises(InvalidInputError) as fusion:
        make_client(fusion="rrf")
    assert fusion.value.field == "scoring.fusion"
    assert "'weighted'" in str(fusion.value) and "'rrf'" in str(fusion.value)
    assert "prme pack configure" in str(fusion.value)
    other = PRMEConfig(scoring=ScoringWeights(), embedding=EmbeddingConfig(provider="minilm"))
    with pytest.raises(InvalidInputError) as embedder:
        make_client(config=other)
    assert embedder.value.field == "embedding.provider"
    assert "'hash'" in str(embedder.value) and "'minilm'" in str(embedder.value)
    # Agreeing explicitly is fine.
    assert make_client(config=make_config("weighted")).config.scoring.fusion == "weighted"


def test_configure_pack_is_a_recorded_content_change(
    make_client: Callable[..., MemoryClient],
) -> None:
    client = make_client(create=True)
    client.store("Aster uses PostgreSQL", user_id="alice")
    seq = client.engine.store.pack_identity().write_seq
    with pytest.raises(FrozenPackError):
        make_client(frozen=True, config=PRMEConfig()).configure_pack(fusion="rrf")
    assert client.engine.store.pack_identity().write_seq == seq
    with pytest.raises(InvalidInputError) as bad:
        client.configure_pack(fusion="fancy")
    assert bad.value.field == "fusion"
    with pytest.raises(InvalidInputError) as nothing:
        client.configure_pack()
    assert nothing.value.field == "settings"
    with pytest.raises(InvalidInputError) as embedded:  # the memories have hash vectors
        client.configure_pack(embedder="minilm")
    assert embedded.value.field == "embedding.provider"
    assert client.engine.store.pack_identity().write_seq == seq  # refusals write nothing

    owner_seq = client.engine.store.owner_write_seq("alice")
    changed = client.configure_pack(fusion="rrf")
    assert changed["scoring"]["fusion"] == "rrf"
    assert client.engine.store.pack_identity().write_seq == seq + 1
    # Settings change every owner's retrievals, so every owner's sequence moves as well.
    assert client.engine.store.owner_write_seq("alice") == owner_seq + 1
    assert client.retrieve("Aster", user_id="alice").metadata.fusion == "rrf"
    assert make_client(config=PRMEConfig()).config.scoring.fusion == "rrf"
    with pytest.raises(InvalidInputError):  # the old setting now disagrees
        make_client(fusion="weighted")


def test_configure_pack_switches_the_vector_index(
    make_client: Callable[..., MemoryClient],
) -> None:
    """``vector_index`` is a recorded setting like fusion: switched as a content write, used at
    once and by every later opening, and part of the feature identity."""
    config = make_config(retrieval=RetrievalConfig(vector_index_min_rows=64))
    client = make_client(create=True, config=config)
    services = ("postgres", "cache", "queue", "search", "gateway")
    texts = [f"Aster note {i}: the {services[i % 5]} service answers in {i % 40} ms" for i in range(300)]
    client.store_many(texts, user_id="alice")
    exact = client.engine.feature_identity_sha256()
    assert client.engine.feature_identity()["vector_search"] == "exact"
    seq = client.engine.store.pack_identity().write_seq
    with pytest.raises(InvalidInputError) as bad:
        client.configure_pack(vector_index="ivf")
    assert bad.value.field == "vector_index"
    assert client.engine.store.pack_identity().write_seq == seq  # a refusal writes nothing

    changed = client.configure_pack(vector_index="hnsw")
    assert changed["retrieval"]["vector_index"] == "hnsw"
    assert changed["retrieval"]["vector_index_min_rows"] == 64  # the rest is kept
    assert client.engine.store.pack_identity().write_seq == seq + 1
    assert client.engine.feature_identity()["vector_search"]["method"] == "usearch-hnsw"
    assert client.build_index(user_id="alice").vector_search == "hnsw"
    response = client.retrieve("postgres answers", user_id="alice")
    receipt = client.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
    assert receipt is not None
    assert receipt.execution.features["vector_search"]["method"] == "usearch-hnsw"
    reopened = make_client(config=PRMEConfig())
    assert reopened.config.retrieval.vector_index == "hnsw"
    assert reopened.engine.feature_identity_sha256() != exact

    client.configure_pack(vector_index="exact")
    assert client.build_index(user_id="alice").vector_search == "exact"
    assert client.engine.feature_identity_sha256() == exact


def test_a_missing_pack_is_never_created_unless_asked(tmp_path: Path, backend: str) -> None:
    missing = tmp_path / "nonexistent"
    with pytest.raises(PackNotFoundError) as error:
        MemoryClient(missing, config=make_config(), create=False)
    assert str(missing) in str(error.value) and "prme init" in str(error.value)
    assert not missing.exists()
    with pytest.raises(InvalidInputError) as bad:
        MemoryClient(missing, config=make_config(), create="yes")  # type: ignore[arg-type]
    assert bad.value.field == "create" and not missing.exists()
    if backend == "postgres":
        from conftest import postgres_schema, session_postgres_url

        from prme.storage.postgres import PostgresStore

        with pytest.raises(PackNotFoundError):
            PostgresStore(session_postgres_url(), schema=postgres_schema(missing), create=False)
    # The seed's MemoryClient("./memories") still creates, recording no settings.
    with MemoryClient(missing, config=make_config()) as implicit:
        assert implicit.pack_settings() is None


def test_judging_under_rank_fusion_warns(make_client: Callable[..., MemoryClient]) -> None:
    client = make_client(fusion="rrf")
    a = client.store("Zephyr runs on ARM", user_id="alice")
    b = client.store("Zephyr ran on x86", user_id="alice")
    request = client.retrieve("what does Zephyr run on", user_id="alice").metadata.request_id
    record = client.record_relevance(
        {"request_id": request, "labels": {a: True, b: False}}, user_id="alice"
    )
    assert isinstance(record, RecordedRelevance)
    assert "rank_fusion_receipt_records" in record.warnings[0]
    stored = client.get_relevance(record.feedback_id, user_id="alice")
    assert stored is not None and not isinstance(stored, RecordedRelevance)
    retried = client.record_relevance(
        {"request_id": request, "labels": {a: True, b: False}, "feedback_id": record.feedback_id},
        user_id="alice",
    )
    assert isinstance(retried, RecordedRelevance) and retried.warnings == record.warnings


def test_export_and_import_carry_the_settings(
    make_client: Callable[..., MemoryClient], tmp_path: Path
) -> None:
    source = make_client(create=True)
    source.store("Aster uses PostgreSQL", user_id="alice")
    dump = tmp_path / "pack.jsonl"
    source.export_pack(dump)
    target = make_client(tmp_path / "copy", config=PRMEConfig())
    target.import_pack(dump)
    assert target.pack_settings() == source.pack_settings()
    reopened = make_client(tmp_path / "copy", config=PRMEConfig())
    assert reopened.config.scoring.fusion == "weighted"
