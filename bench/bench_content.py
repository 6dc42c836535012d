"""Upload and download MiB/s of ``/bytes`` through the real daemon, with the daemon's peak RSS.

For each body size (default 1 MiB, 64 MiB, 1 GiB) and each mode (plain at
Bee's default redundancy, MEDIUM; encrypted), the body is streamed from a
file on disk to ``POST /bytes`` of a daemon started with ``--dev`` in a fresh
data dir (a node-owned batch registered first), then read back with ``GET
/bytes`` and compared by SHA-256. Both directions go over loopback HTTP in
1 MiB pieces, the client never holding a whole body.

Baseline, measured in the same run on the same file: reading it from disk in
the same 1 MiB pieces (page cache warm, as for the upload). Every ratio
printed is "MiB/s of this row / MiB/s of the baseline"; a second ratio
compares the upload with the splitter alone in this process (hashing,
erasure coding, encryption; no stamps, no store, no HTTP), the part of the
work no store can avoid.

Memory: the daemon's ``/proc/PID/status`` sampled every 20 ms during each
transfer. ``anon`` is the peak of ``RssAnon``, the process's own memory
(heap, buffers, thread stacks): flat in the body size means the body is
streamed (a 1 GiB upload held in memory would show 1 GiB more). ``rss`` is
the peak of ``VmRSS``, which also counts pages of the store's LMDB files
mapped while it reads and writes them: page cache the kernel reclaims at
will, and it grows with the store, not with the request.

Bee's own published figures, where they exist, are printed after the table
(none are for the same machine: read them as orders of magnitude).

Run: ``python bench/bench_content.py [--sizes 1,64,1024] [--modes plain,encrypted] [--dir DIR]``
(sizes in MiB; the data dir needs about 1.5x the largest size per mode).
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from chunkstore.swarm.file import Splitter
from chunkstore.swarm.redundancy.level import Level

MIB = 1 << 20
PIECE = MIB
REPO = Path(__file__).resolve().parents[1]
BATCH = "be" * 32
MODES = {"plain": {}, "encrypted": {"Swarm-Encrypt": "true"}}

# Bee's published numbers (ethersphere/bee, in the comments of its own benchmarks):
BEE_PUBLISHED = [
    ("pkg/file/pipeline/builder BenchmarkPipeline, 100,000,000 bytes, 4-core amd64: split, hash and store "
     "in memory (no stamps, no disk, no HTTP)", 100_000_000 / 3.064439098 / MIB, "MiB/s"),
    ("pkg/file/splitter BenchmarkSplitter, 100,000,000 bytes, 4-core amd64", 100_000_000 / 2.972826021 / MIB,
     "MiB/s"),
    ("pkg/storer BenchmarkReservePutter, one stamped chunk into the reserve, 14 cores", 4096 / 29.760e-6 / MIB,
     "MiB/s of 4 KiB chunks"),
]


class DaemonProcess:
    def __init__(self, data_dir: Path) -> None:
        cmd = [sys.executable, "-m", "api.cli", "serve", "--data-dir", str(data_dir), "--port", "0", "--dev",
               "--log-format", "json"]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        self.port = 0
        ready = threading.Event()

        def read() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("msg") == "listening":
                    self.port = int(rec["port"])
                    ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(120):
            self.stop()
            raise SystemExit("daemon did not start")

    def conn(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=3600)

    def rss(self, field: str) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
        return 0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class Peaks:
    """Samples the daemon's memory every 20 ms while a transfer runs; ``anon`` and ``rss`` are the peaks."""

    def __init__(self, daemon: DaemonProcess) -> None:
        self.daemon = daemon
        self.anon = self.rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.anon = max(self.anon, self.daemon.rss("RssAnon"))
            self.rss = max(self.rss, self.daemon.rss("VmRSS"))
            self._stop.wait(0.02)

    def __enter__(self) -> Peaks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._run_once()

    def _run_once(self) -> None:
        self.anon = max(self.anon, self.daemon.rss("RssAnon"))
        self.rss = max(self.rss, self.daemon.rss("VmRSS"))


def make_file(path: Path, size: int) -> str:
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        left = size
        while left:
            piece = os.urandom(min(PIECE, left))
            f.write(piece)
            digest.update(piece)
            left -= len(piece)
    return digest.hexdigest()


def read_rate(path: Path) -> float:
    t0 = time.perf_counter()
    n = 0
    with open(path, "rb") as f:
        while piece := f.read(PIECE):
            n += len(piece)
    return n / MIB / (time.perf_counter() - t0)


def split_rate(path: Path, encrypt: bool) -> float:
    """The splitter alone in this process, chunks dropped: the protocol's own cost."""
    splitter = Splitter(lambda _a, _d: None, level=Level.MEDIUM, encrypt=encrypt)
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        while piece := f.read(PIECE):
            splitter.write(piece)
    splitter.finish()
    return path.stat().st_size / MIB / (time.perf_counter() - t0)


def upload(d: DaemonProcess, path: Path, headers: dict[str, str]) -> tuple[str, float]:
    conn = d.conn()
    size = path.stat().st_size
    t0 = time.perf_counter()
    conn.putrequest("POST", "/bytes")
    for k, v in {"Swarm-Postage-Batch-Id": BATCH, "Content-Type": "application/octet-stream",
                 "Content-Length": str(size), **headers}.items():
        conn.putheader(k, v)
    conn.endheaders()
    with open(path, "rb") as f:
        while piece := f.read(PIECE):
            conn.send(piece)
    resp = conn.getresponse()
    body = resp.read()
    elapsed = time.perf_counter() - t0
    conn.close()
    if resp.status != 201:
        raise SystemExit(f"upload failed: {resp.status} {body[:300]!r}")
    return str(json.loads(body)["reference"]), elapsed


def download(d: DaemonProcess, reference: str) -> tuple[str, int, float]:
    conn = d.conn()
    t0 = time.perf_counter()
    conn.request("GET", f"/bytes/{reference}")
    resp = conn.getresponse()
    digest = hashlib.sha256()
    n = 0
    while piece := resp.read(PIECE):
        digest.update(piece)
        n += len(piece)
    elapsed = time.perf_counter() - t0
    conn.close()
    if resp.status != 200:
        raise SystemExit(f"download failed: {resp.status}")
    return digest.hexdigest(), n, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,64,1024", help="body sizes in MiB, comma-separated")
    parser.add_argument("--modes", default="plain,encrypted", help=f"of {', '.join(MODES)}")
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temporary one)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    modes = args.modes.split(",")
    scratch = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-content-"))
    scratch.mkdir(parents=True, exist_ok=True)
    daemon = DaemonProcess(scratch / "data")
    try:
        conn = daemon.conn()
        conn.request("POST", "/batches", body=json.dumps({"batchID": BATCH, "depth": 26, "bucketDepth": 16,
                                                         "immutable": False, "value": "10000000000000", "start": 0}),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 201, resp.read()
        resp.read()
        print(f"daemon idle: anon {daemon.rss('RssAnon') / MIB:.0f} MiB, rss {daemon.rss('VmRSS') / MIB:.0f} MiB; "
              f"{os.cpu_count()} CPUs; data dir {scratch}")
        header = (f"{'size':>6} {'mode':>9} | {'file read':>9} {'split':>7} | {'upload':>7} {'x read':>6} "
                  f"{'x split':>7} {'anon':>6} {'rss':>6} | {'download':>8} {'x read':>6} {'anon':>6} {'rss':>6}")
        print(header)
        print("-" * len(header))
        for size in sizes:
            path = scratch / f"body-{size}M.bin"
            digest = make_file(path, size * MIB)
            for mode in modes:
                base = read_rate(path)
                split = split_rate(path, mode == "encrypted")
                with Peaks(daemon) as up_mem:
                    reference, up_s = upload(daemon, path, MODES[mode])
                with Peaks(daemon) as down_mem:
                    got, n, down_s = download(daemon, reference)
                if got != digest or n != size * MIB:
                    raise SystemExit(f"{size} MiB {mode}: downloaded bytes differ from the upload")
                up = size / up_s
                down = size / down_s
                print(f"{size:>4}Mi {mode:>9} | {base:>9.0f} {split:>7.1f} | {up:>7.1f} {up / base:>6.3f} "
                      f"{up / split:>7.2f} {up_mem.anon / MIB:>5.0f}M {up_mem.rss / MIB:>5.0f}M | {down:>8.1f} "
                      f"{down / base:>6.3f} {down_mem.anon / MIB:>5.0f}M {down_mem.rss / MIB:>5.0f}M")
            path.unlink()
        print("\nMiB/s; 'x read': ratio to reading the same file in this run; 'x split': ratio to the splitter "
              "alone in this process; anon / rss: the daemon's peak RssAnon / VmRSS during the transfer.")
        print("Bee's published figures (its own benchmark comments; other machines):")
        for what, value, unit in BEE_PUBLISHED:
            print(f"  {value:8.1f} {unit}: {what}")
    finally:
        daemon.stop()
        if not args.dir:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
