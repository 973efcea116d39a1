"""The Embedder protocol and its identity (part of every receipt's feature identity)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from prme.models.base import Frozen


class EmbedderIdentity(Frozen):
    """What produced a vector: changing any field changes the feature identity."""

    provider: str
    model: str
    version: str
    dimension: int


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalized float32 rows of shape (len(texts), dimension)."""

    @property
    def identity(self) -> EmbedderIdentity: ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> npt.NDArray[np.float32]:
    """Query-side vectors. An asymmetric embedder (one with ``embed_query``, such as E5, which
    prefixes queries and documents differently) embeds queries with it; every other embedder
    embeds a query exactly as it embeds a memory."""
    embed_query = getattr(embedder, "embed_query", None)
    if callable(embed_query):
        result: npt.NDArray[np.float32] = embed_query(texts)
        return result
    return embedder.embed(texts)
