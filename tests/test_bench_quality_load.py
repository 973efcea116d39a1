"""bench/quality.py reads any judged collection in the shared JSONL form."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

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
