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
