"""The cyclic garbage collector paused around a bulk loop, and restored as the caller had it.

Publishing builds py-lmdb's ``putmulti`` input as (key, value) tuples, four
per record, and each tuple is a GC-tracked container: every 700 of them set
off a young collection, and now and then a full one over everything the
process holds (some 112,000 objects once numba and numpy are loaded). A
collection holds the GIL, so it stops both publishing threads. Measured on a
100,000-record import: 279-285 collections, 2 of them full, took 0.14-0.16 s
of a 1.35-1.42 s publish. The tuples hold only bytes and memoryviews, never
a cycle, and reference counting frees them; an import leaves the same few
dozen unreachable objects whatever its size (tests/transfer/test_gcpause.py),
so pausing the collector loses nothing.

Pauses nest and may overlap across threads: the collector is enabled again
when the last one ends, and only if it was enabled when the first began.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_restore = False


@contextmanager
def collection_paused() -> Iterator[None]:
    """No cyclic collection inside the block; the collector's enabled state is as before afterwards."""
    global _depth, _restore
    with _lock:
        if _depth == 0:
            _restore = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _restore:
                gc.enable()
