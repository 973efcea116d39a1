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
        self._cache: dict[str, int] = {}

    @property
    def identity(self) -> EmbedderIdentity:
        return EmbedderIdentity(
            provider="hash", model="signed-feature-hashing", version="1", dimension=self._dimension
        )

    def _code(self, token: str) -> int:
        """``2·slot + sign bit`` of a token (one cached int per token)."""
        digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        code = 2 * (value % self._dimension) + ((value >> 63) & 1)
        if len(self._cache) < 200_000:
            self._cache[token] = code
        return code

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        grams: list[str] = []
        counts: list[int] = []
        for text in texts:
            words = _TOKEN.findall(text.lower())
            before = len(grams)
            grams += words
            grams += [f"{a} {b}" for a, b in pairwise(words)]
            counts.append(len(grams) - before)
        codes: list[int | None] = list(map(self._cache.get, grams))
        for at, code in enumerate(codes):
            if code is None:
                codes[at] = self._code(grams[at])
        if codes:
            rows = np.repeat(np.arange(len(texts), dtype=np.int64), counts)
            packed = np.asarray(codes, dtype=np.int64)
            signs = np.where(packed & 1, 1.0, -1.0)
            # ±1 sums are exact whatever the order, so one bincount matches a loop.
            cells = rows * self._dimension + (packed >> 1)
            sums = np.bincount(cells, weights=signs, minlength=out.size)
            out = sums.astype(np.float32).reshape(out.shape)
        # The squares of the integer sums add up exactly in any order, so the norms equal
        # np.linalg.norm of each row; rows without tokens stay zero.
        norms = np.sqrt(np.einsum("ij,ij->i", out, out))
        nonzero = norms > 0
        out[nonzero] /= norms[nonzero, None]
        return out
