"""The child process of the reliability suite: one operation on one pack, in a loop.

Usage: ``python driver.py OPERATION PACK ARGS_JSON``. The driver opens the pack, prints
``{"ready": true}``, then prints one JSON line per acknowledged write, flushed before the next
write starts, so a parent that kills it at any moment knows exactly what was acknowledged. An
unexpected exception is printed as ``{"error": ...}`` and the loop goes on; ``{"done": true}``
ends a bounded run. A run never outlives ``seconds`` (default 60), so no child is left behind.

Operations: ``store``, ``retrieve``, ``judge``, ``profiles`` (activate / deactivate / rollback),
``race`` (activate on a barrier, like ``tests/test_profile_concurrency.py``) and ``disk_full``
(writes under an exhausted file-size limit, then after it is lifted).
"""

from __future__ import annotations

import json
import random
import resource
import signal
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from prme import MemoryClient, PRMEConfig, ScoringWeights, StaleRankingProfileError
from prme.config import EmbeddingConfig, StorageConfig
from prme.errors import InvalidInputError

OWNER = "alice"
QUERIES = ("Which database does Aster use?", "Who leads Basalt?", "Where does Cobalt run?")


def emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def rounds(args: dict[str, Any]) -> Iterator[int]:
    """0, 1, 2, ... until ``count`` (None: until killed) or ``seconds`` have passed."""
    deadline = time.monotonic() + float(args.get("seconds", 60))
    count = args.get("count")
    index = 0
    while (count is None or index < count) and time.monotonic() < deadline:
        yield index
        index += 1


def guarded(step: Callable[[int], None], args: dict[str, Any]) -> None:
    for index in rounds(args):
        try:
            step(index)
        except Exception as exc:  # reported to the parent, which fails the test
            emit(error=f"{type(exc).__name__}: {exc}")


def store(memory: MemoryClient, args: dict[str, Any]) -> None:
    tag, size = args["tag"], int(args.get("batch", 20))

    def step(index: int) -> None:
        batch = f"{tag}-{index}"
        items = [
            {
                "content": f"Aster note {batch} item {j}: the database is PostgreSQL {j}",
                "metadata": {"batch": batch, "item": j},
            }
            for j in range(size)
        ]
        emit(batch=batch, ids=memory.store_many(items, user_id=OWNER))

    guarded(step, args)


def retrieve(memory: MemoryClient, args: dict[str, Any]) -> None:
    def step(index: int) -> None:
        response = memory.retrieve(QUERIES[index % len(QUERIES)], user_id=OWNER, limit=10)
        emit(
            request_id=str(response.metadata.request_id),
            persisted=response.metadata.receipt_persisted,
            results=[str(r.node.id) for r in response.results],
        )

    guarded(step, args)


def judge(memory: MemoryClient, args: dict[str, Any]) -> None:
    def step(index: int) -> None:
        response = memory.retrieve(QUERIES[index % len(QUERIES)], user_id=OWNER, limit=10)
        labels = {str(r.node.id): i % 2 == 0 for i, r in enumerate(response.results[:4])}
        record = memory.record_relevance(
            {"request_id": response.metadata.request_id, "labels": labels}, user_id=OWNER
        )
        emit(feedback_id=str(record.feedback_id), request_id=str(record.request_id), labels=labels)

    guarded(step, args)


def profiles(memory: MemoryClient, args: dict[str, Any]) -> None:
    """Random pointer transitions between base scoring and the given base-evaluated profiles."""
    ids: list[str] = args["profiles"]
    scopes = args.get("scopes")
    rng = random.Random(args.get("seed", 0))

    def step(index: int) -> None:
        active = memory.get_active_ranking_profile(user_id=OWNER, scopes=scopes)
        change_id = uuid.uuid4()
        try:
            if active is None:
                target = rng.choice(ids)
                if rng.random() < 0.5:
                    state = memory.rollback_ranking_profile(
                        target, user_id=OWNER, scopes=scopes, change_id=change_id
                    )
                else:
                    state = memory.activate_ranking_profile(
                        target, user_id=OWNER, change_id=change_id
                    )
            else:
                choice = rng.random()
                others = [p for p in ids if p != str(active.profile_id)]
                if choice < 0.4:
                    result = memory.deactivate_ranking_profile(
                        user_id=OWNER, scopes=scopes, change_id=change_id
                    )
                    assert result is not None
                    state = result
                else:
                    back_to = None if choice < 0.7 else rng.choice(others)
                    state = memory.rollback_ranking_profile(
                        back_to, user_id=OWNER, scopes=scopes, change_id=change_id
                    )
        except InvalidInputError as exc:
            if "unavailable for these scopes" not in str(exc):  # a never-active rollback target
                raise
            return
        emit(
            change_id=str(state.change_id),
            action=state.action,
            previous=None if state.previous_profile_id is None else str(state.previous_profile_id),
            active=None if state.active_profile_id is None else str(state.active_profile_id),
        )

    guarded(step, args)


def race(memory: MemoryClient, args: dict[str, Any]) -> None:
    """For each round: wait for the round's go file, then activate from the same baseline."""
    barrier = Path(args["barrier"])
    for index in range(int(args["rounds"])):
        go, deadline = barrier / f"go-{index}", time.monotonic() + 60
        while not go.exists():
            if time.monotonic() > deadline:
                raise SystemExit("barrier timeout")
            time.sleep(0.0002)
        try:
            state = memory.activate_ranking_profile(args["profile"], user_id=OWNER)
            emit(round=index, won=str(state.active_profile_id))
        except StaleRankingProfileError as exc:
            emit(round=index, stale=str(exc))
        except Exception as exc:
            emit(round=index, error=f"{type(exc).__name__}: {exc}")


def _attempt(label: str, action: Callable[[], Any]) -> None:
    try:
        emit(step=label, ok=True, value=action())
    except Exception as exc:
        emit(step=label, ok=False, error=f"{type(exc).__name__}: {exc}")


def disk_full(memory: MemoryClient, args: dict[str, Any]) -> None:
    """Every write under a 1-byte file-size limit (a full disk), then again once it is lifted."""
    request_id = args["request_id"]
    conn = memory.engine.store.conn  # type: ignore[attr-defined]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the next write must grow the log file
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes fail with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (1, resource.RLIM_INFINITY))
    big = [f"Aster bulk {i} " + "filler words " * 30000 for i in range(16)]  # spills the cache
    _attempt("store", lambda: memory.store("Aster moved to MySQL", user_id=OWNER))
    _attempt("store_many", lambda: memory.store_many(big, user_id=OWNER))
    _attempt(
        "retrieve",
        lambda: (
            (r := memory.retrieve(QUERIES[0], user_id=OWNER, limit=5)).metadata.receipt_persisted,
            [str(c.node.id) for c in r.results],
        ),
    )
    _attempt(
        "judge",
        lambda: (
            memory.record_relevance(
                {"request_id": request_id, "labels": args["labels"]}, user_id=OWNER
            ).feedback_id.hex
        ),
    )
    _attempt("delete", lambda: memory.delete(args["delete"], user_id=OWNER))
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    _attempt("store_after", lambda: memory.store("Aster recovered", user_id=OWNER))
    _attempt(
        "retrieve_after",
        lambda: memory.retrieve(QUERIES[0], user_id=OWNER, limit=5).metadata.receipt_persisted,
    )


OPERATIONS: dict[str, Callable[[MemoryClient, dict[str, Any]], None]] = {
    "store": store,
    "retrieve": retrieve,
    "judge": judge,
    "profiles": profiles,
    "race": race,
    "disk_full": disk_full,
}


def main() -> None:
    operation, pack, raw = sys.argv[1:4]
    args: dict[str, Any] = json.loads(raw)
    storage = StorageConfig(busy_timeout_ms=int(args.get("busy_timeout_ms", 10000)))
    config = PRMEConfig(
        scoring=ScoringWeights(), embedding=EmbeddingConfig(provider="hash"), storage=storage
    )
    while time.time() < float(args.get("start_at", 0)):  # a common start for racing opens
        time.sleep(0.0005)
    with MemoryClient(pack, config=config) as memory:
        emit(ready=True)
        OPERATIONS[operation](memory, args)
    emit(done=True)


if __name__ == "__main__":
    main()
