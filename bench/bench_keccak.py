"""Keccak limits: the single-lane limit L, and the lane kernel's own speed (the kernel bound).

A BMT chunk hash is 128 one-block keccak calls, so the fastest single keccak
bounds what any per-call implementation can reach:
``L = calls/s * cores / 128`` chunks/s. This script measures

* safe-pysha3 ``keccak_256(data).digest()`` on 96-byte inputs (C, but one
  Python call each),
* OpenSSL's SHA3-256 (same permutation, only the padding differs) through
  ``openssl speed -evp sha3-256 -bytes 96 -seconds 1``, if openssl is on PATH,
* the numba permutations alone: scalar, the 8-way loop of the per-chunk
  kernel, and the vector-lane permutation of the lane kernel
  (chunkstore/keccak_lanes.py) at 4 and 8 lanes (``--lanes`` widths), per
  instance; and numba ``keccak256_batch`` on 96-byte rows,
* the kernel bound: chunks/s if nothing ran but 128 lane permutations per
  chunk on every core, ``cores / (128 * t_perm)``. The sampler cannot beat it.

Run: ``PYTHONPATH=. python bench/bench_keccak.py [--seconds S] [--quick] [--lanes 4,8]``.
bench_bmt.py and bench_sample.py import the helpers below.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable

import numpy as np
from sha3 import keccak_256

MSG_SIZE = 96  # 32-byte anchor + 64-byte node: the typical sampler keccak input
CALLS_PER_CHUNK = 128


def cores() -> int:
    """CPUs this process may run on (affinity), not the host's total."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


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
    from chunkstore import hashing

    if hashing.BACKEND != "numba":
        return None
    from chunkstore import keccak_numba

    state = np.zeros(25, np.uint64)
    keccak_numba.permutation_loop(state, 1)
    return rate(lambda: (keccak_numba.permutation_loop(state, 100_000), 100_000)[1], seconds)


def numba_x8_rate(seconds: float) -> float | None:
    """Keccak-f[1600] instances/s through the 8-way permutation on one thread, or None."""
    from chunkstore import hashing

    if hashing.BACKEND != "numba":
        return None
    from chunkstore import keccak_numba

    state = np.zeros(25 * 8, np.uint64)
    keccak_numba.permutation_loop_x8(state, 1)
    return rate(lambda: (keccak_numba.permutation_loop_x8(state, 20_000), 8 * 20_000)[1], seconds)


def numba_batch_rate(seconds: float, size: int = MSG_SIZE, rows: int = 4096) -> float | None:
    """hashing.keccak256_batch calls/s on ``size``-byte rows, or None if the numba backend is off."""
    from chunkstore import hashing

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
    from chunkstore import hashing

    if hashing.BACKEND != "numba":
        return None
    from chunkstore import keccak_lanes

    lanes = keccak_lanes.LANES if width is None else width
    if lanes == keccak_lanes.LANES:
        loop = keccak_lanes.permutation_loop_lanes
    else:
        from numba import njit

        permute = keccak_lanes._make_permute(lanes)

        @njit(nogil=True)
        def loop(state: np.ndarray, count: int) -> None:
            for _ in range(count):
                permute(state)

    state = np.zeros(25 * lanes, np.uint64)
    loop(state, 1)
    count = max(1, 160_000 // lanes)
    return rate(lambda: (loop(state, count), lanes * count)[1], seconds)


def kernel_bound(perm_rate: float, n_cores: int) -> float:
    """Chunks/s if every core did nothing but 128 lane permutations per chunk."""
    return perm_rate * n_cores / CALLS_PER_CHUNK


def single_lane_limit(seconds: float) -> tuple[str, float, dict[str, float | None]]:
    """(name, calls/s) of the fastest single keccak here, plus every rate measured."""
    rates: dict[str, float | None] = {
        "pysha3 keccak_256": pysha3_rate(seconds),
        "openssl sha3-256": openssl_rate(),
    }
    name, best = max(((k, v) for k, v in rates.items() if v is not None), key=lambda kv: kv[1])
    return name, best, rates


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=2.0, help="time per measurement (default 2)")
    ap.add_argument("--quick", action="store_true", help="0.5 s per measurement")
    ap.add_argument("--lanes", default="4,8", help="lane widths of the vector permutation to compare (default 4,8)")
    args = ap.parse_args()
    seconds = 0.5 if args.quick else args.seconds

    from chunkstore import hashing

    n = cores()
    print(f"backend={hashing.BACKEND} cores={n} input={MSG_SIZE} bytes")
    name, best, rates = single_lane_limit(seconds)
    for k, v in rates.items():
        print(f"  {k:<28} {'n/a' if v is None else f'{v:>12,.0f} calls/s  {1e6 / v:6.3f} us/call'}")
    perm = numba_permutation_rate(seconds)
    perm8 = numba_x8_rate(seconds)
    batch = numba_batch_rate(seconds)
    if perm is not None and perm8 is not None and batch is not None:
        print(f"  {'numba keccak_f1600':<28} {perm:>12,.0f} perms/s  {1e6 / perm:6.3f} us/perm")
        print(f"  {'numba keccak_f1600_x8':<28} {perm8:>12,.0f} perms/s  {1e6 / perm8:6.3f} us/perm (per instance)")
        print(f"  {'numba keccak256_batch':<28} {batch:>12,.0f} calls/s  {1e6 / batch:6.3f} us/call")
    chosen = None
    if perm is not None:
        from chunkstore import keccak_lanes

        for width in sorted({int(x) for x in args.lanes.split(",")} | {keccak_lanes.LANES}):
            r = lane_permutation_rate(seconds, width)
            mark = " (the lane kernel's width)" if width == keccak_lanes.LANES else ""
            print(f"  {f'lane permutation x{width}':<28} {r:>12,.0f} perms/s  {1e6 / r:6.3f} us/perm (per instance){mark}")
            if width == keccak_lanes.LANES:
                chosen = r
    limit = best * n / CALLS_PER_CHUNK
    print(f"single-lane limit ({name}): L = {best:,.0f} * {n} / {CALLS_PER_CHUNK} = {limit:,.0f} chunks/s")
    if chosen is not None:
        bound = kernel_bound(chosen, n)
        print(f"kernel bound: {n} cores / ({CALLS_PER_CHUNK} x {1e6 / chosen:.3f} us) = {bound:,.0f} chunks/s "
              f"= {bound / limit:.2f} x L")  # fmt: skip


if __name__ == "__main__":
    main()
