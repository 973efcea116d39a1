"""A server stopped with SIGTERM closes its pack, as one stopped with Ctrl-C does.

uvicorn stops gracefully on SIGTERM and then raises the signal again once its own handler is
gone. With the default handler in place that kills the process before the ``with`` around the
server exits: the pack is never closed, a background index save is cut short, and a PostgreSQL
store's private index directory stays behind. The handler installed here turns that second
SIGTERM into ``SystemExit(0)``, so the ``with`` blocks unwind. (A stdio MCP server stops at the
end of its input instead.)
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


def _exit(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)  # a requested stop is a clean one (what uvicorn before 0.29 returned)


@contextmanager
def sigterm_exits() -> Iterator[None]:
    """Within the block, SIGTERM raises ``SystemExit(0)`` in the main thread (elsewhere, where
    no handler can be installed, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
