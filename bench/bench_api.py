"""HTTP benchmark of the daemon, on loopback only.

    python bench/bench_api.py [--requests 400] [--levels 1,16,64] [--json out.json]

Starts ``python -m api.cli serve`` on a temporary data dir and a free port
(nothing else is touched), registers a batch, and measures:

- ``POST /chunks`` with pre-signed 4 KiB CACs: requests/s, p50, p99 at each
  concurrency level (the chunks and stamps are made before the clock starts);
- ``GET /chunks/{address}`` of the uploaded chunks at each level;
- ``/health`` latency (p50, p99, max) probed every 5 ms while reserve samples
  of the uploaded reserve run back to back.

Baseline, measured in the same run: the same operations called directly on a
``ReserveStore`` in this process (one ``put`` after another, then ``get``), on
its own temporary directory; the tables give each HTTP rate as a ratio of it.

Every phase is bounded by ``--requests`` and the whole run by ``--time-limit``.
``--url`` measures an already running daemon instead (it must accept batch
registration from this host).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp
from benchlib import percentile

from chunkstore.reserve import ReserveStore
from chunkstore.store.batchstore import Batch
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.postage import StampIssuer
from chunkstore.swarm.signer import Signer

ROOT = Path(__file__).resolve().parents[1]
DEPTH, BUCKET_DEPTH = 22, 16


class Daemon:
    def __init__(self, data_dir: str, workers: int | None, extra: tuple[str, ...] = (), start_timeout: float = 120) -> None:
        cmd = [sys.executable, "-m", "api.cli", "serve", "--data-dir", data_dir, "--port", "0", "--log-format", "json",
               *extra]  # fmt: skip
        if workers:
            cmd += ["--workers", str(workers)]
        # Another checkout named by PYTHONPATH runs instead of this one (before/after comparisons).
        tree = os.environ.get("PYTHONPATH", "").split(os.pathsep)[0] or str(ROOT)
        env = {**os.environ, "PYTHONPATH": tree}
        self.proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        self.port: int | None = None
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(start_timeout):
            self.proc.kill()
            raise SystemExit("daemon did not start")

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if '"msg":"listening"' in line:
                self.port = int(re.search(r'"port":(\d+)', line).group(1))
                self._ready.set()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def make_uploads(n: int, signer: Signer, batch_id: bytes) -> list[tuple[bytes, bytes, bytes]]:
    issuer = StampIssuer(signer, batch_id, DEPTH, BUCKET_DEPTH)
    out = []
    for _ in range(n):
        address, data = make_cac(os.urandom(4096))
        out.append((address, data, issuer.stamp(address).to_bytes()))
    return out


def direct_baseline(n: int) -> dict[str, float]:
    """Sequential ``put`` and ``get`` rates on a store in this process (no HTTP)."""
    signer = Signer(os.urandom(32))
    batch_id = keccak256(b"bench-direct", os.urandom(16))
    uploads = make_uploads(n, signer, batch_id)
    with tempfile.TemporaryDirectory(prefix="bench-api-direct-") as d:
        store = ReserveStore(d)
        try:
            store.batches.add(Batch(batch_id, signer.address, DEPTH, BUCKET_DEPTH, False, 10**9, 0))
            t0 = time.perf_counter()
            for _, data, stamp in uploads:
                store.put(data, stamp)
            put_rate = n / (time.perf_counter() - t0)
            t0 = time.perf_counter()
            for address, _, _ in uploads:
                store.get(address)
            get_rate = n / (time.perf_counter() - t0)
        finally:
            store.close()
    return {"put_per_s": put_rate, "get_per_s": get_rate}


async def run_level(concurrency: int, jobs: list[Any], call) -> dict[str, float]:
    """Run ``call(session, job)`` over ``jobs`` with ``concurrency`` clients; latency stats."""
    latencies: list[float] = []
    errors = 0
    queue: asyncio.Queue = asyncio.Queue()
    for j in jobs:
        queue.put_nowait(j)
    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=conn) as session:

        async def worker() -> None:
            nonlocal errors
            while True:
                try:
                    job = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                t0 = time.perf_counter()
                ok = await call(session, job)
                latencies.append(time.perf_counter() - t0)
                errors += not ok

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - t0
    return {
        "concurrency": concurrency,
        "requests": len(jobs),
        "errors": errors,
        "rps": len(jobs) / wall if wall else float("nan"),
        "p50_ms": percentile(latencies, 0.50) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
    }


async def bench(base: str, args: argparse.Namespace) -> dict[str, Any]:
    deadline = time.monotonic() + args.time_limit
    levels = [int(x) for x in args.levels.split(",")]
    signer = Signer(os.urandom(32))
    batch_id = keccak256(b"bench", os.urandom(16))
    async with aiohttp.ClientSession() as s:
        body = {"batchID": batch_id.hex(), "owner": signer.address.hex(), "depth": DEPTH,
                "bucketDepth": BUCKET_DEPTH, "immutable": False, "value": "1000000000", "start": 0}
        async with s.post(base + "/batches", json=body) as r:
            if r.status != 201:
                raise SystemExit(f"cannot register the bench batch: {r.status} {await r.text()}")
    t0 = time.perf_counter()
    uploads = make_uploads(args.requests * len(levels), signer, batch_id)
    print(f"prepared {len(uploads)} stamped 4 KiB chunks in {time.perf_counter() - t0:.1f} s", file=sys.stderr)

    async def post(session: aiohttp.ClientSession, job: tuple[bytes, bytes, bytes]) -> bool:
        _, data, stamp = job
        async with session.post(base + "/chunks", data=data, headers={"Swarm-Postage-Stamp": stamp.hex()}) as r:
            await r.read()
            return r.status == 201

    async def get(session: aiohttp.ClientSession, address: bytes) -> bool:
        async with session.get(f"{base}/chunks/{address.hex()}") as r:
            await r.read()
            return r.status == 200

    results: dict[str, Any] = {"post_chunks": [], "get_chunks": []}
    for i, c in enumerate(levels):
        if time.monotonic() > deadline:
            break
        jobs = uploads[i * args.requests : (i + 1) * args.requests]
        results["post_chunks"].append(await run_level(c, jobs, post))
    addresses = [u[0] for u in uploads]
    for c in levels:
        if time.monotonic() > deadline:
            break
        jobs = [addresses[(k * 7919) % len(addresses)] for k in range(args.requests)]
        results["get_chunks"].append(await run_level(c, jobs, get))
    results["health_during_sample"] = await health_during_sample(base, args.samples, deadline)
    results["direct_baseline"] = direct_baseline(min(args.requests, 300))
    return results


async def health_during_sample(base: str, samples: int, deadline: float) -> dict[str, Any]:
    latencies: list[float] = []
    durations: list[float] = []
    done = asyncio.Event()
    async with aiohttp.ClientSession() as s:

        async def sampler() -> None:
            try:
                for i in range(samples):
                    if time.monotonic() > deadline:
                        break
                    t0 = time.perf_counter()
                    async with s.get(f"{base}/rchash/0/{i + 1:02x}/01") as r:
                        await r.read()
                        if r.status != 200:
                            print(f"rchash answered {r.status}", file=sys.stderr)
                    durations.append(time.perf_counter() - t0)
            finally:
                done.set()

        async def prober() -> None:
            while not done.is_set():
                t0 = time.perf_counter()
                async with s.get(base + "/health") as r:
                    await r.read()
                latencies.append(time.perf_counter() - t0)
                await asyncio.sleep(0.005)

        await asyncio.gather(sampler(), prober())
    return {
        "samples": len(durations),
        "sample_seconds_p50": percentile(durations, 0.5),
        "probes": len(latencies),
        "p50_ms": percentile(latencies, 0.50) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
        "max_ms": max(latencies) * 1000 if latencies else float("nan"),
    }


def print_table(results: dict[str, Any]) -> None:
    base = results["direct_baseline"]
    print(f"baseline (direct store calls, one after another): put {base['put_per_s']:.0f}/s, "
          f"get {base['get_per_s']:.0f}/s")
    for name, ref in (("post_chunks", base["put_per_s"]), ("get_chunks", base["get_per_s"])):
        print(f"\n{name.replace('_', ' ')}")
        print(f"{'clients':>8} {'requests':>9} {'errors':>7} {'req/s':>9} {'x direct':>9} {'p50 ms':>8} {'p99 ms':>8}")
        for r in results[name]:
            print(f"{r['concurrency']:>8} {r['requests']:>9} {r['errors']:>7} {r['rps']:>9.0f} "
                  f"{r['rps'] / ref:>9.3f} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f}")
    h = results["health_during_sample"]
    print(f"\n/health during {h['samples']} samples (median {h['sample_seconds_p50']:.2f} s each): "
          f"{h['probes']} probes, p50 {h['p50_ms']:.2f} ms, p99 {h['p99_ms']:.2f} ms, max {h['max_ms']:.2f} ms")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=400, help="requests per concurrency level")
    p.add_argument("--levels", default="1,16,64", help="concurrency levels")
    p.add_argument("--samples", type=int, default=5, help="reserve samples during the /health probe")
    p.add_argument("--workers", type=int, default=None, help="sampler workers of the spawned daemon")
    p.add_argument("--time-limit", type=float, default=300, help="seconds for the whole run")
    p.add_argument("--url", help="measure a running daemon (loopback) instead of spawning one")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args()
    daemon = None
    tmp = None
    if args.url:
        if not re.match(r"https?://(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:\d+)?/?$", args.url):
            raise SystemExit("--url must be a loopback address")
        base = args.url.rstrip("/")
    else:
        tmp = tempfile.TemporaryDirectory(prefix="bench-api-")
        daemon = Daemon(tmp.name, args.workers)
        base = f"http://127.0.0.1:{daemon.port}"
    try:
        results = asyncio.run(bench(base, args))
    finally:
        if daemon is not None:
            daemon.stop()
        if tmp is not None:
            tmp.cleanup()
    print_table(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
