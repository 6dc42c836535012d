"""The common case of the reference node's export, parsed a slab at a time in numba.

``tarformat.TarReader`` reads one header at a time in Python: every check a
tar allows (PAX and GNU headers, base-256 numbers, signed checksums,
directories, end-of-archive blocks) at some 25 us per entry, the importer's
busiest line. Nearly every entry of a real export is the plain case: a
USTAR (or old-style) header of a regular file named by 64 hex characters,
an octal size, an unsigned checksum. :func:`scan` walks a slab of the input
over entries of exactly that kind and stops, without judging, at the first
header that is anything else (or at the slab's end); the caller hands the
rest of the input to ``TarReader``, which reads and judges it as before,
with the same messages. So the fast path decides nothing the slow path
would decide differently: it only takes what is unmistakably plain.
"""

from __future__ import annotations

import numpy as np

from chunkstore.swarm.bmt.numba_kernels import _jit
from chunkstore.swarm.constants import STAMP_SIZE
from chunkstore.swarm.tarheader import BLOCK

from .tarformat import LENGTH_PREFIX, MAX_RECORD, MIN_RECORD

MORE = 0  # stopped at the slab's end: the next entry needs more input
OTHER = 1  # stopped at a header the fast path does not take: hand over to TarReader


@_jit(inline="always")
def _hex(c: int) -> int:
    if 48 <= c <= 57:
        return c - 48
    if 97 <= c <= 102:
        return c - 87
    if 65 <= c <= 70:
        return c - 55
    return -1


@_jit(inline="always")
def _octal(buf: np.ndarray, at: int, width: int) -> int:
    """An octal field of digits then NUL/space padding; -1 for anything else (the slow path decides)."""
    value = 0
    k = 0
    while k < width and 48 <= buf[at + k] <= 55:
        value = value * 8 + (buf[at + k] - 48)
        k += 1
    if k == 0:
        return -1
    while k < width:
        if buf[at + k] != 0 and buf[at + k] != 32:
            return -1
        k += 1
    return value


@_jit
def scan(buf: np.ndarray, start: int, end: int, eof: bool, max_entries: int, starts: np.ndarray,
         lengths: np.ndarray, addresses: np.ndarray) -> tuple[int, int, int]:  # fmt: skip
    """Plain entries of ``buf[start:end]`` (``start`` at a header): ``(count, next header offset, why stopped)``.

    Entry i's content (``u32 length | data | stamp``) starts at ``starts[i]``,
    its data length is ``lengths[i]`` and the address its name spells is
    ``addresses[i]``. ``eof``: ``end`` is the end of the input, so the last
    entry's padding may be missing (the reference node's files end so).
    """
    n = 0
    at = start
    while n < max_entries:
        if at + BLOCK > end:
            return n, at, MORE
        # checksum: the unsigned byte sum with its own field counted as spaces
        total = 0
        for k in range(BLOCK):
            total += buf[at + k]
        for k in range(148, 156):
            total += 32 - buf[at + k]
        stored = _octal(buf, at + 148, 8)
        kind = buf[at + 156]
        if stored != total or not (kind == 48 or kind == 0 or kind == 55):
            return n, at, OTHER
        ustar = buf[at + 257] == 117 and buf[at + 258] == 115 and buf[at + 259] == 116 and buf[at + 260] == 97
        if buf[at + 64] != 0 or buf[at + 63] == 0 or (ustar and buf[at + 345] != 0):
            return n, at, OTHER
        size = _octal(buf, at + 124, 12)
        if size < MIN_RECORD or size > MAX_RECORD:
            return n, at, OTHER
        content = at + BLOCK
        nxt = content + size + (-size % BLOCK)
        if content + size > end or (nxt > end and not eof):
            return n, at, MORE
        data_length = (np.int64(buf[content]) << 24) | (np.int64(buf[content + 1]) << 16) | \
            (np.int64(buf[content + 2]) << 8) | np.int64(buf[content + 3])  # fmt: skip
        if size != LENGTH_PREFIX + data_length + STAMP_SIZE:
            return n, at, OTHER
        for k in range(32):
            hi = _hex(buf[at + 2 * k])
            lo = _hex(buf[at + 2 * k + 1])
            if hi < 0 or lo < 0:
                return n, at, OTHER
            addresses[n, k] = (hi << 4) | lo
        starts[n] = content
        lengths[n] = data_length
        n += 1
        at = min(nxt, end)
    return n, at, MORE


def warm_up() -> None:
    """Compile (or load) :func:`scan` for the argument types the importer uses."""
    scan(np.zeros(BLOCK, np.uint8), 0, 0, False, 1, np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros((1, 32), np.uint8))
