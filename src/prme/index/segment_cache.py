"""An owner's HNSW graphs, each built once and shared by every snapshot of its index.

A graph is loaded from where it was saved, or built: side by side with the other missing ones
when a search needs it now (:meth:`SegmentCache.get`), or on the background builder when it
will be searched later (:meth:`SegmentCache.prepare`). A graph being built is a future in
:attr:`SegmentCache.building`, so nothing is built twice and whoever needs it waits for it;
the lock guards the two dicts and is never held while a graph is built or awaited.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from prme.index import ann
from prme.index.ann import AnnPolicy, Segment
from prme.index.workers import Background

log = logging.getLogger("prme.index")
Range = tuple[int, int]
# The background builder: one daemon thread for the process, so a build ahead uses one CPU at
# most and never delays the process's exit (a graph it did not finish is built again later).
AHEAD = Background("prme-ann-ahead")


@dataclass(frozen=True)
class GraphSource:
    """What an owner index's graphs are built from (its vectors and policy), and how one is
    loaded from where it was saved (None: not saved) and kept once built (saved)."""

    vectors: ann.Rows
    policy: AnnPolicy
    load: Callable[[Range], Segment | None]
    keep: Callable[[Segment], Segment]


class SegmentCache:
    """The graphs of one owner index and its snapshots, by ``[start, end)`` position range."""

    def __init__(self, built: dict[Range, Segment] | None = None) -> None:
        self.built: dict[Range, Segment] = {} if built is None else built
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self.building: dict[Range, Future[Segment]] = {}
        self.closed = False  # its store closed or dropped the index: nothing more is saved

    def _stopped(self) -> bool:
        """Whether a build ahead stops: its store closed, or the process is exiting."""
        return self.closed or AHEAD.stopping.is_set()

    def close(self) -> None:
        """Build nothing more ahead and save no graph: the store closed, or dropped the index
        (a build already running finishes in memory; usearch cannot stop one)."""
        self.closed = True

    @property
    def lock(self) -> threading.Lock:
        """The lock; in a forked child a new one, and no build in progress: the parent's
        builders are not the child's threads, and its lock may have been held at the fork."""
        if self._pid != os.getpid():
            self._pid, self._lock, self.building = os.getpid(), threading.Lock(), {}
        return self._lock

    def up_to(self, size: int) -> SegmentCache:
        """A cache of the graphs built so far over rows below ``size`` (a saved view's own)."""
        with self.lock:
            return SegmentCache({r: s for r, s in self.built.items() if r[1] <= size})

    def get(self, ranges: Sequence[Range], source: GraphSource) -> list[Segment]:
        """The graphs over ``ranges``: loaded, or built here side by side (each passed to
        ``source.keep``, which saves it), or awaited when already being built. A graph whose build
        ahead failed is built here."""
        claimed = self._claim(ranges, source.load)
        if claimed:
            self._build(claimed, source, side_by_side=True)
        found: list[Segment] = []
        for r in ranges:
            while True:
                with self.lock:
                    segment, pending = self.built.get(r), self.building.get(r)
                if segment is not None:
                    found.append(segment)
                    break
                if pending is None:  # its build elsewhere failed: build it here
                    if claimed := self._claim([r], source.load):
                        self._build(claimed, source, side_by_side=True)
                    continue
                try:
                    pending.result()
                except Exception:  # its build failed there: built here (the loop)
                    continue
        return found

    def prepare(self, ranges: Sequence[Range], source: GraphSource) -> None:
        """Load the graphs over ``ranges``, and build the missing ones on the background
        builder, one after another; returns at once."""
        with self.lock:  # the common case, nothing to do, takes no file system look-up
            if all(r in self.built or r in self.building for r in ranges):
                return
        claimed = self._claim(ranges, source.load)
        if not claimed:
            return

        def build() -> None:
            try:
                self._build(claimed, source, side_by_side=False)
            except Exception:  # a retrieval that needs one of them builds it
                if not self._stopped():
                    log.exception("building HNSW segments %s ahead failed", sorted(claimed))

        if not AHEAD.submit(build):  # shutting down: released, built when needed
            self._release(claimed, RuntimeError("the background builder has stopped"))

    def _claim(self, ranges: Sequence[Range], load: Callable[[Range], Segment | None]) -> list[Range]:
        """Load what is saved; claim (a future each) the graphs nobody builds yet."""
        claimed: list[Range] = []
        with self.lock:
            for r in ranges:
                if r in self.built or r in self.building:
                    continue
                found = load(r)
                if found is not None:
                    self.built[r] = found
                else:
                    self.building[r] = Future()
                    claimed.append(r)
        return sorted(claimed, key=lambda r: r[0] - r[1])  # the largest first

    def _build(self, claimed: list[Range], source: GraphSource, *, side_by_side: bool) -> None:
        vectors, policy = source.vectors, source.policy

        def done(built: Segment) -> Segment:
            segment = built if self.closed else source.keep(built)
            with self.lock:
                self.built[(built.start, built.end)] = segment
                future = self.building.pop((built.start, built.end))
            future.set_result(segment)
            return segment

        try:
            if side_by_side:
                ann.build_segments(vectors, claimed, policy, done)
            else:
                for start, end in claimed:
                    done(ann.build_segment(vectors, start, end, policy, self._stopped))
        except BaseException as exc:
            self._release(claimed, exc)
            raise

    def _release(self, claimed: list[Range], exc: BaseException) -> None:
        """Give up the claimed graphs not built: whoever waits for one sees ``exc``."""
        with self.lock:
            failed = [self.building.pop(r) for r in claimed if r in self.building]
        for future in failed:
            future.set_exception(exc)
