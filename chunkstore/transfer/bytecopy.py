"""Copying many byte ranges at once: numba loops where Python would make an object per range.

An import moves every record's data twice in its main process: out of the
ring into the run buffer, and out of the run buffer in sorted order into a
spilled run. Per record that was a memoryview slice and an assignment or a
``write`` call, some 10 us each, all in the one process that also feeds the
validating workers. :func:`gather` does a whole frame's records in one call.
:func:`scatter` is its mirror for the validating workers, which copy each
record into a row of its own for the batch hashes. Without the numba backend
(``CHUNKSTORE_HASH_BACKEND=pysha3``) both fall back to memoryview loops.
"""

from __future__ import annotations

import numpy as np


def _gather_py(src: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, dst: np.ndarray, at: int) -> int:
    out, source = dst.data, src.data
    for o, ln in zip(offsets.tolist(), lengths.tolist(), strict=True):
        out[at : at + ln] = source[o : o + ln]
        at += ln
    return at


def _scatter_py(src: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, dst: np.ndarray, targets: np.ndarray) -> None:
    out, source = dst.data, src.data
    for o, ln, t in zip(offsets.tolist(), lengths.tolist(), targets.tolist(), strict=True):
        out[t : t + ln] = source[o : o + ln]


def _load() -> tuple[object, object]:
    from chunkstore.swarm.bmt import backend as hashing

    if not hashing.accelerated():
        return _gather_py, _scatter_py
    from . import copykernels

    return copykernels.gather, copykernels.scatter


_kernels: tuple[object, object] | None = None


def _check_ranges(array: np.ndarray, offsets: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ranges as int64 arrays; ``ValueError`` unless each lies inside ``array``."""
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    if offsets.shape != lengths.shape or offsets.ndim != 1:
        raise ValueError("one offset and one length per range")
    if len(offsets):
        if int(lengths.min()) < 0:
            raise ValueError("negative length")
        if int(offsets.min()) < 0 or int((offsets + lengths).max()) > len(array):
            raise ValueError("a byte range lies outside its array")
    return offsets, lengths


def _copy_kernels() -> tuple[object, object]:
    global _kernels
    if _kernels is None:
        _kernels = _load()
    return _kernels


def gather(src: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, dst: np.ndarray, at: int) -> int:
    """Copy ``src[offsets[i] : offsets[i] + lengths[i]]`` for each i, back to back, into ``dst`` from ``at``.

    Returns the offset after the last byte written. ``src`` and ``dst`` are
    1-D uint8 arrays, C-contiguous; the ranges must lie inside them (checked here).
    """
    if not (src.flags.c_contiguous and dst.flags.c_contiguous and src.ndim == dst.ndim == 1):
        raise ValueError("gather copies between 1-D C-contiguous arrays")
    offsets, lengths = _check_ranges(src, offsets, lengths)
    if len(offsets) and (at < 0 or at + int(lengths.sum()) > len(dst)):
        raise ValueError("a byte range lies outside its array")
    return int(_copy_kernels()[0](src, offsets, lengths, dst, at))  # type: ignore[operator]


def scatter(src: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, dst: np.ndarray, targets: np.ndarray) -> None:
    """Copy ``src[offsets[i] : offsets[i] + lengths[i]]`` to ``dst[targets[i]:]`` for each i, in order.

    ``src`` and ``dst`` are 1-D uint8 arrays, C-contiguous; every range must
    lie inside its array (checked here). Where target ranges overlap, the
    later copy wins.
    """
    if not (src.flags.c_contiguous and dst.flags.c_contiguous and src.ndim == dst.ndim == 1):
        raise ValueError("scatter copies between 1-D C-contiguous arrays")
    offsets, lengths = _check_ranges(src, offsets, lengths)
    targets = np.ascontiguousarray(targets, dtype=np.int64)
    if targets.shape != offsets.shape:
        raise ValueError("one target per range")
    _check_ranges(dst, targets, lengths)
    _copy_kernels()[1](src, offsets, lengths, dst, targets)  # type: ignore[operator]
