"""The vector scan inline and on the scan thread: the same arrays, and a busy thread is not a
queue."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from support.owner_index import build_index, memory

from prme.index.owner_index import OwnerIndex
from prme.retrieval import scan as scan_module
from prme.retrieval.scan import ScanThread, finish, scan

QUERY = np.array([0.6, 0.8, 0, 0], dtype=np.float32)


def index() -> OwnerIndex:
    rng = np.random.default_rng(3)
    return build_index([memory(vector=tuple(rng.normal(size=4))) for _ in range(50)])


def same(a: Any, b: Any) -> bool:
    return all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(a, b, strict=True))


def test_threaded_scan_equals_inline_scan() -> None:
    ix = index()
    mask = ix.scope_mask(None)
    inline = scan(ix, QUERY, mask, 10)
    assert len(inline[1]) == 10 and len(inline[0]) == ix.size
    thread = ScanThread()
    started = thread.submit(ix, QUERY, mask, 10)
    assert started is not None
    assert same(finish(started, ix, QUERY, mask, 10), inline)
    assert same(finish(None, ix, QUERY, mask, 10), inline)  # never started: scanned here


def test_a_busy_thread_refuses_a_second_scan(monkeypatch: Any) -> None:
    ix = index()
    mask = ix.scope_mask(None)
    release = threading.Event()
    running = threading.Event()
    real = scan_module.scan

    def slow(*args: Any) -> Any:
        running.set()
        release.wait(10)
        return real(*args)

    monkeypatch.setattr(scan_module, "scan", slow)
    thread = ScanThread()
    first = thread.submit(ix, QUERY, mask, 5)
    assert first is not None and running.wait(10)
    assert thread.submit(ix, QUERY, mask, 5) is None  # the caller scans inline instead
    release.set()
    first.result(10)
    monkeypatch.setattr(scan_module, "scan", real)
    again = thread.submit(ix, QUERY, mask, 5)  # the slot is free once the scan is done
    for _ in range(100):
        if again is not None:
            break
        threading.Event().wait(0.01)
        again = thread.submit(ix, QUERY, mask, 5)
    assert again is not None and same(again.result(10), real(ix, QUERY, mask, 5))
