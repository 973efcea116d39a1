"""An owner that grows while it is queried, with the HNSW vector index: the slow retrievals.

bench/engine.py's workload is stored ``--batch`` memories at a time at ``--rate`` memories per
second (the store time counts against the rate), and one retrieval (a benchmark query, query
embedding included) follows each batch. With chunks of ``--chunk`` rows (the approximate
index's threshold and chunk, as ``PRME_RETRIEVAL__VECTOR_INDEX_MIN_ROWS`` sets them), each
filled chunk changes the graphs the owner's layout searches, and a merge of smaller graphs
into one of up to eight chunks takes seconds here, minutes at the default 32,768-row chunks.
Prints JSON: retrieval wall ms (p50, p95, max), the retrievals over 1 s with the owner's row
count, and the whole run's wall time.

    python bench/growth.py                           # 384 dimensions, chunks of 4,096, 40,960
                                                     # rows at 500 memories/s
    python bench/growth.py --rows 65536 --rate 250   # past a merge into 8 chunks

Run it on two checkouts to compare versions: ``PYTHONPATH=OTHER/src python bench/growth.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    del sys.path[0]  # bench/http.py would shadow the standard library's http package

import argparse
import json
import platform
import statistics
import tempfile
import time
from typing import Any

from prme import MemoryClient
from prme.config import EmbeddingConfig, PRMEConfig, RetrievalConfig

sys.path.append(str(Path(__file__).resolve().parent))  # last: after the standard library
import engine  # bench/engine.py: the workload


def run(rows: int, chunk: int, batch: int, rate: float, dimension: int) -> dict[str, Any]:
    items, asked = engine.memories(rows), engine.queries(200)
    config = PRMEConfig(
        embedding=EmbeddingConfig(provider="hash", dimension=dimension),
        retrieval=RetrievalConfig(vector_index="hnsw", vector_index_min_rows=chunk),
    )
    slow: list[dict[str, Any]] = []
    wall: list[float] = []
    with tempfile.TemporaryDirectory() as directory:
        client = MemoryClient(Path(directory) / "pack", config=config)
        started = time.perf_counter()
        for number, start in enumerate(range(0, rows, batch)):
            client.store_many(items[start : start + batch], user_id=engine.OWNER)
            ahead = start / rate - (time.perf_counter() - started)
            if ahead > 0:
                time.sleep(ahead)
            t0 = time.perf_counter()
            client.retrieve(asked[number % len(asked)], user_id=engine.OWNER, reference_time=engine.NOW)
            elapsed = (time.perf_counter() - t0) * 1000
            wall.append(elapsed)
            if elapsed > 1000:
                slow.append({"rows": min(rows, start + batch), "ms": round(elapsed, 1)})
        total = time.perf_counter() - started
        client.close()
    ordered = sorted(wall)
    return {
        "benchmark": "growth",
        "python": platform.python_version(),
        "rows": rows,
        "chunk_rows": chunk,
        "batch": batch,
        "rate_per_second": rate,
        "hash_dimension": dimension,
        "retrievals": len(wall),
        "retrieve_wall_ms": {
            "p50": round(statistics.median(ordered), 2),
            "p95": round(ordered[int(0.95 * (len(ordered) - 1))], 2),
            "max": round(ordered[-1], 1),
        },
        "retrievals_over_1s": slow,
        "run_seconds": round(total, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=40960)
    parser.add_argument("--chunk", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--rate", type=float, default=500.0, help="memories stored per second")
    parser.add_argument("--hash-dimension", type=int, default=384)
    args = parser.parse_args()
    result = run(args.rows, args.chunk, args.batch, args.rate, args.hash_dimension)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
