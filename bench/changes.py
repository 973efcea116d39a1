"""The first retrieval after an owner's memory is updated (superseded) or deleted.

bench/engine.py's workload fills one owner (hashing embedder, 384 dimensions), builds its index
(``build_index``) and warms it with retrievals. Then, ``--rounds`` times: one memory is updated
and the next retrieval is timed; the same after a delete; and a new client (a new process's
view of the pack) opened after an update, or after a delete, times its first retrieval. Prints
JSON: per size, the warm retrieval p50 and those first retrievals (ms).

    python bench/changes.py                      # 10,000 and 100,000 memories
    python bench/changes.py --sizes 200000 --vector-index hnsw  # with HNSW graphs
    python bench/changes.py --backend postgres   # a local PostgreSQL started for the run

Run it on two checkouts to compare versions: ``PYTHONPATH=OTHER/src python bench/changes.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    del sys.path[0]  # bench/http.py would shadow the standard library's http package

import argparse
import json
import os
import platform
import random
import statistics
import tempfile
import time
from typing import Any

from prme import MemoryClient
from prme.config import EmbeddingConfig, PRMEConfig, RetrievalConfig
from prme.models.retrieval import VectorIndexName

sys.path.append(str(Path(__file__).resolve().parent))  # last: after the standard library
import engine  # bench/engine.py: the workload


def _config(vector_index: VectorIndexName) -> PRMEConfig:
    return PRMEConfig(
        embedding=EmbeddingConfig(provider="hash", dimension=384),
        retrieval=RetrievalConfig(vector_index=vector_index),
    )


def _timed_retrieve(client: MemoryClient, query: str) -> float:
    started = time.perf_counter()
    client.retrieve(query, user_id=engine.OWNER, reference_time=engine.NOW)
    return round((time.perf_counter() - started) * 1000, 2)


def run(
    size: int, rounds: int, vector_index: VectorIndexName, url: str | None = None
) -> dict[str, Any]:
    """One owner of ``size`` memories on a new SQLite pack, or on a new PostgreSQL schema at
    ``url`` (each client then opens its own store on it, as another process would)."""
    config = _config(vector_index)
    items, asked = engine.memories(size), engine.queries(50)
    rng = random.Random(engine.SEED)
    backend = "sqlite" if url is None else "postgres"
    with tempfile.TemporaryDirectory() as directory:
        pack = Path(directory) / "pack"
        first = engine._open_store(backend, url)
        schema = None if first is None else first.schema

        def client(store: Any = None) -> MemoryClient:
            opened = store or engine._open_store(backend, url, schema)
            return MemoryClient(pack, config=config, store=opened)

        writer = client(first)
        ids: list[str] = []
        for start in range(0, size, engine.BATCH):
            ids += writer.store_many(items[start : start + engine.BATCH], user_id=engine.OWNER)
        writer.build_index(user_id=engine.OWNER)
        warm = [_timed_retrieve(writer, query) for query in asked[:20]]
        after_update, after_delete, reopened, reopened_after_delete = [], [], [], []
        for number in range(rounds):
            query = asked[20 + number % 30]
            changed = ids.pop(rng.randrange(len(ids)))
            writer.update(changed, user_id=engine.OWNER, content=f"revised note {number}")
            after_update.append(_timed_retrieve(writer, query))
            writer.delete(ids.pop(rng.randrange(len(ids))), user_id=engine.OWNER)
            after_delete.append(_timed_retrieve(writer, query))
        writer.update(ids.pop(rng.randrange(len(ids))), user_id=engine.OWNER, content="revised")
        writer.close()
        for number in range(rounds):
            with client() as again:
                reopened.append(_timed_retrieve(again, asked[number]))
            with client() as later:
                changed = ids.pop(rng.randrange(len(ids)))
                later.update(changed, user_id=engine.OWNER, content=f"revised again {number}")
        for number in range(rounds):
            with client() as later:
                later.delete(ids.pop(rng.randrange(len(ids))), user_id=engine.OWNER)
            with client() as again:
                reopened_after_delete.append(_timed_retrieve(again, asked[number]))
        if schema is not None:
            from prme.storage.postgres import drop_schema

            drop_schema(str(url), schema)
    return {
        "memories": size,
        "backend": backend,
        "vector_index": vector_index,
        "warm_retrieve_ms_p50": statistics.median(warm),
        "first_retrieve_ms_after_an_update": after_update,
        "first_retrieve_ms_after_a_delete": after_delete,
        "first_retrieve_ms_of_a_new_client_after_an_update": reopened,
        "first_retrieve_ms_of_a_new_client_after_a_delete": reopened_after_delete,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated owner sizes")
    parser.add_argument("--rounds", type=int, default=3, help="updates (and deletes) per size")
    parser.add_argument(
        "--vector-index",
        choices=("exact", "hnsw"),
        default="exact",
        help="the vector channel (hnsw: the approximate index past 131,072 memories)",
    )
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("PRME_BENCH_POSTGRES_URL"),
        help="PostgreSQL with pgvector (default: a local server started for the run)",
    )
    args = parser.parse_args()
    url = None
    if args.backend == "postgres":
        url = args.postgres_url or engine._start_postgres()
    sizes = [int(size) for size in args.sizes.split(",")]
    runs = [run(size, args.rounds, args.vector_index, url) for size in sizes]
    document = {"python": platform.python_version(), "cpus": os.cpu_count(), "runs": runs}
    print(json.dumps(document, indent=2))


if __name__ == "__main__":
    main()
