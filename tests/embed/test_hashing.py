"""The hashing embedder: deterministic, normalized, no weights."""

from __future__ import annotations

import numpy as np
import pytest

from prme.embed.base import Embedder
from prme.embed.hashing import HashingEmbedder

TEXTS = [
    "Which database does Aster use?",
    "Aster stores its data in PostgreSQL",
    "I bought a telescope",
    "",
    "!!! ???",
]


def test_identity() -> None:
    embedder = HashingEmbedder()
    assert isinstance(embedder, Embedder)
    identity = embedder.identity
    assert (identity.provider, identity.dimension) == ("hash", 256)
    assert HashingEmbedder(64).identity.dimension == 64
    assert HashingEmbedder(64).identity != identity


def test_shape_dtype_and_norms() -> None:
    vectors = HashingEmbedder(128).embed(TEXTS)
    assert vectors.shape == (len(TEXTS), 128)
    assert vectors.dtype == np.float32
    norms = np.linalg.norm(vectors, axis=1)
    np.testing.assert_allclose(norms[:3], 1.0, atol=1e-6)
    # Texts without word tokens embed to the zero vector rather than NaN.
    assert np.all(norms[3:] == 0.0)
    assert np.all(np.isfinite(vectors))


def test_empty_input() -> None:
    assert HashingEmbedder().embed([]).shape == (0, 256)


def test_deterministic_across_instances() -> None:
    first = HashingEmbedder().embed(TEXTS)
    second = HashingEmbedder().embed(TEXTS)
    assert first.tobytes() == second.tobytes()
    assert HashingEmbedder().embed(TEXTS).tobytes() == first.tobytes()


def test_case_insensitive_and_batch_independent() -> None:
    embedder = HashingEmbedder()
    upper, lower = embedder.embed(["ASTER Uses PostgreSQL", "aster uses postgresql"])
    assert upper.tobytes() == lower.tobytes()
    batched = embedder.embed(TEXTS)
    single = np.vstack([embedder.embed([text]) for text in TEXTS])
    assert batched.tobytes() == single.tobytes()


def test_shared_words_raise_similarity() -> None:
    query, related, unrelated = HashingEmbedder().embed(
        ["which database does aster use", "aster database is postgresql", "I bought a telescope"]
    )
    assert float(query @ related) > float(query @ unrelated)


def test_rejects_tiny_dimension() -> None:
    with pytest.raises(ValueError):
        HashingEmbedder(4)
