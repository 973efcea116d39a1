"""A large owner's exact vector scan in a process of its own, mapping the owner's saved index.

Why a process: the sparse vectors' postings (:mod:`prme.index.sparse_vectors`) are summed by
numpy's ``add.at``, one call per query dimension and block, which holds the GIL. On the scan
thread the scan therefore takes turns with the lexical search instead of running beside it:
at a million rows the two took 6.2 ms together, against 6.9 ms one after the other. A process
that maps the owner's saved index runs the scan beside it: 3.7-3.9 ms.

What it answers is exactly what this process would find. It loads the index saved under the
owner's directory with the stamp the parent read there (:func:`index_file.load` refuses any
other), so it holds the same rows; it answers a query only while the parent's index is that
saved index (same size, delete sequence and last rowid: rows appended, removed or changed since
make it another index, scanned here as before); and the scan gives the same positions and
cosines (bits) whatever process runs it, the postings' blocks included
(:func:`~prme.index.arrays.exact_dot` computes each row alone). A process that is starting,
busy, broken or slow leaves the scan to this process, which gives the same result.

Processes are started with the ``subprocess`` module and ``python -c``, never by
``multiprocessing``'s spawn, which would run the application's main module again in the
child. They run in their own session (a terminal's Ctrl-C reaches only the parent), exit when
their pipe closes (the parent exited, even killed), and are stopped when the pack closes.
POSIX only (the pipes are inherited by descriptor); elsewhere, and with fewer than two CPUs,
the scan stays on the scan thread.
"""

from __future__ import annotations

import atexit
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from prme.index import index_file
from prme.index.index_file import IndexStamp
from prme.index.owner_index import OwnerIndex
from prme.index.sparse_vectors import complete
from prme.index.workers import usable_cpus
from prme.models.enums import Scope

log = logging.getLogger("prme.index")

# From this many rows an owner's scan goes to a process. Measured (``bench/engine.py``, retrieve
# p50 without the query's embedding, scan thread or inline -> process): 5k 3.46-3.51 ->
# 3.21-3.49 ms, 10k 3.03-3.06 -> 2.80-2.89, 100k 4.67-4.70 -> 3.63-3.70, 1M 9.02-9.15 -> 6.65.
# Below 10k the gain is too small for a process's memory (70-80 MiB, 35-40 anonymous).
SCAN_PROCESS_ROWS = 8192
# How long a new process may take to map the index and report ready, and a started scan to
# answer, before the process counts as broken (a scan of a million rows takes a few ms).
START_SECONDS = 120.0
ANSWER_SECONDS = 30.0
# At most this many processes (and one per usable CPU but one), each serving one owner.
MAX_PROCESSES = 4
# A process unused this long may be stopped to serve another owner's index.
IDLE_SECONDS = 30.0
# A process that broke is replaced no sooner than this (one that keeps failing costs little).
RETRY_SECONDS = 60.0

Found = tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]
# The child's program (``-c``: ``-m`` would import this module twice, as a package member and
# as ``__main__``).
CHILD = "import sys; from prme.index.scan_process import main; sys.exit(main(sys.argv[1:]))"


class ScanUnavailable(Exception):
    """The process gave no answer (it is broken or too slow): scan in this process."""


@dataclass(frozen=True)
class Served:
    """The index a process serves: its saved directory and what its stamp says."""

    directory: Path
    size: int
    delete_seq: int
    max_rowid: int

    @classmethod
    def of(cls, ix: OwnerIndex) -> Served | None:
        if ix.index_dir is None:
            return None
        return cls(ix.index_dir, ix.size, ix.delete_seq, ix.max_rowid)

    def stamped(self, stamp: IndexStamp | None) -> bool:
        return stamp is not None and (stamp.size, stamp.delete_seq, stamp.max_rowid) == (
            self.size,
            self.delete_seq,
            self.max_rowid,
        )


class ScanProcess:
    """One child process serving one saved index (:class:`Served`), one scan at a time."""

    def __init__(self, served: Served, stamp: IndexStamp) -> None:
        self.served, self.stamp = served, stamp
        self.ready = threading.Event()
        self.broken = False
        self.broken_at = 0.0
        self.last_used = time.monotonic()
        self.answered = 0  # scans answered
        self._popen: subprocess.Popen[bytes] | None = None
        self._send: Connection | None = None
        self._receive: Connection | None = None
        self._mutex = threading.Lock()  # held by the scan in flight, from send to answer
        self._in_flight: weakref.ref[Answer] | None = None
        self._unread = False  # the answer of a scan given up is still in the pipe
        self._lifecycle = threading.Lock()  # orders the child's start with a stop
        self._stopping = False

    @property
    def pid(self) -> int | None:
        return None if self._popen is None else self._popen.pid

    @property
    def exited(self) -> bool:
        """Whether the child has exited and been reaped (or was never started)."""
        return self._popen is None or self._popen.returncode is not None

    def start(self) -> None:
        """Start the child and wait until it has mapped the index (on a background thread,
        the only user of the pipes until the process is ready)."""
        try:
            self._start()
        except Exception:
            if not self._stopping:
                log.warning("no scan process for %s", self.served.directory, exc_info=True)
            self._mark_broken()
            self._close()

    def _start(self) -> None:
        if self._stopping:
            raise ScanUnavailable("stopped before it started")
        self._spawn()
        with self._lifecycle:  # a stop before this saw no child: the failure here reaps it
            if self._stopping:
                raise ScanUnavailable("stopped while it started")
        assert self._send is not None and self._receive is not None
        self._send.send((str(self.served.directory), self.stamp.as_json(), __file__))
        if not self._receive.poll(START_SECONDS):
            raise ScanUnavailable("the scan process did not start in time")
        status, detail = self._receive.recv()
        if status != "ready":
            raise ScanUnavailable(f"the scan process refused the index: {detail}")
        with self._lifecycle:
            if self._stopping:
                raise ScanUnavailable("stopped while it started")
            self.ready.set()

    def _spawn(self) -> None:
        child_reads, parent_writes = os.pipe()
        parent_reads, child_writes = os.pipe()
        env = dict(os.environ)
        # the child imports this prme (its package's parent directory first on its path)
        home = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (home, env.get("PYTHONPATH")) if p)
        env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        try:
            self._popen = subprocess.Popen(
                [sys.executable, "-c", CHILD, str(child_reads), str(child_writes)],
                # never the parent's stdout: an MCP server over stdio speaks on it (errors
                # still reach the parent's stderr)
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=(child_reads, child_writes),
                env=env,
                start_new_session=True,
            )
        except BaseException:
            for fd in (parent_reads, parent_writes):
                os.close(fd)
            raise
        finally:
            for fd in (child_reads, child_writes):
                os.close(fd)
        self._send = Connection(parent_writes, readable=False)
        self._receive = Connection(parent_reads, writable=False)

    def submit(
        self, query: npt.NDArray[np.float32], scopes: Sequence[Scope] | None, k: int
    ) -> Answer | None:
        """The scan sent to the process, or None when it is not ready or is busy."""
        if not self.ready.is_set() or self.broken or not self._mutex.acquire(blocking=False):
            return None
        try:
            if self._unread:  # the answer to a scan given up: read it first
                self._read()
                self._unread = False
            assert self._send is not None
            chosen = None if scopes is None else list(scopes)
            self._send.send((np.ascontiguousarray(query, np.float32), chosen, k))
        except (OSError, EOFError, ScanUnavailable, pickle.PicklingError):
            self._mutex.release()
            self._break()
            return None
        answer = Answer(self)
        # Its reader releases the mutex; so does giving it up (Answer.discard), or losing it
        # (the retrieval failed first): the answer is then read before the next scan's.
        self._in_flight = weakref.ref(answer, self._give_up)
        self.last_used = time.monotonic()
        return answer

    def _give_up(self, ref: weakref.ref[Answer]) -> None:
        """The scan in flight, ``ref``, is not to be read (held by its answer's holder)."""
        if self._in_flight is ref:
            self._in_flight, self._unread = None, True
            self._mutex.release()

    def _read(self) -> Found:
        """The answer of the scan sent last (called with the mutex held)."""
        assert self._receive is not None
        try:
            if not self._receive.poll(ANSWER_SECONDS):
                raise ScanUnavailable("the scan process did not answer in time")
            positions, cosines = self._receive.recv()
        except (OSError, EOFError, pickle.UnpicklingError) as exc:
            raise ScanUnavailable("the scan process failed") from exc
        self.answered += 1
        return np.asarray(positions, np.int64), np.asarray(cosines, np.float32)

    def _mark_broken(self) -> None:
        if not self.broken:
            self.broken, self.broken_at = True, time.monotonic()

    def _break(self) -> None:
        """Count this process as broken and stop it (on a thread: the caller may be about to
        release the mutex that :meth:`stop` waits for)."""
        if not self.broken:
            self._mark_broken()
            _in_background(self.stop)

    def stop(self) -> None:
        """Stop the child. A ready one: its pipes are closed (it exits when it reads their
        end) and it is reaped. One still starting is killed, and the starting thread closes
        the pipes and reaps it."""
        with self._lifecycle:
            self._stopping = True
            ready, popen = self.ready.is_set(), self._popen
        self._mark_broken()
        if not ready:
            if popen is not None and popen.poll() is None:
                popen.kill()
            return
        # The pipes are closed only with the mutex held: a closed descriptor's number can be
        # reused by another file at once, which a scan in flight must never touch.
        held = self._mutex.acquire(timeout=ANSWER_SECONDS + 5)
        try:
            self._close(pipes=held)
        finally:
            if held:
                self._mutex.release()

    def _close(self, pipes: bool = True) -> None:
        """Close the pipe to the child (it exits), reap it (killed after 5 s), and close the
        pipe from it."""
        if pipes and self._send is not None:
            self._send.close()
        popen = self._popen
        if popen is not None:
            try:
                popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()
        if pipes and self._receive is not None:
            self._receive.close()


class Answer:
    """A scan sent to a process: :meth:`result` reads its answer, once."""

    def __init__(self, process: ScanProcess) -> None:
        self._process = process

    def result(self) -> Found:
        """The top positions and their cosines.

        Raises:
            ScanUnavailable: the process broke or was too slow (it is stopped), or this answer
                was read or given up already.
        """
        process = self._process
        ref = process._in_flight
        if ref is None or ref() is not self:
            raise ScanUnavailable("this scan's answer was read or given up already")
        process._in_flight = None
        try:
            return process._read()
        except ScanUnavailable:
            process._break()
            raise
        finally:
            process._mutex.release()

    def discard(self) -> None:
        """Give the scan up (its retrieval failed): the process reads its answer later."""
        ref = self._process._in_flight
        if ref is not None and ref() is self:
            self._process._give_up(ref)


class ScanProcesses:
    """The processes of this interpreter, by the saved index directory they serve: at most
    one per directory, and at most MAX_PROCESSES."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._processes: dict[Path, ScanProcess] = {}
        # per directory, the last index found not saved as it is (not looked for again)
        self._refused: dict[Path, Served] = {}
        self._registered = False
        self._pid = os.getpid()

    def enabled(self, ix: OwnerIndex) -> bool:
        """Whether ``ix`` is served by a process when one is ready: large, saved as it is, with
        sparse vectors (a dense index's scan releases the GIL: the scan thread serves it as
        well), on a POSIX system with more than one usable CPU."""
        return (
            os.name == "posix"
            and ix.size >= SCAN_PROCESS_ROWS
            and ix.index_dir is not None
            and ix.saved_size == ix.size
            and not ix.uses_ann()
            and ix.sparse()
            and usable_cpus() > 1
        )

    def submit(
        self,
        ix: OwnerIndex,
        query: npt.NDArray[np.float32],
        scopes: Sequence[Scope] | None,
        k: int,
    ) -> Answer | None:
        """The scan of ``ix`` sent to the process serving its saved copy; None when there is
        none ready and idle (one is started in the background when ``ix`` is its saved copy)."""
        served = Served.of(ix)
        if served is None or not self.enabled(ix):
            return None
        with self._lock:
            if self._pid != os.getpid():  # a forked child: its parent's processes are not its
                self._processes, self._refused, self._pid = {}, {}, os.getpid()
            process = self._processes.get(served.directory)
            if process is None or process.served != served or (
                process.broken and time.monotonic() - process.broken_at >= RETRY_SECONDS
            ):
                if self._refused.get(served.directory) != served:
                    self._start(served)
                return None
        return process.submit(query, scopes, k)

    def _start(self, served: Served) -> None:
        """Start a process for ``served`` when its directory holds it and there is room
        (called with the lock held)."""
        stamp = index_file.read_stamp(served.directory)
        if not served.stamped(stamp):
            self._refused[served.directory] = served
            return
        assert stamp is not None
        old = self._processes.pop(served.directory, None)
        if old is not None:
            _in_background(old.stop)
        room = min(MAX_PROCESSES, usable_cpus() - 1)
        if len(self._processes) >= room and not self._evict_idle():
            return
        process = ScanProcess(served, stamp)
        self._processes[served.directory] = process
        if not self._registered:
            atexit.register(self.stop_all)
            self._registered = True
        _in_background(process.start)

    def _evict_idle(self) -> bool:
        """Stop the process unused longest when unused for IDLE_SECONDS (called with the lock
        held)."""
        now = time.monotonic()
        idle = [p for p in self._processes.values() if now - p.last_used >= IDLE_SECONDS]
        if not idle:
            return False
        oldest = min(idle, key=lambda p: p.last_used)
        del self._processes[oldest.served.directory]
        _in_background(oldest.stop)
        return True

    def running(self, under: Path | None = None) -> list[ScanProcess]:
        """The processes started and not stopped (serving indexes saved under ``under``)."""
        with self._lock:
            found = list(self._processes.values())
        return [p for p in found if under is None or p.served.directory.parent == under]

    def stop_under(self, root: Path) -> None:
        """Stop the processes serving indexes saved under ``root`` (their pack closes)."""
        with self._lock:
            stopping = [p for d, p in self._processes.items() if d.parent == root]
            for process in stopping:
                del self._processes[process.served.directory]
            self._refused = {d: s for d, s in self._refused.items() if d.parent != root}
        for process in stopping:
            process.stop()

    def stop_all(self) -> None:
        with self._lock:
            stopping = list(self._processes.values())
            self._processes.clear()
        for process in stopping:
            process.stop()


def _in_background(job: Callable[[], None]) -> None:
    threading.Thread(target=job, name="prme-scan-process", daemon=True).start()


SCAN_PROCESSES = ScanProcesses()


def serve(incoming: Connection, outgoing: Connection) -> int:
    """The child: map the index named by the first message, then answer scans until the
    parent closes the pipe."""
    directory, stamp_json, parents_module = incoming.recv()
    if parents_module != __file__:  # another prme than the parent's: do not answer for it
        outgoing.send(("failed", f"this process runs {__file__}"))
        return 1
    stamp = IndexStamp.from_json(stamp_json)
    ix = index_file.load(Path(directory), stamp, ann=None)
    # (read again: a save that replaced the directory meanwhile may have mixed its files in)
    if ix is None or not ix.sparse() or index_file.read_stamp(Path(directory)) != stamp:
        outgoing.send(("failed", "the saved index is not there"))
        return 1
    complete(ix.derived_values, ix.vectors, ix.size)  # every block, before the first scan
    outgoing.send(("ready", ix.size))
    while True:
        try:
            query, scopes, k = incoming.recv()
        except EOFError:
            return 0
        found: Any = ix.top_k(ix.scores(query), ix.scope_mask(scopes), k)  # masks kept per set
        outgoing.send(found)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when this one stops
    incoming = Connection(int(argv[0]), writable=False)
    outgoing = Connection(int(argv[1]), readable=False)
    try:
        return serve(incoming, outgoing)
    except (EOFError, BrokenPipeError):
        return 0
