"""Phase 1 of the sample, run in a worker process per shard.

A worker walks the key range of one shard's stamp index that the sample
covers (the anchor's neighbourhood within the storage radius, see
``sampler.scope``), drops (chunk, stamp) entries by index data alone
(below-balance batch, rogue type, stamp newer than the consensus time),
copies each remaining chunk's bytes into a row of a reused ``uint8`` buffer,
hashes whole blocks of rows with the batch kernel, and keeps only the ``k``
smallest ``(transformed address, batch id)`` candidates. All reads of one
scan happen under one LMDB read transaction, so a shard is sampled from one
consistent snapshot.

Two ways to read, one rule:

* ``scan_direct`` (the default with the accelerated backend) reads the
  shard's data file itself (``sampler.lmdbfile``, ``sampler.columns``): the
  index comes in blocks of columns, filtered without per-entry Python, and
  each chunk's position in the file is known before its bytes are needed,
  so the heads of the next ``LOOKAHEAD`` blocks are requested from the
  kernel (``posix_fadvise(WILLNEED)``, sorted by position) while the current
  block is hashed: a cold page cache is read with many requests in flight
  instead of one page fault at a time. A cold block whose chunks lie in runs
  of consecutive pages (a store written in key order, as an import writes
  it) is instead read around the page cache (``O_DIRECT``, in reads of up to
  a MiB by ``DIRECT_READERS`` threads), which costs a fifth of the system
  time of filling the page cache. Memory is bounded by the block sizes,
  whatever the shard holds. A shard whose first block is cold and whose
  chunks lie scattered (a store grown by puts in random order) is hashed
  in file order instead (``sampler.fileorder``): the same candidates and
  counters, from sequential reads where key order would make random ones.
* ``scan_rows`` walks the index through py-lmdb, one entry at a time. It is
  the reference the direct scan is tested against, the path of the pysha3
  backend and of a sample redone after a backend mismatch, and the fallback
  when the data file is not what the direct reader expects
  (``DirectReadError``: counted as ``direct_read_fallbacks``).

The worker returns plain tuples and counters: the parent (phase 2) loads the
full chunks and stamps of the few candidates that can enter the sample.

Progress. When the task names a slot, the worker adds the entries it has
walked into that slot of a shared counter array (handed to every worker
process once, by the pool initializer) after each hashed block: nothing is
done per entry.

Memory. Everything a scan allocates is bounded: the row buffer of one block
(and ``DIRECT_BUFFERS`` more once a block is read around the page cache),
the index columns of ``LOOKAHEAD`` blocks and at most ``2k`` candidates. The
direct scan hashes the chunks that lie in runs of pages (``MAPPED_RUN``: a
store written in key order) and are not read around the page cache where
they lie in it, through a read-only map of the data file
(``chunkstore.store.mapped.ReadOnlyMap``: no ``pread`` copy into a row; a
quarter of the read time of a warm shard); the map's pages are given back
every ``RELEASE_ROWS`` rows, so the process's file-backed RSS stays bounded
too. The row scan reads through LMDB's map. The scan reports the process's
anonymous (private) RSS apart from its file-backed RSS, since only the
former is memory the sample costs.
"""

from __future__ import annotations

import logging
import os
import queue
import resource
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from chunkstore.store.errors import BufferTooSmall, ChunkNotFound
from chunkstore.store.mapped import ReadOnlyMap
from chunkstore.store.shard import ShardReader, ShardSnapshot
from chunkstore.swarm.bmt import ROW_STRIDE
from chunkstore.swarm.bmt import backend as hashing
from chunkstore.swarm.constants import MAX_CAC_SIZE, SOC_HEADER_SIZE, SPAN_SIZE, ChunkType
from chunkstore.swarm.directio import aligned_buffer, open_direct
from chunkstore.swarm.lifeline import exit_with

from .blocks import BlockColumns
from .candidates import Candidate, CandidateSet, Key
from .errors import SamplerWorkerError
from .scope import SampleScope

log = logging.getLogger(__name__)

ROWS = 256  # rows per kernel call of the row scan: amortises its argument checks and dispatch
BLOCK = 1024  # entries walked per block of the direct scan (rows hashed per kernel call)
BLOCK_SLACK = 256  # further entries of the block's last chunk, kept in the block
LOOKAHEAD = 8  # blocks located and requested from the disk ahead of the one being hashed
STRIDE = ROW_STRIDE  # room for a full SOC
DIRECT_RUN = 8  # rows whose head pages follow each other (a few pages apart at most) that make a run worth reading
DIRECT_SHARE = 0.5  # share of a cold block's rows in such runs for the block to be read around the page cache
DIRECT_BUFFERS = 4  # row buffers of blocks read around the page cache: one hashed, the others filled
MAPPED_RUN = 8  # rows whose head pages follow each other that are hashed in place, through the map
DIRECT_READERS = 2  # threads reading blocks around the page cache: reads in flight per worker
# plain ints: the per-entry loop compares them faster than IntEnum members
_CAC, _SOC = int(ChunkType.CAC), int(ChunkType.SOC)
_MIN_CAC, _MAX_CAC = SPAN_SIZE, MAX_CAC_SIZE
PROGRESS_EVERY = 4096  # entries between two progress reports (at the next hashed batch)

# The shared progress counters of this worker process (see ``init_worker``).
_progress: Any = None


def init_worker(progress: Any, master: int | None = None) -> None:
    """Pool initializer: keep the pool's shared ``int64`` counter array (a locked ``Array``), and exit
    when the ``master`` process (the daemon that made the pool) does (see ``lifeline``)."""
    global _progress
    _progress = progress
    if master is not None:
        exit_with(master)
    # Ctrl-C reaches the whole process group: the master stops the pool; a worker's own traceback
    # (SemLock and pipe errors mid-task) would only bury the master's message.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _slot_reporter(slot: int) -> Callable[[int], None] | None:
    counters = _progress
    if counters is None:
        return None

    def add(n: int) -> None:
        with counters.get_lock():
            counters[slot] += n

    return add


def memory_kb() -> dict[str, int]:
    """This process's memory from /proc/self/status, in kB: RssAnon, RssFile, RssShmem, VmRSS, VmHWM.

    Empty where /proc is not available. RssAnon is private memory (heap,
    buffers); RssFile counts pages of mapped files (LMDB's map of the store),
    which are page cache the kernel reclaims at will; VmHWM is the peak of
    their sum.
    """
    out: dict[str, int] = {}
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                name, _, rest = line.partition(b":")
                if name in (b"RssAnon", b"RssFile", b"RssShmem", b"VmRSS", b"VmHWM"):
                    out[name.decode()] = int(rest.split()[0])
    except OSError:
        pass
    return out


def row_buffer() -> np.ndarray:
    """The rows of one block: sector-aligned, so that a read around the page cache can fill them."""
    from .columns import ROW_BYTES

    cap = BLOCK + BLOCK_SLACK
    return aligned_buffer(cap * ROW_BYTES)[: cap * ROW_BYTES].reshape(cap, ROW_BYTES)


def _hash_rows(
    buf: np.ndarray,
    lengths: np.ndarray,
    offsets: np.ndarray,
    soc_addresses: np.ndarray,
    is_soc: np.ndarray,
    prefix: bytes,
    out: np.ndarray,
    reference: bool,
) -> None:
    """Transformed addresses of a batch of rows (the one place that names the backend)."""
    hashing.transformed_addresses(buf, lengths, offsets, soc_addresses, is_soc, prefix, out, reference=reference)


@dataclass(frozen=True)
class ShardTask:
    path: str
    shard: int
    anchor: bytes
    depth: int
    consensus_time: int
    excluded: frozenset[bytes]
    k: int
    after: Key | None = None
    progress_slot: int | None = None  # slot of the pool's progress counters to add walked entries to
    overlay: bytes = b""  # the node's overlay and storage radius: entries below the radius are not walked
    radius: int = 0
    reference: bool = False  # hash with the pysha3 reference, whatever this process's backend is


@dataclass
class ShardScan:
    shard: int
    candidates: list[Candidate]
    complete: bool  # no eligible candidate above ``after`` was left out
    after: Key | None
    k: int
    stats: dict[str, float] = field(default_factory=dict)
    peak_rss_kb: int = 0  # of the process that ran the scan (a maximum, not a sum); includes file pages
    anon_rss_kb: int = 0  # anonymous (private) RSS of that process at the end of the scan


def scan_shard(task: ShardTask) -> ShardScan:
    """Phase 1 over one shard, in a worker process: opens the shard read-only."""
    try:
        with ShardReader(task.path, task.shard) as reader, reader.snapshot() as snap:
            report = _slot_reporter(task.progress_slot) if task.progress_slot is not None else None
            return scan_snapshot(task, snap, report)
    except Exception as exc:
        # Re-raised as one picklable type: exceptions with their own constructor
        # arguments cannot cross the process boundary intact.
        raise SamplerWorkerError(task.shard, f"{type(exc).__name__}: {exc}") from None


def scan_snapshot(task: ShardTask, snap: ShardSnapshot, report: Callable[[int], None] | None = None) -> ShardScan:
    """Phase 1 over one shard read through ``snap`` (one read transaction).

    In-process callers pass a snapshot of the store's own shard: LMDB allows
    one open handle per environment and process. ``report(n)``, if given, is
    called with the number of entries walked since its last call, at most
    every ``PROGRESS_EVERY`` entries (at hashed batches) and once at the end.
    The direct scan is used when the accelerated backend is (and the task
    does not ask for the reference); the row scan otherwise.
    """
    if task.reference or not hashing.accelerated():
        return scan_rows(task, snap, report)
    from .lmdbfile import DirectReadError

    try:
        return scan_direct(task, snap, report)
    except DirectReadError as exc:
        log.warning("shard %d: reading through py-lmdb instead of the data file: %s", task.shard, exc)
        scan = scan_rows(task, snap, report)
        scan.stats["direct_read_fallbacks"] = scan.stats.get("direct_read_fallbacks", 0) + 1
        return scan


def _finish(task: ShardTask, cands: CandidateSet, stats: dict[str, float]) -> ShardScan:
    mem = memory_kb()
    return ShardScan(
        shard=task.shard,
        candidates=cands.result(),
        complete=cands.complete,
        after=task.after,
        k=task.k,
        peak_rss_kb=mem.get("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        anon_rss_kb=mem.get("RssAnon", 0),
        stats=stats,
    )


class _Block(BlockColumns):
    """A block's columns, and how the look-ahead has the scan read its rows."""

    def __init__(self) -> None:
        cap = BLOCK + BLOCK_SLACK
        super().__init__(cap)
        self.placed = np.zeros(cap, np.uint8)  # rows whose head page a read around the page cache fills
        self.in_runs = np.zeros(cap, np.uint8)  # rows whose head pages follow each other: hashed in place (mapped)
        self.direct: _DirectSlot | None = None  # the rows, when they are read around the page cache
        self.reading: Future[int] | None = None  # that read, until the scan has waited for it


class _Lookahead:
    """Walks the index and locates rows block by block in a thread, requesting their pages from the disk.

    The numba functions release the GIL, so while the scan hashes one block
    this thread walks the index leaves (waiting on the disk when they are
    cold) and queues the reads of up to ``LOOKAHEAD`` further blocks. Blocks
    cycle through two queues; the thread ends the ready queue with ``None``,
    or with the exception that stopped it.
    """

    def __init__(self, fd: int, data_file: str, txn_id: int, task: ShardTask, key_range: tuple[bytes, bytes | None]) -> None:
        from . import columns

        self.col = columns
        self.fd = fd
        self.data_file = data_file
        self.walk = columns.IndexWalk(fd, txn_id, key_range, task.excluded, task.consensus_time)
        self.psize = self.walk.psize
        self.free: queue.SimpleQueue[_Block | None] = queue.SimpleQueue()  # None: stop
        for _ in range(LOOKAHEAD + 1):
            self.free.put(_Block())
        self.ready: queue.SimpleQueue[_Block | BaseException | None] = queue.SimpleQueue()
        self.stop = threading.Event()
        self.prefetched_blocks = 0
        # Cold blocks in runs of pages are read around the page cache, into row buffers of their own.
        self.dfd, direct = open_direct(data_file, os.O_RDONLY)
        if not direct or self.psize > columns.ROW_BYTES:  # a row must hold a whole page
            os.close(self.dfd)
            self.dfd = -1
        self.direct_free: queue.SimpleQueue[_DirectSlot | None] = queue.SimpleQueue()  # None: stop
        self.direct_made = 0
        self.direct_rows = 0  # rows read around the page cache (counted by the scanning thread)
        self.direct_failed = False
        self.readers: ThreadPoolExecutor | None = None
        self.thread = threading.Thread(target=self._run, name=f"sample-lookahead-{task.shard}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from .lmdbfile import DirectReadError

        col = self.col
        try:
            while not self.stop.is_set():
                blk = self.free.get()
                if blk is None:
                    break
                self.walk.scan(blk, BLOCK)
                self.walk.locate(blk)
                nrows = blk.rows
                blk.placed[:nrows] = 0
                if not col.cached(self.fd, blk.where, nrows, PROBES):
                    if not self._read_direct(blk, nrows):
                        col.prefetch(self.fd, blk.where, nrows, self.psize, blk.placed)
                        self.prefetched_blocks += 1
                # Only chunks in runs of pages are worth hashing through the map: a page fault maps its
                # cached neighbours too, which are then the next chunks. A chunk alone among others'
                # pages costs a fault and the mapping of pages nobody reads: it is read with pread.
                col.plan_direct(blk.where, nrows, self.psize, MAPPED_RUN, blk.in_runs)
                self.ready.put(blk)
                if self.walk.done:
                    break
            self.ready.put(None)
        except DirectReadError as exc:
            self.ready.put(DirectReadError(f"{self.data_file}: {exc}"))
        except BaseException as exc:  # handed to the scanning thread, which raises it
            self.ready.put(exc)

    def _read_direct(self, blk: _Block, nrows: int) -> bool:
        """Start reading the block's runs of pages around the page cache; False if it is not a block for that.

        The rows outside the runs are requested from the page cache
        (``prefetch``) and copied by the scan. The runs are read by
        ``DIRECT_READERS`` threads, so that several blocks' reads are in
        flight (one sequential read at a time leaves a disk idle between
        requests); the scan waits for a block's reads (``wait_read``) before
        it copies the rest.
        """
        col = self.col
        if self.dfd < 0 or self.direct_failed:
            return False
        planned = col.plan_direct(blk.where, nrows, self.psize, DIRECT_RUN, blk.placed)
        if planned < DIRECT_SHARE * nrows:
            blk.placed[:nrows] = 0
            return False
        slot = self._direct_slot()
        if slot is None:  # closing
            blk.placed[:nrows] = 0
            return False
        col.prefetch(self.fd, blk.where, nrows, self.psize, blk.placed)
        if self.readers is None:
            self.readers = ThreadPoolExecutor(DIRECT_READERS, thread_name_prefix="sample-direct-read")
        blk.direct = slot
        blk.reading = self.readers.submit(col.read_direct, self.dfd, blk.where, nrows, self.psize, slot.rows,
                                          blk.placed, slot.stage)  # fmt: skip
        return True

    def wait_read(self, blk: _Block) -> None:
        """Wait for the block's reads around the page cache, if any. A failed one (a file system that took
        ``O_DIRECT`` at open but not these reads) leaves the block's rows to be read through the page cache,
        and ends reads around it for this scan."""
        if blk.reading is None:
            return
        from .lmdbfile import OK

        rc = blk.reading.result()
        blk.reading = None
        if rc == OK:
            self.direct_rows += int(np.count_nonzero(blk.placed[: blk.rows]))
            return
        if not self.direct_failed:
            log.warning("%s: reads around the page cache failed; reading through it", self.data_file)
        self.direct_failed = True  # read by the look-ahead thread: at worst one more block tries
        blk.placed[: blk.rows] = 0

    def _direct_slot(self) -> _DirectSlot | None:
        try:
            return self.direct_free.get_nowait()
        except queue.Empty:
            pass
        if self.direct_made < DIRECT_BUFFERS:
            self.direct_made += 1
            return _DirectSlot(self.psize)
        return self.direct_free.get()  # one comes back once the scan has hashed its block

    def hashed(self, blk: _Block) -> None:
        """The scan is done with ``blk``: its row buffer and the block go back to the look-ahead."""
        if blk.direct is not None:
            self.direct_free.put(blk.direct)
            blk.direct = None
        self.free.put(blk)

    def close(self) -> None:
        self.stop.set()
        self.free.put(None)  # wakes the thread if it waits for a block
        self.direct_free.put(None)  # or for a row buffer
        self.thread.join()
        if self.readers is not None:
            self.readers.shutdown(wait=True)  # no read may still be writing into a buffer
        if self.dfd >= 0:
            os.close(self.dfd)
            self.dfd = -1


class _DirectSlot:
    """What one block read around the page cache needs to itself: its rows and the buffer its reads land in."""

    def __init__(self, psize: int) -> None:
        from .columns import STAGE_PAGES

        self.rows = row_buffer()
        self.stage = aligned_buffer(STAGE_PAGES * psize)


_UNMAPPED = ReadOnlyMap.empty()
_EMPTY_CHUNK = np.zeros(SPAN_SIZE, np.uint8)  # what a row that cannot be hashed is hashed as (its result is dropped)
RELEASE_ROWS = 4 * BLOCK  # rows hashed in place between two releases of the mapped pages
PROBES = 8  # rows per block probed for being cached before the block's reads are requested


def scan_direct(task: ShardTask, snap: ShardSnapshot, report: Callable[[int], None] | None = None) -> ShardScan:
    """Phase 1 of one shard from its data file: blocks of columns, read ahead in a thread, hashed in blocks.

    Raises ``DirectReadError`` (for the caller to fall back to ``scan_rows``)
    when the file's roots or pages are not what the reader expects.
    """
    from . import columns as col
    from .lmdbfile import ERRORS, OK, DirectReadError

    t_start = time.perf_counter()
    cands = CandidateSet(task.k, task.after)
    loads = load_failed = 0
    taddr_s = load_s = 0.0
    counts = np.zeros(5, np.int64)
    direct_rows = mapped_rows = 0
    key_range = SampleScope(task.anchor, task.depth, task.overlay, task.radius).key_range()
    data_file = os.path.join(snap.shard.path, "data.mdb")
    in_place = hashing.hashes_in_place(task.anchor)
    fd = os.open(data_file, os.O_RDONLY)
    ahead: _Lookahead | None = None
    view: ReadOnlyMap | None = None
    mapped = _UNMAPPED
    try:
        if key_range is not None and in_place:
            from . import fileorder

            txn_id = snap.txn.id()
            if fileorder.worth_file_order(fd, txn_id, key_range, task.excluded, task.consensus_time, BLOCK, BLOCK_SLACK,
                                          DIRECT_RUN, DIRECT_SHARE):  # fmt: skip
                cands, stats = fileorder.scan_file_order(fd, data_file, txn_id, key_range, task.anchor, task.excluded,
                                                         task.consensus_time, task.k, task.after, BLOCK, BLOCK_SLACK,
                                                         report)  # fmt: skip
                return _finish(task, cands, stats)
        if key_range is not None:
            # Chunks are hashed where they lie in the page cache when the kernel can take them there;
            # otherwise (a long anchor) each row is read whole into the row buffer.
            view = ReadOnlyMap(fd) if in_place else None
            if view is not None:
                mapped = view.array
            ahead = _Lookahead(fd, data_file, snap.txn.id(), task, key_range)
            cap = BLOCK + BLOCK_SLACK
            buf = row_buffer()
            lengths = np.zeros(cap, np.int64)
            offsets = np.zeros(cap, np.int64)
            is_soc = np.zeros(cap, np.uint8)
            status = np.zeros(cap, np.int64)
            head_at, head_len, tail_at, tail_len = (np.zeros(cap, np.int64) for _ in range(4))
            unreleased = 0  # rows hashed from the map since its pages were last released
            out = np.zeros((cap, 32), np.uint8)
            while True:
                blk = ahead.ready.get()
                if blk is None:
                    break
                if isinstance(blk, BaseException):
                    raise blk
                n, m = blk.rows, blk.entries
                if n:
                    ahead.wait_read(blk)
                    rows = buf if blk.direct is None else blk.direct.rows
                    t = time.perf_counter()
                    rc = col.place_rows(fd, blk.where, blk.tails, n, ahead.psize, rows, mapped, blk.in_runs, lengths,
                                        status, blk.placed, head_at, head_len, tail_at, tail_len)  # fmt: skip
                    load_s += time.perf_counter() - t
                    if rc != OK:
                        raise DirectReadError(f"{data_file}: chunk data: {ERRORS.get(rc, rc)}")
                    soc = blk.row_type[:n] == _SOC
                    offsets[:n] = np.where(soc, col.DATA_AT + SOC_HEADER_SIZE, col.DATA_AT)
                    is_soc[:n] = soc
                    size = lengths[:n] - offsets[:n]
                    read = status[:n] == 1
                    # The row scan's rule: a missing chunk fails each entry; a chunk whose data
                    # cannot be a chunk of its type is loaded, then fails, for each entry.
                    good = read & (size >= _MIN_CAC) & (size <= _MAX_CAC)
                    if in_place:
                        if mapped.shape[0]:
                            start = mapped.ctypes.data
                            mapped_rows += int(np.count_nonzero(read & (head_at[:n] >= start) &
                                                                (head_at[:n] < start + mapped.shape[0])))  # fmt: skip
                        skip = offsets[:n] - col.DATA_AT  # a SOC's header before its span
                        head_at[:n] += skip
                        head_len[:n] -= skip
                        good &= head_len[:n] >= _MIN_CAC  # holds for any store: only a head has a tail
                    per_row = np.bincount(blk.ent_row[:m], minlength=n)[:n]
                    loads += int(np.count_nonzero(good)) + int(per_row[~good & (status[:n] != 0)].sum())
                    load_failed += int(per_row[~good].sum())
                    if not good.all():
                        # Rows that cannot be hashed stay in the block as empty chunks and are not offered.
                        bad = ~good
                        lengths[:n][bad] = offsets[:n][bad] + _MIN_CAC
                        head_at[:n][bad] = _EMPTY_CHUNK.ctypes.data
                        head_len[:n][bad] = _MIN_CAC
                        tail_len[:n][bad] = 0
                    t = time.perf_counter()
                    if in_place:
                        hashing.transformed_addresses_at(head_at[:n], head_len[:n], tail_at[:n], tail_len[:n],
                                                         blk.row_addr[:n], is_soc[:n], task.anchor, out)  # fmt: skip
                    else:
                        _hash_rows(rows[:n], lengths[:n], offsets[:n], blk.row_addr[:n], is_soc[:n], task.anchor, out,
                                   False)  # fmt: skip
                    taddr_s += time.perf_counter() - t
                    unreleased += n
                    if view is not None and unreleased >= RELEASE_ROWS:
                        view.release()  # the pages hashed leave this process's resident set
                        unreleased = 0
                    keep = good[blk.ent_row[:m]]
                    cands.offer_block(out[:n], blk.ent_row[:m][keep], blk.ent_batch[:m][keep], blk.row_addr[:n],
                                      blk.row_type[:n])  # fmt: skip
                if report is not None and blk.walked:
                    report(blk.walked)
                ahead.hashed(blk)
            counts = ahead.walk.counts
            direct_rows = ahead.direct_rows
    finally:
        if ahead is not None:
            ahead.close()
        if view is not None:
            mapped = _UNMAPPED  # the map closes only once no array exports it
            view.close()
        os.close(fd)
    elapsed = time.perf_counter() - t_start
    return _finish(task, cands, {
        **col.counters(counts),
        "chunk_loads": loads,
        "chunk_load_failed": load_failed,
        "direct_io_rows": direct_rows,
        "mapped_rows": mapped_rows,
        "taddr_duration": taddr_s,
        "chunk_load_duration": load_s,
        "iteration_duration": max(0.0, elapsed - taddr_s - load_s),
    })  # fmt: skip


def scan_rows(task: ShardTask, snap: ShardSnapshot, report: Callable[[int], None] | None = None) -> ShardScan:
    """Phase 1 over one shard through py-lmdb, one index entry at a time (the reference rule)."""
    t_start = time.perf_counter()
    anchor = task.anchor
    excluded = task.excluded
    consensus = task.consensus_time
    reference = task.reference
    key_range = SampleScope(anchor, task.depth, task.overlay, task.radius).key_range()
    entries = iter(()) if key_range is None else snap.iter_range(*key_range)

    buf = np.zeros((ROWS, STRIDE), np.uint8)
    rows = [buf[i].data for i in range(ROWS)]
    lengths = np.zeros(ROWS, np.int64)
    offsets = np.zeros(ROWS, np.int64)
    is_soc = np.zeros(ROWS, np.uint8)
    soc_addresses = np.zeros((ROWS, 32), np.uint8)
    soc_view = soc_addresses.reshape(-1).data
    out = np.zeros((ROWS, 32), np.uint8)

    cands = CandidateSet(task.k, task.after)
    addresses: list[bytes] = []
    types: list[int] = []
    entry_rows: list[int] = []
    entry_batches: list[bytes] = []

    total = below = rogue = new = loads = load_failed = distinct = 0
    read_ns = 0
    taddr_s = 0.0
    reported = 0

    def flush(total: int) -> None:
        # ``total`` passed in, not closed over: the per-entry loop keeps it a fast local.
        nonlocal taddr_s, reported
        n = len(addresses)
        if n:
            t = time.perf_counter()
            _hash_rows(buf, lengths[:n], offsets[:n], soc_addresses, is_soc[:n], anchor, out, reference)
            taddr_s += time.perf_counter() - t
            cands.offer_rows(out, entry_rows, entry_batches, addresses, types)
        addresses.clear()
        types.clear()
        entry_rows.clear()
        entry_batches.clear()
        if report is not None and total - reported >= PROGRESS_EVERY:
            report(total - reported)
            reported = total

    perf_ns = time.perf_counter_ns
    last_address = None  # the chunk in the newest row, for its further stamps
    last_type = -1
    walked_last = None
    for address, chunk_type, batch_id, ts in entries:
        total += 1
        if address != walked_last:
            distinct += 1
            walked_last = address
        if batch_id in excluded:
            below += 1
            continue
        if chunk_type != _CAC and chunk_type != _SOC:
            rogue += 1
            continue
        if ts > consensus:
            new += 1
            continue
        if address == last_address and chunk_type == last_type:
            # Entries are in address order, so a chunk's further stamps follow at once:
            # they share its row and its hash (if their entries give the same chunk type;
            # the reference hashes each entry by its own type).
            entry_rows.append(len(addresses) - 1)
            entry_batches.append(batch_id)
            continue
        n = len(addresses)
        if n == ROWS:
            flush(total)
            n = 0
        t = perf_ns()
        try:
            length = snap.read_into(address, rows[n])
        except ChunkNotFound:
            load_failed += 1
            last_address = None
            continue
        except BufferTooSmall:
            # Stored data longer than any chunk (a damaged store): this entry fails, the sample goes on.
            loads += 1
            load_failed += 1
            last_address = None
            continue
        finally:
            read_ns += perf_ns() - t
        loads += 1
        offset = SOC_HEADER_SIZE if chunk_type == _SOC else 0
        if not _MIN_CAC <= length - offset <= _MAX_CAC:
            # Malformed stored data would make the kernel refuse the whole batch.
            load_failed += 1
            last_address = None
            continue
        lengths[n] = length
        offsets[n] = offset
        is_soc[n] = chunk_type == _SOC
        soc_view[n * 32 : n * 32 + 32] = address
        addresses.append(address)
        types.append(chunk_type)
        entry_rows.append(n)
        entry_batches.append(batch_id)
        last_address = address
        last_type = chunk_type
    flush(total)
    if report is not None and total > reported:
        report(total - reported)
    elapsed = time.perf_counter() - t_start
    chunk_load_s = read_ns / 1e9
    return _finish(task, cands, {
        "total_iterated": total,
        "below_balance_ignored": below,
        "rogue_chunks": rogue,
        "new_ignored": new,
        "distinct_chunks": distinct,
        "chunk_loads": loads,
        "chunk_load_failed": load_failed,
        "taddr_duration": taddr_s,
        "chunk_load_duration": chunk_load_s,
        "iteration_duration": max(0.0, elapsed - taddr_s - chunk_load_s),
    })  # fmt: skip
