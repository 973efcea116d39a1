"""Owner indexes built in memory, without a pack: the pure retrieval stages' inputs."""

from __future__ import annotations

import mmap
import random
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from prme.index.ann import AnnPolicy
from prme.index.owner_index import (
    CONDITIONS,
    DECAYS,
    EPISTEMIC,
    LIFECYCLES,
    NO_TIME,
    NO_TTL,
    NODE_TYPES,
    NUMERIC_COLUMNS,
    SCOPES,
    SOURCES,
    OwnerIndex,
)
from prme.storage.timeutil import to_us

STAGE_NOW = datetime(2026, 9, 1, tzinfo=UTC)
DIMENSION = 4


def memory(**overrides: Any) -> dict[str, Any]:
    """One memory as readable values; ``vector`` (4 floats), ``entities`` and ``evidence`` too."""
    now = to_us(STAGE_NOW)
    base: dict[str, Any] = {
        "scope": "personal",
        "node_type": "note",
        "epistemic": "asserted",
        "source": "user_stated",
        "lifecycle": "tentative",
        "decay": "medium",
        "condition": None,
        "created_at": now,
        "updated_at": now,
        "event_time": None,
        "valid_from": now,
        "valid_to": None,
        "last_reinforced_at": now,
        "confidence": 0.8,
        "salience": 0.5,
        "confidence_base": 0.8,
        "salience_base": 0.5,
        "reinforcement_boost": 0.0,
        "pinned": False,
        "ttl_days": None,
        "doc_len": 5,
        "vector": (0.0, 0.0, 0.0, 0.0),
        "entities": (),
        "evidence": None,
        "content_sha256": "0" * 64,
    }
    base.update(overrides)
    return base


def build_index(rows: Sequence[dict[str, Any]]) -> OwnerIndex:
    """An OwnerIndex of ``rows`` encoded as the store encodes them: rowid i+1 at position i,
    id ``00000000-0000-0000-0000-00000000000<i+1>``."""
    tables = {
        "scope": SCOPES,
        "node_type": NODE_TYPES,
        "epistemic": EPISTEMIC,
        "source": SOURCES,
        "lifecycle": LIFECYCLES,
        "decay": DECAYS,
    }
    encoded = []
    entities: dict[int, list[str]] = {}
    for i, r in enumerate(rows, start=1):
        e = {k: v for k, v in r.items() if k not in ("vector", "entities", "evidence")}
        for name, values in tables.items():
            e[name] = values.index(r[name])
        e["condition"] = CONDITIONS.index(r["condition"] or "unknown")
        for name in ("event_time", "valid_to"):
            e[name] = NO_TIME if r[name] is None else r[name]
        e["ttl_days"] = NO_TTL if r["ttl_days"] is None else r["ttl_days"]
        evidence = r["evidence"] if r["evidence"] is not None else f"[{i}]"
        e.update(rowid=i, id=f"00000000-0000-0000-0000-{i:012d}", evidence_refs=evidence)
        encoded.append(e)
        entities[i] = list(r["entities"])
    ix = OwnerIndex(DIMENSION)
    vectors = np.array([r["vector"] for r in rows], dtype=np.float32).reshape(-1, DIMENSION)
    ix.append(encoded, vectors, entities)
    return ix


def mapped(array: Any) -> bool:
    """Whether ``array``'s memory is a file mapping (a saved index used in place, not read
    into memory): the array or one of its bases is a memory map."""
    while array is not None:
        if isinstance(array, (np.memmap, mmap.mmap)):
            return True
        array = getattr(array, "base", None)
    return False


def refresh_steps(store: Any, user_id: str) -> int:
    """SQLite's virtual-machine steps for ``store`` to refresh ``user_id``'s owner index (the
    work a refresh does on the pack's connection, independent of the machine's speed)."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    store.conn.set_progress_handler(count, 1)
    try:
        store.owner_index(user_id)
    finally:
        store.conn.set_progress_handler(None, 1)
    return steps[0]


def owner_ranking(client: Any, queries: Sequence[str], now: datetime) -> list[list[Any]]:
    """What alice's ``queries`` return at ``now``, with and without a scope: each result's id,
    lifecycle, score and trace (what an index caught up with changes must rank as a rebuilt
    one does)."""
    found = []
    for query in queries:
        for scope in (None, "project"):
            response = client.retrieve(
                query, user_id="alice", scope=scope, limit=15, reference_time=now
            )
            found.append(
                [
                    (r.node.id, r.node.lifecycle_state, r.composite_score, r.score_trace)
                    for r in response.results
                ]
            )
    return found


# Sentences of a few words from a small vocabulary (their hashing vectors are sparse), and an
# index of vectors alone (no pack): the vector search tests' inputs.
WORDS = [
    "aster",
    "basalt",
    "cobalt",
    "fjord",
    "garnet",
    "harbor",
    "iris",
    "juniper",
    "kestrel",
    "lumen",
    "marlin",
    "nimbus",
    "onyx",
    "postgres",
    "redis",
    "kafka",
    "terraform",
    "grafana",
    "latency",
    "budget",
    "roadmap",
    "migration",
    "outage",
    "pricing",
    "security",
    "release",
    "schema",
    "deadline",
    "incident",
    "rollout",
    "caching",
    "backup",
    "alerting",
    "lisbon",
    "berlin",
    "osaka",
    "oslo",
    "dublin",
    "austin",
    "seoul",
    "porto",
    "climbing",
    "chess",
    "cycling",
    "pottery",
    "sailing",
    "ramen",
    "tacos",
]


def sentences(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.sample(WORDS, rng.randint(4, 9))) for _ in range(count)]


def build(
    vectors: np.ndarray[Any, Any], policy: AnnPolicy | None, ann_dir: Path | None = None
) -> OwnerIndex:
    ix = OwnerIndex(vectors.shape[1], ann=policy, ann_dir=ann_dir)
    rows = []
    for i in range(len(vectors)):
        row: dict[str, Any] = {name: 0 for name, _ in NUMERIC_COLUMNS}
        row.update(rowid=i + 1, id=f"m{i:06d}", content_sha256="", evidence_refs="[]")
        rows.append(row)
    ix.append(rows, vectors, {})
    return ix
