"""Reserve eviction benchmark: eviction rate, and upload latency with and without an eviction running.

    python bench/bench_reserve.py [--chunks 100000] [--capacity 20000] [--uploads 1500] [--shards 4] [--step 500]
                                  [--min-evict 1000] [--evict-yield 0.002]

A store is filled with ``--chunks`` full 4096-byte CACs of one batch (bucket
depth 16, as on the network; made and cached like bench/bench_store.py),
with a capacity large enough to keep them all. Then, in the same run:

1. **baseline**: ``--uploads`` single puts (one synced commit each), no eviction;
2. **eviction alone**: a copy of the store is reopened with ``--capacity``
   and the reserve worker evicts down to it: entries per second;
3. **uploads during eviction**: the store is reopened with ``--capacity`` and,
   while the worker evicts in the background, single puts go on in the
   foreground until the eviction is done: eviction rate and put latency.

Uploaded chunks are chosen close enough to the overlay (proximity >= 4) that
the radius the eviction reaches does not refuse them. The eviction has to
be long enough for a few hundred uploads to land during it, hence evicting
four fifths of 100k chunks by default.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time

from benchlib import BATCH_ID, BUCKET_DEPTH, DEPTH, KEY, chunks, payload

from chunkstore.reserve import ReserveOptions, ReserveStore, ReserveWorker
from chunkstore.store.batchstore import Batch
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.postage import StampIssuer
from chunkstore.swarm.proximity import proximity
from chunkstore.swarm.signer import Signer

OVERLAY = bytes.fromhex("9e" + "51" * 31)
UPLOAD_PO = 4


def upload_set(n: int, seed: int, first_position: int) -> list[tuple[bytes, bytes]]:
    """(data, stamp) of ``n`` fresh full chunks with proximity >= UPLOAD_PO to the overlay."""
    positions = range(first_position, 1 << (DEPTH - BUCKET_DEPTH))
    issuer = StampIssuer(Signer(KEY), BATCH_ID, DEPTH, BUCKET_DEPTH, positions=positions)
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        data = rng.randbytes(4096)
        addr, chunk = make_cac(data)
        if proximity(OVERLAY, addr) < UPLOAD_PO:
            continue
        out.append((chunk, issuer.stamp(addr, timestamp_ns=1_800_000_000_000_000_000 + len(out)).to_bytes()))
    return out


def fill(path: str, n: int, shards: int) -> None:
    made = chunks(n)
    batch = Batch(BATCH_ID, Signer(KEY).address, DEPTH, BUCKET_DEPTH, False, 10**15, 0)
    t = time.perf_counter()
    with ReserveStore(path, shards, overlay=OVERLAY, reserve=ReserveOptions(capacity=1 << 30)) as store:
        store.batches.add(batch)
        for lo in range(0, n, 1000):
            store.put_many([(make_cac(payload(i))[1], stamp) for i, (_, stamp) in enumerate(made[lo : lo + 1000], lo)])
    print(f"filled {n} chunks in {time.perf_counter() - t:.1f}s")


def latencies(store: ReserveStore, items: list[tuple[bytes, bytes]], until: object = None) -> list[float]:
    """Put items one by one, timing each; stop early once ``until()`` is true."""
    out = []
    for data, stamp in items:
        if until is not None and until():
            break
        t = time.perf_counter()
        store.put(data, stamp)
        out.append(time.perf_counter() - t)
    return out


def describe(label: str, lat: list[float]) -> dict[str, float]:
    lat = sorted(lat)
    p = {q: lat[min(len(lat) - 1, int(q / 100 * len(lat)))] * 1000 for q in (50, 90, 99)}
    print(f"  {label:<34} n={len(lat):>5}  mean {statistics.fmean(lat) * 1000:6.2f} ms  "
          f"p50 {p[50]:6.2f}  p90 {p[90]:6.2f}  p99 {p[99]:6.2f}  max {lat[-1] * 1000:6.2f} ms")
    return p


def evict(
    path: str, capacity: int, step: int, min_evict: int, uploads: list[tuple[bytes, bytes]] | None,
    evict_yield: float = 0.002,
) -> tuple[int, float, list[float]]:
    """Evict down to ``capacity`` in the background; with ``uploads``, put them meanwhile.

    The eviction is timed until the reserve is first back within capacity
    (uploads keep pushing it over, and the worker keeps following; that tail
    is not the eviction rate). Uploads stop at that moment too.
    """
    opts = ReserveOptions(capacity=capacity, min_evict_count=min_evict, evict_step=step, evict_yield=evict_yield)
    with ReserveStore(path, overlay=OVERLAY, reserve=opts) as store:
        before = store.reserve.status()
        worker = ReserveWorker(store.reserve)
        done_at: list[float] = []

        def within() -> bool:
            if not done_at and store.reserve.over_capacity() == 0:
                done_at.append(time.perf_counter())
            return bool(done_at)

        t = time.perf_counter()
        worker.start()
        lat: list[float] = []
        if uploads is not None:
            lat = latencies(store, uploads, until=within)
        while not within():
            time.sleep(0.001)
        seconds = done_at[0] - t
        evicted = store.reserve.evictions["capacity"]
        worker.settle(3600)
        after = store.reserve.status()
        print(f"  size {before.size} -> {after.size} (capacity {capacity}), radius {before.radius} -> {after.radius}, "
              f"{evicted} entries evicted in {seconds:.2f}s: {evicted / seconds:,.0f} entries/s"
              + (f", {len(lat)} uploads meanwhile" if uploads is not None else ""))
        worker.stop()
    return evicted, seconds, lat


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=100000)
    ap.add_argument("--capacity", type=int, default=None, help="default: a fifth of --chunks")
    ap.add_argument("--uploads", type=int, default=1500)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--step", type=int, default=500, help="entries per eviction step (one transaction per shard)")
    ap.add_argument("--min-evict", type=int, default=1000, help="entries evicted at least per batch visited")
    ap.add_argument("--evict-yield", type=float, default=0.002,
                    help="seconds the eviction pauses between transactions while puts come in (0: never)")
    ap.add_argument("--dir", default=None, help="where to build the stores (default: a temp dir)")
    args = ap.parse_args()
    capacity = args.capacity or args.chunks // 5
    root = tempfile.mkdtemp(prefix="bench-reserve-", dir=args.dir)
    try:
        base = os.path.join(root, "store")
        fill(base, args.chunks, args.shards)
        t = time.perf_counter()
        pool = upload_set(2 * args.uploads, seed=1, first_position=40000)
        print(f"made {len(pool)} upload chunks (proximity >= {UPLOAD_PO}) in {time.perf_counter() - t:.1f}s")
        copy = os.path.join(root, "copy")
        shutil.copytree(base, copy)

        print("uploads, no eviction:")
        with ReserveStore(base, overlay=OVERLAY, reserve=ReserveOptions(capacity=1 << 30)) as store:
            quiet = latencies(store, pool[: args.uploads])
        p_quiet = describe("single put", quiet)

        print("eviction alone:")
        n_alone, s_alone, _ = evict(copy, capacity, args.step, args.min_evict, None, args.evict_yield)

        print("uploads during eviction:")
        n_busy, s_busy, busy = evict(base, capacity, args.step, args.min_evict, pool[args.uploads :], args.evict_yield)
        p_busy = describe("single put while evicting", busy) if busy else None

        print("summary:")
        print(f"  eviction rate alone            {n_alone / s_alone:>10,.0f} entries/s")
        print(f"  eviction rate with uploads     {n_busy / s_busy:>10,.0f} entries/s")
        print(f"  upload p99 no eviction         {p_quiet[99]:>10.2f} ms")
        if p_busy:
            print(f"  upload p99 during eviction     {p_busy[99]:>10.2f} ms")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
