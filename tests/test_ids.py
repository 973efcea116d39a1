"""New memory ids: version-7 UUIDs, ascending in the order made (prme.ids)."""

from __future__ import annotations

import os
import pickle
import threading
import time
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prme import MemoryClient, ids
from prme.ids import COUNTER_BITS, IdClock, new_ids, time_ordered


def _parts(made: uuid.UUID) -> tuple[int, int, int]:
    """(milliseconds, counter, random bits) of a version-7 id laid out as prme.ids says."""
    value = made.int
    counter = ((value >> 64) & 0xFFF) << 14 | (value >> 48) & 0x3FFF
    return value >> 80, counter, value & (1 << 48) - 1


@given(
    count=st.integers(0, 300),
    millis=st.integers(0, (1 << 48) - 2),
    counter=st.integers(0, (1 << COUNTER_BITS) - 1),
    data=st.data(),
)
def test_time_ordered_ids_lay_out_the_time_counter_and_random_bits(
    count: int, millis: int, counter: int, data: st.DataObject
) -> None:
    random = data.draw(st.binary(min_size=6 * count, max_size=6 * count))
    made = time_ordered(count, millis, counter, random)
    assert len(made) == count
    for i, one in enumerate(made):
        step = counter + i
        assert (one.version, one.variant) == (7, uuid.RFC_4122)
        assert _parts(one) == (
            millis + (step >> COUNTER_BITS),
            step % (1 << COUNTER_BITS),
            int.from_bytes(random[6 * i : 6 * i + 6], "big"),
        )
    assert made == sorted(made) and len(set(made)) == count
    assert [str(m) for m in made] == sorted(str(m) for m in made)  # as the pack's index sorts


def test_time_ordered_ids_are_ordinary_uuids() -> None:
    for made in time_ordered(3, 1_700_000_000_000, 5, bytes(range(18))):
        twin = uuid.UUID(int=made.int)
        assert type(made) is uuid.UUID and made.is_safe is uuid.SafeUUID.unknown
        assert (hash(made), str(made), made.hex) == (hash(twin), str(twin), twin.hex)
        assert pickle.loads(pickle.dumps(made)) == twin
        assert uuid.UUID(str(made)) == made
    with pytest.raises(ValueError, match="random holds 5 bytes, not 6"):
        time_ordered(1, 0, 0, bytes(5))


def test_the_id_clock_counts_on_within_a_millisecond_and_never_goes_back() -> None:
    clock = IdClock()
    assert clock.take("alice", 3, 100, 7) == (100, 7)
    assert clock.take("alice", 2, 100, 999) == (100, 10)  # the same millisecond: counted on
    assert clock.take("alice", 1, 99, 0) == (100, 12)  # the clock went back: the ids did not
    assert clock.take("alice", 1, 101, 40) == (101, 40)  # a later millisecond: a new start
    top = (1 << COUNTER_BITS) - 2
    assert clock.take("alice", 5, 102, top) == (102, top)  # runs over into the next one
    assert clock.take("alice", 1, 102, 0) == (103, 3)


def test_an_owners_ids_do_not_count_other_owners_ids() -> None:
    """Within a millisecond the counter goes on per owner: alice's next id is the same
    whether or not bob got ids meanwhile."""
    clock = IdClock()
    assert clock.take("alice", 1, 500, 20) == (500, 20)
    assert clock.take("bob", 1000, 500, 33) == (500, 33)
    assert clock.take("alice", 1, 500, 0) == (500, 21)
    assert clock.take("bob", 1, 500, 0) == (500, 1033)


def test_the_clock_forgets_owners_only_once_their_millisecond_is_past(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ids, "KEPT_OWNERS", 3)
    clock = IdClock()
    for owner in ("a", "b", "c"):
        clock.take(owner, 1, 10, 0)
    clock.take("d", 1, 10, 0)  # four owners at the current millisecond: all kept
    assert clock.take("a", 1, 10, 50) == (10, 1)
    clock.take("e", 1, 11, 0)  # a later millisecond: those before it are forgotten
    assert clock.take("a", 1, 10, 50) == (10, 50)


def test_new_ids_ascend_across_calls_threads_and_a_clock_that_goes_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    drawn: list[int] = []
    urandom = os.urandom

    def counted(size: int) -> bytes:
        drawn.append(size)
        return urandom(size)

    monkeypatch.setattr(os, "urandom", counted)
    first = new_ids("alice", 2000)
    assert drawn == [4 + 6 * 2000]  # one read for the batch
    assert first == sorted(first) and len(set(first)) == 2000
    assert abs(_parts(first[0])[0] - time.time_ns() // 1_000_000) < 60_000
    monkeypatch.setattr(time, "time_ns", lambda: 0)  # the clock jumps back to 1970
    later = new_ids("alice", 3)
    assert later == sorted(later) and later[0] > first[-1]
    assert new_ids("alice", 0) == []

    made: list[list[uuid.UUID]] = []

    def make() -> None:
        made.append(ids.new_ids("alice", 500))

    threads = [threading.Thread(target=make) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [one for batch in made for one in batch]
    assert len(set(every)) == 2000 and all(batch == sorted(batch) for batch in made)
    assert min(every) > later[-1]


def test_stored_memories_list_in_the_order_stored(client: MemoryClient) -> None:
    stored = client.store_many([f"note {i}" for i in range(50)], user_id="alice")
    stored += [client.store("one more note", user_id="alice")]
    stored += client.store_many(["and two", "more notes"], user_id="alice")
    assert all(uuid.UUID(s).version == 7 for s in stored)
    listed = [str(m.id) for m in client.list(user_id="alice", limit=100)]
    assert listed == stored
