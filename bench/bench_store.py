"""Chunk store benchmark: puts (single and batched), get vs get_into, allocations, neighbourhood scans.

    python bench/bench_store.py [--chunks 100000] [--shards 4] [--single 5000] [--batch 1000]

Chunks are full 4096-byte CACs, stamped with a fixed key in one batch. Making
them costs a BMT hash and a signature each, so their addresses and stamps are
cached in bench/.cache/ (payloads are re-derived from a seed; benchlib.py). Every store
figure is measured in the same run as its baseline (``get`` for ``get_into``).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
import tracemalloc

from benchlib import BATCH_ID, BUCKET_DEPTH, DEPTH, KEY, chunks, payload

from chunkstore.reserve import ReserveStore
from chunkstore.store.batchstore import Batch
from chunkstore.store.shard import ShardReader
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.stamp import parse_stamp


def rate(label: str, n: int, seconds: float, unit: str = "ops") -> float:
    per = seconds / n * 1e6
    print(f"  {label:<38} {n / seconds:>12,.0f} {unit}/s  {per:>9.2f} us/op")
    return per


def alloc(fn, calls: int) -> tuple[float, int]:
    """(bytes left allocated per call, peak transient bytes) after warm-up."""
    for _ in range(500):
        fn()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        for _ in range(calls):
            fn()
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return (current - base) / calls, peak - base


def du(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            total += os.stat(os.path.join(root, name)).st_blocks * 512
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--single", type=int, default=5000, help="how many of the chunks to put one by one")
    ap.add_argument("--batch", type=int, default=1000, help="put_many batch size for the rest")
    ap.add_argument("--dir", default=None, help="store directory (default: a temporary one, removed after)")
    args = ap.parse_args(argv)
    n = args.chunks
    items = chunks(n)
    datas = [make_cac(payload(i))[1] for i in range(n)] if n <= 200_000 else None
    data_of = (lambda i: datas[i]) if datas is not None else (lambda i: make_cac(payload(i))[1])
    workdir = args.dir or tempfile.mkdtemp(prefix="bench_store_")
    print(f"store in {workdir}: {n} chunks of 4104 bytes, {args.shards} shards, python {sys.version.split()[0]}")
    try:
        with ReserveStore(workdir, args.shards) as store:
            owner = Signer(KEY).address
            store.batches.add(Batch(BATCH_ID, owner, DEPTH, BUCKET_DEPTH, False, 10**18, 0))
            single = min(args.single, n)
            print("puts (each validates: BMT hash + stamp signature recovery)")
            t = time.perf_counter()
            for i in range(single):
                store.put(data_of(i), items[i][1])
            put_single = rate("put (one durable commit each)", single, time.perf_counter() - t)
            t = time.perf_counter()
            for lo in range(single, n, args.batch):
                hi = min(n, lo + args.batch)
                store.put_many([(data_of(i), items[i][1]) for i in range(lo, hi)])
            if n > single:
                put_batched = rate(f"put_many (batches of {args.batch})", n - single, time.perf_counter() - t)
                print(f"  -> batched/single speed-up {put_single / put_batched:.2f}x")
            stamps = [parse_stamp(s) for _, s in items[:2000]]
            addrs = [a for a, _ in items]
            t = time.perf_counter()
            for i, st in enumerate(stamps):
                store.put(data_of(i), st)
            rate("put of an exact repeat (no-op)", len(stamps), time.perf_counter() - t)
            stats = store.stats()
            size = du(workdir)
            print(f"  stats: {stats['chunks']} chunks, {stats['stamps']} stamps, {stats['bytes']:,} data bytes; "
                  f"on disk {size:,} bytes = {size / max(1, stats['chunks']):,.0f} per chunk")

            print("reads (random order, all chunks)")
            order = addrs[:]
            random.Random(7).shuffle(order)
            buf = memoryview(bytearray(4104))
            get = store.get
            get_into = store.get_into
            t = time.perf_counter()
            for a in order:
                get(a)
            get_us = rate("get (baseline)", n, time.perf_counter() - t)
            t = time.perf_counter()
            for a in order:
                get_into(a, buf)
            into_us = rate("get_into (reused buffer)", n, time.perf_counter() - t)
            print(f"  -> get_into/get time ratio {into_us / get_us:.2f}")
            a0 = order[0]
            g_net, g_peak = alloc(lambda: get(a0), 20_000)
            i_net, i_peak = alloc(lambda: get_into(a0, buf), 20_000)
            print(f"  allocations per call (tracemalloc, after warm-up): get net {g_net:.2f} B, peak {g_peak} B; "
                  f"get_into net {i_net:.2f} B, peak {i_peak} B")
            print(f"  -> get_into/get transient bytes {i_peak / g_peak:.2f}")

            print("neighbourhood iteration (index only)")
            t = time.perf_counter()
            count = sum(1 for _ in store.iter_neighbourhood(b"", 0))
            rate("all shards merged, depth 0", count, time.perf_counter() - t, "entries")
            t = time.perf_counter()
            count = sum(1 for s in range(store.shard_count) for _ in store.iter_neighbourhood(b"", 0, shard=s))
            rate("shard by shard, depth 0", count, time.perf_counter() - t, "entries")
            anchor = addrs[0][:1]
            t = time.perf_counter()
            count = sum(1 for _ in store.iter_neighbourhood(anchor, 4))
            rate(f"merged, depth 4 (anchor {anchor.hex()})", max(count, 1), time.perf_counter() - t, "entries")
            t = time.perf_counter()
            count = 0
            for s in range(store.shard_count):
                with ShardReader(workdir, s) as reader, reader.snapshot() as snap:
                    for addr, *_ in snap.iter_range():
                        snap.read_into(addr, buf)
                        count += 1
            rate("ShardReader scan + read_into", count, time.perf_counter() - t, "chunks")
    finally:
        if args.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
