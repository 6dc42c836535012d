"""What the benchmarks share: timing, the single-lane keccak limit L, a local cache, stamped chunks.

Run the benchmarks with the project installed (``make venv`` installs it in
editable mode), from anywhere: ``.venv/bin/python bench/bench_bmt.py``. Each
script imports this module from its own directory, which Python puts first
on the path of a script it runs.

Every figure a benchmark prints comes with a baseline measured in the same
run; the helpers here only measure. Generated inputs (stamped chunks, built
stores, tar files) are cached under bench/.cache/, which is never committed.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sha3 import keccak_256

from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.constants import CHUNK_SIZE, STAMP_SIZE
from chunkstore.swarm.directio import ALIGN, aligned_buffer, open_direct
from chunkstore.swarm.postage import StampIssuer
from chunkstore.swarm.signer import Signer

CACHE = Path(__file__).resolve().parent / ".cache"
T0 = 1_700_000_000_000_000_000  # stamp timestamps of generated chunks count up from here


def cache_dir() -> Path:
    """bench/.cache, created with a .gitignore that keeps it out of the repository."""
    CACHE.mkdir(exist_ok=True)
    ignore = CACHE / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n")
    return CACHE


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


# ---------------------------------------------------------------- timing and the keccak limit

MSG_SIZE = 96  # 32-byte anchor + 64-byte node: the typical sampler keccak input
CALLS_PER_CHUNK = 128


def cores() -> int:
    """CPUs this process may run on (affinity), not the host's total."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def vector_width() -> str:
    """The CPU's widest vector extension and the target numba compiles for, as a benchmark prints it.

    The lane kernel's speed, and so every kernel bound, depends on it
    (``AVX-512`` holds 8 lanes in one register, ``AVX2`` 4), and figures are
    rerun on other machines: e.g. ``AVX-512 (JIT target icelake-server)``.
    """
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    widest = next((name for flag, name in (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX")) if flag in flags),
                  "no AVX" if flags else "unknown")  # fmt: skip
    target = os.environ.get("NUMBA_CPU_NAME")
    if not target:
        try:
            import llvmlite.binding as llvm

            target = llvm.get_host_cpu_name()
        except Exception:  # noqa: BLE001 - only a label
            target = "unknown"
    return f"{widest} (JIT target {target})"


def rate(fn: Callable[[], int], seconds: float, rounds: int = 5) -> float:
    """Median of ``rounds`` rates of ``fn`` (which returns how many items it did).

    The median, not the mean or best: shared VMs show bursts of interference
    and one round caught in a burst should not decide the result.
    """
    per_round = seconds / rounds
    rates = []
    for _ in range(rounds):
        done = 0
        start = time.perf_counter()
        while True:
            done += fn()
            elapsed = time.perf_counter() - start
            if elapsed >= per_round:
                break
        rates.append(done / elapsed)
    return statistics.median(rates)


def pysha3_rate(seconds: float, size: int = MSG_SIZE) -> float:
    """keccak_256 calls/s on ``size``-byte inputs, one Python call per hash."""
    data = bytes(range(size % 256)) * (size // 256) + bytes(size % 256)
    h = keccak_256

    def burst() -> int:
        for _ in range(1000):
            h(data).digest()
        return 1000

    return rate(burst, seconds)


def openssl_rate(size: int = MSG_SIZE) -> float | None:
    """SHA3-256 calls/s from ``openssl speed`` on ``size``-byte inputs, or None without openssl."""
    exe = shutil.which("openssl")
    if exe is None:
        return None
    cmd = [exe, "speed", "-evp", "sha3-256", "-bytes", str(size), "-seconds", "1"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    # Table line: "sha3-256   225657.50k" -- thousands of bytes per second.
    m = re.search(r"^sha3-256\s+([\d.]+)k", proc.stdout, re.MULTILINE)
    if m is None:
        return None
    return float(m.group(1)) * 1000.0 / size


def numba_permutation_rate(seconds: float) -> float | None:
    """Keccak-f[1600] permutations/s on one thread, or None if the numba backend is off."""
    from chunkstore.swarm.bmt import backend as hashing

    if hashing.BACKEND != "numba":
        return None
    from chunkstore.swarm.bmt import numba_kernels as keccak_numba

    state = np.zeros(25, np.uint64)
    keccak_numba.permutation_loop(state, 1)
    return rate(lambda: (keccak_numba.permutation_loop(state, 100_000), 100_000)[1], seconds)


def numba_x8_rate(seconds: float) -> float | None:
    """Keccak-f[1600] instances/s through the 8-way permutation on one thread, or None."""
    from chunkstore.swarm.bmt import backend as hashing

    if hashing.BACKEND != "numba":
        return None
    from chunkstore.swarm.bmt import numba_kernels as keccak_numba

    state = np.zeros(25 * 8, np.uint64)
    keccak_numba.permutation_loop_x8(state, 1)
    return rate(lambda: (keccak_numba.permutation_loop_x8(state, 20_000), 8 * 20_000)[1], seconds)


def numba_batch_rate(seconds: float, size: int = MSG_SIZE, rows: int = 4096) -> float | None:
    """hashing.keccak256_batch calls/s on ``size``-byte rows, or None if the numba backend is off."""
    from chunkstore.swarm.bmt import backend as hashing

    if hashing.BACKEND != "numba":
        return None
    buf = np.random.default_rng(0).integers(0, 256, size=(rows, size), dtype=np.uint8)
    lengths = np.full(rows, size, np.int64)
    out = np.empty((rows, 32), np.uint8)
    hashing.keccak256_batch(buf, lengths, out)
    return rate(lambda: (hashing.keccak256_batch(buf, lengths, out), rows)[1], seconds)


def lane_permutation_rate(seconds: float, width: int | None = None) -> float | None:
    """Keccak-f[1600] instances/s through the lane kernel's vector permutation on one thread, or None.

    ``width`` None: the width the lane kernel uses; other widths are compiled
    here (uncached) to compare.
    """
    from chunkstore.swarm.bmt import backend as hashing

    if hashing.BACKEND != "numba":
        return None
    from chunkstore.swarm.bmt import lane_kernels

    lanes = lane_kernels.LANES if width is None else width
    if lanes == lane_kernels.LANES:
        loop = lane_kernels.permutation_loop_lanes
    else:
        from numba import njit

        permute = lane_kernels._make_permute(lanes)

        @njit(nogil=True)  # type: ignore[untyped-decorator]
        def loop(state: np.ndarray, count: int) -> None:
            for _ in range(count):
                permute(state)

    state = np.zeros(25 * lanes, np.uint64)
    loop(state, 1)
    count = max(1, 160_000 // lanes)
    return rate(lambda: (loop(state, count), lanes * count)[1], seconds)


def kernel_bound(perm_rate: float, n_cores: int) -> float:
    """Chunks/s if every core did nothing but 128 lane permutations per chunk (the sampler cannot beat it)."""
    return perm_rate * n_cores / CALLS_PER_CHUNK


def single_lane_limit(seconds: float) -> tuple[str, float, dict[str, float | None]]:
    """(name, calls/s) of the fastest single keccak here, plus every rate measured."""
    rates: dict[str, float | None] = {
        "pysha3 keccak_256": pysha3_rate(seconds),
        "openssl sha3-256": openssl_rate(),
    }
    name, best = max(((k, v) for k, v in rates.items() if v is not None), key=lambda kv: kv[1])
    return name, best, rates


# ---------------------------------------------------------------- stamped full chunks (bench_store, bench_reserve)

KEY = hashlib.sha256(b"bench_store batch owner").digest()
BATCH_ID = hashlib.sha256(b"bench_store batch").digest()
DEPTH, BUCKET_DEPTH = 32, 16  # 65536 positions per bucket: room for every worker range


RANGE = 4096  # chunks made per task; each task stamps in its own positions of every bucket
POSITIONS_PER_RANGE = 64  # a range puts only a handful into one bucket


def payload(i: int) -> bytes:
    return random.Random(i).randbytes(CHUNK_SIZE)


def _make(lo: int, hi: int) -> list[tuple[bytes, bytes]]:
    first = (lo // RANGE) * POSITIONS_PER_RANGE
    issuer = StampIssuer(Signer(KEY), BATCH_ID, DEPTH, BUCKET_DEPTH, positions=range(first, 1 << (DEPTH - BUCKET_DEPTH)))
    out = []
    for i in range(lo, hi):
        addr, _ = make_cac(payload(i))
        out.append((addr, issuer.stamp(addr, timestamp_ns=T0 + i).to_bytes()))
    return out


def chunks(n: int) -> list[tuple[bytes, bytes]]:
    """(address, stamp) of chunks 0..n-1 (full payloads ``payload(i)``), from the cache or made in parallel."""
    path = cache_dir() / f"chunks-{n}.bin"
    rec = 32 + STAMP_SIZE
    if path.exists():
        raw = path.read_bytes()
        if len(raw) == n * rec:
            return [(raw[i : i + 32], raw[i + 32 : i + rec]) for i in range(0, len(raw), rec)]
    t = time.perf_counter()
    with ProcessPoolExecutor() as pool:
        parts = pool.map(_make, range(0, n, RANGE), [min(n, lo + RANGE) for lo in range(0, n, RANGE)])
        out = [item for part in parts for item in part]
    path.write_bytes(b"".join(a + s for a, s in out))
    print(f"made {n} stamped chunks in {time.perf_counter() - t:.1f}s (cached in {path})")
    return out


@dataclass(frozen=True)
class DiskRates:
    """What the disk under some files delivers right now, read around the page cache."""

    sequential_bps: float  # bytes/s of ``streams`` concurrent streams of 1 MiB reads
    streams: int
    random_pps: float  # 4 KiB pages/s at random offsets, ``depth`` reads in flight
    depth: int


def disk_rates(files: list[Path], seconds: float = 1.5, depth: int = 32, streams: int = 2) -> DiskRates | None:
    """Measure the disk a cold sample reads ``files`` from: sequential and random ``O_DIRECT`` reads, now.

    A cold sample's time is the disk's as much as the code's, and a shared
    VM's disk swings: 4 KiB random reads here ran at 3,400-5,500 pages/s one
    hour and 13,600-68,900 the next (1 to 64 in flight). So a cold figure
    is printed beside these, measured in the same run. Reads bypass the page
    cache and leave it as it was. None where ``O_DIRECT`` is refused (tmpfs).
    """
    fds = []
    try:
        for f in files:
            fd, direct = open_direct(str(f), os.O_RDONLY)
            fds.append(fd)
            if not direct:
                return None
        sizes = [os.fstat(fd).st_size for fd in fds]
        block = 1 << 20

        def stream(i: int) -> int:
            fd, size = fds[i % len(fds)], sizes[i % len(sizes)]
            buf = aligned_buffer(block)
            last = max(0, size // block - 1)  # the last whole block: O_DIRECT reads whole aligned blocks
            at = random.Random(i).randint(0, last)
            done, end = 0, time.perf_counter() + seconds
            while time.perf_counter() < end:
                got = os.preadv(fd, [buf], at * block)
                if got <= 0:
                    break
                done += got
                at = at + 1 if at < last else 0
            return done

        t = time.perf_counter()
        with ThreadPoolExecutor(streams) as ex:
            total = sum(ex.map(stream, range(streams)))
        sequential = total / (time.perf_counter() - t)

        def pages(i: int) -> int:
            rng = random.Random(1000 + i)
            buf = aligned_buffer(ALIGN)
            n, end = 0, time.perf_counter() + seconds
            while time.perf_counter() < end:
                j = rng.randrange(len(fds))
                os.preadv(fds[j], [buf], rng.randrange(max(1, sizes[j] // ALIGN)) * ALIGN)
                n += 1
            return n

        t = time.perf_counter()
        with ThreadPoolExecutor(depth) as ex:
            total = sum(ex.map(pages, range(depth)))
        return DiskRates(sequential, streams, total / (time.perf_counter() - t), depth)
    finally:
        for fd in fds:
            os.close(fd)


def durable_write_rate(directory: str | Path, nbytes: int = 256 << 20, streams: int = 2) -> float:
    """Bytes/s of ``streams`` files written at once through the page cache and ``fdatasync``ed, ``nbytes`` in all, now.

    What an import's publish does with every byte it stores: LMDB writes a
    commit's pages and syncs them, two shards at once (one thread each). So a
    publish's time is set against this rate measured in the same run, as a
    shared VM's disk swings (352-672 MB/s here within an hour). The files
    are removed after.
    """
    block = np.random.default_rng(0).integers(0, 256, 1 << 20, dtype=np.uint8).tobytes()
    per_stream = max(1, nbytes // len(block) // streams)

    def write(_: int) -> None:
        fd, path = tempfile.mkstemp(prefix=".write-rate-", dir=directory)
        try:
            for _ in range(per_stream):
                os.write(fd, block)
            os.fdatasync(fd)
        finally:
            os.close(fd)
            os.unlink(path)

    t = time.perf_counter()
    with ThreadPoolExecutor(streams) as ex:
        list(ex.map(write, range(streams)))
    return streams * per_stream * len(block) / (time.perf_counter() - t)
