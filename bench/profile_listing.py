"""``list_ranking_profiles(limit=1)`` on a pack with many profiles; prints one JSON document.

The demo workflow (hash embedder) makes a pack with one profile; its attested reports are then
reused for ``--profiles`` profiles in all. The listing is timed (median of ``--repeat`` runs in
this process) and its memory measured with tracemalloc (peak bytes allocated by one listing).

    python bench/profile_listing.py --pack /tmp/listing-pack              # build, then measure
    python bench/profile_listing.py --pack /tmp/listing-pack --measure-only
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import tracemalloc
from pathlib import Path
from typing import Any

from prme import MemoryClient, PRMEConfig, ScoringWeights
from prme.config import EmbeddingConfig
from prme.demo.workflow import MARKER_FILE, run_demo

CONFIG = PRMEConfig(scoring=ScoringWeights(), embedding=EmbeddingConfig(provider="hash"))


def build(pack: Path, profiles: int) -> str:
    summary = run_demo(pack, embedder="hash")
    with MemoryClient(pack, config=CONFIG) as memory:
        (first,) = memory.list_ranking_profiles(user_id=summary.user_id, limit=1)
        for _ in range(profiles - len(memory.list_ranking_profiles(user_id=summary.user_id))):
            memory.create_ranking_profile(first.proposal, first.holdout, user_id=summary.user_id)
    return summary.user_id


def measure(pack: Path, user_id: str, repeat: int) -> dict[str, Any]:
    with MemoryClient(pack, config=CONFIG) as memory:
        memory.list_ranking_profiles(user_id=user_id, limit=1)  # warm the page cache
        seconds = []
        for _ in range(repeat):
            started = time.perf_counter()
            page = memory.list_ranking_profiles(user_id=user_id, limit=1)
            seconds.append(time.perf_counter() - started)
        tracemalloc.start()
        memory.list_ranking_profiles(user_id=user_id, limit=1)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        total = len(memory.engine.store.find_ops("ranking_profile", user_id))
    return {
        "profiles": total,
        "page": len(page),
        "median_ms": round(statistics.median(seconds) * 1000, 2),
        "peak_mib": round(peak / 2**20, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pack", type=Path, required=True)
    parser.add_argument("--profiles", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--measure-only", action="store_true")
    args = parser.parse_args()
    user_id = (
        json.loads((args.pack / MARKER_FILE).read_text())["user_id"]
        if args.measure_only
        else build(args.pack, args.profiles)
    )
    print(json.dumps(measure(args.pack, user_id, args.repeat)))


if __name__ == "__main__":
    main()
