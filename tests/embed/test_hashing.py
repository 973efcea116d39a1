"""The hashing embedder: deterministic, normalized, no weights."""

from __future__ import annotations

import hashlib
import re
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prme.embed.base import Embedder
from prme.embed.hashing import HashingEmbedder, words_of

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


def _reference(embedder: HashingEmbedder, text: str, dimension: int) -> np.ndarray:
    """One text the plain way: add each gram's sign at its slot, divide by the row's norm."""
    row = np.zeros(dimension, dtype=np.float32)
    words = re.findall(r"\w+", text.lower())
    for gram in words + [f"{a} {b}" for a, b in pairwise(words)]:
        code = embedder._code(gram)
        row[code >> 1] += 1.0 if code & 1 else -1.0
    norm = float(np.linalg.norm(row))
    if norm > 0:
        row /= norm
    return row


def test_batch_vectors_equal_the_per_text_computation_byte_for_byte() -> None:
    texts = [*TEXTS, "the the the cat", "Ärger über Straßen ß", "a " * 500, "x"]
    embedder = HashingEmbedder(64)
    batch = embedder.embed(texts)
    expected = np.stack([_reference(HashingEmbedder(64), text, 64) for text in texts])
    assert batch.tobytes() == expected.tobytes()


VARIED = [
    *TEXTS,
    "the the the cat",
    "Ärger über Straßen ß",
    "a " * 500,
    "x",
    "ΟΔΟΣ ΣΟΦΟΣ",
    "İstanbul İzmir",
    "snake_case and 12 345 6th",
    "日本語のテキスト 東京",
    "tab\tnew\nline",
    "x" * 3000,
]
# sha256 of embed(VARIED) as the embedder computed it before its batch path was reworked: a
# stored pack's vectors (and its digest) depend on these bytes.
VARIED_SHA256 = {
    256: "d2db695681bf9d61065df3bbdf1ada156f52d4025b2e04ca77f7ef09ccbddbf9",
    64: "1fd7bcf4cb95e6947ab0b8e0b7e535cb08457eac62db628bc520d55639818b15",
}


def _independent(text: str, dimension: int) -> bytes:
    """One text from the definition alone: blake2b-64 of each lowercased word and bigram,
    slot = value mod dimension, sign = top bit, float32 sums divided by their L2 norm."""
    row = np.zeros(dimension, dtype=np.float32)
    words = re.findall(r"\w+", text.lower())
    for gram in words + [f"{a} {b}" for a, b in pairwise(words)]:
        value = int.from_bytes(hashlib.blake2b(gram.encode(), digest_size=8).digest(), "little")
        row[value % dimension] += 1.0 if value >> 63 else -1.0
    norm = np.sqrt(np.float32(sum(float(v) * float(v) for v in row)))
    return (row / norm if norm > 0 else row).astype(np.float32).tobytes()


@pytest.mark.parametrize("dimension", [256, 64])
def test_vectors_are_the_bytes_earlier_versions_stored(dimension: int) -> None:
    embedder = HashingEmbedder(dimension)
    batch = embedder.embed(VARIED)
    assert hashlib.sha256(batch.tobytes()).hexdigest() == VARIED_SHA256[dimension]
    assert [row.tobytes() for row in batch] == [_independent(t, dimension) for t in VARIED]
    again = embedder.embed(VARIED[::-1])  # warm cache, other order, other batch
    assert [row.tobytes() for row in again[::-1]] == [row.tobytes() for row in batch]


_ASCII = st.text(alphabet=st.characters(max_codepoint=127), max_size=80)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=80) | _ASCII, max_size=12))
def test_any_batch_equals_each_text_from_the_definition(texts: list[str]) -> None:
    batch = HashingEmbedder(32).embed(texts)
    assert batch.shape == (len(texts), 32) and batch.dtype == np.float32
    assert [row.tobytes() for row in batch] == [_independent(t, 32) for t in texts]


@settings(max_examples=300, deadline=None)
@given(_ASCII | st.text(max_size=40) | st.sampled_from(["\u212a Kelvin", "İI ı", "ǅ x_y-z"]))
def test_words_are_the_regex_runs_of_the_lowercased_text(text: str) -> None:
    # ASCII text (also once lowered, e.g. the Kelvin sign) is split in C, the rest by regex.
    assert words_of(text) == re.findall(r"\w+", text.lower())


def test_a_warm_cache_missing_a_few_grams_gives_the_bytes_of_a_cold_one() -> None:
    # A batch that misses few of its grams fills them in place; one that misses many (a cold
    # cache) refills every code: both give the vectors a fresh embedder gives.
    warm = HashingEmbedder(64)
    warm.embed(VARIED)
    batch = [*VARIED, "a quite new sentence", "x" * 3000, "a quite new sentence"]
    assert warm.embed(batch).tobytes() == HashingEmbedder(64).embed(batch).tobytes()


def test_sums_in_float32_and_in_float64_give_the_same_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Batches of fewer than 2**24 grams sum in float32; larger ones in float64 (then cast).
    from prme.embed import hashing

    small = HashingEmbedder(64).embed(VARIED).tobytes()
    monkeypatch.setattr(hashing, "_EXACT_IN_FLOAT32", 0)
    assert HashingEmbedder(64).embed(VARIED).tobytes() == small
    assert hashlib.sha256(small).hexdigest() == VARIED_SHA256[64]
