"""``ttl_days`` is enforced: a memory lives until its stated time (``event_time``, else
``created_at``) plus ``ttl_days`` days. Past that instant of the request's clock (its
``reference_time``, else the engine's clock) it leaves retrieval; ``get``/``list`` still return it
marked ``expired``, and receipts that returned it still replay."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from conftest import FakeClock

from prme import MemoryClient, MemoryRecord, RetrievalMode, Scope
from prme.retrieval.replay import replay_ranking, replay_scores

ONE_US = timedelta(microseconds=1)
TEN_YEARS = timedelta(days=3653)


def returned(memory: MemoryClient, **kwargs: object) -> set[str]:
    response = memory.retrieve("Aster database", user_id="alice", limit=50, **kwargs)  # type: ignore[arg-type]
    return {str(r.node.id) for r in response.results}


def test_expired_memories_leave_retrieval_and_are_marked_in_get_and_list(
    make_client: Callable[..., MemoryClient], clock: FakeClock
) -> None:
    memory = make_client()
    start = clock.now
    forever = memory.store("Aster database: PostgreSQL (kept)", user_id="alice")
    instant = memory.store("Aster database: SQLite (ttl 0)", user_id="alice", ttl_days=0)
    month = memory.store("Aster database: MySQL (30 days)", user_id="alice", ttl_days=30)
    event = start + timedelta(days=10)
    meeting = memory.store(
        "Aster database review meeting", user_id="alice", ttl_days=1, event_time=event
    )
    created = {r.id: r.created_at for r in memory.list(user_id="alice")}

    clock.now = start + timedelta(days=1)
    first = memory.retrieve("Aster database", user_id="alice", limit=50)
    assert {str(r.node.id) for r in first.results} == {forever, month, meeting}
    clock.now = start + timedelta(days=12)
    assert returned(memory) == {forever, month}
    assert returned(memory, retrieval_mode=RetrievalMode.EXPLICIT) == {forever, month}
    clock.now = start + TEN_YEARS
    assert returned(memory) == {forever}
    # The request's reference time is its clock.
    assert returned(memory, reference_time=start + timedelta(days=5)) == {forever, month, meeting}

    records = {str(r.id): r for r in memory.list(user_id="alice")}
    assert all(isinstance(r, MemoryRecord) for r in records.values())
    assert {i for i, r in records.items() if r.expired} == {instant, month, meeting}
    assert records[forever].expires_at is None and not records[forever].expired
    assert records[instant].expires_at == created[records[instant].id]
    assert records[month].expires_at == created[records[month].id] + timedelta(days=30)
    assert records[meeting].expires_at == event + timedelta(days=1)
    got = memory.get(instant, user_id="alice")
    assert got is not None and got.expired and got.content == "Aster database: SQLite (ttl 0)"

    # A receipt from before the expiry still reads back and replays exactly.
    receipt = memory.get_retrieval_receipt(first.metadata.request_id, user_id="alice")
    assert receipt is not None
    assert [str(c.node_id) for c in receipt.candidates] == [str(r.node.id) for r in first.results]
    assert replay_ranking(receipt) == [c.node_id for c in receipt.candidates]
    assert replay_scores(receipt) == [c.score for c in receipt.candidates]


def test_a_memory_expires_just_after_its_last_instant(
    make_client: Callable[..., MemoryClient],
) -> None:
    memory = make_client()
    node_id = memory.store("Aster database: MySQL", user_id="alice", ttl_days=30)
    stored = memory.get(node_id, user_id="alice")
    assert stored is not None and stored.expires_at is not None and not stored.expired
    end = stored.expires_at
    assert returned(memory, reference_time=end) == {node_id}
    assert returned(memory, reference_time=end + ONE_US) == set()
    # Filtered cross-scope hints obey the same rule.
    hints = memory.retrieve(
        "Aster database", user_id="alice", scope=Scope.PROJECT, reference_time=end + ONE_US
    ).cross_scope_hints
    assert hints == []
    hints = memory.retrieve(
        "Aster database", user_id="alice", scope=Scope.PROJECT, reference_time=end
    ).cross_scope_hints
    assert [str(h.node_id) for h in hints] == [node_id]


def test_an_expiry_past_year_9999_never_comes(make_client: Callable[..., MemoryClient]) -> None:
    memory = make_client()
    far = memory.store(
        "Aster database: far future",
        user_id="alice",
        ttl_days=1_000_000,
        event_time=FakeClock().now.replace(year=9999),
    )
    record = memory.get(far, user_id="alice")
    assert record is not None and record.expires_at is None and not record.expired
    assert returned(memory) == {far}
