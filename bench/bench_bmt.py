"""BMT chunk hashing throughput: naive vs pysha3 reference vs the numba batch path.

Full 4096-byte chunks (the worst case: no zero subtrees to skip), plain
(``prefix = b""``, the CAC address) and prefixed with a 32-byte anchor (the
sampler's transformed address). Methods:

  naive      a new keccak object per node over concatenated bytes -- the baseline
  reference  chunkstore.swarm.bmt.reference.chunk_hash (safe-pysha3, level-at-a-time)
  numba-1    chunkstore.swarm.bmt.backend batch call, --batch rows per call, one thread,
             scalar permutation only (one keccak at a time)
  numba      the same with the default kernel: wide tree levels 8 pairs per
             vectorised permutation
  numba xT   the default kernel from T threads at once (the kernels release the GIL)

Every ratio is against the naive baseline measured in the same run. Then the
single-lane limit (see bench_keccak.py): L = (fastest single keccak calls/s)
* cores / 128 chunks/s, and the numba path against it; the whole sampler's
target is >= 0.9 L with 2 processes.

Run: ``python bench/bench_bmt.py [--seconds S] [--quick] [--batch N] [--threads T]``.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import threading
import time
import tracemalloc
from collections.abc import Callable

import numpy as np
from benchlib import CALLS_PER_CHUNK, cores, rate, single_lane_limit, vector_width
from sha3 import keccak_256

from chunkstore.swarm.bmt import backend as hashing
from chunkstore.swarm.bmt import reference as bmt

PAYLOAD = 4096
DATA = 8 + PAYLOAD
STRIDE = DATA + 97  # room for a SOC header, as the sampler's buffers have
ANCHOR = bytes(range(1, 33))


def naive_chunk_hash(data: bytes, prefix: bytes = b"") -> bytes:
    """The textbook BMT: list of segments, one fresh keccak object per node."""
    span, payload = data[:8], data[8:]
    payload = payload + bytes(PAYLOAD - len(payload))
    nodes = [payload[i : i + 32] for i in range(0, PAYLOAD, 32)]
    while len(nodes) > 1:
        nodes = [keccak_256(prefix + nodes[i] + nodes[i + 1]).digest() for i in range(0, len(nodes), 2)]
    return keccak_256(prefix + span + nodes[0]).digest()


class Batch:
    """A reusable row buffer of full chunks, the way the sampler feeds the kernels."""

    def __init__(self, rows: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.buf = rng.integers(0, 256, size=(rows, STRIDE), dtype=np.uint8)
        self.buf[:, :8] = np.frombuffer(PAYLOAD.to_bytes(8, "little"), np.uint8)
        self.lengths = np.full(rows, DATA, np.int64)
        self.offsets = np.zeros(rows, np.int64)
        self.is_soc = np.zeros(rows, np.bool_)
        self.out = np.empty((rows, 32), np.uint8)

    def run(self, prefix: bytes) -> int:
        if prefix:
            hashing.transformed_addresses(self.buf, self.lengths, self.offsets, None, self.is_soc, prefix, self.out)
        else:
            hashing.bmt_hashes(self.buf, self.lengths, self.offsets, b"", self.out)
        return len(self.lengths)


def per_chunk(fn: Callable[[bytes, bytes], bytes], chunks: list[bytes], prefix: bytes) -> Callable[[], int]:
    def burst() -> int:
        for c in chunks:
            fn(c, prefix)
        return len(chunks)

    return burst


def threaded_rate(batches: list[Batch], prefix: bytes, seconds: float, rounds: int = 3) -> float:
    """Aggregate chunks/s of one thread per batch hashing at the same time (median of rounds)."""
    rates = []
    for _ in range(rounds):
        done = [0] * len(batches)
        stop = threading.Event()

        def work(k: int, done: list[int] = done, stop: threading.Event = stop) -> None:
            while not stop.is_set():
                done[k] += batches[k].run(prefix)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(len(batches))]
        start = time.perf_counter()
        for t in threads:
            t.start()
        time.sleep(seconds / rounds)
        stop.set()
        for t in threads:
            t.join()
        rates.append(sum(done) / (time.perf_counter() - start))
    return statistics.median(rates)


def traced_peak(fn: Callable[[], int]) -> int:
    """Peak Python-heap bytes allocated during one call of ``fn`` (numpy buffers included)."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="time per measurement (default 3)")
    ap.add_argument("--quick", action="store_true", help="0.6 s per measurement")
    ap.add_argument("--batch", type=int, default=256, help="rows per numba call (default 256)")
    ap.add_argument("--threads", type=int, default=0, help="threads for the 'numba xT' row (default: cores)")
    args = ap.parse_args()
    seconds = 0.6 if args.quick else args.seconds
    ncores = cores()
    nthreads = args.threads or ncores

    batches = [Batch(args.batch, seed) for seed in range(max(1, nthreads))]
    chunks = [batches[0].buf[i, :DATA].tobytes() for i in range(8)]
    for prefix in (b"", ANCHOR):
        # The methods must agree before their speeds mean anything.
        batches[0].run(prefix)
        for i, c in enumerate(chunks):
            expect = bmt.chunk_hash(c, prefix)
            assert naive_chunk_hash(c, prefix) == expect and batches[0].out[i].tobytes() == expect

    print(f"backend={hashing.BACKEND} cores={ncores} vector={vector_width()} batch={args.batch} threads={nthreads} seconds={seconds}")
    print(f"full {PAYLOAD}-byte chunks; prefixed = {len(ANCHOR)}-byte anchor")
    print(f"{'method':<12} {'prefix':<9} {'us/chunk':>9} {'chunks/s':>10} {'x naive':>8} {'peak heap':>10}")
    results: dict[tuple[str, bytes], float] = {}
    batch_name = "numba" if hashing.BACKEND == "numba" else "batch"
    for prefix in (b"", ANCHOR):
        label = "prefixed" if prefix else "plain"
        methods: list[tuple[str, Callable[[], int], bool]] = [
            ("naive", per_chunk(naive_chunk_hash, chunks, prefix), True),
            ("reference", per_chunk(bmt.chunk_hash, chunks, prefix), True),
        ]
        if hashing.BACKEND == "numba":
            methods.append(("numba-1", lambda p=prefix: batches[0].run(p), False))
        methods.append((batch_name, lambda p=prefix: batches[0].run(p), True))
        for name, fn, wide in methods:
            hashing._WIDE = wide  # private switch, flipped only here, single-threaded
            r = rate(fn, seconds)
            results[(name, prefix)] = r
            peak = traced_peak(fn)
            hashing._WIDE = True
            ratio = r / results[("naive", prefix)]
            print(f"{name:<12} {label:<9} {1e6 / r:>9.2f} {r:>10,.0f} {ratio:>8.2f} {peak / 1024:>8.0f}KB")
        r = threaded_rate(batches[:nthreads], prefix, seconds)
        results[("threads", prefix)] = r
        ratio = r / results[("naive", prefix)]
        print(f"{f'numba x{nthreads}':<12} {label:<9} {1e6 / r:>9.2f} {r:>10,.0f} {ratio:>8.2f} {'':>10}")

    name, best, rates = single_lane_limit(seconds)
    print("single keccak, 96-byte input:")
    for k, v in rates.items():
        print(f"  {k:<20} {'n/a' if v is None else f'{v:>12,.0f} calls/s'}")
    limit = best * ncores / CALLS_PER_CHUNK
    print(f"L = {best:,.0f} * {ncores} cores / {CALLS_PER_CHUNK} = {limit:,.0f} chunks/s ({name})")
    one = results[(batch_name, ANCHOR)]
    many = results[("threads", ANCHOR)]
    if ("numba-1", ANCHOR) in results:
        scalar = results[("numba-1", ANCHOR)]
        print(f"prefixed, 1 thread, scalar: {scalar:>10,.0f} chunks/s = {scalar / (limit / ncores):.2f} x L/core")
    print(f"prefixed, 1 thread : {one:>10,.0f} chunks/s = {one / (limit / ncores):.2f} x L/core")
    print(f"prefixed, {nthreads} threads: {many:>10,.0f} chunks/s = {many / limit:.2f} x L (sampler target >= 0.9 L)")
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(f"peak RSS of this process: {maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
