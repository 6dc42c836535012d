"""Batch chunk hashing for the splitter and joiner.

A ``BatchHasher`` takes chunk datas (``span | payload``, 8..4104 bytes each)
and returns their BMT addresses in order. The default goes through
:mod:`chunkstore.swarm.bmt`, which hashes a whole batch per call with the
accelerated backend (falling back to the reference tree itself when numba is
unavailable); :func:`reference_hasher` is the plain one-at-a-time reference
the tests compare it with.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .. import bmt
from ..constants import MAX_CAC_SIZE
from ..errors import InvalidChunk

__all__ = ["BatchHasher", "batch_hasher", "reference_hasher"]

Data = bytes | bytearray | memoryview
BatchHasher = Callable[[Sequence[Data]], list[bytes]]

_ROW = MAX_CAC_SIZE


def batch_hasher(chunks: Sequence[Data]) -> list[bytes]:
    """BMT addresses of ``chunks`` in one batch call of the accelerated backend."""
    n = len(chunks)
    if n == 0:
        return []
    if n == 1:
        return [bmt.chunk_hash(chunks[0])]
    buf = np.empty((n, _ROW), np.uint8)
    lengths = np.empty(n, np.int64)
    for i, data in enumerate(chunks):
        size = len(data)
        if not bmt.SPAN_SIZE <= size <= _ROW:
            raise InvalidChunk(f"chunk {i} of the batch is {size} bytes; must be {bmt.SPAN_SIZE}..{_ROW}")
        buf[i, :size] = np.frombuffer(data, np.uint8)
        lengths[i] = size
    out = np.empty((n, bmt.SEGMENT_SIZE), np.uint8)
    bmt.bmt_hashes(buf, lengths, np.zeros(n, np.int64), b"", out)
    flat = out.tobytes()
    return [flat[i * 32 : (i + 1) * 32] for i in range(n)]


def reference_hasher(chunks: Sequence[Data]) -> list[bytes]:
    """BMT addresses with the reference implementation, one chunk at a time."""
    return [bmt.chunk_hash(data) for data in chunks]
