"""Chunk-encryption key streams, eight Keccak permutations at a time (numba).

Every 32-byte segment key is ``keccak(keccak(key | uint32_le(counter)))``:
two single-block hashes of short fixed-length messages. Both fit one
136-byte block, so each is one Keccak-f[1600] over a state built directly
from the message lanes plus the padding bits, and eight of them run in one
vectorised permutation (:func:`chunkstore.swarm.bmt.numba_kernels.keccak_f1600_x8`).
:mod:`chunkstore.swarm.encryption` uses this only when the accelerated
hashing backend is active and after checking it against the reference.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .bmt.numba_kernels import keccak_f1600_x8

__all__ = ["segment_keys"]

_PAD_FIRST = np.uint64(0x01)  # Keccak's padding start, placed right after the message
_PAD_LAST = np.uint64(0x80) << np.uint64(56)  # the padding's final bit, in the last lane of the block
_LAST_LANE = 16  # 136-byte rate: lane 16 holds bytes 128..135


@njit(nogil=True, cache=True)
def _segment_keys(keys: np.ndarray, counters: np.ndarray, out: np.ndarray) -> None:
    """``out[r] = keccak(keccak(keys[r] | uint32_le(counters[r])))`` as 4 uint64 lanes per row."""
    rows = keys.shape[0]
    state = np.empty(25 * 8, np.uint64)
    for base in range(0, rows, 8):
        width = min(8, rows - base)
        state[:] = 0
        for i in range(width):
            r = base + i
            for j in range(4):
                state[8 * j + i] = keys[r, j]
            # Bytes 32..35 are the counter, byte 36 starts the padding.
            state[8 * 4 + i] = np.uint64(counters[r]) | (_PAD_FIRST << np.uint64(32))
            state[8 * _LAST_LANE + i] = _PAD_LAST
        keccak_f1600_x8(state)
        # Second hash: the 32-byte digest (lanes 0..3 already in place) then padding.
        for i in range(8):
            for j in range(4, 25):
                state[8 * j + i] = 0
            state[8 * 4 + i] = _PAD_FIRST
            state[8 * _LAST_LANE + i] = _PAD_LAST
        keccak_f1600_x8(state)
        for i in range(width):
            for j in range(4):
                out[base + i, j] = state[8 * j + i]


def segment_keys(keys: np.ndarray, counters: np.ndarray) -> np.ndarray:
    """Segment keys for ``keys`` (``uint8[n, 32]``) at ``counters`` (``uint32[n]``): ``uint8[n, 32]``."""
    lanes = np.ascontiguousarray(keys, dtype=np.uint8).view("<u8").astype(np.uint64)
    ctr = np.ascontiguousarray(counters, dtype=np.uint32)
    out = np.empty((lanes.shape[0], 4), np.uint64)
    _segment_keys(lanes, ctr, out)
    return out.astype("<u8").view(np.uint8).reshape(lanes.shape[0], 32)
