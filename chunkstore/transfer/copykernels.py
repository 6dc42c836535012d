"""The numba loops behind :mod:`chunkstore.transfer.bytecopy` (imported only when the numba backend is live).

They live at module level, not as closures built at first use: numba keys a
closure's cache entry on its cells' contents, which differ in every process,
so a closure is compiled again (and one more entry written beside this file)
by every import, 0.5-0.7 s of the importer's core each time. Module-level
kernels are compiled once and loaded from the cache after that
(``tests/transfer/test_bytecopy.py`` checks a second process compiles nothing).
"""

from __future__ import annotations

import numpy as np

from chunkstore.swarm.bmt.numba_kernels import _jit
from chunkstore.swarm.libc import sys_memcpy


@_jit
def gather(src: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, dst: np.ndarray, at: int) -> int:
    # libc's memcpy: numba's slice assignment copies a byte at a time (measured 1.4 GB/s)
    s, d = src.ctypes.data, dst.ctypes.data
    for i in range(offsets.shape[0]):
        n = lengths[i]
        sys_memcpy(d + at, s + offsets[i], n)
        at += n
    return at


@_jit
def scatter(src: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, dst: np.ndarray, targets: np.ndarray) -> None:
    s, d = src.ctypes.data, dst.ctypes.data
    for i in range(offsets.shape[0]):
        sys_memcpy(d + targets[i], s + offsets[i], lengths[i])
