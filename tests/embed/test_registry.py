"""The embedder registry."""

from __future__ import annotations

import pytest

from prme.embed.base import Embedder
from prme.embed.hashing import HashingEmbedder
from prme.embed.minilm import MiniLMEmbedder
from prme.embed.registry import DEFAULT_PROVIDER, EMBEDDERS, make_embedder
from prme.errors import InvalidInputError


def test_registered_names() -> None:
    assert set(EMBEDDERS) == {"minilm", "e5", "hash"}
    assert DEFAULT_PROVIDER == "minilm"


def test_default_is_minilm() -> None:
    embedder = make_embedder()
    assert isinstance(embedder, MiniLMEmbedder)
    assert embedder.identity.provider == "minilm-onnx"
    assert embedder.identity.dimension == 384


@pytest.mark.parametrize("dimension", [None, 384])
def test_minilm_accepts_its_own_dimension(dimension: int | None) -> None:
    embedder = make_embedder("minilm", dimension)
    assert isinstance(embedder, Embedder)
    assert embedder.identity.dimension == 384


@pytest.mark.parametrize("dimension", [256, 768, 0])
def test_minilm_rejects_other_dimensions(dimension: int) -> None:
    with pytest.raises(InvalidInputError) as info:
        make_embedder("minilm", dimension)
    assert info.value.field == "embedding.dimension"
    assert "384" in str(info.value)


def test_hash_dimension() -> None:
    default = make_embedder("hash")
    assert isinstance(default, HashingEmbedder)
    assert default.identity.dimension == 256
    assert make_embedder("hash", 64).identity.dimension == 64
    assert make_embedder("hash", 64).embed(["x"]).shape == (1, 64)


def test_hash_rejects_invalid_dimension() -> None:
    with pytest.raises(InvalidInputError) as info:
        make_embedder("hash", 2)
    assert info.value.field == "embedding.dimension"


@pytest.mark.parametrize("name", ["openai", "MiniLM", "", "hashing"])
def test_unknown_provider_lists_every_valid_name(name: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        make_embedder(name)
    assert info.value.field == "embedding.provider"
    assert info.value.value == name
    message = str(info.value)
    assert message.startswith("embedding.provider: ")
    for valid in EMBEDDERS:
        assert repr(valid) in message


def test_error_message_follows_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(EMBEDDERS, "extra", lambda dimension: HashingEmbedder(dimension or 16))
    with pytest.raises(InvalidInputError, match="'extra'"):
        make_embedder("nope")
    assert make_embedder("extra").identity.dimension == 16
