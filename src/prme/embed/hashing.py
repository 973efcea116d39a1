"""A deterministic hashing embedder: no weights, no downloads; for tests and benchmarks."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from contextlib import suppress
from functools import partial
from itertools import compress, pairwise
from operator import is_

import numpy as np
import numpy.typing as npt

from prme.embed.base import EmbedderIdentity
from prme.text import word_runs


def words_of(text: str) -> list[str]:
    """The lowercased words of ``text``: its runs of word characters."""
    return word_runs(text.lower())


_is_none = partial(is_, None)
_CACHE_LIMIT = 200_000  # tokens whose codes are kept
_EXACT_IN_FLOAT32 = 1 << 24  # float32 holds every integer below this exactly


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
        return self._codes([token])[0]

    def _codes(self, tokens: Sequence[str]) -> list[int]:
        """:meth:`_code` of each of ``tokens`` (distinct): their blake2b-64 digests, then the
        slots and signs of all of them in one numpy pass (uint64: the same integers)."""
        blake2b = hashlib.blake2b
        digests = b"".join([blake2b(t.encode("utf-8"), digest_size=8).digest() for t in tokens])
        values = np.frombuffer(digests, dtype="<u8")
        dimension = np.uint64(self._dimension)
        codes: list[int] = (2 * (values % dimension) + (values >> np.uint64(63))).tolist()
        room = _CACHE_LIMIT - len(self._cache)
        if room > 0:
            self._cache.update(zip(tokens[:room], codes[:room], strict=True))
        return codes

    def _filled(self, grams: list[str], codes: list[int | None], misses: int) -> list[int | None]:
        """``codes`` (the cached code of each gram, None when missing: ``misses`` of them) with
        the missing ones computed, each distinct gram once."""
        if misses * 16 > len(codes):  # a cold cache: one pass in C over every gram
            missing = list(dict.fromkeys(compress(grams, map(_is_none, codes))))
            found = dict(zip(missing, self._codes(missing), strict=True))
            return list(map(found.get, grams, codes))
        at, places = -1, []
        with suppress(ValueError):  # a warm cache misses few grams: list.index finds them in C
            while True:
                places.append(at := codes.index(None, at + 1))
        missing = list(dict.fromkeys([grams[at] for at in places]))
        found = dict(zip(missing, self._codes(missing), strict=True))
        for at in places:
            codes[at] = found[grams[at]]
        return codes

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        dimension = self._dimension
        join = " ".join
        grams: list[str] = []
        counts: list[int] = []
        for text in texts:  # each text's words, then its bigrams
            words = words_of(text)
            grams += words
            grams += map(join, pairwise(words))
            counts.append(2 * len(words) - 1 if words else 0)
        codes: list[int | None] = list(map(self._cache.get, grams))
        misses = codes.count(None)
        if misses:  # each missing gram is hashed once, however often the batch has it
            codes = self._filled(grams, codes, misses)
        if not codes:
            return np.zeros((len(texts), dimension), dtype=np.float32)
        rows = np.repeat(np.arange(len(texts), dtype=np.int64), counts)
        packed = np.fromiter(codes, np.int64, len(codes))
        cells = rows * dimension + (packed >> 1)
        # ±1 sums are exact whatever the order, so one pass matches a loop: in float32 while
        # every sum stays below 2**24 (fewer grams than that in the batch), else in float64
        # (and cast: the same values).
        if len(codes) < _EXACT_IN_FLOAT32:
            flat = np.zeros(len(texts) * dimension, dtype=np.float32)
            np.add.at(flat, cells, np.where(packed & 1, np.float32(1), np.float32(-1)))
        else:
            signs = np.where(packed & 1, 1.0, -1.0)
            sums = np.bincount(cells, weights=signs, minlength=len(texts) * dimension)
            flat = sums.astype(np.float32)
        out = flat.reshape(len(texts), dimension)
        # The squares of the integer sums add up exactly in any order, so the norms equal
        # np.linalg.norm of each row; rows without tokens stay zero (divided by 1).
        norms = np.sqrt(np.einsum("ij,ij->i", out, out))
        out /= np.where(norms > 0, norms, np.float32(1))[:, None]
        return out
