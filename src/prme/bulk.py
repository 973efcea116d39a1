"""Bulk work: pause the cyclic garbage collector while building many long-lived objects.

A learning snapshot parses or builds tens of thousands of small objects that all stay alive
until the report is done (a store_many batch, its nodes and rows until they are written);
every automatic collection would rescan all of them again, which makes bulk work quadratic
in the snapshot size. Pausing changes no result, only the time.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic GC for the block and restore its previous state afterwards."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
