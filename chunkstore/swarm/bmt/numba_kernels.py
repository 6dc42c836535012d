"""Numba kernels: Keccak-f[1600] over uint64 lanes and a batched (prefixed) BMT.

This is the fast path behind :mod:`.backend`; :mod:`.reference`
(safe-pysha3) is the reference it is tested against. Everything here is
original Keccak-256 (pad byte 0x01, final bit 0x80, rate 136 bytes).

Why it looks the way it does:

* The permutation keeps the 25 lanes in local scalars for the 24 rounds so
  LLVM can hold them in registers; arrays are only touched on entry and exit.
* A BMT node input is ``prefix | 64 bytes`` and the span step is
  ``prefix | span | root``. Whole 136-byte blocks of the prefix are absorbed
  once per prefix (:class:`PrefixContext`); the rest of the prefix and the
  padding are pre-XORed into the first block's lanes, so hashing a node costs
  one copy of 25 lanes, 8 XORs (9 with a shifted prefix) and the permutation.
  A tail of at most 71 prefix bytes keeps the node input in one block; longer
  tails take a second block.
* Tree nodes stay as little-endian uint64 words from the leaves to the root:
  a Keccak-256 digest is the first 4 lanes of the state, byte for byte, on a
  little-endian host (the facade refuses this module on big-endian hosts).
* Wide tree levels (up to 64 independent pairs) go 8 pairs at a time through
  :func:`keccak_f1600_x8`, the same round code looped over 8 instances so
  LLVM vectorises it; that costs ~2 scalar permutations for 8 and makes a
  full chunk ~3x cheaper than one keccak at a time. Narrow levels, the span
  step and prefixes whose tail needs two blocks use the scalar permutation.
* Subtrees made only of zero padding are not hashed; their value comes from
  the per-prefix zero-hash table.
* Kernels are ``nogil`` so threads can share them, and ``cache=True`` so
  worker processes load machine code instead of recompiling; when no cache
  directory is writable numba refuses ``cache=True`` and we compile uncached.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numba import njit

from ..constants import BMT_DEPTH, CHUNK_SIZE, HASH_SIZE, SPAN_SIZE

log = logging.getLogger(__name__)

__all__ = [
    "RATE",
    "PrefixContext",
    "prefix_context",
    "keccak_f1600",
    "keccak_f1600_x8",
    "keccak256_rows",
    "bmt_batch",
    "permutation_loop",
    "permutation_loop_x8",
    "warm_up",
]

RATE = 136  # bytes absorbed per permutation (Keccak-256: 1600 - 2 * 256 bits)
RATE_LANES = RATE // 8  # 17
STATE_LANES = 25
TREE_DEPTH = BMT_DEPTH
TREE_WORDS = CHUNK_SIZE // 8  # the zero-padded payload as uint64 words
NODE_BYTES = 2 * HASH_SIZE  # a BMT node input after the prefix: left | right
SPAN_MSG_BYTES = SPAN_SIZE + HASH_SIZE  # span step input after the prefix: span(8) | root(32)
WIDE = 8  # instances per keccak_f1600_x8 call
# A level goes through the 8-way permutation while at least this many pairs
# are left: one x8 call costs about as much as 2 scalar permutations.
WIDE_MIN = 2

_RC = np.array(
    [
        0x0000000000000001, 0x0000000000008082, 0x800000000000808A,
        0x8000000080008000, 0x000000000000808B, 0x0000000080000001,
        0x8000000080008081, 0x8000000000008009, 0x000000000000008A,
        0x0000000000000088, 0x0000000080008009, 0x000000008000000A,
        0x000000008000808B, 0x800000000000008B, 0x8000000000008089,
        0x8000000000008003, 0x8000000000008002, 0x8000000000000080,
        0x000000000000800A, 0x800000008000000A, 0x8000000080008081,
        0x8000000000008080, 0x0000000080000001, 0x8000000080008008,
    ],
    dtype=np.uint64,
)  # fmt: skip

_U64 = np.uint64(64)
_cache_warned = False


def _jit(fn: Any = None, **opts: Any) -> Any:
    """``njit(nogil=True, cache=True)``, uncached if numba finds no writable cache dir.

    numba raises at decoration time when neither ``__pycache__`` next to this
    file nor the user-wide cache dir is writable (read-only install, locked
    HOME); compiling without a cache is slower to start but still correct.
    """
    if fn is None:
        return lambda f: _jit(f, **opts)
    if fn.__code__.co_freevars:
        # numba keys a closure's cache entry on its cells, which differ per process: it would compile
        # again, and write one more cache file, in every process that used it.
        raise TypeError(f"kernel {fn.__qualname__} is a closure over {fn.__code__.co_freevars}: define it at module level")
    try:
        return njit(nogil=True, cache=True, **opts)(fn)
    except RuntimeError as exc:  # "cannot cache function ...: no locator available"
        global _cache_warned
        # One warning per process is enough; every kernel hits the same wall.
        log.log(
            logging.DEBUG if _cache_warned else logging.WARNING, "numba cache unavailable, compiling uncached: %s", exc
        )
        _cache_warned = True
        return njit(nogil=True, cache=False, **opts)(fn)


def caching() -> bool:
    """Whether the kernels defined so far go to numba's cache (False: compiled again in every process)."""
    return not _cache_warned


@_jit(inline="always")
def _rotl(x: np.uint64, n: int) -> np.uint64:
    # Always called with a literal n in 1..63; inlined and folded to a rotate.
    return (x << np.uint64(n)) | (x >> np.uint64(64 - n))


@_jit
def keccak_f1600(s: np.ndarray) -> None:
    """Keccak-f[1600] in place on ``s`` (uint64[25], lane x + 5y)."""
    a00, a10, a20, a30, a40 = s[0], s[1], s[2], s[3], s[4]
    a01, a11, a21, a31, a41 = s[5], s[6], s[7], s[8], s[9]
    a02, a12, a22, a32, a42 = s[10], s[11], s[12], s[13], s[14]
    a03, a13, a23, a33, a43 = s[15], s[16], s[17], s[18], s[19]
    a04, a14, a24, a34, a44 = s[20], s[21], s[22], s[23], s[24]
    for rnd in range(24):
        # theta: column parities, folded into each lane below
        c0 = a00 ^ a01 ^ a02 ^ a03 ^ a04
        c1 = a10 ^ a11 ^ a12 ^ a13 ^ a14
        c2 = a20 ^ a21 ^ a22 ^ a23 ^ a24
        c3 = a30 ^ a31 ^ a32 ^ a33 ^ a34
        c4 = a40 ^ a41 ^ a42 ^ a43 ^ a44
        d0 = c4 ^ _rotl(c1, 1)
        d1 = c0 ^ _rotl(c2, 1)
        d2 = c1 ^ _rotl(c3, 1)
        d3 = c2 ^ _rotl(c4, 1)
        d4 = c3 ^ _rotl(c0, 1)
        # rho + pi: b[y, 2x+3y] = rot(a[x, y] ^ d[x], R[x][y])
        b00 = a00 ^ d0
        b13 = _rotl(a01 ^ d0, 36)
        b21 = _rotl(a02 ^ d0, 3)
        b34 = _rotl(a03 ^ d0, 41)
        b42 = _rotl(a04 ^ d0, 18)
        b02 = _rotl(a10 ^ d1, 1)
        b10 = _rotl(a11 ^ d1, 44)
        b23 = _rotl(a12 ^ d1, 10)
        b31 = _rotl(a13 ^ d1, 45)
        b44 = _rotl(a14 ^ d1, 2)
        b04 = _rotl(a20 ^ d2, 62)
        b12 = _rotl(a21 ^ d2, 6)
        b20 = _rotl(a22 ^ d2, 43)
        b33 = _rotl(a23 ^ d2, 15)
        b41 = _rotl(a24 ^ d2, 61)
        b01 = _rotl(a30 ^ d3, 28)
        b14 = _rotl(a31 ^ d3, 55)
        b22 = _rotl(a32 ^ d3, 25)
        b30 = _rotl(a33 ^ d3, 21)
        b43 = _rotl(a34 ^ d3, 56)
        b03 = _rotl(a40 ^ d4, 27)
        b11 = _rotl(a41 ^ d4, 20)
        b24 = _rotl(a42 ^ d4, 39)
        b32 = _rotl(a43 ^ d4, 8)
        b40 = _rotl(a44 ^ d4, 14)
        # chi (+ iota on lane 0)
        a00 = b00 ^ (~b10 & b20)
        a10 = b10 ^ (~b20 & b30)
        a20 = b20 ^ (~b30 & b40)
        a30 = b30 ^ (~b40 & b00)
        a40 = b40 ^ (~b00 & b10)
        a01 = b01 ^ (~b11 & b21)
        a11 = b11 ^ (~b21 & b31)
        a21 = b21 ^ (~b31 & b41)
        a31 = b31 ^ (~b41 & b01)
        a41 = b41 ^ (~b01 & b11)
        a02 = b02 ^ (~b12 & b22)
        a12 = b12 ^ (~b22 & b32)
        a22 = b22 ^ (~b32 & b42)
        a32 = b32 ^ (~b42 & b02)
        a42 = b42 ^ (~b02 & b12)
        a03 = b03 ^ (~b13 & b23)
        a13 = b13 ^ (~b23 & b33)
        a23 = b23 ^ (~b33 & b43)
        a33 = b33 ^ (~b43 & b03)
        a43 = b43 ^ (~b03 & b13)
        a04 = b04 ^ (~b14 & b24)
        a14 = b14 ^ (~b24 & b34)
        a24 = b24 ^ (~b34 & b44)
        a34 = b34 ^ (~b44 & b04)
        a44 = b44 ^ (~b04 & b14)
        a00 ^= _RC[rnd]
    s[0], s[1], s[2], s[3], s[4] = a00, a10, a20, a30, a40
    s[5], s[6], s[7], s[8], s[9] = a01, a11, a21, a31, a41
    s[10], s[11], s[12], s[13], s[14] = a02, a12, a22, a32, a42
    s[15], s[16], s[17], s[18], s[19] = a03, a13, a23, a33, a43
    s[20], s[21], s[22], s[23], s[24] = a04, a14, a24, a34, a44


@_jit
def keccak_f1600_x8(s: np.ndarray) -> None:
    """Eight independent Keccak-f[1600] in place; ``s`` is uint64[25 * 8], lane j of instance i at s[8j + i].

    Same round code as :func:`keccak_f1600`, but each round runs over the 8
    instances in an inner loop whose iterations share nothing, so LLVM turns
    the loop into vector code: one 512-bit register per lane with AVX-512
    (vprolq rotates, vpternlogq for chi and theta), pairs of registers with
    AVX2 or SSE2. It costs ~3 scalar permutations and does 8.
    """
    for rnd in range(24):
        for i in range(8):
            a00, a10, a20, a30, a40 = s[i], s[8 + i], s[16 + i], s[24 + i], s[32 + i]
            a01, a11, a21, a31, a41 = s[40 + i], s[48 + i], s[56 + i], s[64 + i], s[72 + i]
            a02, a12, a22, a32, a42 = s[80 + i], s[88 + i], s[96 + i], s[104 + i], s[112 + i]
            a03, a13, a23, a33, a43 = s[120 + i], s[128 + i], s[136 + i], s[144 + i], s[152 + i]
            a04, a14, a24, a34, a44 = s[160 + i], s[168 + i], s[176 + i], s[184 + i], s[192 + i]
            # theta: column parities, folded into each lane below
            c0 = a00 ^ a01 ^ a02 ^ a03 ^ a04
            c1 = a10 ^ a11 ^ a12 ^ a13 ^ a14
            c2 = a20 ^ a21 ^ a22 ^ a23 ^ a24
            c3 = a30 ^ a31 ^ a32 ^ a33 ^ a34
            c4 = a40 ^ a41 ^ a42 ^ a43 ^ a44
            d0 = c4 ^ _rotl(c1, 1)
            d1 = c0 ^ _rotl(c2, 1)
            d2 = c1 ^ _rotl(c3, 1)
            d3 = c2 ^ _rotl(c4, 1)
            d4 = c3 ^ _rotl(c0, 1)
            # rho + pi: b[y, 2x+3y] = rot(a[x, y] ^ d[x], R[x][y])
            b00 = a00 ^ d0
            b13 = _rotl(a01 ^ d0, 36)
            b21 = _rotl(a02 ^ d0, 3)
            b34 = _rotl(a03 ^ d0, 41)
            b42 = _rotl(a04 ^ d0, 18)
            b02 = _rotl(a10 ^ d1, 1)
            b10 = _rotl(a11 ^ d1, 44)
            b23 = _rotl(a12 ^ d1, 10)
            b31 = _rotl(a13 ^ d1, 45)
            b44 = _rotl(a14 ^ d1, 2)
            b04 = _rotl(a20 ^ d2, 62)
            b12 = _rotl(a21 ^ d2, 6)
            b20 = _rotl(a22 ^ d2, 43)
            b33 = _rotl(a23 ^ d2, 15)
            b41 = _rotl(a24 ^ d2, 61)
            b01 = _rotl(a30 ^ d3, 28)
            b14 = _rotl(a31 ^ d3, 55)
            b22 = _rotl(a32 ^ d3, 25)
            b30 = _rotl(a33 ^ d3, 21)
            b43 = _rotl(a34 ^ d3, 56)
            b03 = _rotl(a40 ^ d4, 27)
            b11 = _rotl(a41 ^ d4, 20)
            b24 = _rotl(a42 ^ d4, 39)
            b32 = _rotl(a43 ^ d4, 8)
            b40 = _rotl(a44 ^ d4, 14)
            # chi (+ iota on lane 0)
            a00 = b00 ^ (~b10 & b20)
            a10 = b10 ^ (~b20 & b30)
            a20 = b20 ^ (~b30 & b40)
            a30 = b30 ^ (~b40 & b00)
            a40 = b40 ^ (~b00 & b10)
            a01 = b01 ^ (~b11 & b21)
            a11 = b11 ^ (~b21 & b31)
            a21 = b21 ^ (~b31 & b41)
            a31 = b31 ^ (~b41 & b01)
            a41 = b41 ^ (~b01 & b11)
            a02 = b02 ^ (~b12 & b22)
            a12 = b12 ^ (~b22 & b32)
            a22 = b22 ^ (~b32 & b42)
            a32 = b32 ^ (~b42 & b02)
            a42 = b42 ^ (~b02 & b12)
            a03 = b03 ^ (~b13 & b23)
            a13 = b13 ^ (~b23 & b33)
            a23 = b23 ^ (~b33 & b43)
            a33 = b33 ^ (~b43 & b03)
            a43 = b43 ^ (~b03 & b13)
            a04 = b04 ^ (~b14 & b24)
            a14 = b14 ^ (~b24 & b34)
            a24 = b24 ^ (~b34 & b44)
            a34 = b34 ^ (~b44 & b04)
            a44 = b44 ^ (~b04 & b14)
            a00 ^= _RC[rnd]
            s[i], s[8 + i], s[16 + i], s[24 + i], s[32 + i] = a00, a10, a20, a30, a40
            s[40 + i], s[48 + i], s[56 + i], s[64 + i], s[72 + i] = a01, a11, a21, a31, a41
            s[80 + i], s[88 + i], s[96 + i], s[104 + i], s[112 + i] = a02, a12, a22, a32, a42
            s[120 + i], s[128 + i], s[136 + i], s[144 + i], s[152 + i] = a03, a13, a23, a33, a43
            s[160 + i], s[168 + i], s[176 + i], s[184 + i], s[192 + i] = a04, a14, a24, a34, a44


@_jit
def permutation_loop(state: np.ndarray, count: int) -> None:
    """Apply Keccak-f[1600] ``count`` times to ``state``; a benchmark probe."""
    for _ in range(count):
        keccak_f1600(state)


@_jit
def permutation_loop_x8(state: np.ndarray, count: int) -> None:
    """Apply :func:`keccak_f1600_x8` ``count`` times to ``state`` (uint64[200]); a benchmark probe."""
    for _ in range(count):
        keccak_f1600_x8(state)


@_jit
def _absorb_blocks(state: np.ndarray, words: np.ndarray) -> None:
    """Absorb whole 136-byte blocks given as uint64 words (17 per block)."""
    for b in range(words.shape[0] // RATE_LANES):
        for j in range(RATE_LANES):
            state[j] ^= words[b * RATE_LANES + j]
        keccak_f1600(state)


@_jit(inline="always")
def _xor_shifted(dst: np.ndarray, q: int, sh: np.uint64, msg: np.ndarray, moff: int, nwords: int) -> None:
    # Message words land at byte offset 8q + sh/8 of dst; with a prefix tail
    # that is not a multiple of 8 bytes each word straddles two lanes.
    if sh == 0:
        for k in range(nwords):
            dst[q + k] ^= msg[moff + k]
    else:
        shr = _U64 - sh
        for k in range(nwords):
            w = msg[moff + k]
            dst[q + k] ^= w << sh
            dst[q + k + 1] ^= w >> shr


@_jit(inline="always")
def _hash_words(
    init: np.ndarray,
    tail: np.ndarray,
    blocks: int,
    r: int,
    msg: np.ndarray,
    moff: int,
    nwords: int,
    state: np.ndarray,
    lanes: np.ndarray,
) -> None:
    """Keccak-256 of ``prefix | msg[moff:moff + nwords]``; the digest is ``state[0:4]``.

    ``init`` is the state after the prefix's whole blocks XOR the first
    block's template (prefix tail, and the padding when ``blocks == 1``);
    ``tail`` is the second block's template (padding only); ``r`` is the
    prefix tail length, i.e. the message's byte offset in the first block.
    """
    for j in range(STATE_LANES):
        state[j] = init[j]
    q = r >> 3
    sh = np.uint64((r & 7) * 8)
    if blocks == 1:
        # The hot path (prefix tail <= 71 bytes): XOR straight into the state.
        _xor_shifted(state, q, sh, msg, moff, nwords)
        keccak_f1600(state)
        return
    # The message straddles two blocks: lay it out over 34 lanes first.
    for j in range(2 * RATE_LANES):
        lanes[j] = 0
    _xor_shifted(lanes, q, sh, msg, moff, nwords)
    for j in range(RATE_LANES):
        state[j] ^= lanes[j]
    keccak_f1600(state)
    for j in range(RATE_LANES):
        state[j] ^= tail[j] ^ lanes[RATE_LANES + j]
    keccak_f1600(state)


@_jit
def _zero_hash_table(init: np.ndarray, tail: np.ndarray, blocks: int, r: int, zeros: np.ndarray) -> None:
    """zeros[k] = hash of an all-zero subtree of height k (zeros[0] = zero segment)."""
    state = np.empty(STATE_LANES, np.uint64)
    lanes = np.empty(2 * RATE_LANES, np.uint64)
    msg = np.zeros(8, np.uint64)
    zeros[0, :] = 0
    for k in range(1, TREE_DEPTH + 1):
        msg[0:4] = zeros[k - 1]
        msg[4:8] = zeros[k - 1]
        _hash_words(init, tail, blocks, r, msg, 0, 8, state, lanes)
        zeros[k, :] = state[0:4]


@_jit
def _hash_pairs_x8(init: np.ndarray, r: int, tree: np.ndarray, first: int, count: int, s: np.ndarray) -> None:
    """Nodes ``first .. first + count - 1`` (count <= 8) of the next level from their pairs in ``tree``.

    One-block inputs only (prefix tail <= 71 bytes). Every state lane is
    written exactly once, by a loop over the 8 instances that LLVM vectorises:
    scalar read-modify-writes here would make the permutation's vector loads
    stall on store forwarding (measured: +40% per call). So all 8 instances
    are filled even when ``count < 8``; the extra ones read pairs that are
    still inside ``tree`` (groups start at multiples of 8, and a level has at
    most 64 pairs) and their results are never stored.
    """
    q = r >> 3
    sh = np.uint64((r & 7) * 8)
    for j in range(q):  # lanes holding only prefix bytes
        v = init[j]
        for i in range(WIDE):
            s[WIDE * j + i] = v
    if sh == 0:
        for k in range(8):
            v = init[q + k]
            for i in range(WIDE):
                s[WIDE * (q + k) + i] = v ^ tree[8 * (first + i) + k]
        rest = q + 8
    else:
        # Each message word straddles two lanes when the prefix tail is not
        # a multiple of 8 bytes.
        shr = _U64 - sh
        v = init[q]
        for i in range(WIDE):
            s[WIDE * q + i] = v ^ (tree[8 * (first + i)] << sh)
        for k in range(1, 8):
            v = init[q + k]
            for i in range(WIDE):
                pair = 8 * (first + i)
                s[WIDE * (q + k) + i] = v ^ (tree[pair + k] << sh) ^ (tree[pair + k - 1] >> shr)
        v = init[q + 8]
        for i in range(WIDE):
            s[WIDE * (q + 8) + i] = v ^ (tree[8 * (first + i) + 7] >> shr)
        rest = q + 9
    for j in range(rest, STATE_LANES):  # padding and capacity lanes
        v = init[j]
        for i in range(WIDE):
            s[WIDE * j + i] = v
    keccak_f1600_x8(s)
    for i in range(count):
        node = 4 * (first + i)
        for k in range(4):
            tree[node + k] = s[WIDE * k + i]


@_jit
def _bmt_root(
    tree: np.ndarray,
    n: int,
    init: np.ndarray,
    tail: np.ndarray,
    blocks: int,
    r: int,
    zeros: np.ndarray,
    wide: bool,
    state: np.ndarray,
    lanes: np.ndarray,
    wstate: np.ndarray,
) -> None:
    """BMT root of the ``n``-byte payload whose leaves are in ``tree``; root -> tree[0:4].

    Only the first ceil(n / 32) leaves are read (the caller zeroes the tail
    of the last one). Each level is hashed in place: pair j (words 8j..8j+7)
    becomes node j (words 4j..4j+3); a node is written only after every pair
    at or below its index has been read. Pairs made only of padding are never
    hashed: the levels above them are the precomputed zero hashes, which is
    what makes small chunks cheap. With ``wide`` (one-block inputs only),
    pairs go 8 at a time through :func:`keccak_f1600_x8` while at least
    ``WIDE_MIN`` are left; the rest one by one.
    """
    used = (n + 31) >> 5  # nodes at the current level that can differ from zero
    if used == 0:
        tree[0:4] = zeros[TREE_DEPTH]
        return
    for level in range(1, TREE_DEPTH + 1):
        if used & 1:
            # The last used node's sibling is padding: its hash is known.
            tree[4 * used : 4 * used + 4] = zeros[level - 1]
        pairs = (used + 1) >> 1
        j = 0
        if wide:
            while pairs - j >= WIDE_MIN:
                count = min(WIDE, pairs - j)
                _hash_pairs_x8(init, r, tree, j, count, wstate)
                j += count
        while j < pairs:
            _hash_words(init, tail, blocks, r, tree, 8 * j, 8, state, lanes)
            tree[4 * j] = state[0]
            tree[4 * j + 1] = state[1]
            tree[4 * j + 2] = state[2]
            tree[4 * j + 3] = state[3]
            j += 1
        used = pairs


@_jit
def bmt_batch(
    buf: np.ndarray,
    lengths: np.ndarray,
    offsets: np.ndarray,
    is_soc: np.ndarray,
    soc_addresses: np.ndarray,
    node_init: np.ndarray,
    node_tail: np.ndarray,
    node_blocks: int,
    span_init: np.ndarray,
    span_tail: np.ndarray,
    span_blocks: int,
    r: int,
    zeros: np.ndarray,
    plain_init: np.ndarray,
    wide: bool,
    out: np.ndarray,
) -> None:
    """Prefixed BMT hash (and SOC transform) of each row; inputs already validated.

    Row i: ``span | payload`` starts at ``offsets[i]`` and ends at
    ``lengths[i]``; bytes after it are never read. If ``is_soc[i]``, the
    result is ``keccak(soc_addresses[i] | bmt)`` (plain, ``plain_init``).
    ``wide`` allows the 8-way permutation for wide tree levels; ``False``
    keeps everything on the scalar permutation (for tests and benchmarks).
    """
    tree = np.empty(TREE_WORDS, np.uint64)
    tree8 = tree.view(np.uint8)
    state = np.empty(STATE_LANES, np.uint64)
    lanes = np.empty(2 * RATE_LANES, np.uint64)
    msg = np.empty(8, np.uint64)
    msg8 = msg.view(np.uint8)
    dig = np.empty(4, np.uint64)
    dig8 = dig.view(np.uint8)
    wstate = np.empty(STATE_LANES * WIDE, np.uint64)
    use_wide = wide and node_blocks == 1
    for i in range(lengths.shape[0]):
        off = offsets[i]
        start = off + 8
        n = lengths[i] - start
        row = buf[i]
        # Copy the payload in, zeroing only the tail of the last leaf: stale
        # bytes past the length never reach a hashed node.
        for j in range(n):
            tree8[j] = row[start + j]
        for j in range(n, ((n + 31) >> 5) << 5):
            tree8[j] = 0
        _bmt_root(tree, n, node_init, node_tail, node_blocks, r, zeros, use_wide, state, lanes, wstate)
        for j in range(8):
            msg8[j] = row[off + j]
        msg[1:5] = tree[0:4]
        _hash_words(span_init, span_tail, span_blocks, r, msg, 0, 5, state, lanes)
        if is_soc[i]:
            for j in range(32):
                msg8[j] = soc_addresses[i, j]
            msg[4:8] = state[0:4]
            _hash_words(plain_init, plain_init, 1, 0, msg, 0, 8, state, lanes)
        dig[:] = state[0:4]
        for j in range(32):
            out[i, j] = dig8[j]


@_jit
def keccak256_rows(buf: np.ndarray, lengths: np.ndarray, out: np.ndarray) -> None:
    """out[i] = Keccak-256 of buf[i, :lengths[i]], any length (multi-block)."""
    state = np.empty(STATE_LANES, np.uint64)
    blk = np.empty(RATE_LANES, np.uint64)
    blk8 = blk.view(np.uint8)
    dig = np.empty(4, np.uint64)
    dig8 = dig.view(np.uint8)
    for i in range(lengths.shape[0]):
        length = lengths[i]
        row = buf[i]
        state[:] = 0
        pos = 0
        while length - pos >= RATE:
            for j in range(RATE):
                blk8[j] = row[pos + j]
            for j in range(RATE_LANES):
                state[j] ^= blk[j]
            keccak_f1600(state)
            pos += RATE
        rem = length - pos
        for j in range(rem):
            blk8[j] = row[pos + j]
        for j in range(rem, RATE):
            blk8[j] = 0
        blk8[rem] ^= 0x01  # original Keccak padding, not SHA-3's 0x06
        blk8[RATE - 1] ^= 0x80
        for j in range(RATE_LANES):
            state[j] ^= blk[j]
        keccak_f1600(state)
        dig[:] = state[0:4]
        for j in range(32):
            out[i, j] = dig8[j]


def _template(prefix_tail: bytes, msg_len: int) -> tuple[np.ndarray, int]:
    """Lanes of the final block(s) of ``prefix_tail | <msg_len bytes> | padding`` with the message zeroed."""
    total = len(prefix_tail) + msg_len
    blocks = total // RATE + 1  # padding needs at least one byte
    raw = bytearray(blocks * RATE)
    raw[: len(prefix_tail)] = prefix_tail
    raw[total] ^= 0x01
    raw[-1] ^= 0x80
    lanes = np.frombuffer(bytes(raw), dtype="<u8").astype(np.uint64)
    return lanes, blocks


@dataclass(frozen=True, eq=False)
class PrefixContext:
    """Everything the kernels need to hash under one prefix, computed once per prefix."""

    prefix: bytes
    tail_len: int  # prefix bytes after its whole blocks = message offset in the block
    node_init: np.ndarray  # uint64[25]
    node_tail: np.ndarray  # uint64[17], second-block padding (zeros if one block)
    node_blocks: int
    span_init: np.ndarray
    span_tail: np.ndarray
    span_blocks: int
    zeros: np.ndarray  # uint64[8, 4]: zero-subtree hashes, level 0..7


def _init_and_tail(base: np.ndarray, lanes: np.ndarray, blocks: int) -> tuple[np.ndarray, np.ndarray]:
    init = base.copy()
    init[:RATE_LANES] ^= lanes[:RATE_LANES]
    tail = np.zeros(RATE_LANES, np.uint64)
    if blocks == 2:
        tail[:] = lanes[RATE_LANES:]
    return init, tail


@lru_cache(maxsize=64)
def prefix_context(prefix: bytes) -> PrefixContext:
    """Absorb the prefix's whole blocks and build the padded templates (cached per prefix)."""
    prefix = bytes(prefix)
    whole = len(prefix) // RATE * RATE
    base = np.zeros(STATE_LANES, np.uint64)
    if whole:
        _absorb_blocks(base, np.frombuffer(prefix[:whole], dtype="<u8").astype(np.uint64))
    tail_bytes = prefix[whole:]
    node_lanes, node_blocks = _template(tail_bytes, NODE_BYTES)
    span_lanes, span_blocks = _template(tail_bytes, SPAN_MSG_BYTES)
    node_init, node_tail = _init_and_tail(base, node_lanes, node_blocks)
    span_init, span_tail = _init_and_tail(base, span_lanes, span_blocks)
    zeros = np.zeros((TREE_DEPTH + 1, 4), np.uint64)
    _zero_hash_table(node_init, node_tail, node_blocks, len(tail_bytes), zeros)
    for arr in (node_init, node_tail, span_init, span_tail, zeros):
        arr.setflags(write=False)  # shared by every caller of this prefix
    return PrefixContext(
        prefix, len(tail_bytes), node_init, node_tail, node_blocks, span_init, span_tail, span_blocks, zeros
    )


def warm_up() -> None:
    """Compile (or load from the cache) every kernel with the argument types the facade uses."""
    ctx = prefix_context(b"")
    buf = np.zeros((1, 64), np.uint8)
    lengths = np.array([8], np.int64)
    out = np.zeros((1, 32), np.uint8)
    bmt_batch(
        buf, lengths, np.zeros(1, np.int64), np.zeros(1, np.uint8), np.zeros((1, 32), np.uint8),
        ctx.node_init, ctx.node_tail, ctx.node_blocks, ctx.span_init, ctx.span_tail, ctx.span_blocks,
        ctx.tail_len, ctx.zeros, ctx.node_init, True, out,
    )  # fmt: skip
    keccak256_rows(buf, lengths, out)
