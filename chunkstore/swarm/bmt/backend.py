"""The BMT interface every caller uses: one chunk or whole batches, on the fastest working backend.

``numba`` (:mod:`.numba_kernels`) runs Keccak-f[1600] as JIT-compiled code
over uint64 lanes, without the GIL; ``pysha3`` loops over :mod:`.reference`,
the implementation the fast path is tested against. Both give byte-identical
results, so callers never branch on :data:`BACKEND`.

Selection happens once, at import (or, in a process that asked for it with
:func:`.loading.load_in_background`, in a thread started at import, the
reference serving meanwhile; :func:`wait_settled` waits for the choice):

* ``CHUNKSTORE_HASH_BACKEND=pysha3`` forces the fallback (numba is then not
  even imported);
* otherwise numba is imported, every kernel is compiled (or loaded from the
  on-disk cache) and checked against the reference on a known chunk; any
  failure (numba missing, JIT error, a wrong answer, a big-endian host) logs a
  warning and selects ``pysha3``.

The fallback is about 9x slower, so it must be visible where an operator
looks: :func:`backend_info` says which backend is in use and why the
reference path was chosen (the daemon shows it in ``/chunkstore/status``,
``/metrics`` and ``/rchash?verbose=true``). A caller that catches the
accelerated path disagreeing with the reference at run time calls
:func:`demote`: the process then uses the reference path for good.

Batch layout (the same for every batch function): ``buf`` is ``uint8[rows,
stride]``, row ``i`` holds one chunk's stored data; ``lengths[i]`` is its
total length and ``offsets[i]`` where ``span | payload`` starts in it (0 for a
CAC, 97 for a SOC). The number of rows processed is ``len(lengths)``; ``buf``,
``out`` (and ``soc_addresses``) may have more rows, so a partial batch is a
view such as ``lengths[:k]``. Bytes of a row past ``lengths[i]`` are never
read: rows are reused buffers and may hold a previous chunk's tail.
:data:`ROW_STRIDE` is a row wide enough for any chunk.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, cast

import numpy as np

from ..constants import HASH_SIZE, MAX_CAC_SIZE, MAX_SOC_SIZE, SPAN_SIZE
from ..errors import InvalidChunk
from ..keccak import keccak256
from . import loading as _loading
from . import reference as _reference

if TYPE_CHECKING:
    from .numba_kernels import PrefixContext

log = logging.getLogger(__name__)

__all__ = [
    "BACKEND",
    "ENV_VAR",
    "ROW_STRIDE",
    "BackendInfo",
    "accelerated",
    "backend_info",
    "chunk_seconds",
    "demote",
    "settled",
    "wait_settled",
    "transformed_addresses",
    "transformed_addresses_at",
    "hashes_in_place",
    "bmt_hashes",
    "keccak256_batch",
    "chunk_hash",
    "zero_hashes",
]

ENV_VAR = "CHUNKSTORE_HASH_BACKEND"
# A batch row that holds any chunk (a SOC around a full CAC), rounded up to 16 bytes: 4208.
ROW_STRIDE = -(-MAX_SOC_SIZE // 16) * 16

# Hash wide tree levels 8 pairs at a time with the vectorised permutation
# (~3x faster per full chunk than one keccak at a time here; the 8-way
# permutation also beat the scalar one 3-4x when compiled for AVX2-only and
# SSE2-only targets); False pins the scalar permutation everywhere.
_WIDE = True
# Hash batches of mostly full chunks one chunk per vector lane
# (lane_kernels.py: about twice as fast per full chunk as the
# per-chunk kernel, measured by bench/bench_keccak.py); False pins the per-chunk
# kernel (tests and benchmarks compare the two).
_LANES = True
# The lane kernel hashes zero padding like data; below this mean payload the
# per-chunk kernel, which skips zero subtrees, is cheaper.
_LANES_MIN_MEAN_PAYLOAD = 1024

# A fixed chunk checked against the reference at selection time, so a
# miscompiled kernel (wrong CPU features, numba bug) can never go live.
_SELF_TEST_PREFIX = b"chunkstore-self-test"
_SELF_TEST_DATA = (1000).to_bytes(SPAN_SIZE, "little") + bytes(range(256)) * 3 + b"tail"


def _load_numba() -> ModuleType:
    if sys.byteorder != "little":
        # The kernels read digests straight out of little-endian lanes.
        raise RuntimeError("big-endian host")
    from . import lane_kernels, numba_kernels

    numba_kernels.warm_up()
    expected = _reference.chunk_hash(_SELF_TEST_DATA, _SELF_TEST_PREFIX)
    for wide in (True, False):
        if _numba_chunk_hash(numba_kernels, _SELF_TEST_DATA, _SELF_TEST_PREFIX, wide) != expected:
            raise RuntimeError(f"self-test: numba BMT hash (wide={wide}) differs from the reference")
    if _lanes_chunk_hash(numba_kernels, lane_kernels, _SELF_TEST_DATA, _SELF_TEST_PREFIX) != expected:
        raise RuntimeError("self-test: numba lane BMT hash differs from the reference")
    if _pieces_chunk_hash(numba_kernels, lane_kernels, _SELF_TEST_DATA, _SELF_TEST_PREFIX) != expected:
        raise RuntimeError("self-test: numba lane BMT hash of a chunk in two pieces differs from the reference")
    return numba_kernels


def _select_backend() -> tuple[str, ModuleType | None, str | None]:
    """(name, kernel module or None, why the reference path was chosen or None)."""
    wanted = os.environ.get(ENV_VAR, "").strip().lower()
    if wanted == "pysha3":
        return "pysha3", None, f"forced by {ENV_VAR}=pysha3"
    if wanted not in ("", "auto", "numba"):
        log.warning("%s=%r is not 'numba' or 'pysha3'; choosing automatically", ENV_VAR, wanted)
    try:
        return "numba", _load_numba(), None
    except Exception as exc:  # any import, JIT or self-test failure means: use the fallback
        reason = f"numba backend unavailable at start-up: {type(exc).__name__}: {exc}"
        log.warning("numba hashing backend unavailable (%s: %s); using pysha3", type(exc).__name__, exc)
        return "pysha3", None, reason


# ---------------------------------------------------------------- validation


def _contiguous(arr: np.ndarray, dtype: type) -> np.ndarray:
    """``arr`` as a C-contiguous, writable array of ``dtype``, copying only if needed.

    The kernels are compiled for exactly these array types; a read-only or
    strided argument would otherwise trigger a fresh multi-second JIT compile.
    """
    out: np.ndarray = np.ascontiguousarray(arr, dtype=dtype)
    if not out.flags.writeable:
        out = out.copy()
    return out


def _check_rows(buf: np.ndarray, lengths: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, ...]:
    """Validate a batch (vectorised) and return (buf, lengths, offsets) ready for a kernel."""
    if not isinstance(buf, np.ndarray) or buf.ndim != 2 or buf.dtype != np.uint8:
        raise TypeError("buf must be a 2-D uint8 numpy array")
    lengths = _contiguous(np.asarray(lengths).reshape(-1), np.int64)
    offsets = _contiguous(np.asarray(offsets).reshape(-1), np.int64)
    n = lengths.shape[0]
    if offsets.shape[0] < n or buf.shape[0] < n:
        raise ValueError(f"{n} lengths but {offsets.shape[0]} offsets and {buf.shape[0]} buffer rows")
    offsets = offsets[:n]
    data = lengths - offsets
    bad = (data < SPAN_SIZE) | (data > MAX_CAC_SIZE) | (offsets < 0) | (lengths > buf.shape[1])
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidChunk(
            f"row {i}: span|payload of {int(data[i])} bytes at offset {int(offsets[i])}, row length "
            f"{int(lengths[i])} (stride {buf.shape[1]}); need {SPAN_SIZE}..{MAX_CAC_SIZE} bytes inside the row"
        )
    return _contiguous(buf[:n], np.uint8), lengths, offsets


def _check_out(out: np.ndarray, n: int) -> None:
    if not isinstance(out, np.ndarray) or out.dtype != np.uint8 or out.ndim != 2 or out.shape[1] != HASH_SIZE:
        raise TypeError("out must be a uint8 numpy array of shape (rows, 32)")
    if out.shape[0] < n:
        raise ValueError(f"out has {out.shape[0]} rows; {n} needed")


def _run_into(out: np.ndarray, n: int, kernel_call: Callable[[np.ndarray], None]) -> None:
    """Run ``kernel_call(target)`` writing into ``out[:n]`` directly when its layout allows."""
    target = out[:n]
    if target.flags.c_contiguous and target.flags.writeable:
        kernel_call(target)
    else:
        tmp = np.empty((n, HASH_SIZE), np.uint8)
        kernel_call(tmp)
        target[...] = tmp


# ---------------------------------------------------------------- numba path


def _numba_batch(
    kn: ModuleType,
    buf: np.ndarray,
    lengths: np.ndarray,
    offsets: np.ndarray,
    is_soc: np.ndarray,
    soc_addresses: np.ndarray,
    prefix: bytes,
    out: np.ndarray,
    wide: bool | None = None,
) -> None:
    ctx = kn.prefix_context(prefix)
    plain = kn.prefix_context(b"")
    if wide is None and _LANES and _lanes_suit(ctx, lengths, offsets):
        from . import lane_kernels

        lane_kernels.bmt_rows(
            buf, lengths, offsets, is_soc, soc_addresses, ctx.node_init, ctx.span_init, ctx.tail_len,
            plain.node_init, out,
        )  # fmt: skip
        return
    kn.bmt_batch(
        buf, lengths, offsets, is_soc, soc_addresses,
        ctx.node_init, ctx.node_tail, ctx.node_blocks,
        ctx.span_init, ctx.span_tail, ctx.span_blocks,
        ctx.tail_len, ctx.zeros, plain.node_init, _WIDE if wide is None else wide, out,
    )  # fmt: skip


def _lanes_suit(ctx: PrefixContext, lengths: np.ndarray, offsets: np.ndarray) -> bool:
    """Is the lane kernel the faster (and an able) one for this batch?"""
    from . import lane_kernels

    n = lengths.shape[0]
    if n < 2 or ctx.node_blocks != 1 or ctx.span_blocks != 1 or not lane_kernels.fits_one_block(ctx.tail_len):
        return False
    payload = int(lengths.sum()) - int(offsets.sum()) - SPAN_SIZE * n
    return bool(payload >= _LANES_MIN_MEAN_PAYLOAD * n)


def _lanes_chunk_hash(kn: ModuleType, kl: ModuleType, data: bytes, prefix: bytes) -> bytes:
    """One chunk through the lane kernel (the other lanes repeat it)."""
    buf = np.zeros((1, MAX_CAC_SIZE), np.uint8)
    buf[0, : len(data)] = np.frombuffer(data, np.uint8)
    out = np.empty((1, HASH_SIZE), np.uint8)
    ctx, plain = kn.prefix_context(prefix), kn.prefix_context(b"")
    kl.bmt_rows(
        buf, np.array([len(data)], np.int64), np.zeros(1, np.int64), np.zeros(1, np.uint8), _NO_SOC,
        ctx.node_init, ctx.span_init, ctx.tail_len, plain.node_init, out,
    )  # fmt: skip
    return bytes(out[0].tobytes())


def _pieces_chunk_hash(kn: ModuleType, kl: ModuleType, data: bytes, prefix: bytes) -> bytes:
    """One chunk through the in-place lane kernel, split mid-word into a head and a tail."""
    split = SPAN_SIZE + 13
    head = np.frombuffer(data[:split], np.uint8).copy()
    tail = np.frombuffer(data[split:], np.uint8).copy()
    out = np.empty((1, HASH_SIZE), np.uint8)
    ctx, plain = kn.prefix_context(prefix), kn.prefix_context(b"")
    kl.bmt_pieces(
        np.array([head.ctypes.data], np.int64), np.array([len(head)], np.int64),
        np.array([tail.ctypes.data], np.int64), np.array([len(tail)], np.int64), np.zeros(1, np.uint8), _NO_SOC,
        ctx.node_init, ctx.span_init, ctx.tail_len, plain.node_init, out,
    )  # fmt: skip
    return bytes(out[0].tobytes())


_NO_SOC = np.zeros((1, HASH_SIZE), np.uint8)


def _numba_chunk_hash(kn: ModuleType, data: bytes, prefix: bytes, wide: bool | None = None) -> bytes:
    buf = np.zeros((1, MAX_CAC_SIZE), np.uint8)
    buf[0, : len(data)] = np.frombuffer(data, np.uint8)
    out = np.empty((1, HASH_SIZE), np.uint8)
    lengths = np.array([len(data)], np.int64)
    _numba_batch(kn, buf, lengths, np.zeros(1, np.int64), np.zeros(1, np.uint8), _NO_SOC, prefix, out, wide)
    return cast(bytes, out[0].tobytes())


LOADING = "the numba kernels are loading in the background"  # the reason while the reference stands in
_settled = threading.Event()  # set once the backend is chosen for good


def _start() -> tuple[str, ModuleType | None, str | None]:
    if _loading.in_background() and os.environ.get(ENV_VAR, "").strip().lower() != "pysha3":
        threading.Thread(target=_load_in_background, name="hash-backend-load", daemon=True).start()
        return "pysha3", None, LOADING
    chosen = _select_backend()
    _settled.set()
    return chosen


def _load_in_background() -> None:
    global BACKEND, _kn, _reason
    t0 = time.perf_counter()
    try:
        name, kn, reason = _select_backend()  # logs its own warning when it falls back
        # _kn last: a caller that sees it set finds the name and reason already of the kernels.
        BACKEND, _reason = name, reason
        _kn = kn
    finally:
        _settled.set()
    if kn is not None:
        log.info("hashing backend loaded: numba", extra={"fields": {"seconds": round(time.perf_counter() - t0, 2)}})


def settled() -> bool:
    """Whether the backend in use is the one this process keeps (not the reference standing in while the
    kernels load in the background)."""
    return _settled.is_set()


def wait_settled(timeout: float | None = None) -> bool:
    """Wait until the backend is chosen for good (at once, unless the kernels load in the background)."""
    return _settled.wait(timeout)


BACKEND, _kn, _reason = _start()


@dataclass(frozen=True)
class BackendInfo:
    """The hashing backend in use; ``reason`` says why it is the reference path (None when accelerated)."""

    name: str
    accelerated: bool
    reason: str | None

    def as_dict(self) -> dict[str, str | bool | None]:
        return {"name": self.name, "accelerated": self.accelerated, "reason": self.reason}


def backend_info() -> BackendInfo:
    return BackendInfo(BACKEND, _kn is not None, _reason)


def accelerated() -> bool:
    """True while the numba kernels are in use in this process."""
    return _kn is not None


def demote(reason: str) -> None:
    """Use the reference path in this process from now on (the accelerated one gave a wrong answer).

    Threads inside a batch call finish it with the kernel they started with.
    """
    global BACKEND, _kn, _reason
    if _kn is None:
        return
    log.error("hashing backend demoted to pysha3: %s", reason)
    BACKEND, _kn, _reason = "pysha3", None, reason


# ---------------------------------------------------------------- interface


def transformed_addresses(
    buf: np.ndarray,
    lengths: np.ndarray,
    offsets: np.ndarray,
    soc_addresses: np.ndarray | None,
    is_soc: np.ndarray,
    prefix: bytes,
    out: np.ndarray,
    *,
    reference: bool = False,
) -> None:
    """Reserve-sample transformed address of each row into ``out[i]`` (uint8[., 32]).

    CAC row: the BMT hash of ``span | payload`` with ``prefix`` (the anchor)
    before every keccak input. SOC row (``is_soc[i]``): ``keccak(soc_addresses[i]
    | that hash of its wrapped CAC)``, plain keccak. Raises
    :class:`~chunkstore.swarm.errors.InvalidChunk` if any row's ``span | payload`` is
    not 8..4104 bytes inside the row; nothing is written then. ``reference``
    takes the pysha3 path whatever backend is selected.
    """
    prefix = bytes(prefix)
    buf, lengths, offsets = _check_rows(buf, lengths, offsets)
    n = lengths.shape[0]
    _check_out(out, n)
    soc = np.asarray(is_soc).reshape(-1)
    if soc.shape[0] < n:
        raise ValueError(f"is_soc has {soc.shape[0]} entries; {n} needed")
    soc = _contiguous(soc[:n] != 0, np.bool_).view(np.uint8)
    if soc.any():
        if soc_addresses is None:
            raise ValueError("soc_addresses is required when a row is a SOC")
        addrs = np.asarray(soc_addresses)
        if addrs.dtype != np.uint8 or addrs.ndim != 2 or addrs.shape[1] != HASH_SIZE or addrs.shape[0] < n:
            raise TypeError(f"soc_addresses must be uint8[>= {n}, 32]")
        addrs = _contiguous(addrs[:n], np.uint8)
    else:
        addrs = _NO_SOC
    kn = None if reference else _kn
    if kn is not None:
        _run_into(out, n, lambda target: _numba_batch(kn, buf, lengths, offsets, soc, addrs, prefix, target))
        return
    for i in range(n):
        h = _reference.chunk_hash(buf[i, offsets[i] : lengths[i]].tobytes(), prefix)
        if soc[i]:
            h = keccak256(addrs[i].tobytes(), h)
        out[i] = np.frombuffer(h, np.uint8)


def hashes_in_place(prefix: bytes) -> bool:
    """Can :func:`transformed_addresses_at` hash with ``prefix`` in this process?

    It needs the lane kernel (the accelerated backend) and a prefix whose
    tail fits one block with a node's message, as every 32-byte anchor does.
    """
    kn = _kn
    if kn is None or not _LANES:
        return False
    from . import lane_kernels

    ctx = kn.prefix_context(bytes(prefix))
    return bool(ctx.node_blocks == 1 and ctx.span_blocks == 1 and lane_kernels.fits_one_block(ctx.tail_len))


def transformed_addresses_at(
    head_at: np.ndarray,
    head_len: np.ndarray,
    tail_at: np.ndarray,
    tail_len: np.ndarray,
    soc_addresses: np.ndarray,
    is_soc: np.ndarray,
    prefix: bytes,
    out: np.ndarray,
) -> None:
    """:func:`transformed_addresses` of chunks read where they lie in memory, in two pieces each.

    Row i's ``span | payload`` is the ``head_len[i]`` bytes at address
    ``head_at[i]``, then the ``tail_len[i]`` bytes at ``tail_at[i]`` (int64
    addresses, e.g. into a mapped file and a column of tails): the sampler
    hashes chunks straight from the page cache this way, with no copy into
    rows. The head must hold at least the span. The caller vouches that
    every address is readable for its length (nothing past it is read); a
    bad one crashes the process rather than raising. Raises ``ValueError``
    for a prefix the lane kernel cannot take (ask :func:`hashes_in_place`
    first), and :class:`~chunkstore.swarm.errors.InvalidChunk` for lengths
    that are no chunk's (nothing is written then). Once the process is
    demoted to the reference path (:func:`demote`), the pieces are copied
    out and hashed by the reference, as :func:`transformed_addresses` does.
    """
    kn = _kn  # read once: a concurrent demote() must not leave us holding None
    if kn is not None and not hashes_in_place(prefix):
        raise ValueError("hashing chunks in place needs a prefix whose tail fits one block (hashes_in_place)")
    head_len = _contiguous(np.asarray(head_len).reshape(-1), np.int64)
    n = head_len.shape[0]
    head_at, tail_at, tail_len = (_contiguous(np.asarray(a).reshape(-1)[:n], np.int64) for a in (head_at, tail_at, tail_len))
    if min(head_at.shape[0], tail_at.shape[0], tail_len.shape[0]) < n:
        raise ValueError(f"{n} head lengths but fewer head addresses, tail addresses or tail lengths")
    bad = (head_len < SPAN_SIZE) | (tail_len < 0) | (head_len + tail_len > MAX_CAC_SIZE) | (head_at == 0)
    bad |= (tail_len > 0) & (tail_at == 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidChunk(
            f"row {i}: a head of {int(head_len[i])} bytes and a tail of {int(tail_len[i])}; the head must hold "
            f"the span and both {SPAN_SIZE}..{MAX_CAC_SIZE} bytes (at nonzero addresses)"
        )
    _check_out(out, n)
    soc = _contiguous(np.asarray(is_soc).reshape(-1)[:n] != 0, np.bool_).view(np.uint8)
    if soc.shape[0] < n:
        raise ValueError(f"is_soc has {soc.shape[0]} entries; {n} needed")
    addrs = np.asarray(soc_addresses)
    if addrs.dtype != np.uint8 or addrs.ndim != 2 or addrs.shape[1] != HASH_SIZE or addrs.shape[0] < n:
        raise TypeError(f"soc_addresses must be uint8[>= {n}, 32]")
    addrs = _contiguous(addrs[:n], np.uint8)
    if kn is None:
        for i in range(n):
            data = ctypes.string_at(int(head_at[i]), int(head_len[i])) + ctypes.string_at(int(tail_at[i]), int(tail_len[i]))
            h = _reference.chunk_hash(data, bytes(prefix))
            out[i] = np.frombuffer(keccak256(addrs[i].tobytes(), h) if soc[i] else h, np.uint8)
        return
    from . import lane_kernels

    ctx, plain = kn.prefix_context(bytes(prefix)), kn.prefix_context(b"")
    _run_into(out, n, lambda target: lane_kernels.bmt_pieces(
        head_at, head_len, tail_at, tail_len, soc, addrs, ctx.node_init, ctx.span_init, ctx.tail_len,
        plain.node_init, target,
    ))  # fmt: skip


def bmt_hashes(buf: np.ndarray, lengths: np.ndarray, offsets: np.ndarray, prefix: bytes, out: np.ndarray) -> None:
    """BMT hash (prefixed unless ``prefix == b""``) of ``span | payload`` of each row into ``out[i]``.

    With an empty prefix this is the CAC address (for a SOC row at offset 97,
    the wrapped chunk's address). Same validation as :func:`transformed_addresses`.
    """
    prefix = bytes(prefix)
    buf, lengths, offsets = _check_rows(buf, lengths, offsets)
    n = lengths.shape[0]
    _check_out(out, n)
    kn = _kn  # read once: a concurrent demote() must not leave us holding None
    if kn is not None:
        soc = np.zeros(n, np.uint8)
        _run_into(out, n, lambda target: _numba_batch(kn, buf, lengths, offsets, soc, _NO_SOC, prefix, target))
        return
    for i in range(n):
        out[i] = np.frombuffer(_reference.chunk_hash(buf[i, offsets[i] : lengths[i]].tobytes(), prefix), np.uint8)


def keccak256_batch(buf: np.ndarray, lengths: np.ndarray, out: np.ndarray) -> None:
    """Plain Keccak-256 of ``buf[i, :lengths[i]]`` (any length up to the stride) into ``out[i]``."""
    if not isinstance(buf, np.ndarray) or buf.ndim != 2 or buf.dtype != np.uint8:
        raise TypeError("buf must be a 2-D uint8 numpy array")
    lengths = _contiguous(np.asarray(lengths).reshape(-1), np.int64)
    n = lengths.shape[0]
    if buf.shape[0] < n:
        raise ValueError(f"{n} lengths but {buf.shape[0]} buffer rows")
    if ((lengths < 0) | (lengths > buf.shape[1])).any():
        raise ValueError(f"lengths must be within 0..{buf.shape[1]}")
    _check_out(out, n)
    rows = _contiguous(buf[:n], np.uint8)
    kn = _kn
    if kn is not None:
        _run_into(out, n, lambda target: kn.keccak256_rows(rows, lengths, target))
        return
    for i in range(n):
        out[i] = np.frombuffer(keccak256(rows[i, : lengths[i]].tobytes()), np.uint8)


def chunk_hash(data: bytes | bytearray | memoryview, prefix: bytes = b"") -> bytes:
    """BMT hash of one chunk's ``span | payload`` (the CAC address if unprefixed)."""
    data = bytes(data)
    if not SPAN_SIZE <= len(data) <= MAX_CAC_SIZE:
        raise InvalidChunk(f"chunk data is {len(data)} bytes; must be {SPAN_SIZE}..{MAX_CAC_SIZE}")
    kn = _kn
    if kn is not None:
        return _numba_chunk_hash(kn, data, bytes(prefix))
    return _reference.chunk_hash(data, bytes(prefix))


def zero_hashes(prefix: bytes = b"") -> tuple[bytes, ...]:
    """Hash of an all-zero subtree per level (level 0: the zero segment), via the active backend."""
    kn = _kn
    if kn is not None:
        return tuple(row.tobytes() for row in kn.prefix_context(bytes(prefix)).zeros)
    return _reference.zero_hashes(bytes(prefix))


# ---------------------------------------------------------------- speed

_COST_ROWS = {True: 16, False: 128}  # rows per timed batch: reference, accelerated (a few ms each)
_COST_REPEATS = 3
_costs: dict[bool, float] = {}
_costs_lock = threading.Lock()


def chunk_seconds(reference: bool | None = None) -> float:
    """Seconds one core spends on the transformed address of a full 4 KiB chunk.

    Measured once per process and path (``reference`` None: the path in use
    now), the best of a few batches of random full chunks. The sampler's
    throughput estimates use it: the rate of a small sample is all start-up
    cost and says little about the backend.
    """
    ref = _kn is None or bool(reference)  # without the kernels only the reference path can be timed
    with _costs_lock:
        cached = _costs.get(ref)
        if cached is not None:
            return cached
        n = _COST_ROWS[ref]
        rng = np.random.default_rng(0)
        buf = rng.integers(0, 256, size=(n, MAX_CAC_SIZE), dtype=np.uint8)
        buf[:, :SPAN_SIZE] = 0
        buf[:, 1] = 0x10  # span 4096, little-endian
        lengths = np.full(n, MAX_CAC_SIZE, np.int64)
        offsets = np.zeros(n, np.int64)
        is_soc = np.zeros(n, np.uint8)
        out = np.empty((n, HASH_SIZE), np.uint8)
        transformed_addresses(buf, lengths, offsets, None, is_soc, b"\x5a" * 32, out, reference=ref)  # warm
        best = float("inf")
        for _ in range(_COST_REPEATS):
            t = time.perf_counter()
            transformed_addresses(buf, lengths, offsets, None, is_soc, b"\x5a" * 32, out, reference=ref)
            best = min(best, time.perf_counter() - t)
        cost = _costs[ref] = best / n
        return cost
