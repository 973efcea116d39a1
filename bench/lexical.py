"""The SQLite lexical channel alone: BM25 top-k over one owner's postings, on the engine
benchmark's corpus and queries (bench/engine.py's generator, so figures compare).

    python bench/lexical.py --size 1000000            # mean / p50 / p95 / max CPU ms per query
    python bench/lexical.py --size 1000000 --profile  # and a cProfile of the searches

The postings are built once per size with the pack's tokenizer (unicode61, as the pack's FTS5
index) and kept in a temporary directory (``--cache``), so later runs only load them. The
figures are process CPU times of each search (the machine is shared), each query searched
``--repeat`` times, interleaved.
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    del sys.path[0]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import cProfile
import inspect
import json
import pstats
import statistics
import tempfile
import time
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.engine import memories, queries
from prme.index.postings import ARRAYS, OFFSET_DTYPES, OwnerPostings, Vocabulary
from prme.retrieval.query import analyze_query
from prme.storage.fts5_lexical import DocumentTokenizer, QueryTokenizer

try:
    from prme.index.lexical import ranked
except ImportError:  # (a commit before it moved out of the SQLite module, timed for comparison)
    from prme.storage.fts5_lexical import ranked  # type: ignore[attr-defined,no-redef]

TOKENIZE = "unicode61"
BATCH = 32768
TOTAL = [0]  # the token total of the loaded corpus
SHORTEST = [0]  # its shortest document
GIVES_SHORTEST = "shortest" in inspect.signature(ranked).parameters


def build(size: int) -> tuple[OwnerPostings, npt.NDArray[np.int64]]:
    """The postings of the first ``size`` generated memories and each one's token count."""
    texts = [m["content"] for m in memories(size)]
    tokenizer = DocumentTokenizer(TOKENIZE)
    postings = OwnerPostings(Vocabulary())
    doc_len = np.zeros(size, dtype=np.int64)
    for start in range(0, size, BATCH):
        end = min(start + BATCH, size)
        batch = tokenizer.tokenized((p, texts[p]) for p in range(start, end))
        doc_len += np.bincount(batch.docs, minlength=size)
        postings = postings.appended(end, batch.tokens, batch.counts, batch.docs, batch.offsets)
    return postings, doc_len


def cached(size: int, directory: Path) -> tuple[OwnerPostings, npt.NDArray[np.int64]]:
    base = directory / f"prme-lexical-{size}"
    meta = base / "meta.json"
    if meta.exists():
        bounds = json.loads(meta.read_text())
        arrays = {
            name: np.load(base / f"{name}.npy", mmap_mode="r")
            for name in ARRAYS
            if (base / f"{name}.npy").exists()  # (saved before the document postings)
        }
        arrays = {name: np.asarray(a) for name, a in arrays.items()}
        assert arrays["offsets"].dtype in OFFSET_DTYPES
        postings = OwnerPostings.from_arrays(size, bounds, arrays)
        return postings, np.load(base / "doc_len.npy")
    postings, doc_len = build(size)
    base.mkdir(parents=True, exist_ok=True)
    bounds, arrays = postings.arrays()
    for name, array in arrays.items():
        np.save(base / f"{name}.npy", array)
    np.save(base / "doc_len.npy", doc_len)
    meta.write_text(json.dumps(bounds))
    return cached(size, directory)


def search(
    postings: OwnerPostings,
    doc_len: npt.NDArray[np.int64],
    in_scope: npt.NDArray[np.bool_],
    phrases: list[tuple[str, ...]],
    k: int,
) -> Any:
    if not GIVES_SHORTEST:  # (the code before it took the shortest length)
        return ranked(postings, doc_len, TOTAL[0], in_scope, phrases, k)
    return ranked(postings, doc_len, TOTAL[0], in_scope, phrases, k, SHORTEST[0])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=250)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--k", type=int, default=500)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    postings, doc_len = cached(args.size, args.cache)
    TOTAL[0] = int(doc_len.sum())
    SHORTEST[0] = int(doc_len.min())
    in_scope = np.ones(args.size, dtype=np.bool_)
    tokenizer = QueryTokenizer(TOKENIZE)
    asked = [tokenizer.tokens(analyze_query(q).terms) for q in queries(args.queries)]
    for phrases in asked:  # warm: the vocabulary's dictionary, the caches
        search(postings, doc_len, in_scope, phrases, args.k)
    times: dict[int, list[float]] = {i: [] for i in range(len(asked))}
    profile = cProfile.Profile() if args.profile else None
    for _ in range(args.repeat):
        for i, phrases in enumerate(asked):
            if profile:
                profile.enable()
            t0 = time.process_time()
            search(postings, doc_len, in_scope, phrases, args.k)
            times[i].append((time.process_time() - t0) * 1000)
            if profile:
                profile.disable()
    per_query = [min(t) for t in times.values()]
    ordered = sorted(per_query)
    worst = sorted(range(len(asked)), key=lambda i: -per_query[i])[:5]
    print(
        json.dumps(
            {
                "size": args.size,
                "k": args.k,
                "cpu_ms_mean": round(statistics.mean(per_query), 3),
                "cpu_ms_p50": round(ordered[len(ordered) // 2], 3),
                "cpu_ms_p95": round(ordered[int(len(ordered) * 0.95)], 3),
                "cpu_ms_max": round(ordered[-1], 3),
                "slowest": [[asked[i], round(per_query[i], 3)] for i in worst],
            },
            indent=1,
        )
    )
    if profile:
        pstats.Stats(profile).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
