"""Reserve import/export throughput: tar and snapshot imports against a naive one-put-per-chunk import.

    python bench/bench_transfer.py --chunks 200000 [--memory-budget 512] [--workers 2] [--naive 5000]

Builds (once, cached in bench/.cache/) the reference node's export of N full
chunks (4096-byte payloads, ``--soc-fraction`` of them SOCs, one batch), then
in this run:

* imports it into an empty store (``chunkstore import``, tar),
* exports that store as tar and as a snapshot (export rates),
* imports the snapshot into another empty store,
* imports the first ``--naive`` entries the naive way (``store.put`` per
  entry, each a durable commit, after the same validation) for the baseline,

each import in its own process, whose peak RSS (and its workers') is
reported against ``--memory-budget``. Every import validates fully: BMT
hashes, SOC and stamp signature recovery. Each import's ratio to L is taken
to the mean of L measured again just before it and just after (printed on its line).

Under each import, its bound in the same run: validating every record once
(one process's time per record, measured on the tar's first 4,000, spread
over every core) and then writing what the store holds at the disk's
durable write rate (``benchlib.durable_write_rate``, measured just before
the import), as the two phases run one after the other.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from benchlib import (
    CALLS_PER_CHUNK,
    cache_dir,
    cores,
    durable_write_rate,
    openssl_rate,
    single_lane_limit,
    vector_width,
)

from chunkstore.store.batchstore import Batch
from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.postage import StampIssuer
from chunkstore.swarm.signer import Signer
from chunkstore.transfer.batchfile import dump_batches

FORMAT = 1  # bump when the cached tar's recipe changes
BASE_TIME = 1_700_000_000_000_000_000
DEPTH, BUCKET_DEPTH = 30, 16
STEP = 4096  # chunks per generator task; each task owns 64 positions of every bucket
MiB = 1 << 20


def _signer() -> Signer:
    return Signer(keccak256(b"bench_transfer signer"))


def _batch() -> Batch:
    return Batch(keccak256(b"bench_transfer batch"), _signer().address, DEPTH, BUCKET_DEPTH, False, 10**18, 0)


def _make(lo: int, hi: int, soc_fraction: float) -> bytes:
    """Tar entries (headers, records, padding) of chunks lo..hi-1."""
    from chunkstore.swarm.bmt import backend as hashing
    from chunkstore.swarm.soc import make_soc
    from chunkstore.transfer import tarformat as tarf

    rng = np.random.default_rng(lo)
    signer = _signer()
    batch = _batch()
    n = hi - lo
    buf = np.zeros((n, 4104), np.uint8)
    buf[:, :8] = np.frombuffer((4096).to_bytes(8, "little"), np.uint8)
    buf[:, 8:] = rng.integers(0, 256, size=(n, 4096), dtype=np.uint8)
    out = np.zeros((n, 32), np.uint8)
    hashing.bmt_hashes(buf, np.full(n, 4104, np.int64), np.zeros(n, np.int64), b"", out)
    issuer = StampIssuer(signer, batch.id, DEPTH, BUCKET_DEPTH, positions=range((lo // STEP) * 64, 1 << (DEPTH - BUCKET_DEPTH)))
    parts = []
    for i in range(n):
        data = buf[i].tobytes()
        address = out[i].tobytes()
        if rng.random() < soc_fraction:
            soc = make_soc(signer, rng.bytes(32), data)
            address, data = soc.address, soc.data
        stamp = issuer.stamp(address, timestamp_ns=BASE_TIME + lo + i).to_bytes()
        size = 4 + len(data) + len(stamp)
        parts += [tarf.encode_header(address.hex().encode(), size), len(data).to_bytes(4, "big"), data, stamp,
                  bytes(tarf.padding(size))]
    return b"".join(parts)


def source_tar(n: int, soc_fraction: float) -> str:
    """The reference node's export of n chunks, from the cache or made in parallel."""
    path = os.path.join(cache_dir(), f"transfer-n{n}-soc{int(soc_fraction * 100)}-f{FORMAT}.tar")
    if os.path.exists(path):
        return path
    t = time.perf_counter()
    ranges = [(lo, min(n, lo + STEP)) for lo in range(0, n, STEP)]
    tmp = path + ".building"
    import multiprocessing as mp

    with ProcessPoolExecutor(mp_context=mp.get_context("spawn")) as pool, open(tmp, "wb") as f:
        for part in pool.map(_make, [a for a, _ in ranges], [b for _, b in ranges], [soc_fraction] * len(ranges)):
            f.write(part)
    os.replace(tmp, path)
    print(f"made {n} stamped chunks in {time.perf_counter() - t:.1f}s (cached in {path})")
    return path


def _child_import(args: argparse.Namespace) -> None:
    """Run one import in this (child) process and print its figures as JSON."""
    from chunkstore.transfer.importer import import_reserve

    report = import_reserve(args.store, args.source, batches=[_batch()], workers=args.workers,
                            memory_budget=args.memory_budget * MiB, show_progress=False)
    kids = max(report.worker_peak_rss, default=0)
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    cpu = sum(u.ru_utime + u.ru_stime for u in usage)
    print(json.dumps({
        "cpu": cpu,
        "records": report.records, "written": report.load.written, "read_s": report.read_seconds,
        "publish_s": report.publish_seconds, "runs": report.runs, "peak_rss": report.peak_rss,
        "worker_peak_rss": kids, "stored_bytes": _stored_bytes(args.store),
    }))


def _stored_bytes(store: str) -> int:
    """The store's LMDB data files after the import: what its publish wrote (each file starts empty)."""
    return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(store) for f in files
               if f == "data.mdb")


def _records(tar: tarfile.TarFile, limit: int) -> Iterator[tuple[bytes, bytes, bytes]]:
    """(address, data, stamp) of the export's first ``limit`` entries (``u32 length | data | stamp`` each)."""
    for i, member in enumerate(tar):
        if i >= limit:
            return
        raw = tar.extractfile(member).read()
        length = int.from_bytes(raw[:4], "big")
        yield bytes.fromhex(member.name), raw[4 : 4 + length], raw[4 + length :]


def validation_seconds(tar_path: str, records: int = 4000) -> float:
    """Seconds one process spends validating one record of the tar (BMT hash, SOC and stamp signatures), now.

    The import cannot do less than this for every record, on ``cores()``
    processes at most: with the publish's bytes at the disk's durable write
    rate, it is the import's bound in the same run.
    """
    from chunkstore.store.batchstore import encode_batch
    from chunkstore.transfer.fastcheck import OK, BatchTable, Validator

    addresses, stamps, datas = [], [], []
    with tarfile.open(tar_path) as tar:
        for address, data, stamp in _records(tar, records):
            addresses.append(address)
            datas.append(data)
            stamps.append(stamp)
    n = len(datas)
    lengths = np.array([len(d) for d in datas], np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths[:-1]))).astype(np.int64)
    src = np.frombuffer(b"".join(datas), np.uint8)
    addr = np.frombuffer(b"".join(addresses), np.uint8).reshape(n, 32)
    stm = np.frombuffer(b"".join(stamps), np.uint8).reshape(n, -1)
    batch = _batch()
    validator = Validator(BatchTable({batch.id: (batch, encode_batch(batch))}))
    validator.check(addr[:256], stm[:256], src, offsets[:256], lengths[:256])  # kernels loaded, caches warm
    t = time.perf_counter()
    status, _ = validator.check(addr, stm, src, offsets, lengths)
    seconds = (time.perf_counter() - t) / n
    if not (status == OK).all():
        raise SystemExit("validation_seconds: the bench's own tar did not validate")
    return seconds


def _child_naive(args: argparse.Namespace) -> None:
    """The baseline: parse the tar with tarfile and put each entry (validated, one durable commit each)."""
    from chunkstore.reserve import ReserveStore
    from chunkstore.transfer.budget import peak_rss_bytes

    with ReserveStore(args.store) as store, tarfile.open(args.source) as tar:
        store.batches.add(_batch())
        n = 0
        t = time.perf_counter()
        for address, data, stamp in _records(tar, args.limit):
            store.put(data, stamp, address=address)
            n += 1
        seconds = time.perf_counter() - t
    print(json.dumps({"records": n, "seconds": seconds, "peak_rss": peak_rss_bytes()}))


def _busy_seconds() -> float:
    """CPU seconds all processes of this machine have used (from /proc/stat), to tell contention apart."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _run_child(mode: str, *extra: str) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, *extra]
    busy, t = _busy_seconds(), time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    busy, wall = _busy_seconds() - busy, time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"{mode} child failed:\n{proc.stderr}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["others"] = max(0.0, busy - out.get("cpu", busy)) / wall  # cores other processes kept busy meanwhile
    return out


def _timed_against_l(first_limit: float, mode: str, *extra: str, write_dir: str) -> dict:
    """A child run, with L measured again just before it and just after: the VM's speed drifts
    (one run here measured L from 14,371 to 20,747 between its imports), so each import's ratio is
    taken to the mean of the two around it (the first L when openssl is missing)."""
    before = openssl_rate()
    write_rate = durable_write_rate(write_dir)  # the disk the store is written to, just before
    out = _run_child(mode, *extra)
    out["write_rate"] = write_rate
    after = openssl_rate()
    rates = [r * cores() / CALLS_PER_CHUNK for r in (before, after) if r]
    out["L"] = sum(rates) / len(rates) if rates else first_limit
    out["L_range"] = (min(rates), max(rates)) if rates else (first_limit, first_limit)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=200_000)
    ap.add_argument("--soc-fraction", type=float, default=0.1)
    ap.add_argument("--workers", type=int, default=None, help="validation processes (default: one per core)")
    ap.add_argument("--memory-budget", type=int, default=512, metavar="MiB")
    ap.add_argument("--naive", type=int, default=5000, help="entries for the naive baseline")
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one, removed after)")
    ap.add_argument("--verify", action="store_true", help="run verify_store on the snapshot-imported store")
    ap.add_argument("--repeat", type=int, default=1, help="run each import this many times (each into an empty store)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--store", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--source", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--limit", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child == "import":
        _child_import(args)
        return 0
    if args.child == "naive":
        _child_naive(args)
        return 0

    from chunkstore.transfer.exporter import export_reserve
    from chunkstore.transfer.importer import default_workers

    n = args.chunks
    workers = default_workers() if args.workers is None else args.workers
    tar_path = source_tar(n, args.soc_fraction)
    work = args.dir or tempfile.mkdtemp(prefix="bench_transfer_")
    common = ["--workers", str(workers), "--memory-budget", str(args.memory_budget)]
    print(f"{n} chunks ({args.soc_fraction:.0%} SOC), {os.path.getsize(tar_path):,} bytes of tar; {workers} workers, "
          f"{len(os.sched_getaffinity(0))} cores ({vector_width()}), memory budget {args.memory_budget} MiB")
    lname, call_rate, _ = single_lane_limit(2.0)
    limit = call_rate * cores() / CALLS_PER_CHUNK  # L, in the same run: every import rate is also a ratio to it
    print(f"L ({lname}) = {call_rate:,.0f} x {cores()} / {CALLS_PER_CHUNK} = {limit:,.0f} chunks/s")
    per_record = validation_seconds(tar_path)
    print(f"validating one record in one process: {per_record * 1e6:.1f} us ({cores()} cores: "
          f"{cores() / per_record:,.0f} records/s if nothing else ran)")
    try:
        with open(os.path.join(work, "batches.json"), "w") as f:
            f.write(dump_batches([_batch()]))
        results: dict[str, list[dict]] = {"tar": [], "snapshot": []}
        tar_store = os.path.join(work, "from-tar")
        for i in range(args.repeat):
            store = tar_store if i == 0 else os.path.join(work, f"from-tar-{i}")
            results["tar"].append(_timed_against_l(limit, "import", "--store", store, "--source", tar_path, *common,
                                                   write_dir=work))
            if i:
                shutil.rmtree(store)
        t = time.perf_counter()
        exp_tar = export_reserve(tar_store, os.path.join(work, "out.tar"), show_progress=False)
        exp_tar_s = time.perf_counter() - t
        t = time.perf_counter()
        exp_snap = export_reserve(tar_store, os.path.join(work, "out.snap"), fmt="snapshot", show_progress=False)
        exp_snap_s = time.perf_counter() - t
        for i in range(args.repeat):
            store = os.path.join(work, "from-snap" if i == 0 else f"from-snap-{i}")
            results["snapshot"].append(
                _timed_against_l(limit, "import", "--store", store, "--source", os.path.join(work, "out.snap"), *common,
                                 write_dir=work)
            )
            if i:
                shutil.rmtree(store)
        naive = _run_child("naive", "--store", os.path.join(work, "naive"), "--source", tar_path, "--limit", str(min(n, args.naive)))

        naive_rate = naive["records"] / naive["seconds"]
        print(f"\n{'':<28}{'records':>10}{'seconds':>9}{'rate/s':>10}{'x L':>7}{'x naive':>9}{'peak RSS':>11}{'workers':>10}")
        for name, r in [(n, r) for n in ("tar", "snapshot") for r in results[n]]:
            seconds = r["read_s"] + r["publish_s"]
            rate = r["records"] / seconds
            print(f"{'import ' + name:<28}{r['records']:>10}{seconds:>9.1f}{rate:>10,.0f}{rate / r['L']:>7.2f}{rate / naive_rate:>9.1f}"
                  f"{r['peak_rss'] / MiB:>9.0f}Mi{r['worker_peak_rss'] / MiB:>8.0f}Mi"
                  f"   (validate {r['read_s']:.1f}s, publish {r['publish_s']:.1f}s, {r['runs']} runs;"
                  f" {r['cpu'] / seconds:.2f} cores used, other processes {r['others']:.2f}; L {r['L']:,.0f}, "
                  f"{r['L_range'][0]:,.0f}-{r['L_range'][1]:,.0f} before and after)")
            # The import's floor in this run: every record validated once on every core, and every stored byte
            # written once at the disk's durable rate (measured just before the import).
            floor = r["records"] * per_record / cores() + r["stored_bytes"] / r["write_rate"]
            print(f"{'':<28}bound {r['records'] / floor:,.0f} records/s ({r['records'] * per_record / cores():.1f}s "
                  f"validating on {cores()} cores + {r['stored_bytes'] / 1e6:,.0f} MB written at "
                  f"{r['write_rate'] / 1e6:,.0f} MB/s durable = {floor:.1f}s): the import runs at "
                  f"{floor / seconds:.0%} of it, {r['records'] / floor / r['L']:.2f} x L")
        print(f"{'import naive (put each)':<28}{naive['records']:>10}{naive['seconds']:>9.1f}{naive_rate:>10,.0f}"
              f"{naive_rate / limit:>7.2f}{1.0:>9.1f}{naive['peak_rss'] / MiB:>9.0f}Mi")
        for label, rep, s in (("export tar", exp_tar, exp_tar_s), ("export snapshot", exp_snap, exp_snap_s)):
            print(f"{label:<28}{rep.records:>10}{s:>9.1f}{rep.records / s:>10,.0f}   {rep.bytes_written:,} bytes")
        for name in ("tar", "snapshot"):
            peak = max(r["peak_rss"] for r in results[name]) / MiB
            state = "under" if peak < args.memory_budget else "OVER"
            print(f"import {name}: peak RSS {peak:.0f} MiB, {state} the budget of {args.memory_budget} MiB")
        if args.verify:
            from chunkstore.store.verify import verify_store

            t = time.perf_counter()
            report = verify_store(os.path.join(work, "from-snap"))
            print(f"verify: {report.summary()} ({time.perf_counter() - t:.0f}s)")
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
