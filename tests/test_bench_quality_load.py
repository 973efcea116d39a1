"""bench/quality.py reads any judged collection in the shared JSONL form."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

from prme.embed.hashing import HashingEmbedder

BENCH = Path(__file__).resolve().parents[1] / "bench" / "quality.py"


def quality() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_quality", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_quality"] = module
    spec.loader.exec_module(module)
    return module


def write(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_null_times_and_blank_memories(tmp_path: Path) -> None:
    q = quality()
    memory = {"user_id": "o", "scope": "project", "event_time": None, "metadata": {}}
    write(
        tmp_path / "memories.jsonl",
        [
            {**memory, "id": "m1", "text": "alpha"},
            {**memory, "id": "m2", "text": "   "},
            {**memory, "id": "m3", "text": "beta", "event_time": "2023-05-08T13:56:00"},
        ],
    )
    query = {"user_id": "o", "reference_time": None, "category": None, "metadata": {}}
    write(
        tmp_path / "queries.jsonl",
        [
            {**query, "query_id": "a", "group_id": "a", "text": "x", "relevant_ids": ["m1", "m2"]},
            {**query, "query_id": "b", "group_id": "b", "text": "y", "relevant_ids": ["m2"]},
        ],
    )
    loaded = q.load(tmp_path)
    assert [r["id"] for r in loaded.memories["o"]] == ["m1", "m3"]
    assert [x.relevant for x in loaded.queries] == [("m1",)]
    assert loaded.queries[0].reference_time == q.utc(q.FIXED_TIME)
    assert loaded.queries[0].category == "none"
    assert loaded.skipped == {
        "blank_memories": 1,
        "relevant_ids_dropped": 2,
        "queries_without_relevant": 1,
    }
    assert q.utc(None) == q.utc(q.FIXED_TIME)
    assert q.utc("2023-05-08T13:56:00").tzinfo is not None


def _collection(path: Path) -> Path:
    memory = {"user_id": "o", "scope": "project", "event_time": None, "metadata": {}}
    texts = ["Aster stores its data in PostgreSQL", "Basalt runs on Kubernetes", "Cobalt uses Go"]
    write(
        path / "memories.jsonl",
        [{**memory, "id": f"m{i}", "text": t} for i, t in enumerate(texts)],
    )
    query = {"user_id": "o", "reference_time": None, "category": "c", "metadata": {}}
    write(
        path / "queries.jsonl",
        [{**query, "query_id": "a", "group_id": "a", "text": "Aster data", "relevant_ids": ["m0"]}],
    )
    (path / "manifest.json").write_text("{}", encoding="utf-8")
    return path


def test_selected_modes_only(tmp_path: Path) -> None:
    q = quality()
    data = _collection(tmp_path)
    args = ["--data", str(data), "--embedder", "hash", "--parts", "retrieval"]
    result = q.main([*args, "--modes", "weighted,weighted_raw_graph"])
    modes = result["retrieval"]["modes"]
    assert list(modes) == ["weighted", "weighted_raw_graph"]
    assert modes["weighted"]["overall"]["ndcg@10"] == 1.0
    try:
        q.main([*args, "--modes", "weighted,nonsense"])
    except SystemExit as exc:
        assert exc.code == 2
    else:
        raise AssertionError("an unknown mode must be refused")


def test_cached_embedder_keeps_queries_apart() -> None:
    q = quality()
    cached = q.CachedEmbedder(HashingEmbedder(dimension=32))
    text = ["Aster data"]
    assert cached.embed_query(text).tobytes() == HashingEmbedder(dimension=32).embed(text).tobytes()
    assert list(cached.query_cache) == text and cached.cache == {}
