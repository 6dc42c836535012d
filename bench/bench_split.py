"""Split and join throughput of the file-tree primitives, with peak memory.

For 1 MiB and 64 MiB of random bytes, three shapes of tree: plain (level 0,
what ``Swarm-Redundancy-Level: 0`` uploads), encrypted (64-byte references),
and MEDIUM (Bee's default upload level: Reed-Solomon parities, level bytes
in spans, root replicas). Split streams the input in 64 KiB writes into a
sink that keeps the chunks in a dict; join reads the whole file back through
``Joiner.read`` (every chunk verified against its address).

Baselines measured in the same run:
  keccak       one plain Keccak-256 over the same bytes (safe-pysha3): the cost
               of touching every byte once with the hash the tree is made of
  split-ref    plain split with the reference one-chunk-at-a-time BMT
               (chunkstore.swarm.bmt) instead of the batch hasher
Every ratio printed is "MiB/s of this row / MiB/s of the keccak baseline".

Peak memory: tracemalloc's peak of Python allocations during a streaming
split of the input with a sink that drops the chunks (so it is the
splitter's own footprint, which must not grow with the input), in a second
pass so the tracing does not slow the timed runs.

Run: ``python bench/bench_split.py [--sizes 1,64] [--repeat N]``.
"""

from __future__ import annotations

import argparse
import os
import time
import tracemalloc

from sha3 import keccak_256

from chunkstore.swarm.file import Joiner, Splitter
from chunkstore.swarm.file.hasher import reference_hasher
from chunkstore.swarm.redundancy.level import Level

MIB = 1 << 20
PIECE = 64 << 10
SHAPES = {
    "plain": {},
    "encrypted": {"encrypt": True},
    "medium": {"level": Level.MEDIUM},
}


def split(data: bytes, store: dict | None, **options) -> bytes:
    sink = store.__setitem__ if store is not None else (lambda _a, _d: None)
    splitter = Splitter(sink, **options)
    mv = memoryview(data)
    for i in range(0, len(data), PIECE):
        splitter.write(mv[i : i + PIECE])
    return splitter.finish()


def best_of(repeat: int, fn) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def peak_split_memory(data: bytes, **options) -> int:
    tracemalloc.start()
    split(data, None, **options)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,64", help="input sizes in MiB, comma-separated")
    parser.add_argument("--repeat", type=int, default=2, help="timed runs per row; the best counts")
    args = parser.parse_args()
    # Warm the batch hasher (numba compile or cache load) outside the timings.
    split(os.urandom(5 * 4096), {}, encrypt=True, level=Level.MEDIUM)

    print(f"{'size':>6} {'row':<18} {'MiB/s':>8} {'x keccak':>9} {'peak MiB':>9}")
    for size_mib in (int(s) for s in args.sizes.split(",")):
        data = os.urandom(size_mib * MIB)
        keccak_s = best_of(args.repeat, lambda d=data: keccak_256(d).digest())
        base = size_mib / keccak_s
        print(f"{size_mib:>4}Mi {'keccak (baseline)':<18} {base:>8.1f} {1.0:>9.2f} {'':>9}")
        ref_s = best_of(1, lambda d=data: split(d, {}, hasher=reference_hasher))
        print(
            f"{size_mib:>4}Mi {'split-ref plain':<18} {size_mib / ref_s:>8.1f} {size_mib / ref_s / base:>9.3f} {'':>9}"
        )
        for name, options in SHAPES.items():
            store: dict = {}
            reference = split(data, store, **options)
            split_s = best_of(args.repeat, lambda d=data, o=options: split(d, {}, **o))
            peak = peak_split_memory(data, **options) / MIB

            def join(r=reference, s=store, n=size_mib * MIB) -> None:
                joined = 0
                for piece in Joiner(r, s.__getitem__).read():
                    joined += len(piece)
                assert joined == n

            join_s = best_of(args.repeat, join)
            assert b"".join(Joiner(reference, store.__getitem__).read()) == data
            rate_split = size_mib / split_s
            rate_join = size_mib / join_s
            print(f"{size_mib:>4}Mi {'split ' + name:<18} {rate_split:>8.1f} {rate_split / base:>9.3f} {peak:>9.2f}")
            print(f"{size_mib:>4}Mi {'join ' + name:<18} {rate_join:>8.1f} {rate_join / base:>9.3f} {'':>9}")
            print(f"{'':>6} {'':<18} chunks stored: {len(store)}")


if __name__ == "__main__":
    main()
