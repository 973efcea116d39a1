"""A deterministic hashing embedder: no weights, no downloads; for tests and benchmarks."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from prme.embed.base import EmbedderIdentity

_TOKEN = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    """Signed feature hashing of lowercased word unigrams and bigrams, L2-normalized."""

    def __init__(self, dimension: int = 256) -> None:
        if dimension < 8:
            raise ValueError("dimension must be at least 8")
        self._dimension = dimension
        self._cache: dict[str, tuple[int, float]] = {}

    @property
    def identity(self) -> EmbedderIdentity:
        return EmbedderIdentity(
            provider="hash", model="signed-feature-hashing", version="1", dimension=self._dimension
        )

    def _slot(self, token: str) -> tuple[int, float]:
        hit = self._cache.get(token)
        if hit is None:
            digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
            value = int.from_bytes(digest, "little")
            hit = (value % self._dimension, 1.0 if (value >> 63) & 1 else -1.0)
            if len(self._cache) < 200_000:
                self._cache[token] = hit
        return hit

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            words = _TOKEN.findall(text.lower())
            grams = words + [f"{a} {b}" for a, b in pairwise(words)]
            for gram in grams:
                slot, sign = self._slot(gram)
                out[row, slot] += sign
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
        return out
