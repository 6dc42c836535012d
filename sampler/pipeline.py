"""The reserve sample: phase 1 in worker processes, phase 2 in the caller.

Phase 1 (``sampler.worker``) runs one task per shard in a process pool and
returns, per shard, the ``k`` smallest ``(transformed address, batch id)``
candidates that pass the index-only filters (storage radius, balance, chunk
type, stamp time). Phase 2 merges the shards' candidates in ascending key order and, for
each candidate that can still enter the sample, loads the chunk and its stamp
from the store, re-checks the stamp time, re-derives the transformed address
from the loaded bytes and validates the stamp against the batch; it stops at
16 valid items. When a shard's list runs out while that shard has more
candidates (many invalid stamps), the shard is scanned again for the next
candidates above the last one consumed, with a four times larger ``k``: the
merge never takes a candidate while a smaller one may still be unseen, so the
result does not depend on how many stamps are invalid or on ``k``.

Phase 2 judges a candidate (chunk X, batch B) by the entry of X under B with
the smallest index among those whose chunk type byte is the candidate's (an
entry with a rogue type byte never reaches a proof); if that entry's stamp is
after the consensus time, X does not enter under B, even when phase 1 let a
later entry of B through.

Duplicates. One chunk held under several stamps has one transformed address
and enters the sample once. Each batch vouches for the chunk with one stamp,
as the reference loads it: of the chunk's stamps of that batch, the one with
the smallest index; if that stamp is after the consensus time or invalid, the
batch does not bring the chunk in, whatever its other stamps of the chunk.
Among the batches whose stamp passes every check, the smallest batch id
(bytewise) gives the item's stamp. This falls out of the merge order
(transformed address, then batch id) and is the same whatever the shard
layout or worker count.

Hashing backend. Phase 2 re-derives each candidate's transformed address
with the pysha3 reference. If the accelerated backend's answer for a chunk
differs from it (and not because a SOC was replaced meanwhile), that is a
wrong kernel, not a bad chunk: it is logged as an error, counted
(``stats.hash_mismatches``), the process switches to the reference backend
(``hashing.demote``), and the whole sample is redone with it, since a wrong
hash may also have pushed a chunk that belongs in the sample out of every
shard's candidate list.

Consistency. Each shard is scanned in one LMDB read transaction. Phase 2
reads the store afresh; a candidate whose chunk or stamp changed or vanished
in between (a concurrent put or removal) is recomputed from what is now
stored and skipped if it no longer matches, so every item returned is
consistent with the store as phase 2 saw it.
"""

from __future__ import annotations

import asyncio
import atexit
import heapq
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, cast

import numpy as np

from chunkstore.store.layout import neighbourhood_range
from chunkstore.swarm import workerlog
from chunkstore.swarm.bmt import backend as hashing
from chunkstore.swarm.constants import SAMPLE_SIZE, SOC_HEADER_SIZE, ChunkType
from chunkstore.swarm.errors import SwarmError
from chunkstore.swarm.stamp import Stamp, validate_stamp

from . import kernelcache
from .batches import below_balance_batches, expired_batches
from .candidates import Candidate
from .errors import InsufficientSample, SamplerWorkerError
from .items import SampleItem, SampleResult, SampleStats, check_chunk, transformed_address
from .scope import SampleScope, range_fraction_bits
from .source import SampleSource
from .worker import ShardScan, ShardTask, init_worker, scan_shard, scan_snapshot

log = logging.getLogger(__name__)

DEFAULT_K = 64  # 4x the sample size: one invalid stamp in four near the top costs no rescan
RESCAN_GROWTH = 4


# ----------------------------------------------------------------- the pool


PROGRESS_SLOTS = 64  # concurrent samples per pool that can report progress
PROGRESS_POLL = 0.1  # seconds between two progress callbacks during phase 1


class _PoolHolder:
    """Process pools reused across samples (starting a process costs ~0.3 s), one per size.

    One pool per size, never resized in place, so concurrent samples asking
    for different worker counts cannot shut down each other's pool. Each pool
    comes with a shared array of progress counters, handed to its workers by
    the pool initializer; a sample that wants progress borrows one slot.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pools: dict[int, ProcessPoolExecutor] = {}
        self._counters: dict[int, Any] = {}  # id(pool) -> shared int64 array
        self._free: dict[int, list[int]] = {}  # id(pool) -> free slots

    def get(self, size: int) -> ProcessPoolExecutor:
        # Which kernels the fork server preloads follows the backend this process keeps. Waited for outside
        # the lock: a shutdown (at exit) takes it, and must not wait for the kernels to load first.
        hashing.wait_settled()
        # The fork server loads the scan kernels from the cache once they are compiled aside (kernelcache.py).
        if hashing.accelerated():
            kernelcache.wait()
        else:
            kernelcache.stop()  # the workers will not run them
        with self._lock:
            pool = self._pools.get(size)
            if pool is None:
                ctx = _mp_context()
                counters = ctx.Array("q", PROGRESS_SLOTS, lock=True)
                pool = self._pools[size] = ProcessPoolExecutor(
                    max_workers=size, mp_context=ctx, initializer=init_worker, initargs=(counters, os.getpid())
                )
                self._counters[id(pool)] = counters
                self._free[id(pool)] = list(range(PROGRESS_SLOTS))
            return pool

    def take_slot(self, pool: ProcessPoolExecutor) -> tuple[Any, int] | None:
        """A zeroed progress slot of ``pool`` (counters, index), or None when all are taken."""
        with self._lock:
            free = self._free.get(id(pool))
            if not free:
                return None
            slot = free.pop()
            counters = self._counters[id(pool)]
        with counters.get_lock():
            counters[slot] = 0
        return counters, slot

    def give_slot(self, pool: ProcessPoolExecutor, slot: int) -> None:
        with self._lock:
            free = self._free.get(id(pool))
            if free is not None:
                free.append(slot)

    def _forget(self, pool: ProcessPoolExecutor) -> None:
        self._counters.pop(id(pool), None)
        self._free.pop(id(pool), None)

    def discard(self, pool: ProcessPoolExecutor) -> None:
        """Forget a broken pool so the next sample starts fresh processes."""
        with self._lock:
            for size, p in list(self._pools.items()):
                if p is pool:
                    del self._pools[size]
                    self._forget(pool)
        pool.shutdown(wait=False, cancel_futures=True)

    def shutdown(self) -> None:
        kernelcache.stop()
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
            for pool in pools:
                self._forget(pool)
        for pool in pools:
            pool.shutdown(wait=True, cancel_futures=True)


def _mp_context() -> multiprocessing.context.BaseContext:
    """'forkserver' where available (workers fork from a clean server that has
    imported the worker module, and thus the compiled hashing kernels, once),
    its server started; otherwise 'spawn'. Never plain 'fork': the daemon has
    threads and open LMDB environments that must not be copied into a child."""
    try:
        ctx = multiprocessing.get_context("forkserver")
    except ValueError:
        return multiprocessing.get_context("spawn")
    # With the accelerated backend the fork server also compiles the direct scan once.
    # workerlog first: the server's own logging is set up before the kernels' imports can log.
    kernels = ["sampler.worker", "sampler.columns", "sampler.fileorder"] if hashing.accelerated() else ["sampler.worker"]
    ctx.set_forkserver_preload([workerlog.__name__, *kernels])
    _start_fork_server()
    return ctx


def _start_fork_server() -> None:
    """Start the fork server with the daemon's import path, not its working directory's.

    Python 3.11's fork server imports the preloaded modules before it takes
    the parent's ``sys.path``, on a path that starts with the current
    directory: a ``sampler`` or ``chunkstore`` directory there (a checkout of
    another version, say) would be the code the workers run, not the
    daemon's. ``PYTHONSAFEPATH`` keeps that directory off the server's path;
    it is set only while the server starts, as is ``workerlog.ENV``, this
    process's log format for the server and its workers.
    """
    from multiprocessing import forkserver

    temporary = {"PYTHONSAFEPATH": "1", workerlog.ENV: workerlog.describe()}
    saved = _put_environ(temporary)
    try:
        forkserver.ensure_running()
    finally:
        _put_environ(saved)


def _put_environ(values: dict[str, str | None]) -> dict[str, str | None]:
    """Set (None: remove) these environment variables; returns what they were, to put back the same way."""
    before = {name: os.environ.get(name) for name in values}
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    return before


_POOL = _PoolHolder()
atexit.register(_POOL.shutdown)


def pool_size(store: SampleSource, workers: int | None = None) -> int:
    """The worker processes a sample of ``store`` runs in: ``workers`` (default: the usable CPUs), at most
    one a shard; 0 means in the calling process."""
    nworkers = default_workers() if workers is None else workers
    return min(nworkers, int(store.shard_count)) if nworkers > 0 else 0


def start_pool(store: SampleSource, workers: int | None = None) -> int:
    """Start what a sample of ``store`` would start first, so that the first sample does not wait for it: the
    pool, and the fork server its workers fork from, which loads (or compiles) the scan kernels in its own
    process. Returns the pool's size (0: a sample of ``store`` runs in the calling process).

    A daemon calls this once it listens: the first ``/rchash`` after a start took 1.2 s more than the next
    (13 s on a fresh install, the kernels being compiled), a figure an operator reads as the sample's own.
    With the fork server warm, forking the workers costs the first sample some 0.05 s. No worker is started
    here: a process this has to wait for would hold the exit of a daemon told to stop meanwhile. While this
    process's BMT kernels load, the scan kernels are compiled in a process of their own (``kernelcache``).
    """
    size = pool_size(store, workers)
    if size:
        if not hashing.settled():  # the BMT kernels are loading here: the scan kernels compile aside meanwhile
            kernelcache.start_compiling()
            hashing.wait_settled()
            kernelcache.wait()
            if kernelcache.stopped():  # the pool was shut down meanwhile (the daemon is stopping): no server
                return size
        _POOL.get(size)
    return size


def shutdown_pool() -> None:
    """Stop the sampler's worker processes (they are started again on the next sample)."""
    _POOL.shutdown()


# ----------------------------------------------------------------- helpers


def sample_scope(store: SampleSource, anchor: bytes, depth: int) -> SampleScope:
    """What a sample of ``store`` covers: the anchor's neighbourhood within the store's storage radius."""
    reserve = store.reserve
    return SampleScope(bytes(anchor), depth, bytes(reserve.overlay), int(reserve.radius))


def expected_entries(store: SampleSource, anchor: bytes, depth: int) -> int:
    """Estimated stamp entries a sample walks, from counters only (no scan).

    Addresses are uniform, so a range covering ``1 / 2^bits`` of the address
    space holds about that share of the entries: of all of them with radius
    0 (exact at depth 0), else of those within the radius (the per-bin
    counters), the radius range covering ``1 / 2^radius``.
    """
    if not anchor:
        return 0
    scope = sample_scope(store, anchor, depth)
    bits = range_fraction_bits(scope.key_range())
    if bits is None:
        return 0
    if scope.radius and scope.overlay:
        base = range_fraction_bits(neighbourhood_range(scope.overlay, scope.radius)) or 0
        return int(store.reserve.status().size_within_radius) >> max(0, bits - base)
    stamps = sum(store.shard(i).counts()["stamps"] for i in range(int(store.shard_count)))
    return stamps >> bits


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class _ShardStream:
    """Candidates of one shard, consumed in order and refilled on demand."""

    def __init__(self, scan: ShardScan) -> None:
        self.shard = scan.shard
        self._set(scan)

    def _set(self, scan: ShardScan) -> None:
        self.items: list[Candidate] = scan.candidates
        self.pos = 0
        self.complete = scan.complete
        self.k = scan.k

    def peek(self) -> Candidate | None:
        return self.items[self.pos] if self.pos < len(self.items) else None

    @property
    def needs_more(self) -> bool:
        return self.pos >= len(self.items) and not self.complete

    def refill(self, scan: ShardScan) -> None:
        self._set(scan)


class _Phase1:
    """Runs shard scans, in the pool or (workers == 0) in this process."""

    def __init__(self, store: SampleSource, scope: SampleScope, consensus_time: int,
                 excluded: frozenset[bytes], workers: int, k: int, reference: bool,
                 progress: Callable[[int], None] | None = None) -> None:  # fmt: skip
        self.store = store
        self.path = os.fspath(store.path)
        self.shards = int(store.shard_count)
        self.scope = scope
        self.reference = reference
        self.consensus_time = consensus_time
        self.excluded = excluded
        self.k = k
        self.workers = pool_size(store, workers)
        self.pool = _POOL.get(self.workers) if self.workers else None
        self.stats = SampleStats(workers=max(1, self.workers))
        self.rescans = 0
        self.progress = progress

    def _task(self, shard: int, k: int, after: tuple[bytes, bytes] | None, slot: int | None = None) -> ShardTask:
        sc = self.scope
        return ShardTask(
            self.path, shard, sc.anchor, sc.depth, self.consensus_time, self.excluded, k, after, slot,
            overlay=sc.overlay, radius=sc.radius, reference=self.reference,
        )  # fmt: skip

    def _run_here(self, tasks: list[ShardTask], progress: Callable[[int], None] | None) -> list[ShardScan]:
        out = []
        done = 0

        def report(n: int) -> None:
            nonlocal done
            done += n
            progress(done)  # type: ignore[misc]

        for t in tasks:
            with self.store.shard(t.shard).snapshot() as snap:
                out.append(scan_snapshot(t, snap, report if progress is not None else None))
        return out

    def _run(self, tasks: list[ShardTask], progress: Callable[[int], None] | None = None) -> list[ShardScan]:
        """Scan ``tasks``; ``progress(entries walked so far)`` is called now and then while they run."""
        if self.pool is None:
            return self._run_here(tasks, progress)
        borrowed = _POOL.take_slot(self.pool) if progress is not None else None
        if borrowed is not None:
            counters, slot = borrowed
            tasks = [ShardTask(**{**t.__dict__, "progress_slot": slot}) for t in tasks]
        futures: list[Future[ShardScan]] = []
        try:
            futures = [self.pool.submit(scan_shard, t) for t in tasks]
            if borrowed is not None:
                pending = set(futures)
                while pending:
                    _, pending = wait(pending, timeout=PROGRESS_POLL, return_when=FIRST_EXCEPTION)
                    progress(counters[slot])  # type: ignore[misc]
                    if any(f.done() and f.exception() is not None for f in futures):
                        break
            return self._collect(tasks, futures)
        finally:
            if borrowed is not None:
                # Only once every task is finished or cancelled: a late worker must not write into a reused slot.
                for f in futures:
                    f.cancel()
                wait(futures)
                _POOL.give_slot(self.pool, slot)

    def _collect(self, tasks: list[ShardTask], futures: list[Future[ShardScan]]) -> list[ShardScan]:
        out = []
        for task, fut in zip(tasks, futures, strict=True):
            try:
                out.append(fut.result())
            except BrokenProcessPool as exc:
                assert self.pool is not None  # only pool futures break this way
                _POOL.discard(self.pool)
                raise SamplerWorkerError(task.shard, f"worker process died: {exc}") from exc
            except SamplerWorkerError:
                raise
            except Exception as exc:  # e.g. a task that could not be pickled
                raise SamplerWorkerError(task.shard, f"{type(exc).__name__}: {exc}") from exc
        return out

    def _record(self, scans: list[ShardScan], rescan: bool) -> None:
        for scan in scans:
            self.stats.worker_peak_rss_kb = max(self.stats.worker_peak_rss_kb, scan.peak_rss_kb)
            self.stats.worker_anon_rss_kb = max(self.stats.worker_anon_rss_kb, scan.anon_rss_kb)
            if rescan:
                # A rescan walks the same entries again: count its time, not its entries.
                self.stats.add_counts({k: v for k, v in scan.stats.items() if k.endswith("_duration")})
            else:
                self.stats.add_counts(scan.stats)

    def first(self) -> list[ShardScan]:
        # Only the first pass reports progress: rescans walk entries already counted.
        scans = self._run([self._task(s, self.k, None) for s in range(self.shards)], self.progress)
        self._record(scans, rescan=False)
        return scans

    def more(self, stream: _ShardStream) -> ShardScan:
        last = stream.items[-1] if stream.items else None
        after = (last[0], last[1]) if last is not None else None
        (scan,) = self._run([self._task(stream.shard, stream.k * RESCAN_GROWTH, after)])
        self._record([scan], rescan=True)
        self.rescans += 1
        return scan


def _merged(phase1: _Phase1, streams: list[_ShardStream]) -> Iterator[Candidate]:
    """All candidates of all shards in ascending (taddr, batch id) order, refilling shards lazily."""
    heap: list[tuple[bytes, bytes, int]] = []
    for i, s in enumerate(streams):
        c = s.peek()
        if c is not None:
            heap.append((c[0], c[1], i))
    heapq.heapify(heap)
    pending = [i for i, s in enumerate(streams) if s.needs_more]
    while True:
        # A shard with unseen candidates must show its next one before anything is taken.
        for i in pending:
            s = streams[i]
            while s.needs_more:
                s.refill(phase1.more(s))
            c = s.peek()
            if c is not None:
                heapq.heappush(heap, (c[0], c[1], i))
        pending = []
        if not heap:
            return
        _, _, i = heapq.heappop(heap)
        s = streams[i]
        cand = s.items[s.pos]
        s.pos += 1
        yield cand
        nxt = s.peek()
        if nxt is not None:
            heapq.heappush(heap, (nxt[0], nxt[1], i))
        elif s.needs_more:
            pending.append(i)


# ----------------------------------------------------------------- phase 2


class BackendMismatch(Exception):
    """Phase 1's transformed address of a chunk is not the reference's (internal: triggers the redo)."""

    def __init__(self, address: bytes, chunk_type: int, accelerated: bytes, reference: bytes) -> None:
        self.address = address
        self.chunk_type = chunk_type
        self.accelerated = accelerated
        self.reference = reference
        self.stats: SampleStats | None = None  # of the run that caught it
        super().__init__(
            f"accelerated hashing backend gave transformed address {accelerated.hex()} for "
            f"{'SOC' if chunk_type == ChunkType.SOC else 'CAC'} {address.hex()}; the reference gives {reference.hex()}"
        )


def _accelerated_taddr(address: bytes, data: bytes, chunk_type: int, anchor: bytes) -> bytes:
    """The transformed address of one chunk by the accelerated backend of this process."""
    offset = SOC_HEADER_SIZE if chunk_type == ChunkType.SOC else 0
    row = np.frombuffer(data, np.uint8).reshape(1, -1)
    out = np.empty((1, 32), np.uint8)
    soc_address = np.frombuffer(address, np.uint8).reshape(1, 32)
    hashing.transformed_addresses(
        row, np.array([len(data)], np.int64), np.array([offset], np.int64), soc_address,
        np.array([chunk_type == ChunkType.SOC], np.uint8), anchor, out,
    )  # fmt: skip
    return cast(bytes, out[0].tobytes())


class _Phase2:
    """Loads, re-checks and validates candidates in order until the sample is full.

    ``reference``: phase 1 hashed with the pysha3 reference, so a differing
    transformed address can only mean the chunk changed since.
    """

    def __init__(self, store: SampleSource, anchor: bytes, consensus_time: int, stats: SampleStats, reference: bool) -> None:
        self.store = store
        self.anchor = bytes(anchor)
        self.consensus_time = consensus_time
        self.stats = stats
        self.reference = reference
        self.items: list[SampleItem] = []
        self._data: dict[tuple[bytes, int], bytes | None] = {}  # (address, type) -> verified data (None: unusable)
        self._done: set[tuple[bytes, bytes, int]] = set()  # (address, batch id, type) already tried

    def _load(self, address: bytes, chunk_type: int, taddr: bytes) -> bytes | None:
        """The chunk's data if it still matches what phase 1 hashed; else None (counted)."""
        key = (address, chunk_type)
        if key in self._data:
            return self._data[key]
        st = self.stats
        t = time.perf_counter()
        data: bytes | None
        try:
            data = bytes(self.store.get(address))
            st.chunk_loads += 1
        except SwarmError:
            data = None
        st.chunk_load_duration += time.perf_counter() - t
        if data is not None and not self._intact(address, data, chunk_type, taddr):
            data = None
        if data is None:
            st.chunk_load_failed += 1
        self._data[key] = data
        return data

    def _intact(self, address: bytes, data: bytes, chunk_type: int, taddr: bytes) -> bool:
        """Is ``data`` the chunk phase 1 hashed to ``taddr``? Raises ``BackendMismatch`` on a wrong kernel."""
        try:
            # A corrupt or concurrently replaced chunk would give a claim the contract refuses.
            check_chunk(address, data, chunk_type)
        except SwarmError:
            return False
        t = time.perf_counter()
        want = transformed_address(address, data, chunk_type, self.anchor)
        self.stats.taddr_duration += time.perf_counter() - t
        if want == taddr:
            return True
        if self.reference:
            return False  # the chunk (a SOC) was replaced after phase 1 hashed it
        # A CAC's data is fixed by its address, so phase 1 hashed these very bytes. A SOC may
        # have been replaced since: then this process's kernel agrees with the reference on
        # the new bytes, and the candidate is merely stale.
        if chunk_type == ChunkType.CAC or _accelerated_taddr(address, data, chunk_type, self.anchor) != want:
            raise BackendMismatch(address, chunk_type, taddr, want)
        return False

    def _first_stamp(self, address: bytes, batch_id: bytes, chunk_type: int) -> Stamp | None:
        """The stamp of ``address``'s entry under ``batch_id`` with the smallest index among those with the
        candidate's chunk type (phase 1 skipped entries of another type byte, rogue ones above all); None
        when there is none."""
        try:
            entries = self.store.shard(self.store.shard_of(address)).stamp_entries(address)
        except SwarmError:
            return None
        mine = [stamp for kind, stamp in entries if kind == chunk_type and stamp.batch_id == batch_id]
        return min(mine, key=lambda s: s.index, default=None)

    def offer(self, cand: Candidate) -> bool:
        """Try one candidate; True when the sample is full."""
        taddr, batch_id, address, chunk_type = cand
        key = (address, batch_id, chunk_type)
        if key in self._done:
            return False  # a further entry of a (chunk, batch) already judged by its first stamp
        self._done.add(key)
        if self.items and self.items[-1].transformed_address == taddr:
            # The chunk is in the sample under a smaller batch id: one count per further batch.
            self.stats.duplicates_ignored += 1
            return False
        st = self.stats
        stamp = self._first_stamp(address, batch_id, chunk_type)
        if stamp is None:
            # The entry vanished or changed since phase 1 (a newer stamp took its slot).
            st.chunk_load_failed += 1
            return False
        batch = self.store.batches.find(batch_id)
        # The reference loads one stamp per (chunk, batch), the batch's first in index order
        # (Bee: chunkstamp.LoadWithBatchID in sample.go), and judges the chunk by it alone: when
        # that stamp is too new or invalid, the batch's other stamps of the chunk do not stand in.
        if stamp.timestamp_ns > self.consensus_time:
            # Phase 1 counted this entry already (same timestamp in the index), or the stamp
            # was replaced by a newer one since, or the chunk entered phase 1 through a later
            # entry of this batch: skip without counting.
            return False
        if batch is None:
            st.invalid_stamps += 1
            return False
        data = self._load(address, chunk_type, taddr)
        if data is None:
            return False
        t = time.perf_counter()
        st.stamp_validations += 1
        try:
            validate_stamp(stamp, address, batch.owner, batch.depth, batch.bucket_depth)
        except SwarmError:
            st.invalid_stamps += 1
            return False
        finally:
            st.stamp_validation_duration += time.perf_counter() - t
        self.items.append(SampleItem(taddr, address, data, stamp, ChunkType(chunk_type)))
        return len(self.items) >= SAMPLE_SIZE


# ----------------------------------------------------------------- entry points


MAX_DEPTH = 255  # the reference's depth is a uint8


def _check_arguments(anchor: object, depth: object, consensus_time: object, k: object) -> None:
    """Refuse, by name, arguments of the wrong type or range, before any worker starts.

    ``bool`` is an ``int`` to Python, but ``depth=True`` is a caller's mistake.
    """
    if not isinstance(anchor, bytes | bytearray | memoryview):
        raise TypeError(f"anchor must be bytes, not {type(anchor).__name__}")
    if not len(anchor):
        raise ValueError("anchor is empty")
    for name, value in (("depth", depth), ("consensus_time", consensus_time), ("k", k)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    assert isinstance(depth, int) and isinstance(consensus_time, int) and isinstance(k, int)
    if not 0 <= depth <= MAX_DEPTH:
        raise ValueError(f"depth {depth} is outside 0..{MAX_DEPTH}")
    if consensus_time < 0:
        raise ValueError(f"consensus_time {consensus_time} is negative")
    if k < 1:
        raise ValueError("k must be positive")


def reserve_sample(
    store: SampleSource,
    anchor: bytes,
    depth: int,
    consensus_time: int,
    min_batch_balance: int | None = None,
    workers: int | None = None,
    k: int = DEFAULT_K,
    progress: Callable[[int], None] | None = None,
) -> SampleResult:
    """The reserve sample of the neighbourhood ``proximity(address, anchor) >= depth``.

    ``consensus_time`` is Unix nanoseconds: stamps stamped later are left out.
    ``workers`` processes scan the shards (default: the usable CPUs; 0 scans
    in this process, for debugging). Raises ``InsufficientSample`` when fewer
    than 16 eligible chunks exist.

    ``progress``, if given, is called in this thread during phase 1 with the
    number of stamp entries walked so far (about every 0.1 s; workers add to
    a shared counter every few thousand entries); ``expected_entries`` gives
    the total to expect.
    """
    _check_arguments(anchor, depth, consensus_time, k)
    # Which path the scans take follows the backend: while a daemon's kernels still load, the sample
    # waits for them rather than hash a reserve on the reference (not timed: it is start-up).
    hashing.wait_settled()
    t0 = time.perf_counter()
    scope = sample_scope(store, anchor, depth)
    excluded = below_balance_batches(store.batches, min_batch_balance) | expired_batches(store.reserve)
    nworkers = default_workers() if workers is None else workers
    reference = not hashing.accelerated()
    try:
        items, stats = _sample_once(store, scope, consensus_time, excluded, nworkers, k, reference, progress)
    except BackendMismatch as exc:
        log.error(
            "hashing backend mismatch: redoing the sample with the reference backend",
            extra={"fields": {"chunk": exc.address.hex(), "chunk_type": int(exc.chunk_type), "anchor": scope.anchor.hex(),
                              "accelerated": exc.accelerated.hex(), "reference": exc.reference.hex()}},
        )  # fmt: skip
        hashing.demote(str(exc))
        walked = exc.stats.total_iterated if exc.stats is not None else 0

        def resumed(n: int) -> None:
            progress(walked + n)  # type: ignore[misc]

        reference = True
        items, stats = _sample_once(
            store, scope, consensus_time, excluded, nworkers, k, reference, resumed if progress else None
        )
        stats.hash_mismatches += 1
    stats.total_duration = time.perf_counter() - t0
    stats.chunks_per_second = stats.total_iterated / stats.total_duration if stats.total_duration > 0 else 0.0
    if len(items) < SAMPLE_SIZE:
        raise InsufficientSample(len(items), stats=stats)
    return SampleResult(
        items=items, stats=stats, anchor=bytes(anchor), depth=depth, storage_radius=scope.radius,
        hash_backend="pysha3" if reference else "numba",
    )  # fmt: skip


def _sample_once(
    store: SampleSource,
    scope: SampleScope,
    consensus_time: int,
    excluded: frozenset[bytes],
    workers: int,
    k: int,
    reference: bool,
    progress: Callable[[int], None] | None,
) -> tuple[list[SampleItem], SampleStats]:
    """Phases 1 and 2 with one hashing path; the items (up to 16) and the run's stats."""
    t0 = time.perf_counter()
    phase1 = _Phase1(store, scope, consensus_time, excluded, workers, k, reference, progress)
    streams = [_ShardStream(scan) for scan in phase1.first()]
    t1 = time.perf_counter()
    stats = phase1.stats
    stats.phase1_duration = t1 - t0
    phase2 = _Phase2(store, scope.anchor, consensus_time, stats, reference)
    try:
        for cand in _merged(phase1, streams):
            if phase2.offer(cand):
                break
    except BackendMismatch as exc:
        exc.stats = stats
        raise
    finally:
        stats.reruns = phase1.rescans
        stats.phase2_duration = time.perf_counter() - t1
    return phase2.items, stats


async def reserve_sample_async(
    store: SampleSource,
    anchor: bytes,
    depth: int,
    consensus_time: int,
    min_batch_balance: int | None = None,
    workers: int | None = None,
    k: int = DEFAULT_K,
    progress: Callable[[int], None] | None = None,
) -> SampleResult:
    """``reserve_sample`` in a thread, so the event loop keeps serving while it runs.

    ``progress`` is called in that thread, not in the event loop.
    """
    return await asyncio.to_thread(
        reserve_sample, store, anchor, depth, consensus_time, min_batch_balance, workers, k, progress
    )
