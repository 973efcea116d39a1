"""A large owner's vector scan in a process of its own (prme.index.scan_process): a real child
process maps the owner's saved index and answers exactly what this process's scan would."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.owner_index import sentences

from prme import MemoryClient
from prme.index import scan_process
from prme.index.ann import SPARSE_SAMPLE_ROWS
from prme.index.scan_process import SCAN_PROCESSES, ScanProcess
from prme.index.sparse_vectors import BUILDER
from prme.services import retrieval
from prme.storage import owner_indexes

pytestmark = pytest.mark.skipif(
    os.name != "posix" or scan_process.usable_cpus() < 2,
    reason="scan processes run on POSIX systems with two CPUs or more",
)

AT = datetime(2031, 1, 1, tzinfo=UTC)
ASKED = [
    ("aster postgres lisbon", None),
    ("kafka outage", "project"),
    ("chess ramen", "personal"),
    ("lisbon", ["project", "personal"]),
]
ROWS = SPARSE_SAMPLE_ROWS + 700  # sparse vectors: a whole chunk's block and the tail's


@pytest.fixture
def small_owners(monkeypatch: pytest.MonkeyPatch) -> None:
    """This file's owners count as large: their indexes are saved, and served by a process."""
    monkeypatch.setattr(owner_indexes, "SAVE_INDEX_ROWS", 64)
    monkeypatch.setattr(scan_process, "SCAN_PROCESS_ROWS", 1024)
    monkeypatch.setattr(retrieval, "PARALLEL_SCAN_ROWS", 1024)


def _filled(client: MemoryClient, user_id: str, texts: list[str]) -> None:
    scopes = ("project", "personal", "organisation")
    for start in range(0, len(texts), 1000):
        batch = [
            {"content": t, "scope": scopes[(start + i) % 3]}
            for i, t in enumerate(texts[start : start + 1000])
        ]
        client.store_many(batch, user_id=user_id)
    client.engine.store.owner_index(user_id)  # saved when refreshed (PostgreSQL: meanwhile)
    client.engine.store.wait_for_index_saves()


def _outcomes(client: MemoryClient, user_id: str = "alice") -> list[Any]:
    found = []
    for query, scope in ASKED:
        response = client.retrieve(
            query,
            user_id=user_id,
            scope=scope,
            limit=20,
            reference_time=AT,
            include_cross_scope=True,
        )
        found.append(
            [
                (str(c.node.id), c.composite_score, c.semantic_score, c.paths)
                for c in response.results
            ]
            + [(str(h.node_id), h.semantic_score) for h in response.cross_scope_hints]
        )
        assert response.results
    return found


def _process(client: MemoryClient) -> ScanProcess:
    """The process started for the pack's owners (one: this machine may run one more)."""
    index = client.engine.store.owner_index("alice")
    assert index is not None and index.index_dir is not None
    running = SCAN_PROCESSES.running(index.index_dir.parent)
    assert len(running) == 1
    return running[0]


def _ready(client: MemoryClient) -> ScanProcess:
    """Retrieve once (which starts the process), and wait until the process is ready."""
    _outcomes(client)
    process = _process(client)
    assert process.ready.wait(120), "the scan process did not start"
    return process


@pytest.fixture
def filled(
    make_client: Callable[..., MemoryClient], small_owners: None
) -> Callable[[], MemoryClient]:
    """A pack holding alice's saved index, reopened: the index read is its saved copy."""
    client = make_client()
    _filled(client, "alice", sentences(ROWS, seed=21))
    client.close()
    return make_client


def test_the_scan_process_gives_the_same_retrievals(
    filled: Callable[[], MemoryClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Results, scores, channels and cross-scope hints are the same whether the scan runs in
    the process, on the scan thread or inline, with and without scopes."""
    client = filled()
    process = _ready(client)
    assert process.pid is not None and not process.exited
    before = process.answered
    through_process = _outcomes(client)
    assert process.answered == before + len(ASKED)

    monkeypatch.setattr(scan_process, "SCAN_PROCESS_ROWS", 10**9)
    assert _outcomes(client) == through_process  # on the scan thread
    monkeypatch.setattr(retrieval, "PARALLEL_SCAN_ROWS", 10**9)
    assert _outcomes(client) == through_process  # inline
    assert process.answered == before + len(ASKED)


def test_a_killed_process_leaves_the_scan_to_the_retrieval(
    filled: Callable[[], MemoryClient],
) -> None:
    client = filled()
    process = _ready(client)
    expected = _outcomes(client)
    assert process.pid is not None
    os.kill(process.pid, signal.SIGKILL)
    assert _outcomes(client) == expected  # the answer never came: scanned here instead
    assert process.broken
    assert _outcomes(client) == expected
    process.stop()
    assert process.exited
    assert _process(client) is process  # not started again at once


def test_an_index_changed_since_its_save_is_not_sent_to_the_process(
    filled: Callable[[], MemoryClient],
) -> None:
    """Rows appended, or removed, make another index than the one the process maps: scanned
    here, and once it is saved, a process for the new copy replaces the old one."""
    client = filled()
    process = _ready(client)
    answered = process.answered
    new_id = client.store("lisbon aster postgres", user_id="alice", scope="project")
    client.engine.store.wait_for_index_saves()
    index = client.engine.store.owner_index("alice")
    assert index is not None and index.saved_size < index.size  # not saved again yet
    changed = _outcomes(client)
    assert process.answered == answered
    assert new_id in [row[0] for row in changed[0]]
    _filled(client, "alice", sentences(700, seed=22))
    index = client.engine.store.owner_index("alice")
    assert index is not None and index.saved_size == index.size  # saved again
    _outcomes(client)
    replacement = _process(client)
    assert replacement is not process and process.broken
    assert replacement.ready.wait(120)
    assert process.exited
    expected = _outcomes(client)
    assert replacement.answered >= len(ASKED)

    memory_id = expected[0][0][0]
    assert client.delete(memory_id, user_id="alice")
    after_delete = _outcomes(client)
    assert all(memory_id not in [row[0] for row in rows] for rows in after_delete)


def test_closing_the_pack_stops_its_process(filled: Callable[[], MemoryClient]) -> None:
    client = filled()
    process = _ready(client)
    index = client.engine.store.owner_index("alice")
    assert index is not None and index.index_dir is not None
    client.close()
    assert process.exited
    assert SCAN_PROCESSES.running(index.index_dir.parent) == []


def test_an_answer_never_read_is_read_before_the_next_scan(
    filled: Callable[[], MemoryClient],
) -> None:
    """A retrieval that fails after sending its scan leaves an answer in the pipe: the next
    scan reads it first, and gets its own."""
    client = filled()
    process = _ready(client)
    expected = _outcomes(client)
    index = client.engine.store.owner_index("alice")
    assert index is not None
    query = np.asarray(client.engine.embedder.embed(["kafka outage"]), np.float32)[0]
    answer = SCAN_PROCESSES.submit(index, query, None, 500)
    assert answer is not None
    assert SCAN_PROCESSES.submit(index, query, None, 500) is None  # busy
    del answer  # never read
    answered = process.answered
    assert _outcomes(client) == expected
    assert process.answered == answered + 1 + len(ASKED)  # the lost answer, then each scan's
    assert not process.broken


def test_a_retrieval_that_fails_gives_its_scan_up(filled: Callable[[], MemoryClient]) -> None:
    client = filled()
    process = _ready(client)
    expected = _outcomes(client)
    store: Any = client.engine.store

    def unavailable(*args: Any) -> Any:
        raise RuntimeError("the lexical search failed")

    answered = process.answered
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(store, "lexical_search", unavailable)
        with pytest.raises(RuntimeError, match="lexical search failed") as failed:
            client.retrieve("kafka outage", user_id="alice", reference_time=AT)
    # (its traceback, still held here, holds the retrieval's frames and so the scan sent)
    assert failed.value.__traceback__ is not None
    assert _outcomes(client) == expected
    assert process.answered == answered + 1 + len(ASKED)
    assert not process.broken


def test_another_owner_is_never_answered_by_this_owners_process(
    filled: Callable[[], MemoryClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    client = filled()
    _filled(client, "bob", sentences(ROWS, seed=23))
    process = _ready(client)
    bob_index = client.engine.store.owner_index("bob")
    assert bob_index is not None and bob_index.index_dir != process.served.directory
    answered = process.answered
    bobs = _outcomes(client, "bob")
    assert process.answered == answered  # alice's process serves alice's index only
    monkeypatch.setattr(scan_process, "SCAN_PROCESS_ROWS", 10**9)
    assert _outcomes(client, "bob") == bobs
    BUILDER.drain()


SERVE_THEN_WAIT = """
import sys, time
from prme import MemoryClient
from prme.config import EmbeddingConfig, PRMEConfig
from prme.index import scan_process
from prme.storage import owner_indexes
owner_indexes.SAVE_INDEX_ROWS, scan_process.SCAN_PROCESS_ROWS = 64, 1024
client = MemoryClient(sys.argv[1], config=PRMEConfig(embedding=EmbeddingConfig(provider="hash")))
client.retrieve("kafka outage", user_id="alice")
(process,) = scan_process.SCAN_PROCESSES.running()
assert process.ready.wait(120)
print(process.pid, flush=True)
time.sleep(600)
"""


def _exited(pid: int) -> bool:
    """Whether ``pid`` has exited (gone, or a zombie its new parent has not reaped yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


@pytest.mark.sqlite_only  # the pack is opened by path in another process
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process states from /proc")
def test_a_scan_process_exits_when_its_parent_is_killed(
    filled: Callable[[], MemoryClient], pack_path: Path
) -> None:
    import subprocess
    import sys
    import time

    with subprocess.Popen(
        [sys.executable, "-c", SERVE_THEN_WAIT, str(pack_path)], stdout=subprocess.PIPE, text=True
    ) as parent:
        try:
            assert parent.stdout is not None
            child = int(parent.stdout.readline())
            assert not _exited(child)
        finally:
            parent.kill()
    deadline = time.monotonic() + 30
    while not _exited(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _exited(child)  # it read the end of its pipe


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads descriptors from /proc")
def test_the_scan_process_never_writes_to_the_parents_stdout(
    filled: Callable[[], MemoryClient],
) -> None:
    """An MCP server over stdio speaks on its stdout: the child's is /dev/null, its stdin too,
    and its stderr is the parent's (where a failure's traceback belongs)."""
    client = filled()
    process = _ready(client)
    fds = Path(f"/proc/{process.pid}/fd")
    assert os.readlink(fds / "0") == os.readlink(fds / "1") == os.devnull
    assert os.readlink(fds / "2") == os.readlink(f"/proc/{os.getpid()}/fd/2")


@pytest.mark.parametrize("stopped_at", ["before the spawn", "after the spawn"])
def test_a_process_stopped_while_it_starts_is_reaped_and_never_ready(
    filled: Callable[[], MemoryClient], monkeypatch: pytest.MonkeyPatch, stopped_at: str
) -> None:
    """A pack closed while its process starts: a child spawned after the stop, or spawned and
    not ready yet, is stopped and reaped by the starting thread; it never counts as ready."""
    import threading

    from prme.index import index_file
    from prme.index.scan_process import Served

    client = filled()
    index = client.engine.store.owner_index("alice")
    assert index is not None and index.index_dir is not None
    served = Served.of(index)
    stamp = index_file.read_stamp(index.index_dir)
    assert served is not None and stamp is not None and served.stamped(stamp)
    reached, stopped = threading.Event(), threading.Event()
    spawn = ScanProcess._spawn

    def spawn_around_the_stop(self: ScanProcess) -> None:
        if stopped_at == "after the spawn":
            spawn(self)
        reached.set()
        assert stopped.wait(60)
        if stopped_at == "before the spawn":
            spawn(self)

    monkeypatch.setattr(ScanProcess, "_spawn", spawn_around_the_stop)
    process = ScanProcess(served, stamp)
    starting = threading.Thread(target=process.start)
    starting.start()
    assert reached.wait(60)
    process.stop()
    stopped.set()
    starting.join(60)
    assert not starting.is_alive()
    assert process.pid is not None and process.exited
    assert process.broken and not process.ready.is_set()
