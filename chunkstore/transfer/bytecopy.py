"""Copying many byte ranges at once: numba loops where Python would make an object per range.

An import moves every record's data twice in its main process: out of the
ring into the run buffer, and out of the run buffer in sorted order into a
spilled run. Per record that was a memoryview slice and an assignment or a
``write`` call, some 10 us each, all in the one process that also feeds the
validating workers. :func:`gather` does a whole frame's records in one call.
Without the numba backend (``CHUNKSTORE_HASH_BACKEND=pysha3``) it falls back
to the memoryview loop.
"""

from __future__ import annotations

import numpy as np


def _gather_py(src: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, dst: np.ndarray, at: int) -> int:
    out, source = dst.data, src.data
    for o, ln in zip(offsets.tolist(), lengths.tolist(), strict=True):
        out[at : at + ln] = source[o : o + ln]
        at += ln
    return at


def _load() -> object:
    from chunkstore.swarm.bmt import backend as hashing

    if not hashing.accelerated():
        return _gather_py
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

    return gather


_gather = None


def gather(src: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, dst: np.ndarray, at: int) -> int:
    """Copy ``src[offsets[i] : offsets[i] + lengths[i]]`` for each i, back to back, into ``dst`` from ``at``.

    Returns the offset after the last byte written. ``src`` and ``dst`` are
    1-D uint8 arrays, C-contiguous; the ranges must lie inside them (checked here).
    """
    global _gather
    if not (src.flags.c_contiguous and dst.flags.c_contiguous and src.ndim == dst.ndim == 1):
        raise ValueError("gather copies between 1-D C-contiguous arrays")
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    if len(offsets):
        end = at + int(lengths.sum())
        if int(offsets.min()) < 0 or int((offsets + lengths).max()) > len(src) or at < 0 or end > len(dst):
            raise ValueError("a byte range lies outside its array")
        if int(lengths.min()) < 0:
            raise ValueError("negative length")
    if _gather is None:
        _gather = _load()
    return int(_gather(src, offsets, lengths, dst, at))  # type: ignore[operator]
