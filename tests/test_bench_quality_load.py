"""bench/quality.py reads any judged collection in the shared JSONL form."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

from prme import MemoryClient, PRMEConfig, ScoringWeights
from prme.config import EmbeddingConfig
from prme.demo.simulation import OWNER, SimulationSettings, run_workflow
from prme.embed.hashing import HashingEmbedder
from prme.models.learning import LearningConfig

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


def test_tied_candidates_rank_the_same_in_every_run(tmp_path: Path) -> None:
    """Identical texts tie under BM25, and a memory's id breaks the tie: the benchmark's
    stored ids come from a seeded generator, so two runs report the same figures (they
    differed with the engine's random ids)."""
    memory = {"user_id": "o", "scope": "project", "event_time": None, "metadata": {}}
    texts = ["Aster stores its data in PostgreSQL", "Basalt runs on Kubernetes", "Cobalt uses Go"]
    rows = [{**memory, "id": f"m{i}", "text": texts[i % 3]} for i in range(90)]
    write(tmp_path / "memories.jsonl", rows)
    query = {"user_id": "o", "reference_time": None, "category": "c", "metadata": {}}
    asked = [("Aster data", "m30"), ("Basalt Kubernetes", "m40"), ("Cobalt Go", "m77")]
    write(
        tmp_path / "queries.jsonl",
        [
            {**query, "query_id": f"q{i}", "group_id": f"q{i}", "text": text, "relevant_ids": [m]}
            for i, (text, m) in enumerate(asked)
        ],
    )
    (tmp_path / "manifest.json").write_text("{}", encoding="utf-8")
    q = quality()
    args = ["--data", str(tmp_path), "--embedder", "hash", "--parts", "retrieval"]
    runs = [q.main([*args, "--modes", "bm25_only"])["retrieval"]["modes"] for _ in range(2)]
    assert runs[0] == runs[1]
    assert 0 < runs[0]["bm25_only"]["overall"]["mrr"] < 1  # the relevant one is among ties


def test_cached_embedder_keeps_queries_apart() -> None:
    q = quality()
    cached = q.CachedEmbedder(HashingEmbedder(dimension=32))
    text = ["Aster data"]
    assert cached.embed_query(text).tobytes() == HashingEmbedder(dimension=32).embed(text).tobytes()
    assert list(cached.query_cache) == text and cached.cache == {}


def test_gate1_ceiling_is_an_upper_bound_not_evidence(tmp_path: Path) -> None:
    """``--ceiling`` scores a multiplier grid on gate 1's validation groups: with a planted
    signal many points pass gate 1's rules (as the fit's own proposal does). It looks at the
    validation labels, so under the null (labels permuted within each request) some points pass
    by chance too: the ceiling bounds every fit from above (no passing point → no fit can pass)
    and is never evidence of a gain."""
    q = quality()
    config = PRMEConfig(scoring=ScoringWeights(), embedding=EmbeddingConfig(provider="hash"))
    ceilings = {}
    for signal in (1.0, 0.0):
        pack = tmp_path / f"signal-{signal}"
        run = run_workflow(pack, seed=0, signal=signal, settings=SimulationSettings(projects=30))
        assert run.gate1_passed is (signal == 1.0)
        with MemoryClient(pack, config=config) as memory:
            ceilings[signal] = q.gate1_ceiling(
                memory, OWNER, LearningConfig(), levels=q.CEILING_COARSE_LEVELS
            )
    planted, null = ceilings[1.0], ceilings[0.0]
    assert planted["decided"] and null["decided"]
    # a feature constant within every judged list only shifts scores: it is left off the grid
    assert "recency" not in planted["features"] and "salience" not in planted["features"]
    assert planted["points"] == len(q.CEILING_COARSE_LEVELS) ** len(planted["features"])
    assert planted["passing_points"] >= 1
    assert planted["best"]["interval_low"] > 0
    assert sum(planted["best"]["validation_win_tie_loss"].values()) == run.gate1_validation_groups
    assert 0 < null["passing_points"] < planted["passing_points"]
    assert null["best"]["validation_ndcg_gain"] < planted["best"]["validation_ndcg_gain"]
