"""A full neighbourhood, measured: 2^22 chunks imported, then sampled through the daemon, cold and warm.

    python bench/bench_scale.py [--chunks 4194304] [--cache DIR] [--compare 200000] [--repeat 1]

Builds (once; cached in ``--cache``, default bench/.cache/, between runs) a
store of ``--chunks`` chunks, about a tenth of them SOCs, stamped by four
batches of four owners:

* the chunks and stamps are generated in parallel (one process per core)
  into the reference node's export format, a tar, kept zstd-compressed
  (the payloads are a random 64-byte pattern repeated, so the tar compresses
  well: a 4 KiB payload costs the same to hash and store as any other);
* the store is built by ``chunkstore import`` reading that tar from a pipe:
  the build is itself the measurement of the import at full size (records/s
  against L, the import's peak RSS). An import keeps a staging copy of
  everything it validated before it publishes, so the build needs about
  twice the store's size free (~40 GB for 2^22 chunks, plus a 15 GB margin
  left to others); without it the run is skipped with a message.

Then, through the running daemon (``chunkstore serve`` on that store, its
sampler workers at the default count), ``GET /rchash/0/{anchor1}/{anchor2}
?verbose=true`` samples the whole store:

* cold: the store's data files dropped from the page cache first
  (``posix_fadvise(POSIX_FADV_DONTNEED)``, no root needed); warm: after the
  files were read through the page cache (untimed: a cold sample reads its
  runs of pages around the page cache and leaves it as it found it);
* chunks/s and the ratio to L = cores x (openssl sha3-256 96-byte calls/s) /
  128, measured in the same run, and how far the warm rate is below the
  kernel bound (cores / (128 x one lane permutation), also timed here);
* ``/health`` latency (p50, p99, max) probed every 10 ms during each sample;
* peak anonymous RSS (RssAnon + RssShmem) of the daemon and of each sampler
  worker, polled every 50 ms, against the same run on a ``--compare``-chunk
  store of the same recipe (flat: within 1.2x);
* the verbose answer's ``fullReserveEstimate.estimatedSeconds`` against the
  measured time of this very (full-size) sample.

The bulk import writes each shard in key order, so the store's chunk pages
lie almost in address order on disk: a cold sample of this store reads
nearly sequentially, in large reads around the page cache (``O_DIRECT``).
bench/bench_sample.py measures the other extreme (a store written in random
order, as a live node's is).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from bench_api import Daemon
from bench_sample import MemoryPoller, data_files, drop_page_cache, fill_page_cache, index_pages, print_disk
from benchlib import (
    CACHE,
    CALLS_PER_CHUNK,
    DiskRates,
    cores,
    disk_rates,
    kernel_bound,
    lane_permutation_rate,
    percentile,
    single_lane_limit,
    vector_width,
)

from chunkstore.reserve import ReserveStore
from chunkstore.store.batchstore import Batch
from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.signer import Signer
from chunkstore.transfer.batchfile import dump_batches

FORMAT = 1  # bump when the recipe changes
BASE_TIME = 1_700_000_000_000_000_000
BATCHES = 4
DEPTH, BUCKET_DEPTH = 31, 16  # 2^15 positions per bucket: 512 generator tasks x 64
STEP = 8192  # chunks per generator task
SLOTS_PER_TASK = 64  # positions of each bucket a task may use: task t owns [64t, 64t + 64)
GB = 1 << 30
STORE_BYTES_PER_CHUNK = 5200  # measured: ~4.9 KB per full chunk with its index, plus LMDB's slack
STAGING_BYTES_PER_CHUNK = 4400  # the import's staging runs: data, stamp, address, bookkeeping
MARGIN = 15 * GB  # left free for everyone else on the machine
FULL = 1 << 22  # a full neighbourhood


def _signer(i: int) -> Signer:
    return Signer(keccak256(b"bench_scale owner %d" % i))


def batches() -> list[Batch]:
    return [
        Batch(keccak256(b"bench_scale batch %d" % i), _signer(i).address, DEPTH, BUCKET_DEPTH, False, 10**18, 0)
        for i in range(BATCHES)
    ]


def _make(task: int, lo: int, hi: int, soc_fraction: float) -> bytes:
    """zstd frame of the tar entries of chunks lo..hi-1 (each its own stamp)."""
    import zstandard

    from chunkstore.swarm.bmt import backend as hashing
    from chunkstore.swarm.soc import make_soc
    from chunkstore.swarm.stamp import bucket_of, sign_stamp
    from chunkstore.transfer import tarformat as tarf

    if (task + 1) * SLOTS_PER_TASK > 1 << (DEPTH - BUCKET_DEPTH):
        raise RuntimeError(f"generator task {task}: positions beyond the batch depth {DEPTH}")
    rng = np.random.default_rng([FORMAT, lo])
    signers = [_signer(i) for i in range(BATCHES)]
    ids = [b.id for b in batches()]
    n = hi - lo
    buf = np.zeros((n, 4104), np.uint8)
    buf[:, :8] = np.frombuffer((4096).to_bytes(8, "little"), np.uint8)
    buf[:, 8:] = np.tile(rng.integers(0, 256, size=(n, 64), dtype=np.uint8), 64)
    out = np.zeros((n, 32), np.uint8)
    hashing.bmt_hashes(buf, np.full(n, 4104, np.int64), np.zeros(n, np.int64), b"", out)
    which = rng.integers(0, BATCHES, size=n)
    soc = rng.random(n) < soc_fraction
    used: dict[tuple[int, int], int] = {}
    parts = []
    for i in range(n):
        data = buf[i].tobytes()
        address = out[i].tobytes()
        b = int(which[i])
        if soc[i]:
            s = make_soc(signers[b], rng.bytes(32), data)
            address, data = s.address, s.data
        bucket = bucket_of(address, BUCKET_DEPTH)
        k = used.get((b, bucket), 0)
        if k == SLOTS_PER_TASK:
            raise RuntimeError(f"generator task {task}: bucket {bucket} of batch {b} ran out of positions")
        used[(b, bucket)] = k + 1
        stamp = sign_stamp(signers[b], address, ids[b], bucket, task * SLOTS_PER_TASK + k, BASE_TIME + lo + i)
        size = 4 + len(data) + 113
        parts += [tarf.encode_header(address.hex().encode(), size), len(data).to_bytes(4, "big"), data,
                  stamp.to_bytes(), bytes(tarf.padding(size))]  # fmt: skip
    return zstandard.ZstdCompressor(level=3).compress(b"".join(parts))


def source(n: int, soc_fraction: float, cache: Path) -> Path:
    """The compressed export of n chunks, from the cache or generated in parallel."""
    path = cache / f"scale-n{n}-soc{int(soc_fraction * 100)}-f{FORMAT}.tar.zst"
    if path.exists():
        return path
    import multiprocessing as mp

    t = time.perf_counter()
    ranges = [(i, lo, min(n, lo + STEP)) for i, lo in enumerate(range(0, n, STEP))]
    tmp = path.with_suffix(".building")
    done = 0
    with ProcessPoolExecutor(cores(), mp_context=mp.get_context("spawn")) as pool, open(tmp, "wb") as f:
        for part in pool.map(_make, *zip(*ranges, strict=True), [soc_fraction] * len(ranges)):
            f.write(part)
            done += STEP
            if sys.stderr.isatty():
                print(f"\rgenerating: {min(done, n):,}/{n:,} chunks", end="", file=sys.stderr, flush=True)
    os.replace(tmp, path)
    print(f"generated {n:,} stamped chunks in {time.perf_counter() - t:.0f} s: {path} ({path.stat().st_size / GB:.2f} GB)")
    return path


def _feed(src: Path, pipe) -> None:  # noqa: ANN001 - a subprocess pipe
    import zstandard

    try:
        with open(src, "rb") as f, zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True) as r:
            while True:
                block = r.read(1 << 20)
                if not block:
                    break
                pipe.write(block)
    except BrokenPipeError:
        pass  # the import stopped early; its exit status says why
    finally:
        try:
            pipe.close()
        except BrokenPipeError:
            pass


def build(n: int, soc_fraction: float, cache: Path, workers: int | None, rebuild: bool = False) -> tuple[Path, dict]:
    """The store of n chunks, imported from the generated export (cached with the import's figures)."""
    store = cache / f"scale-store-n{n}-soc{int(soc_fraction * 100)}-f{FORMAT}"
    info_file = store / "BENCH.json"
    if info_file.exists() and not rebuild:
        return store, json.loads(info_file.read_text())
    shutil.rmtree(store, ignore_errors=True)  # a rebuild, or what a failed build left
    need = n * (STORE_BYTES_PER_CHUNK + STAGING_BYTES_PER_CHUNK) + MARGIN
    free = shutil.disk_usage(cache).free
    if free < need:
        raise SystemExit(
            f"bench_scale skipped: building a {n:,}-chunk store needs {need / GB:.0f} GB free on {cache} "
            f"(the store, the import's staging copy and a {MARGIN // GB} GB margin for others); {free / GB:.0f} GB are"
        )
    src = source(n, soc_fraction, cache)
    shutil.rmtree(store, ignore_errors=True)
    batch_file = cache / f"scale-batches-f{FORMAT}.json"
    batch_file.write_text(dump_batches(batches()))
    name, call_rate, _ = single_lane_limit(2.0)
    limit = call_rate * cores() / CALLS_PER_CHUNK
    cmd = [str(Path(sys.executable).parent / "chunkstore"), "import", "--data-dir", str(store), "--batches",
           str(batch_file), "--progress" if sys.stderr.isatty() else "--no-progress", "-"]  # fmt: skip
    if workers is not None:
        cmd[2:2] = ["--workers", str(workers)]
    print(f"$ zstd -dc {src.name} | {' '.join(cmd)}", flush=True)
    busy, cpu0 = _busy_seconds(), _children_cpu()
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=False)
    with MemoryPoller(0.2, root=proc.pid) as poller:
        feeder = threading.Thread(target=_feed, args=(src, proc.stdin), daemon=True)
        feeder.start()
        assert proc.stdout is not None
        out = proc.stdout.read()
        proc.wait()
        feeder.join()
    seconds = time.perf_counter() - t
    cpu = _children_cpu() - cpu0
    others = max(0.0, _busy_seconds() - busy - cpu) / seconds  # cores other processes kept busy meanwhile
    summary = out.decode(errors="replace").strip().splitlines()[-1:] or [""]
    if proc.returncode != 0 or f": {n} records in" not in summary[0]:
        shutil.rmtree(store, ignore_errors=True)
        raise SystemExit(f"import failed (exit {proc.returncode}): {out.decode(errors='replace')}")
    mem = poller.summary()
    info = {
        "chunks": n, "import_seconds": seconds, "import_per_second": n / seconds, "limit": limit, "limit_source": name,
        "import_peak_anon_kb": mem["parent"]["anon_kb"], "import_peak_rss_kb": mem["parent"]["rss_kb"],
        "import_worker_peak_anon_kb": mem["max_worker_anon_kb"],
        "summary": summary[0], "load_average": os.getloadavg()[0], "cores_used": cpu / seconds,
        "other_processes_cores": others,
    }  # fmt: skip
    info_file.write_text(json.dumps(info))
    return store, info


def _children_cpu() -> float:
    import resource

    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def _busy_seconds() -> float:
    """CPU seconds every process of the machine has used (/proc/stat), to tell contention apart."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------ sampling through the daemon


async def _sample(base: str, anchor1: str, anchor2: str, probe_s: float) -> dict:
    import aiohttp

    latencies: list[float] = []
    done = asyncio.Event()
    result: dict = {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3600)) as s:

        async def sample() -> None:
            try:
                t = time.perf_counter()
                async with s.get(f"{base}/rchash/0/{anchor1}/{anchor2}?verbose=true") as r:
                    body = await r.json()
                    if r.status != 200:
                        raise SystemExit(f"/rchash answered {r.status}: {body}")
                result["seconds"] = time.perf_counter() - t
                result["body"] = body
            finally:
                done.set()

        async def probe() -> None:
            while not done.is_set():
                t = time.perf_counter()
                async with s.get(base + "/health") as r:
                    await r.read()
                latencies.append(time.perf_counter() - t)
                await asyncio.sleep(probe_s)

        await asyncio.gather(sample(), probe())
    result["health_ms"] = {
        "probes": len(latencies),
        "p50": percentile(latencies, 0.5) * 1e3,
        "p99": percentile(latencies, 0.99) * 1e3,
        "max": max(latencies) * 1e3 if latencies else float("nan"),
    }
    return result


def measure(store: Path, n: int, repeat: int, workers: int | None, cold: bool = True) -> dict:
    """Cold and warm full samples of ``store`` through a daemon started on it; memory polled throughout."""
    extra = ("--reserve-capacity", str(2 * n), "--sample-wait", "3600")
    files = data_files(store)
    with ReserveStore(store, readonly=True) as opened:  # before the daemon holds it: LMDB's stats of the index
        index = index_pages(opened)
    daemon = Daemon(str(store), workers, extra, start_timeout=600)
    runs: dict[str, list[dict]] = {"cold": [], "warm": []}
    disks: list[DiskRates] = []
    try:
        base = f"http://127.0.0.1:{daemon.port}"
        asyncio.run(_warm_pool(base))
        with MemoryPoller(0.05, root=daemon.proc.pid) as poller:
            for i in range(repeat):
                anchor1, anchor2 = f"{0x5a ^ i:02x}", f"{i + 1:02x}"
                if cold:
                    drop_page_cache(store)
                    disk = disk_rates(files)  # around the page cache: the store stays cold
                    if disk is not None:
                        disks.append(disk)
                    runs["cold"].append(asyncio.run(_sample(base, anchor1, anchor2, 0.01)))
                    fill_page_cache(store)
                runs["warm"].append(asyncio.run(_sample(base, anchor1, anchor2, 0.01)))
        mem = poller.summary()
    finally:
        daemon.stop()
    reading = {"rates": disks, "data_bytes": sum(f.stat().st_size for f in files), "index_pages": index}
    return {"runs": runs, "memory": mem, "disk": reading}


async def _warm_pool(base: str) -> None:
    """One sample of an (almost) empty neighbourhood: the sampler's processes start outside the timing."""
    import aiohttp

    async with aiohttp.ClientSession() as s, s.get(f"{base}/rchash/31/a5a5a5a5/01") as r:
        await r.read()


def _row(label: str, value: str) -> None:
    print(f"  {label:<44} {value}")


def report(n: int, result: dict, limit: float, name: str) -> dict:
    out = {}
    for mode in ("cold", "warm"):
        rs = result["runs"][mode]
        if not rs:
            continue
        rs = sorted(rs, key=lambda r: r["seconds"])
        mid = rs[len(rs) // 2]
        body = mid["body"]
        stats = body.get("stats", {})
        seconds = mid["seconds"]
        iterated = stats.get("total_iterated", n)
        rate = iterated / seconds
        est = (body.get("fullReserveEstimate") or {}).get("estimatedSeconds")
        full = seconds * FULL / iterated if iterated else float("nan")  # measured, or extrapolated to 2^22
        out[mode] = {"seconds": seconds, "rate": rate, "ratio": rate / limit, "health": mid["health_ms"],
                     "estimate": est, "estimate_ratio": est / full if est else None, "stats": stats,
                     "durationSeconds": body.get("durationSeconds"),
                     "fullReserveEstimate": body.get("fullReserveEstimate")}  # fmt: skip
        print(f"{mode} sample of {iterated:,} entries (median of {len(rs)}): {seconds:.1f} s, {rate:,.0f} chunks/s, "
              f"{rate / limit:.2f} x L")  # fmt: skip
        _row("phase 1 / phase 2 (s)", f"{stats.get('phase1_duration', 0):.1f} / {stats.get('phase2_duration', 0):.2f}")
        _row("summed over workers (s)", f"hashing {stats.get('taddr_duration', 0):.1f}, reads "
             f"{stats.get('chunk_load_duration', 0):.1f}, walking and waiting {stats.get('iteration_duration', 0):.1f}")  # fmt: skip
        _row("/health during the sample", f"p50 {mid['health_ms']['p50']:.1f} ms, p99 {mid['health_ms']['p99']:.1f} ms, "
             f"max {mid['health_ms']['max']:.1f} ms ({mid['health_ms']['probes']} probes)")  # fmt: skip
        if mode == "cold":
            d = result["disk"]
            print_disk(d["rates"], d["data_bytes"], d["index_pages"], seconds)
        if est:
            how = "this sample" if iterated == FULL else f"this sample extrapolated from {iterated:,} entries"
            _row("estimate of a 2^22 sample (verbose)", f"{est:.1f} s vs {full:.1f} s measured ({how}): "
                 f"ratio {est / full:.2f}")  # fmt: skip
    if "cold" in out and "warm" in out:
        print(f"cold/warm rate: {out['cold']['rate'] / out['warm']['rate']:.2f}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=FULL, help="chunks in the store (default 2^22)")
    ap.add_argument("--soc-fraction", type=float, default=0.1)
    ap.add_argument("--cache", type=Path, default=CACHE, help="where stores and exports are cached (default bench/.cache)")
    ap.add_argument("--compare", type=int, default=200_000,
                    help="chunks of the smaller store whose memory peaks the full run is held to (0: none)")  # fmt: skip
    ap.add_argument("--repeat", type=int, default=1, help="cold+warm sample pairs (default 1; medians reported)")
    ap.add_argument("--workers", type=int, default=None, help="import and sampler workers (default: cores)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--generate-only", action="store_true", help="only generate (and cache) the compressed exports")
    ap.add_argument("--rebuild", action="store_true", help="import the stores again (measures the import again)")
    ap.add_argument("--no-sample", action="store_true", help="build (or reuse) the stores, sample nothing")
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    ignore = args.cache / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n")
    if args.generate_only:
        for n in (args.chunks, args.compare):
            if n:
                source(n, args.soc_fraction, args.cache)
        return 0

    sizes = [args.chunks] + ([args.compare] if args.compare and args.compare != args.chunks else [])
    stores = {}
    for n in sizes:
        store, info = build(n, args.soc_fraction, args.cache, args.workers, args.rebuild)
        stores[n] = store
        print(f"store of {n:,} chunks: {store} (imported at {info['import_per_second']:,.0f} records/s = "
              f"{info['import_per_second'] / info['limit']:.2f} x L(then {info['limit']:,.0f}); import peak anon "
              f"{info['import_peak_anon_kb'] / 1024:.0f} MiB, workers {info['import_worker_peak_anon_kb'] / 1024:.0f} MiB)")  # fmt: skip
        print(f"  {info['summary']}")
        if "cores_used" in info:
            print(f"  import used {info['cores_used']:.2f} cores; other processes {info['other_processes_cores']:.2f} "
                  f"cores meanwhile (load average {info['load_average']:.2f})")  # fmt: skip
    if args.no_sample:
        return 0
    name, call_rate, rates = single_lane_limit(2.0)
    limit = call_rate * cores() / CALLS_PER_CHUNK
    print(f"L ({name}) = {call_rate:,.0f} x {cores()} / {CALLS_PER_CHUNK} = {limit:,.0f} chunks/s "
          f"(load average {os.getloadavg()[0]:.2f}; {vector_width()})")  # fmt: skip
    perm_rate = lane_permutation_rate(2.0)
    bound = kernel_bound(perm_rate, cores()) if perm_rate else 0.0
    if bound:
        print(f"kernel bound (lane permutation, {1e6 / perm_rate:.3f} us per instance) = {bound:,.0f} chunks/s "
              f"= {bound / limit:.2f} x L")  # fmt: skip
    results = {}
    for n in sizes:
        print(f"\n--- {n:,} chunks, through the daemon")
        res = measure(stores[n], n, args.repeat, args.workers)
        results[n] = {"summary": report(n, res, limit, name), "memory": res["memory"]}
        warm = results[n]["summary"].get("warm")
        if bound and warm:
            print(f"  warm is {bound / warm['rate']:.2f}x below the kernel bound (target: within 1.3x)")
        mem = res["memory"]
        print(f"  peak anon RSS: daemon {mem['parent']['anon_kb'] / 1024:.0f} MiB, workers "
              + ", ".join(f"{w['anon_kb'] / 1024:.0f}" for w in mem["workers"]) + " MiB")
    if len(sizes) == 2:
        big, small = (results[n]["memory"] for n in sizes)
        d = big["parent"]["anon_kb"] / max(1, small["parent"]["anon_kb"])
        w = big["max_worker_anon_kb"] / max(1, small["max_worker_anon_kb"])
        print(f"\nanon RSS {sizes[0]:,} vs {sizes[1]:,} chunks: daemon {d:.2f}x, largest worker {w:.2f}x "
              f"({'flat' if max(d, w) <= 1.2 else 'NOT flat'}: limit 1.2x)")
    if args.json:
        args.json.write_text(json.dumps({"limit": limit, "kernel_bound": bound, "results": {str(k): v for k, v in results.items()}}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
