"""LMDB map size: what a large map costs, and what the puts' map-room check costs.

    python bench/bench_mapsize.py [--chunks 5000] [--rounds 3]

1. Opening a 4-shard store with maps of 256 GiB (the old fixed default, the
   baseline), the size this machine's default picks (chunkstore/store/mapsize.py)
   and 4 TiB per shard: open + close time, virtual and resident memory added,
   and the files' size after the same puts. A map reserves address space only.
2. Puts with the map-room check (chunkstore/store/store.py ``_check_map_room``) and
   without it (the baseline, a no-op in its place), alternating rounds: far
   from the map's end (the check reads two LMDB counters) and near it (a
   small map, where it also counts the databases' pages).

Chunks and stamps come from bench/benchlib.py's cache.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

from benchlib import BATCH_ID, BUCKET_DEPTH, DEPTH, KEY, chunks, payload

from chunkstore.reserve import ReserveStore
from chunkstore.store.batchstore import Batch
from chunkstore.store.mapsize import GiB, TiB, shard_map_size
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.signer import Signer


def vm() -> tuple[int, int]:
    """(VmSize, VmRSS) of this process in bytes."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmSize:", "VmRSS:")):
                key, value, _ = line.split()
                out[key] = int(value) * 1024
    return out["VmSize:"], out["VmRSS:"]


def files(path: str) -> int:
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs if f == "data.mdb")


def new_store(path: str, map_size: int | None) -> ReserveStore:
    store = ReserveStore(path, shards=4, map_size=map_size)
    if not store.batches.find(BATCH_ID):
        store.batches.add(Batch(BATCH_ID, Signer(KEY).address, DEPTH, BUCKET_DEPTH, False, 10**15, 0))
    return store


def bench_open(workdir: str, items: list, datas: list, rounds: int) -> None:
    sizes = [("256 GiB (old default)", 256 * GiB), (f"default here ({shard_map_size(workdir, 4) / GiB:g} GiB)", None),
             ("4 TiB", 4 * TiB)]
    print("1. opening a 4-shard store (median of 20 opens), after putting the same chunks")
    base = None
    for label, size in sizes:
        path = os.path.join(workdir, f"open-{size}")
        with new_store(path, size) as store:
            store.put_many([(datas[i], items[i][1]) for i in range(len(items))])
        times, vms, rss = [], [], []
        for _ in range(20 * rounds):
            v0, r0 = vm()
            t = time.perf_counter()
            store = ReserveStore(path, map_size=size)
            times.append(time.perf_counter() - t)
            v1, r1 = vm()
            store.close()
            vms.append(v1 - v0)
            rss.append(r1 - r0)
        t_med = statistics.median(times)
        base = base or t_med
        print(f"  {label:<28} open {t_med * 1e3:7.2f} ms ({t_med / base:4.2f}x)  virtual +{statistics.median(vms) / GiB:8.1f} GiB"
              f"  resident +{statistics.median(rss) / 2**20:5.1f} MiB  files {files(path) / 2**20:7.1f} MiB")


def put_rate(path: str, map_size: int | None, items: list, datas: list, group: int, check: bool) -> float:
    if os.path.exists(path):
        shutil.rmtree(path)
    with new_store(path, map_size) as store:
        if not check:
            store._check_map_room = lambda needs: None
        t = time.perf_counter()
        for lo in range(0, len(items), group):
            store.put_many([(datas[i], items[i][1]) for i in range(lo, min(len(items), lo + group))])
        return len(items) / (time.perf_counter() - t)


def bench_check(workdir: str, items: list, datas: list, rounds: int) -> None:
    print("2. puts with the map-room check vs without (baseline), median chunks/s of alternating rounds")
    for label, group in [("put", 1), ("put_many of 128", 128)]:
        with_, without = [], []
        for _ in range(rounds):
            without.append(put_rate(os.path.join(workdir, "p"), None, items, datas, group, False))
            with_.append(put_rate(os.path.join(workdir, "p"), None, items, datas, group, True))
        w, wo = statistics.median(with_), statistics.median(without)
        print(f"  {label:<20} with {w:>9,.0f}/s  without {wo:>9,.0f}/s  ratio {w / wo:5.3f}")
    # Near the map's end the check also counts the databases' pages: once per shard a put touches.
    with new_store(os.path.join(workdir, "p"), None) as store:
        shard = store.shard(0)
        t = time.perf_counter()
        for _ in range(2000):
            shard.map_room()
        count_us = (time.perf_counter() - t) / 2000 * 1e6
    group_us = 128 / statistics.median(with_) * 1e6
    print(f"  near the map's end: counting pages takes {count_us:.1f} us per shard; against a put_many of 128 "
          f"({group_us / 1e3:.1f} ms) on 4 shards that is {4 * count_us / group_us:.2%}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one, removed after)")
    args = ap.parse_args(argv)
    items = chunks(args.chunks)
    datas = [make_cac(payload(i))[1] for i in range(args.chunks)]
    workdir = args.dir or tempfile.mkdtemp(prefix="bench_mapsize_")
    try:
        bench_open(workdir, items, datas, args.rounds)
        bench_check(workdir, items, datas, args.rounds)
    finally:
        if args.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
