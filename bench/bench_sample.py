"""Reserve sample throughput against the single-lane keccak limit.

Builds (or reuses, cached under bench/.cache/) a store of N random full
chunks (4096-byte payloads, 10% SOC, one batch), then samples its whole
content (depth 0) with ``sampler.reserve_sample`` and reports

* chunks/s and us/chunk of the sample (stamp entries iterated / total time,
  pool already warm), warm (the store in the page cache) and cold (the
  store's data files dropped from the page cache first with
  ``posix_fadvise(POSIX_FADV_DONTNEED)``, which needs no root), and their
  ratio. The store is written by ``put_many`` in random address order, so
  its chunk pages lie in random order on disk, as a live node's do: read in
  key order, a cold sample would be random reads; phase 1 reads such a
  shard in file order instead (``sampler.fileorder``; the chunks it read so
  are counted),
* memory of this process and of each phase-1 worker, split honestly: a
  thread polls /proc/<pid>/status of this process and all its descendants
  every ``--poll-ms`` during the timed samples and keeps, per process, the
  peak of RssAnon (private memory: heap, buffers; what the sample costs) and
  of RssFile (pages of mapped files, i.e. LMDB's map of the store: page
  cache, reclaimable, and growing with N as more of the store is read), plus
  VmHWM (lifetime peak of the sum, what getrusage's ru_maxrss reports),
* the limit L = (fastest single keccak call rate on a one-block input) x
  cores / 128, measured in the same run (bench_keccak: openssl speed and
  pysha3), and the ratio chunks/s / L,
* the kernel bound: chunks/s if every core ran nothing but the 128
  permutations per chunk of the BMT kernel (its vector permutation, timed
  alone in the same run), and how far the sample is below it,
* a baseline: the same sample the reference node's old way, in one process:
  every chunk eagerly loaded with ``store.get``, a chunk object per entry, one
  transformed-address call per chunk, insertion into the sorted sample with
  stamp checks for items that could enter. Its hash must equal the sample's.

Run: ``python bench/bench_sample.py --chunks 200000``
(the first run builds the store: about 0.4 ms per chunk). With
``PYTHONPATH`` naming another checkout, the same measurement runs that
tree's sampler (a before/after comparison).

``--key-order-cold N`` adds N cold samples with phase 1's file order off
(``CHUNKSTORE_SAMPLE_FILE_ORDER=never``: key order, as before
``sampler.fileorder``), each in a fresh process, and how much faster this
run's cold sample was. On a store written in random order, that is the
random reads file order avoids.

``--compare-rss 100000,400000`` runs the sample (no baseline, no keccak
limit) in a fresh process per store size and prints the peaks side by side
with their ratio: anonymous memory must stay flat in N (ratio <= 1.2), the
file-backed part may not.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from benchlib import (
    CALLS_PER_CHUNK,
    DiskRates,
    cache_dir,
    cores,
    disk_rates,
    kernel_bound,
    lane_permutation_rate,
    numba_permutation_rate,
    numba_x8_rate,
    single_lane_limit,
    vector_width,
)

from chunkstore.reserve import ReserveStore
from chunkstore.store.batchstore import Batch
from chunkstore.swarm.bmt import backend as hashing
from chunkstore.swarm.constants import SAMPLE_SIZE
from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.postage import StampIssuer
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.soc import make_soc
from chunkstore.swarm.stamp import Stamp, validate_stamp
from sampler import InsufficientSample, reserve_sample, sample_hash
from sampler.items import SampleItem, transformed_address

FORMAT = 1  # bump when the cached store's recipe changes
BASE_TIME = 1_700_000_000_000_000_000
BATCH_DEPTH, BUCKET_DEPTH = 30, 16


def _signer() -> Signer:
    return Signer(keccak256(b"bench signer"))


def _batch() -> Batch:
    return Batch(keccak256(b"bench batch"), _signer().address, BATCH_DEPTH, BUCKET_DEPTH, False, 10**18, 0)


def build_store(path: Path, n: int, shards: int, soc_fraction: float, seed: int = 1) -> None:
    """N random full chunks, stamped by one batch with free slots; addresses hashed in batches."""
    rng = np.random.default_rng(seed)
    signer = _signer()
    batch = _batch()
    issuer = StampIssuer(signer, batch.id, batch.depth, batch.bucket_depth)
    tmp = path.with_suffix(".building")
    shutil.rmtree(tmp, ignore_errors=True)
    store = ReserveStore(tmp, shards=shards)
    store.batches.add(batch)
    rows = 512
    buf = np.zeros((rows, 4104), np.uint8)
    lengths = np.full(rows, 4104, np.int64)
    out = np.zeros((rows, 32), np.uint8)
    t0 = time.perf_counter()
    done = 0
    while done < n:
        m = min(rows, n - done)
        buf[:m, :8] = np.frombuffer((4096).to_bytes(8, "little"), np.uint8)
        buf[:m, 8:] = rng.integers(0, 256, size=(m, 4096), dtype=np.uint8)
        hashing.bmt_hashes(buf[:m], lengths[:m], np.zeros(m, np.int64), b"", out)
        puts = []
        for i in range(m):
            data = buf[i].tobytes()
            address = out[i].tobytes()
            if rng.random() < soc_fraction:
                soc = make_soc(signer, rng.bytes(32), data)
                address, data = soc.address, soc.data
            puts.append((data, issuer.stamp(address, timestamp_ns=BASE_TIME + done + i)))
        store.put_many(puts)
        done += m
        if sys.stderr.isatty():
            rate = done / (time.perf_counter() - t0)
            print(f"\rbuilding store: {done}/{n} chunks ({rate:,.0f}/s)", end="", file=sys.stderr, flush=True)
    store.close()
    if sys.stderr.isatty():
        print(file=sys.stderr)
    (tmp / "COMPLETE").write_text(json.dumps({"chunks": n, "shards": shards, "format": FORMAT}))
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)


def cached_store(n: int, shards: int, soc_fraction: float, rebuild: bool) -> tuple[Path, bool]:
    path = cache_dir() / f"store-n{n}-s{shards}-soc{int(soc_fraction * 100)}-f{FORMAT}"
    if rebuild or not (path / "COMPLETE").exists():
        build_store(path, n, shards, soc_fraction)
        return path, True
    return path, False


# ------------------------------------------------------------------ the baseline


@dataclass
class EagerChunk:
    """The per-chunk object the old design made for every entry."""

    address: bytes
    data: bytes
    chunk_type: int
    batch_id: bytes
    timestamp: int


def baseline_sample(store: ReserveStore, anchor: bytes, depth: int, consensus: int) -> tuple[list[SampleItem], int]:
    """One process, eager ``store.get`` of every chunk, one hash call per chunk, insertion sort."""
    items: list[SampleItem] = []
    batches = {b.id: b for b in store.batches.list()}
    n = 0
    for address, ctype, batch_id, ts in store.iter_neighbourhood(anchor, depth):
        n += 1
        if ctype not in (1, 2) or batch_id not in batches:
            continue
        ch = EagerChunk(address, store.get(address), ctype, batch_id, ts)
        if ch.chunk_type == 1:
            taddr = hashing.chunk_hash(ch.data, anchor)
        else:
            taddr = keccak256(ch.address, hashing.chunk_hash(ch.data[97:], anchor))
        if len(items) == SAMPLE_SIZE and taddr >= items[-1].transformed_address:
            continue
        stamp: Stamp | None = next((s for s in store.stamps_of(address) if s.batch_id == batch_id), None)
        if stamp is None or stamp.timestamp_ns > consensus:
            continue
        b = batches[batch_id]
        try:
            validate_stamp(stamp, address, b.owner, b.depth, b.bucket_depth)
        except Exception:  # noqa: BLE001 - any invalid stamp just leaves the chunk out
            continue
        if any(it.transformed_address == taddr for it in items):
            continue
        items.append(SampleItem(taddr, address, ch.data, stamp, ctype))
        items.sort(key=lambda it: it.transformed_address)
        del items[SAMPLE_SIZE:]
    return items, n


def _rss_mb(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024.0


# ------------------------------------------------------------------ memory

_STATUS_FIELDS = (b"RssAnon", b"RssFile", b"RssShmem", b"VmRSS", b"VmHWM")


def proc_status(pid: int) -> dict[str, int] | None:
    """RssAnon, RssFile, RssShmem, VmRSS, VmHWM of ``pid`` in kB (None once it is gone)."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                name, _, rest = line.partition(b":")
                if name in _STATUS_FIELDS:
                    out[name.decode()] = int(rest.split()[0])
    except (OSError, ValueError):
        return None
    return out


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(x) for x in f.read().split())
        except OSError:
            pass
    return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@dataclass
class ProcPeak:
    pid: int
    role: str
    anon_kb: int = 0  # peak RssAnon seen
    file_kb: int = 0  # peak RssFile seen
    rss_kb: int = 0  # peak VmRSS seen
    hwm_kb: int = 0  # VmHWM at the last poll (lifetime peak, file pages included)
    polls: int = 0

    def update(self, st: dict[str, int]) -> None:
        self.anon_kb = max(self.anon_kb, st.get("RssAnon", 0) + st.get("RssShmem", 0))
        self.file_kb = max(self.file_kb, st.get("RssFile", 0))
        self.rss_kb = max(self.rss_kb, st.get("VmRSS", 0))
        self.hwm_kb = max(self.hwm_kb, st.get("VmHWM", 0))
        self.polls += 1

    def as_dict(self) -> dict[str, int | str]:
        return dict(self.__dict__)


@dataclass
class MemoryPoller:
    """Polls /proc/<pid>/status of this process and its descendants on a thread; keeps peaks per process.

    Roles: ``parent`` (this process), ``forkserver`` and ``resource-tracker``
    (multiprocessing helpers), ``worker`` (children of the fork server: the
    sampler's phase-1 processes; and the parent's spawned or forked children:
    an import's validation workers), ``child`` (anything else).
    """

    interval: float = 0.02
    procs: dict[int, ProcPeak] = field(default_factory=dict)
    root: int = 0  # the process whose tree is polled (0: this one)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="memory-poller", daemon=True)

    def _role(self, pid: int, parent_role: str) -> str:
        if parent_role == "parent":
            cmd = _cmdline(pid)
            if "forkserver" in cmd:
                return "forkserver"
            if "resource_tracker" in cmd:
                return "resource-tracker"
            if "spawn_main" in cmd or cmd == _cmdline(self.root or os.getpid()):
                return "worker"  # spawned, or forked (a fork keeps its parent's command line)
            return "child"
        return "worker" if parent_role == "forkserver" else "child"

    def poll(self) -> None:
        stack = [(self.root or os.getpid(), "parent")]
        while stack:
            pid, role = stack.pop()
            st = proc_status(pid)
            if st is None:
                continue
            peak = self.procs.get(pid)
            if peak is None:
                peak = self.procs[pid] = ProcPeak(pid, role)
            peak.update(st)
            stack.extend(
                (c, self._role(c, peak.role) if c not in self.procs else self.procs[c].role) for c in _children(pid)
            )

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()

    def __enter__(self) -> MemoryPoller:
        self.poll()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.poll()

    def of(self, role: str) -> list[ProcPeak]:
        return sorted((p for p in self.procs.values() if p.role == role), key=lambda p: p.pid)

    def summary(self) -> dict:
        parent = self.of("parent")[0]
        workers = self.of("worker")
        return {
            "parent": parent.as_dict(),
            "workers": [w.as_dict() for w in workers],
            "helpers": [p.as_dict() for p in self.procs.values() if p.role not in ("parent", "worker")],
            "max_worker_anon_kb": max((w.anon_kb for w in workers), default=0),
            "max_worker_file_kb": max((w.file_kb for w in workers), default=0),
            "max_worker_rss_kb": max((w.rss_kb for w in workers), default=0),
            "max_worker_hwm_kb": max((w.hwm_kb for w in workers), default=0),
            "interval_s": self.interval,
        }


def _mb(kb: float) -> str:
    return f"{kb / 1024:.1f} MB"


def print_memory(mem: dict) -> None:
    print("memory (peaks while sampling; anon = RssAnon+RssShmem, private; file = RssFile, mapped store pages, "
          "reclaimable page cache; hwm = VmHWM, lifetime peak of anon+file):")  # fmt: skip
    rows = [("parent", mem["parent"])] + [("worker", w) for w in mem["workers"]]
    for role, p in rows:
        print(f"  {role:<7} pid {p['pid']:>7}: anon {_mb(p['anon_kb']):>9}  file {_mb(p['file_kb']):>9}  "
              f"rss {_mb(p['rss_kb']):>9}  hwm {_mb(p['hwm_kb']):>9}  ({p['polls']} polls)")  # fmt: skip


def data_files(path: Path) -> list[Path]:
    """The store's LMDB data files (``data.mdb`` of every shard), in a stable order."""
    return sorted(Path(path).rglob("data.mdb"))


def drop_page_cache(path: Path) -> int:
    """Evict the store's data files from the page cache (``POSIX_FADV_DONTNEED``: no root needed).

    Only ``data.mdb`` files: closing a descriptor of an LMDB lock file would
    drop the fcntl locks this process holds on it through the open store.
    Dirty pages are not dropped by the kernel, so the files are synced first.
    Returns the bytes advised.
    """
    advised = 0
    for data in data_files(path):
        fd = os.open(data, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            size = os.fstat(fd).st_size
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            advised += size
        finally:
            os.close(fd)
    return advised


def fill_page_cache(path: Path) -> int:
    """Read the store's data files through the page cache, so that a sample that follows finds them there.

    A cold sample does not leave them there: it reads runs of pages around
    the page cache (``O_DIRECT``). Returns the bytes read.
    """
    done = 0
    chunk = bytearray(4 << 20)
    for data in data_files(path):
        with open(data, "rb", buffering=0) as f:
            while got := f.readinto(chunk):
                done += got
    return done


def index_pages(store: ReserveStore) -> int:
    """Branch and leaf pages of the databases phase 1 walks (stamp index, chunks, tails), over every shard."""
    pages = 0
    for s in range(store.shard_count):
        shard = store.shard(s)
        with shard.env.begin() as txn:
            for db in (shard.stamps, shard.chunks, shard.tails):
                st = txn.stat(db)
                pages += st["branch_pages"] + st["leaf_pages"]
    return pages


def print_disk(disks: list[DiskRates], data_bytes: int, index: int, cold_s: float) -> None:
    """The disk as the cold samples met it, and what reading the store takes at those rates."""
    if not disks:
        print("  disk: not measured (the file system refuses O_DIRECT)")
        return
    seq = sorted(d.sequential_bps for d in disks)
    rnd = sorted(d.random_pps for d in disks)
    d = disks[0]
    # Phase 1 of a cold store reads every data page once (in file order or in runs, sequentially) and its
    # index pages: at random where the store grew at random (file order's first walk), among the runs where
    # it was imported in key order. At the slowest rates of the run, and one after the other:
    sequential = data_bytes / seq[0]
    floor = sequential + index / rnd[0]
    print(f"  disk before each cold sample (O_DIRECT): sequential {seq[0] / 1e6:,.0f}-{seq[-1] / 1e6:,.0f} MB/s "
          f"({d.streams} streams of 1 MiB reads), random {rnd[0]:,.0f}-{rnd[-1]:,.0f} pages/s ({d.depth} 4 KiB reads "
          f"in flight); the store's data files {data_bytes / 1e9:.2f} GB take {sequential:.1f} s at the "
          f"slowest sequential rate, its {index:,} index pages {index / rnd[0]:.1f} s read at random; "
          f"cold / their sum ({floor:.1f} s) = {cold_s / floor:.2f}, cold / the data files' time = "
          f"{cold_s / sequential:.2f}")  # fmt: skip


def warm_pool(store: ReserveStore, anchor: bytes, consensus: int, workers: int | None) -> None:
    """Start the worker pool (process start, kernel load) on an empty neighbourhood: not part of a sample's cost."""
    try:
        reserve_sample(store, anchor, 31, consensus, workers=workers)
    except InsufficientSample:
        pass


def cold_sample(path: str, anchor: bytes, consensus: int, workers: int | None) -> dict[str, object]:
    """One cold sample of the store at ``path`` in this process's own worker pool: seconds, hash, file-order rows."""
    with ReserveStore(Path(path), readonly=True) as store:
        warm_pool(store, anchor, consensus, workers)
        drop_page_cache(Path(path))
        res = reserve_sample(store, anchor, 0, consensus, workers=workers)
    return {"seconds": res.stats.total_duration, "hash": sample_hash(res.items).hex(),
            "file_order_rows": res.stats.file_order_rows}  # fmt: skip


def key_order_cold(path: Path, anchor: bytes, consensus: int, workers: int | None, runs: int) -> list[dict]:
    """Cold samples as phase 1 read before file order (``CHUNKSTORE_SAMPLE_FILE_ORDER=never``: key order).

    Each in a fresh process, since a worker pool reads the setting when it starts.
    """
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import bench_sample as b; "
            "print(json.dumps(b.cold_sample(sys.argv[2], bytes.fromhex(sys.argv[3]), int(sys.argv[4]), "
            "None if sys.argv[5] == '-' else int(sys.argv[5]))))")  # fmt: skip
    env = dict(os.environ, CHUNKSTORE_SAMPLE_FILE_ORDER="never")
    out = []
    for _ in range(runs):
        argv = [sys.executable, "-c", code, str(Path(__file__).parent), str(path), anchor.hex(), str(consensus),
                "-" if workers is None else str(workers)]  # fmt: skip
        done = subprocess.run(argv, env=env, check=True, capture_output=True, text=True)
        out.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return out


def kernel_rate(seconds: float) -> tuple[str, float | None]:
    """(name, instances/s) of the permutation the BMT kernel runs on; the lane kernel if this tree has it."""
    if hasattr(hashing, "_LANES"):
        return "lane permutation", lane_permutation_rate(seconds)
    return "x8 loop permutation", numba_x8_rate(seconds)  # a tree without the lane kernel: its 8-way loop


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2] if values else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=20000, help="chunks in the store (default 20000)")
    ap.add_argument("--store", type=Path, default=None,
                    help="sample this store instead of building one (e.g. bench_scale.py's, written in key order "
                         "by an import, so a cold sample reads it around the page cache)")  # fmt: skip
    ap.add_argument("--shards", type=int, default=4, help="shards of a newly built store (default 4)")
    ap.add_argument("--workers", type=int, default=None, help="sampler workers (default: cores)")
    ap.add_argument("--soc-fraction", type=float, default=0.1)
    ap.add_argument("--rebuild", action="store_true", help="build the store again even if cached")
    ap.add_argument("--no-baseline", action="store_true", help="skip the eager one-process baseline")
    ap.add_argument("--repeat", type=int, default=3, help="timed warm samples; the median is reported (default 3)")
    ap.add_argument("--cold", type=int, default=3,
                    help="timed samples after dropping the store from the page cache (default 3; 0: none)")
    ap.add_argument("--seconds", type=float, default=2.0, help="time per keccak-rate measurement")
    ap.add_argument("--json", action="store_true", help="also print the results as one JSON line")
    ap.add_argument("--no-limit", action="store_true", help="skip measuring the keccak limit L")
    ap.add_argument("--poll-ms", type=float, default=20.0, help="memory polling interval (default 20 ms)")
    ap.add_argument("--key-order-cold", type=int, default=0, metavar="N",
                    help="also N cold samples with file order off (key order, as before it), each in a fresh process")  # fmt: skip
    ap.add_argument("--compare-rss", metavar="N1,N2", default=None,
                    help="run the sample on stores of N1 and N2 chunks, each in a fresh process, and compare peaks")  # fmt: skip
    args = ap.parse_args()
    if args.compare_rss:
        return compare_rss(args)

    n_cores = cores()
    if args.no_limit:
        name, call_rate, rates, limit, perm, kname, krate = "none", 0.0, {}, 0.0, None, "none", None
    else:
        # Measured first, while this process is small: a forked helper (openssl) would
        # otherwise report this process's mapped store pages as its own peak RSS.
        name, call_rate, rates = single_lane_limit(args.seconds)
        limit = call_rate * n_cores / CALLS_PER_CHUNK
        perm = numba_permutation_rate(args.seconds)
        kname, krate = kernel_rate(args.seconds)
    bound = kernel_bound(krate, n_cores) if krate else 0.0
    if args.store is not None:
        path, built = args.store, False
    else:
        path, built = cached_store(args.chunks, args.shards, args.soc_fraction, args.rebuild)
    print(f"store: {path} ({'built' if built else 'given' if args.store else 'cached'}), backend={hashing.BACKEND}, "
          f"cores={n_cores}, vector={vector_width()}, "
          f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    anchor = keccak256(b"bench anchor")
    consensus = BASE_TIME + 10**15

    with ReserveStore(path, readonly=True) as store:
        warm_pool(store, anchor, consensus, args.workers)
        runs: dict[str, list] = {"cold": [], "warm": []}
        files = data_files(path)
        data_bytes, index = sum(f.stat().st_size for f in files), index_pages(store)
        disks: list[DiskRates] = []
        with MemoryPoller(args.poll_ms / 1000.0) as poller:
            # Warm means the page cache holds the data files. A cached store last sampled cold (its heads read
            # around the page cache) does not, and a first sample would find it cold and leave it so: with
            # --cold 0, every "warm" sample read the disk.
            fill_page_cache(path)
            reserve_sample(store, anchor, 0, consensus, workers=args.workers)
            for i in range(max(args.repeat, args.cold)):
                if i < args.cold:
                    drop_page_cache(path)
                    disk = disk_rates(files)  # around the page cache: the store stays cold
                    if disk is not None:
                        disks.append(disk)
                    runs["cold"].append(reserve_sample(store, anchor, 0, consensus, workers=args.workers))
                    fill_page_cache(path)
                if i < args.repeat:
                    runs["warm"].append(reserve_sample(store, anchor, 0, consensus, workers=args.workers))
        mem = poller.summary()
        for r in runs.values():
            r.sort(key=lambda res: res.stats.total_duration)
        res = runs["warm"][len(runs["warm"]) // 2]
        st = res.stats
        rate = st.total_iterated / st.total_duration
        cold_rate = _median([r.stats.total_iterated / r.stats.total_duration for r in runs["cold"]])
        fast_hash = sample_hash(res.items)
        assert all(sample_hash(r.items) == fast_hash for rs in runs.values() for r in rs)
        # Before the baseline, which maps every chunk into this process.
        self_mb, children_mb = _rss_mb(resource.RUSAGE_SELF), _rss_mb(resource.RUSAGE_CHILDREN)
        base = None
        if not args.no_baseline:
            t = time.perf_counter()
            items, seen = baseline_sample(store, anchor, 0, consensus)
            dt = time.perf_counter() - t
            base = {"seconds": dt, "chunks_per_second": seen / dt, "hash_equal": sample_hash(items) == fast_hash}
            assert [i.transformed_address for i in items] == [i.transformed_address for i in res.items]
        for it in res.items[:1]:  # spot check with the reference single-chunk rule
            assert transformed_address(it.chunk_address, it.chunk_data, it.chunk_type, anchor) == it.transformed_address

    base_mb = _rss_mb(resource.RUSAGE_SELF)
    base_anon_mb = (proc_status(os.getpid()) or {}).get("RssAnon", 0) / 1024.0
    worker_mb = st.worker_peak_rss_kb / 1024.0
    best = runs["warm"][0].stats.total_iterated / runs["warm"][0].stats.total_duration
    print(f"sample of {st.total_iterated:,} chunks, warm: {st.total_duration:.3f} s (median of {len(runs['warm'])}), "
          f"{rate:,.0f} chunks/s, {1e6 / rate:.2f} us/chunk ({1e6 * n_cores / rate:.2f} us/chunk/core); "
          f"best run {best:,.0f} chunks/s")  # fmt: skip
    print(f"  phase 1 {st.phase1_duration:.3f} s (workers {st.workers}; summed over workers: hashing "
          f"{st.taddr_duration:.3f} s, reads {st.chunk_load_duration:.3f} s, iteration {st.iteration_duration:.3f} s), "
          f"phase 2 {st.phase2_duration:.3f} s, reruns {st.reruns}; {st.mapped_rows:,} chunks hashed in place, "
          f"{st.file_order_rows:,} in file order")  # fmt: skip
    if runs["cold"]:
        cold = runs["cold"][len(runs["cold"]) // 2].stats
        print(f"sample cold (store dropped from the page cache first): {cold.total_duration:.3f} s (median of "
              f"{len(runs['cold'])}), {cold_rate:,.0f} chunks/s; cold/warm = {cold_rate / rate:.3f}")  # fmt: skip
        print(f"  phase 1 {cold.phase1_duration:.3f} s (summed over workers: hashing {cold.taddr_duration:.3f} s, "
              f"reads {cold.chunk_load_duration:.3f} s, iteration {cold.iteration_duration:.3f} s; "
              f"{cold.direct_io_rows:,} chunks read around the page cache, {cold.file_order_rows:,} in file order)")  # fmt: skip
        print_disk(disks, data_bytes, index, cold.total_duration)
    if args.key_order_cold and runs["cold"]:
        before = key_order_cold(path, anchor, consensus, args.workers, args.key_order_cold)
        assert all(b["hash"] == fast_hash.hex() and b["file_order_rows"] == 0 for b in before)
        key_s = _median([float(b["seconds"]) for b in before])
        print(f"sample cold in key order (file order off, as before it; fresh process each): {key_s:.3f} s (median of "
              f"{len(before)}), {st.total_iterated / key_s:,.0f} chunks/s; cold/warm = {st.total_iterated / key_s / rate:.3f}; "
              f"this run's cold is {key_s / cold.total_duration:.2f}x faster")  # fmt: skip
    for k, v in rates.items():
        print(f"  keccak rate {k:<20} {'n/a' if v is None else f'{v:,.0f} calls/s'}")
    if perm is not None:
        print(f"  keccak rate {'numba permutation':<20} {perm:,.0f} perms/s (not used for L)")
    if limit:
        print(f"limit L ({name}) = {call_rate:,.0f} x {n_cores} / {CALLS_PER_CHUNK} = {limit:,.0f} chunks/s; "
              f"ratio warm = {rate / limit:.3f}" + (f", cold = {cold_rate / limit:.3f}" if runs["cold"] else ""))  # fmt: skip
    if bound:
        print(f"kernel bound ({kname}, {1e6 / krate:.3f} us per instance) = {n_cores} x {krate:,.0f} / "
              f"{CALLS_PER_CHUNK} = {bound:,.0f} chunks/s; warm is {bound / rate:.2f}x below it")  # fmt: skip
    if base is not None:
        print(f"baseline (eager store.get + per-chunk objects, 1 process): {base['chunks_per_second']:,.0f} chunks/s, "
              + (f"ratio to L {base['chunks_per_second'] / limit:.3f}, " if limit else "")
              + f"same hash: {base['hash_equal']}; speed-up {rate / base['chunks_per_second']:.2f}x")  # fmt: skip
    print_memory(mem)
    print(f"  largest worker: anon {_mb(mem['max_worker_anon_kb'])}, file {_mb(mem['max_worker_file_kb'])}, "
          f"hwm {_mb(mem['max_worker_hwm_kb'])} (as the worker reported it: anon at scan end "
          f"{_mb(st.worker_anon_rss_kb)}, hwm {_mb(st.worker_peak_rss_kb)})")  # fmt: skip
    print(f"  getrusage ru_maxrss (anon + file): this process {self_mb:.0f} MB"
          + (f" (after the baseline {base_mb:.0f} MB, anon now {base_anon_mb:.0f} MB)" if base is not None else "")
          + f", waited children {children_mb:.0f} MB")  # fmt: skip
    print(f"sample hash {fast_hash.hex()}")
    if args.json:
        print(json.dumps({
            "chunks": st.total_iterated, "store_chunks": args.chunks, "seconds": st.total_duration, "chunks_per_second": rate,
            "cold_chunks_per_second": cold_rate if runs["cold"] else None,
            "us_per_chunk": 1e6 / rate, "best_chunks_per_second": best, "limit": limit, "limit_source": name,
            "ratio": rate / limit if limit else None, "kernel_bound": bound or None, "kernel": kname,
            "baseline": base, "rss_mb": {"self": self_mb, "self_after_baseline": base_mb, "worker": worker_mb, "children": children_mb},
            "memory": mem, "load_average": os.getloadavg()[0],
            "backend": hashing.BACKEND, "cores": n_cores, "workers": st.workers, "hash": fast_hash.hex(),
        }))  # fmt: skip
    return 0


def compare_rss(args: argparse.Namespace) -> int:
    """One fresh process per store size; prints peaks side by side and the ratios of the last to the first."""
    try:
        sizes = [int(x) for x in args.compare_rss.split(",")]
    except ValueError:
        print(f"--compare-rss wants N1,N2 (got {args.compare_rss!r})", file=sys.stderr)
        return 2
    if len(sizes) < 2:
        print("--compare-rss wants at least two sizes", file=sys.stderr)
        return 2
    results = []
    for n in sizes:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--chunks", str(n), "--shards", str(args.shards),
               "--soc-fraction", str(args.soc_fraction), "--repeat", str(args.repeat), "--poll-ms", str(args.poll_ms),
               "--no-baseline", "--no-limit", "--cold", "0", "--json"]  # fmt: skip
        if args.workers is not None:
            cmd += ["--workers", str(args.workers)]
        print(f"$ {' '.join(cmd)}", flush=True)
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            print(proc.stdout)
            print(f"run for {n} chunks failed (exit {proc.returncode})", file=sys.stderr)
            return 1
        for line in lines[:-1]:
            print(f"  {line}")
        results.append(json.loads(lines[-1]))
    print()
    head = f"{'':<34}" + "".join(f"{n:>14,}" for n in sizes) + f"{'ratio':>9}"
    print(head)

    def row(label: str, values: list[float], unit: str = "MB") -> float:
        ratio = values[-1] / values[0] if values[0] else float("inf")
        cells = "".join(f"{v / 1024:>11.1f} {unit}" if unit == "MB" else f"{v:>14,.0f}" for v in values)
        print(f"{label:<34}{cells}{ratio:>9.3f}")
        return ratio

    mems = [r["memory"] for r in results]
    worker_anon = row("worker anon peak (max)", [m["max_worker_anon_kb"] for m in mems])
    parent_anon = row("parent anon peak", [m["parent"]["anon_kb"] for m in mems])
    row("worker file-backed peak (max)", [m["max_worker_file_kb"] for m in mems])
    row("parent file-backed peak", [m["parent"]["file_kb"] for m in mems])
    row("worker total rss peak (max)", [m["max_worker_rss_kb"] for m in mems])
    row("worker VmHWM (max)", [m["max_worker_hwm_kb"] for m in mems])
    row("parent VmHWM", [m["parent"]["hwm_kb"] for m in mems])
    row("chunks/s (median run)", [r["chunks_per_second"] for r in results], unit="")
    flat = worker_anon <= 1.2 and parent_anon <= 1.2
    print(f"anonymous memory flat in N (ratio <= 1.2 for workers and parent): {'yes' if flat else 'NO'}")
    return 0 if flat else 1


if __name__ == "__main__":
    sys.exit(main())
