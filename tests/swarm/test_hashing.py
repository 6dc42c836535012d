"""The batch hashing facade against the pysha3 reference (chunkstore.swarm.bmt.reference).

Whatever backend was selected at import is what gets tested against the
reference; the pysha3 fallback is exercised in-process by switching the
module's kernel handle off, and backend *selection* in subprocesses.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkstore.swarm.bmt import backend as hashing
from chunkstore.swarm.bmt import reference as bmt
from chunkstore.swarm.errors import InvalidChunk
from chunkstore.swarm.keccak import keccak256

ROOT = Path(__file__).resolve().parents[2]
STRIDE = 4096 + 8 + 97 + 7  # > the minimum so rows always have a garbage tail
SOC_HEADER = 97

KECCAK_EMPTY = "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
ZERO_LEVEL1 = "ad3228b676f7d3cd4284a5443f17f1962b36e491b30a40b2405849e597ba5fb5"


def reference(data: bytes, prefix: bytes, soc_address: bytes | None) -> bytes:
    """Transformed address by the spec, straight from the pysha3 reference."""
    h = bmt.chunk_hash(data, prefix)
    return h if soc_address is None else keccak256(soc_address, h)


def build_batch(
    rows: list[tuple[bytes, bytes | None]], rng: np.random.Generator, stride: int = STRIDE
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Lay out (span|payload, soc_address or None) rows over a garbage-filled buffer."""
    n = len(rows)
    buf = rng.integers(0, 256, size=(n, stride), dtype=np.uint8)
    lengths = np.empty(n, np.int64)
    offsets = np.empty(n, np.int64)
    is_soc = np.zeros(n, np.bool_)
    addrs = rng.integers(0, 256, size=(n, 32), dtype=np.uint8)
    for i, (data, soc_address) in enumerate(rows):
        off = 0
        if soc_address is not None:
            # id | signature: arbitrary bytes, the transform never reads them
            off = SOC_HEADER
            is_soc[i] = True
            addrs[i] = np.frombuffer(soc_address, np.uint8)
        buf[i, off : off + len(data)] = np.frombuffer(data, np.uint8)
        offsets[i] = off
        lengths[i] = off + len(data)
    return buf, lengths, offsets, is_soc, addrs


@contextmanager
def kernel_mode(mode: str) -> Iterator[None]:
    """Pin the numba kernels for a block: "lanes" (one chunk per vector lane, whenever the
    prefix allows), "wide" (per chunk, 8-way permutation for wide levels), "scalar"."""
    saved = hashing._WIDE, hashing._LANES, hashing._LANES_MIN_MEAN_PAYLOAD
    hashing._WIDE = mode != "scalar"
    hashing._LANES = mode == "lanes"
    hashing._LANES_MIN_MEAN_PAYLOAD = 0
    try:
        yield
    finally:
        hashing._WIDE, hashing._LANES, hashing._LANES_MIN_MEAN_PAYLOAD = saved


# Every numba tree path must equal the reference; under pysha3 the mode is moot.
MODES = ["lanes", "wide", "scalar"] if hashing.BACKEND == "numba" else ["lanes"]


# ---------------------------------------------------------------- known answers


def test_backend_is_a_known_name() -> None:
    assert hashing.BACKEND in ("numba", "pysha3")


def test_keccak_empty_known_answer() -> None:
    out = np.zeros((1, 32), np.uint8)
    hashing.keccak256_batch(np.zeros((1, 8), np.uint8), np.array([0]), out)
    assert out[0].tobytes().hex() == KECCAK_EMPTY


def test_zero_hashes_known_answer() -> None:
    zeros = hashing.zero_hashes(b"")
    assert zeros[0] == bytes(32)
    assert zeros[1].hex() == ZERO_LEVEL1
    assert zeros == bmt.zero_hashes(b"")


@pytest.mark.parametrize("length", [0, 1, 55, 64, 96, 135, 136, 137, 271, 272, 300])
def test_keccak256_batch_matches_pysha3(length: int) -> None:
    rng = np.random.default_rng(length)
    buf = rng.integers(0, 256, size=(3, 320), dtype=np.uint8)
    out = np.zeros((3, 32), np.uint8)
    hashing.keccak256_batch(buf, np.array([length, 0, length // 2]), out)
    for i, n in enumerate([length, 0, length // 2]):
        assert out[i].tobytes() == keccak256(buf[i, :n].tobytes())


def test_cac_address_known_answer() -> None:
    # "foo" under span 3 is bee's documented BMT test vector (pkg/bmt, pkg/cac tests).
    data = (3).to_bytes(8, "little") + b"foo"
    expected = "2387e8e7d8a48c2a9339c97c1dc3461a9a7aa07e994c5cb8b38fd7c1b3e6ea48"
    assert hashing.chunk_hash(data).hex() == expected
    assert bmt.chunk_hash(data).hex() == expected


# ---------------------------------------------------------------- equivalence

# Payload sizes around every power-of-two subtree boundary, then prefixes
# around the 8-byte lane boundary, the one-block limit for nodes (71), for the
# span step (95) and whole-block prefixes (136, 272).
EDGE_SIZES = [0, 1, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1000, 2048, 2049, 4064, 4095, 4096]
EDGE_PREFIXES = [0, 1, 7, 8, 9, 31, 32, 63, 71, 72, 95, 96, 100, 135, 136, 137, 207, 208, 271, 272, 300]


@pytest.mark.parametrize("wide", MODES)
@pytest.mark.parametrize("prefix_len", EDGE_PREFIXES)
def test_edge_sizes_and_prefixes(prefix_len: int, wide: str) -> None:
    rng = np.random.default_rng(prefix_len)
    prefix = rng.bytes(prefix_len)
    rows = []
    for k, size in enumerate(EDGE_SIZES):
        data = rng.bytes(8 + size)
        rows.append((data, rng.bytes(32) if k % 3 == 0 else None))
    buf, lengths, offsets, is_soc, addrs = build_batch(rows, rng)
    out = np.zeros((len(rows), 32), np.uint8)
    plain = np.zeros_like(out)
    with kernel_mode(wide):
        hashing.transformed_addresses(buf, lengths, offsets, addrs, is_soc, prefix, out)
        hashing.bmt_hashes(buf, lengths, offsets, prefix, plain)
        single = [hashing.chunk_hash(data, prefix) for data, _ in rows]
    for i, (data, soc_address) in enumerate(rows):
        assert out[i].tobytes() == reference(data, prefix, soc_address), (prefix_len, EDGE_SIZES[i])
        assert plain[i].tobytes() == bmt.chunk_hash(data, prefix)
        assert single[i] == bmt.chunk_hash(data, prefix)
    assert hashing.zero_hashes(prefix) == bmt.zero_hashes(prefix)


payload_size = st.one_of(st.integers(0, 4096), st.sampled_from(EDGE_SIZES))
row_strategy = st.tuples(payload_size, st.booleans())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(row_strategy, min_size=1, max_size=20),
    prefix=st.one_of(st.binary(max_size=100), st.binary(min_size=72, max_size=100)),
    seed=st.integers(0, 2**32 - 1),
    wide=st.sampled_from(MODES),
)
def test_matches_reference(rows: list[tuple[int, bool]], prefix: bytes, seed: int, wide: str) -> None:
    rng = np.random.default_rng(seed)
    chunks = [(rng.bytes(8 + size), rng.bytes(32) if soc else None) for size, soc in rows]
    buf, lengths, offsets, is_soc, addrs = build_batch(chunks, rng)
    out = np.zeros((len(chunks), 32), np.uint8)
    with kernel_mode(wide):
        hashing.transformed_addresses(buf, lengths, offsets, addrs, is_soc, prefix, out)
    for i, (data, soc_address) in enumerate(chunks):
        assert out[i].tobytes() == reference(data, prefix, soc_address)


def test_fallback_matches_reference(pysha3_backend: None) -> None:
    rng = np.random.default_rng(7)
    prefix = rng.bytes(32)
    rows = [(rng.bytes(8 + size), rng.bytes(32) if size % 2 else None) for size in (0, 33, 4096, 777)]
    buf, lengths, offsets, is_soc, addrs = build_batch(rows, rng)
    out = np.zeros((4, 32), np.uint8)
    hashing.transformed_addresses(buf, lengths, offsets, addrs, is_soc, prefix, out)
    assert [out[i].tobytes() for i in range(4)] == [reference(d, prefix, a) for d, a in rows]
    hashing.bmt_hashes(buf, lengths, offsets, b"", out)
    assert [out[i].tobytes() for i in range(4)] == [bmt.chunk_hash(d) for d, _ in rows]
    assert hashing.chunk_hash(rows[2][0], prefix) == bmt.chunk_hash(rows[2][0], prefix)
    assert hashing.zero_hashes(prefix) == bmt.zero_hashes(prefix)
    hashing.keccak256_batch(buf, np.array([0, 5]), out)
    assert out[0].tobytes().hex() == KECCAK_EMPTY


# ---------------------------------------------------------------- reused buffers


@pytest.mark.parametrize("wide", MODES)
@pytest.mark.parametrize("size", [0, 5, 32, 100, 4000])
@pytest.mark.parametrize("prefix", [b"", b"\x01" * 32, b"\x02" * 13])
def test_bytes_past_length_are_ignored(size: int, prefix: bytes, wide: str) -> None:
    rng = np.random.default_rng(size)
    data = rng.bytes(8 + size)
    expected = bmt.chunk_hash(data, prefix)
    results = []
    for fill in (0x00, 0xFF, None):
        buf = np.full((2, STRIDE), fill or 0, np.uint8)
        if fill is None:
            buf[:] = rng.integers(0, 256, size=buf.shape, dtype=np.uint8)
        for off, row in ((0, 0), (SOC_HEADER, 1)):
            buf[row, off : off + len(data)] = np.frombuffer(data, np.uint8)
        out = np.zeros((2, 32), np.uint8)
        with kernel_mode(wide):
            hashing.bmt_hashes(
                buf, np.array([len(data), SOC_HEADER + len(data)]), np.array([0, SOC_HEADER]), prefix, out
            )
        results += [out[0].tobytes(), out[1].tobytes()]
    assert results == [expected] * 6


def test_row_reused_for_a_shorter_chunk() -> None:
    rng = np.random.default_rng(1)
    buf = np.zeros((1, STRIDE), np.uint8)
    out = np.zeros((1, 32), np.uint8)
    long_data, short_data = rng.bytes(4104), rng.bytes(8 + 70)
    buf[0, :4104] = np.frombuffer(long_data, np.uint8)
    hashing.bmt_hashes(buf, np.array([4104]), np.array([0]), b"", out)
    assert out[0].tobytes() == bmt.chunk_hash(long_data)
    buf[0, :78] = np.frombuffer(short_data, np.uint8)  # the long chunk's tail stays
    hashing.bmt_hashes(buf, np.array([78]), np.array([0]), b"", out)
    assert out[0].tobytes() == bmt.chunk_hash(short_data)


def test_only_the_first_n_rows() -> None:
    rng = np.random.default_rng(2)
    rows = [(rng.bytes(8 + 64 * i), None) for i in range(5)]
    buf, lengths, offsets, is_soc, addrs = build_batch(rows, rng)
    out = np.full((5, 32), 0xAA, np.uint8)
    hashing.transformed_addresses(buf, lengths[:3], offsets, addrs, is_soc, b"x", out)
    assert [out[i].tobytes() for i in range(3)] == [bmt.chunk_hash(d, b"x") for d, _ in rows[:3]]
    assert (out[3:] == 0xAA).all()


def test_strided_and_readonly_arguments() -> None:
    rng = np.random.default_rng(3)
    rows = [(rng.bytes(8 + 300), rng.bytes(32)), (rng.bytes(8 + 4096), None)]
    buf, lengths, offsets, is_soc, addrs = build_batch(rows, rng)
    wide = np.zeros((2, STRIDE + 50), np.uint8)
    wide[:, :STRIDE] = buf
    strided_buf = wide[:, :STRIDE]  # not C-contiguous
    buf.setflags(write=False)
    big_out = np.zeros((2, 64), np.uint8)
    out = big_out[:, 16:48]  # not C-contiguous either
    for b in (buf, strided_buf):
        out[:] = 0
        hashing.transformed_addresses(b, lengths, offsets, addrs, is_soc.astype(np.uint8), b"p", out)
        assert [out[i].tobytes() for i in range(2)] == [reference(d, b"p", a) for d, a in rows]
    assert (big_out[:, :16] == 0).all() and (big_out[:, 48:] == 0).all()


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("length", "offset"),
    [
        (7, 0),
        (0, 0),
        (4105, 0),
        (SOC_HEADER + 7, SOC_HEADER),
        (SOC_HEADER + 4105, SOC_HEADER),
        (20, -1),
        (STRIDE + 1, 0),
    ],
)
def test_invalid_lengths_raise(length: int, offset: int) -> None:
    buf = np.zeros((2, STRIDE), np.uint8)
    out = np.full((2, 32), 0xAA, np.uint8)
    lengths, offsets = np.array([8, length]), np.array([0, offset])
    with pytest.raises(InvalidChunk):
        hashing.transformed_addresses(buf, lengths, offsets, None, np.zeros(2, bool), b"", out)
    with pytest.raises(InvalidChunk):
        hashing.bmt_hashes(buf, lengths, offsets, b"", out)
    assert (out == 0xAA).all()  # validated before anything is written


def test_chunk_hash_rejects_bad_sizes() -> None:
    with pytest.raises(InvalidChunk):
        hashing.chunk_hash(b"\x00" * 7)
    with pytest.raises(InvalidChunk):
        hashing.chunk_hash(b"\x00" * 4105)


def test_soc_rows_need_addresses() -> None:
    buf = np.zeros((1, STRIDE), np.uint8)
    with pytest.raises(ValueError):
        hashing.transformed_addresses(
            buf, np.array([105]), np.array([97]), None, np.array([True]), b"", np.zeros((1, 32), np.uint8)
        )


# ---------------------------------------------------------------- threads and selection


@pytest.mark.skipif(hashing.BACKEND != "numba", reason="numba backend not available")
def test_kernels_release_the_gil() -> None:
    from chunkstore.swarm.bmt import lane_kernels
    from chunkstore.swarm.bmt import numba_kernels as keccak_numba

    kernels = (keccak_numba.bmt_batch, keccak_numba.keccak256_rows, keccak_numba.keccak_f1600, lane_kernels.bmt_rows,
               lane_kernels.bmt_pieces)  # fmt: skip
    for kernel in kernels:
        assert kernel.targetoptions.get("nogil") is True


@pytest.mark.skipif(hashing.BACKEND != "numba", reason="numba kernels not in use")
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_lane_permutation_equals_scalar(seed: int) -> None:
    from chunkstore.swarm.bmt import lane_kernels
    from chunkstore.swarm.bmt import numba_kernels as keccak_numba

    w = lane_kernels.LANES
    state = np.random.default_rng(seed).integers(0, 2**64, size=25 * w, dtype=np.uint64)
    before = state.reshape(25, w).copy()
    lane_kernels.keccak_lanes(state)
    for i in range(w):
        lane = before[:, i].copy()
        keccak_numba.keccak_f1600(lane)
        assert (state.reshape(25, w)[:, i] == lane).all()


@pytest.mark.skipif(hashing.BACKEND != "numba", reason="numba kernels not in use")
def test_lane_kernel_is_chosen_for_full_chunks() -> None:
    # The speed claim rests on batches of full chunks taking the lane kernel: catch a
    # heuristic that silently routes them elsewhere.
    from chunkstore.swarm.bmt import numba_kernels as keccak_numba

    ctx = keccak_numba.prefix_context(b"\x5a" * 32)
    full = np.full(64, 4104, np.int64)
    assert hashing._lanes_suit(ctx, full, np.zeros(64, np.int64))
    assert not hashing._lanes_suit(ctx, np.full(64, 40, np.int64), np.zeros(64, np.int64))
    assert not hashing._lanes_suit(keccak_numba.prefix_context(bytes(80)), full, np.zeros(64, np.int64))


def test_threads_share_the_kernels() -> None:
    rng = np.random.default_rng(4)
    rows = [(rng.bytes(8 + 4096), None) for _ in range(16)]
    buf, lengths, offsets, is_soc, addrs = build_batch(rows, rng)
    expected = [bmt.chunk_hash(d, b"anchor") for d, _ in rows]
    outs = [np.zeros((16, 32), np.uint8) for _ in range(4)]

    def work(out: np.ndarray) -> None:
        for _ in range(5):
            hashing.transformed_addresses(buf, lengths, offsets, addrs, is_soc, b"anchor", out)

    threads = [threading.Thread(target=work, args=(out,)) for out in outs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for out in outs:
        assert [out[i].tobytes() for i in range(16)] == expected


def run_python(code: str, **env: str) -> str:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    proc = subprocess.run(
        [sys.executable, "-c", code], env=full_env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout + proc.stderr


CHECK = """
import sys
from chunkstore.swarm.bmt import backend as hashing
from chunkstore.swarm.bmt import reference as bmt
assert hashing.chunk_hash(bytes(8) + b"abc", b"pre") == bmt.chunk_hash(bytes(8) + b"abc", b"pre")
print("BACKEND=" + hashing.BACKEND, "numba-imported=" + str("numba" in sys.modules))
info = hashing.backend_info()
assert info.name == hashing.BACKEND and info.accelerated == (info.name == "numba") == (info.reason is None)
print("REASON=" + str(info.reason))
"""


def test_env_var_forces_pysha3() -> None:
    out = run_python(CHECK, CHUNKSTORE_HASH_BACKEND="pysha3")
    assert "BACKEND=pysha3" in out
    assert "numba-imported=False" in out  # the fallback does not even load numba
    assert "REASON=forced by CHUNKSTORE_HASH_BACKEND=pysha3" in out


def test_missing_numba_falls_back_with_a_warning() -> None:
    # sys.modules[name] = None makes "import numba" raise ImportError.
    out = run_python("import sys; sys.modules['numba'] = None\n" + CHECK, CHUNKSTORE_HASH_BACKEND="")
    assert "BACKEND=pysha3" in out
    assert "numba hashing backend unavailable" in out
    assert "REASON=numba backend unavailable at start-up: ModuleNotFoundError" in out  # what /chunkstore/status shows


def test_wrong_kernel_answer_falls_back() -> None:
    # A kernel that disagrees with the reference (a miscompile) must never go live.
    code = "import chunkstore.swarm.bmt.reference as b; real = b.chunk_hash; b.chunk_hash = lambda d, p=b'': real(d, p + b'!')\n"
    out = run_python(code + "from chunkstore.swarm.bmt import backend as hashing; print('BACKEND=' + hashing.BACKEND)")
    expected = "pysha3" if hashing.BACKEND == "numba" else hashing.BACKEND
    assert f"BACKEND={expected}" in out


@pytest.mark.skipif(hashing.BACKEND != "numba", reason="numba backend not available")
def test_uncacheable_function_compiles_uncached(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # What numba does when no cache dir is writable: every locator declines,
    # and njit(cache=True) raises at decoration time. _jit must shrug that off.
    from numba.core import caching

    from chunkstore.swarm.bmt import numba_kernels as keccak_numba

    monkeypatch.setattr(caching.CacheImpl, "_locator_classes", [])
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(keccak_numba, "_cache_warned", False)

    def add_one(x: int) -> int:
        return x + 1

    with caplog.at_level(logging.WARNING, logger="chunkstore.swarm.bmt.numba_kernels"):
        fn = keccak_numba._jit(add_one)
    assert fn(41) == 42
    assert "numba cache unavailable" in caplog.text


# ---------------------------------------------------------------- chunks hashed where they lie


def _pieces(rows: list[tuple[bytes, bytes | None]], splits: list[int], rng: np.random.Generator):
    """Each row's span|payload cut at ``splits[i]`` into a head and a tail, in two garbage-filled buffers."""
    n = len(rows)
    heads = rng.integers(0, 256, size=(n, STRIDE), dtype=np.uint8)
    tails = rng.integers(0, 256, size=(n, STRIDE), dtype=np.uint8)
    addrs = rng.integers(0, 256, size=(n, 32), dtype=np.uint8)
    head_len, tail_len = np.zeros(n, np.int64), np.zeros(n, np.int64)
    is_soc = np.zeros(n, np.bool_)
    for i, ((data, soc_address), cut) in enumerate(zip(rows, splits, strict=True)):
        heads[i, :cut] = np.frombuffer(data[:cut], np.uint8)
        tails[i, : len(data) - cut] = np.frombuffer(data[cut:], np.uint8)
        head_len[i], tail_len[i] = cut, len(data) - cut
        if soc_address is not None:
            is_soc[i] = True
            addrs[i] = np.frombuffer(soc_address, np.uint8)
    head_at = heads.ctypes.data + np.arange(n, dtype=np.int64) * heads.strides[0]
    tail_at = tails.ctypes.data + np.arange(n, dtype=np.int64) * tails.strides[0]
    return (heads, tails), head_at, head_len, tail_at, tail_len, is_soc, addrs


@pytest.mark.skipif(hashing.BACKEND != "numba", reason="hashing in place needs the lane kernel")
@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 19),
    prefix_len=st.sampled_from([0, 1, 7, 32, 71]),
    sizes=st.sampled_from(["full", "mixed", "short"]),
)
def test_chunks_in_two_pieces_hash_as_the_reference(seed: int, n: int, prefix_len: int, sizes: str) -> None:
    # Heads cut anywhere from just the span to the whole chunk, mid-word included (a SOC's head ends
    # 97 bytes off a word boundary in the store), tails of every length; buffers full of garbage.
    rng = np.random.default_rng(seed)
    prefix = rng.bytes(prefix_len)
    rows: list[tuple[bytes, bytes | None]] = []
    splits = []
    for _ in range(n):
        size = {"full": 4096, "short": int(rng.integers(0, 200))}.get(sizes, int(rng.integers(0, 4097)))
        data = (size if rng.random() < 0.9 else int(rng.integers(1, 2**40))).to_bytes(8, "little") + rng.bytes(size)
        rows.append((data, rng.bytes(32) if rng.random() < 0.3 else None))
        splits.append(int(rng.choice([8, len(data), int(rng.integers(8, len(data) + 1)), min(len(data), 4080 - 97)])))
    keep, head_at, head_len, tail_at, tail_len, is_soc, addrs = _pieces(rows, splits, rng)
    out = np.zeros((n, 32), np.uint8)
    hashing.transformed_addresses_at(head_at, head_len, tail_at, tail_len, addrs, is_soc, prefix, out)
    assert [out[i].tobytes() for i in range(n)] == [reference(d, prefix, a) for d, a in rows]
    del keep


@pytest.mark.skipif(hashing.BACKEND != "numba", reason="hashing in place needs the lane kernel")
def test_chunks_in_pieces_refuse_what_is_no_chunk() -> None:
    rng = np.random.default_rng(2)
    rows = [(rng.bytes(8 + 100), None)]
    keep, head_at, head_len, tail_at, tail_len, is_soc, addrs = _pieces(rows, [50], rng)
    out = np.zeros((1, 32), np.uint8)
    for field, value in ((head_len, 7), (tail_len, -1), (tail_len, 4097), (head_at, 0)):
        saved = field[0]
        field[0] = value
        with pytest.raises(InvalidChunk):
            hashing.transformed_addresses_at(head_at, head_len, tail_at, tail_len, addrs, is_soc, b"", out)
        field[0] = saved
    assert not out.any(), "nothing is written for a refused batch"
    assert hashing.hashes_in_place(bytes(32)) and not hashing.hashes_in_place(bytes(80))
    with pytest.raises(ValueError):
        hashing.transformed_addresses_at(head_at, head_len, tail_at, tail_len, addrs, is_soc, bytes(80), out)
    del keep


@pytest.mark.skipif(hashing.BACKEND != "numba", reason="the in-place path starts on the lane kernel")
def test_chunks_in_pieces_after_a_demotion_hash_by_the_reference(monkeypatch) -> None:
    # A scan that decided to hash in place goes on after phase 2 demoted the process: its blocks are then
    # hashed by the reference from the same addresses, not refused.
    rng = np.random.default_rng(8)
    rows = [(rng.bytes(8 + 4096), None), (rng.bytes(8 + 300), rng.bytes(32))]
    keep, head_at, head_len, tail_at, tail_len, is_soc, addrs = _pieces(rows, [4080 - 97, 8 + 13], rng)
    monkeypatch.setattr(hashing, "_kn", None)
    out = np.zeros((2, 32), np.uint8)
    hashing.transformed_addresses_at(head_at, head_len, tail_at, tail_len, addrs, is_soc, b"anchor", out)
    assert [out[i].tobytes() for i in range(2)] == [reference(d, b"anchor", a) for d, a in rows]
    del keep


LOAD_IN_BACKGROUND = """
import os
from chunkstore.swarm.bmt import loading
assert loading.load_in_background()
from chunkstore.swarm.bmt import backend as hashing
from chunkstore.swarm.bmt import reference as bmt
assert not loading.load_in_background()  # too late now: the backend is chosen
data = bytes(8) + os.urandom(3000)
at_import = hashing.backend_info()
# Right after the import the reference stands in (unless a cached load beat these lines); either way the
# answers are the reference's.
assert (at_import.name, at_import.reason) == ("pysha3", hashing.LOADING) or hashing.settled(), at_import
assert hashing.chunk_hash(data, b"pre") == bmt.chunk_hash(data, b"pre")
assert hashing.wait_settled(300)
info = hashing.backend_info()
print("SETTLED=" + info.name, info.accelerated, info.reason)
assert hashing.chunk_hash(data, b"pre") == bmt.chunk_hash(data, b"pre")
"""


def test_a_daemon_loads_the_kernels_in_the_background_and_switches_to_them():
    """``serve`` listened only once the kernels were compiled: 14-25 s on a fresh install on two busy cores,
    a daemon that did not answer ``/health`` meanwhile. A process that asks for it before importing the
    backend now gets the reference at once and the kernels when they pass their self-test."""
    out = run_python(LOAD_IN_BACKGROUND)
    assert "SETTLED=numba True None" in out, out
    forced = run_python(LOAD_IN_BACKGROUND.replace("hashing.LOADING) or hashing.settled()", "hashing.LOADING) or True"),
                        CHUNKSTORE_HASH_BACKEND="pysha3")
    assert "SETTLED=pysha3 False forced by" in forced, forced  # forced: no load at all, settled at import
