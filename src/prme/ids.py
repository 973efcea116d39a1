"""New memory ids: time-ordered UUIDs (version 7, RFC 9562), ascending in the order made.

Why not random (version 4) ids: the pack keeps a unique index on the memory id, and random ids
land on random pages of it. At a million memories a batch of 1,000 dirtied about 1,000 of its
pages, each written to the log at commit and again at the checkpoint: appending batches took
58-78 ms each, against 45-47 ms with time-ordered ids, whose batch lands on a few pages at the
end (measured on a copy of the benchmark's 1M pack). Listing memories by id also returns them in
the order they were stored, and a new memory sorts after every earlier one of its owner made by
this process.

Layout (RFC 9562, method 1): the 48-bit Unix time in milliseconds; the version; a 26-bit counter
(the 12 bits of ``rand_a`` and, after the variant, 14 bits of ``rand_b``), started at a random
value below 2**25 in each new millisecond and counted up within it, per owner; then 48 random
bits. The counter running over moves the time on by a millisecond, and a clock that goes back
does not move the ids back: an owner's ids stay ascending within a process. Ids of two owners
or processes stay distinct by their random bits (and counters' random starts).
"""

from __future__ import annotations

import os
import threading
import time
import uuid

import numpy as np

COUNTER_BITS = 26
_COUNTER_MASK = (1 << COUNTER_BITS) - 1
RANDOM_BYTES = 6  # per id: the last 48 bits

_new_uuid = object.__new__
_set = object.__setattr__


def time_ordered(count: int, millis: int, counter: int, random: bytes) -> list[uuid.UUID]:
    """``count`` version-7 UUIDs from the time ``millis`` and the counter value ``counter`` on,
    ascending (pure: ``random`` holds their last 6 bytes each)."""
    if len(random) != RANDOM_BYTES * count:
        raise ValueError(f"random holds {len(random)} bytes, not {RANDOM_BYTES * count}")
    steps = np.arange(counter, counter + count, dtype=np.uint64)
    times = np.uint64(millis) + (steps >> np.uint64(COUNTER_BITS))
    counters = steps & np.uint64(_COUNTER_MASK)
    rand = np.zeros((count, 8), np.uint8)
    rand[:, 2:] = np.frombuffer(random, np.uint8).reshape(count, RANDOM_BYTES)
    high = (times << np.uint64(16)) | np.uint64(0x7000) | (counters >> np.uint64(14))
    low = (
        np.uint64(0x8000_0000_0000_0000)  # the RFC 9562 variant (0b10)
        | ((counters & np.uint64(0x3FFF)) << np.uint64(48))
        | rand.view(">u8").ravel()
    )
    data = np.stack((high, low), axis=1).astype(">u8").tobytes()
    made, unknown = [], uuid.SafeUUID.unknown
    for at in range(0, 16 * count, 16):
        # What UUID(int=...) sets, without its argument checks (the value is in range).
        made.append(value := _new_uuid(uuid.UUID))
        _set(value, "int", int.from_bytes(data[at : at + 16], "big"))
        _set(value, "is_safe", unknown)
    return made


class IdClock:
    """Where each owner's next id's time and counter are, in this process (thread-safe). The
    counter counts one owner's ids only: an owner's ids never tell how many ids other owners
    got in the same millisecond."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next: dict[str, tuple[int, int]] = {}  # owner -> (time, counter) of its next id

    def take(self, owner: str, count: int, now_millis: int, counter_start: int) -> tuple[int, int]:
        """The time and counter of the first of ``count`` new ids of ``owner`` at
        ``now_millis``: a later millisecond starts at ``counter_start``, else the counter goes
        on from the owner's last id."""
        with self._lock:
            millis, counter = self._next.get(owner, (0, 0))
            if now_millis > millis:
                millis, counter = now_millis, counter_start
            end = counter + count
            self._next[owner] = (millis + (end >> COUNTER_BITS), end & _COUNTER_MASK)
            if len(self._next) > KEPT_OWNERS:  # those before now start afresh anyway
                self._next = {o: at for o, at in self._next.items() if at[0] >= now_millis}
            return millis, counter


# Owners whose next id is kept past the current millisecond (the rest are forgotten, which only
# matters for a clock that goes back).
KEPT_OWNERS = 4096
_CLOCK = IdClock()


def new_ids(owner: str, count: int) -> list[uuid.UUID]:
    """``count`` new ids for ``owner``'s records, ascending and after every id this process made
    for the owner before (one ``os.urandom`` call)."""
    if count <= 0:
        return []
    drawn = os.urandom(4 + RANDOM_BYTES * count)
    start = int.from_bytes(drawn[:4], "big") >> (32 - COUNTER_BITS + 1)  # below 2**25
    millis, counter = _CLOCK.take(owner, count, time.time_ns() // 1_000_000, start)
    return time_ordered(count, millis, counter, drawn[4:])
