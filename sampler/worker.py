"""Phase 1 of the sample, run in a worker process per shard.

A worker walks the key range of one shard's stamp index that the sample
covers (the anchor's neighbourhood within the storage radius, see
``sampler.scope``), drops (chunk, stamp) entries by index data alone
(below-balance batch, rogue type, stamp newer than the consensus time), copies each
remaining chunk's bytes into a row of a reused ``uint8`` buffer, hashes whole
batches of rows with the batch kernel, and keeps only the ``k`` smallest
``(transformed address, batch id)`` candidates. No per-chunk objects beyond
the index tuple are made, and all reads of one scan happen in one LMDB read
transaction, so a shard is sampled from one consistent snapshot.

The worker returns plain tuples and counters: the parent (phase 2) loads the
full chunks and stamps of the few candidates that can enter the sample.

Progress. When the task names a slot, the worker adds the entries it has
walked into that slot of a shared counter array (handed to every worker
process once, by the pool initializer) at each hashed batch of rows, at most
every ``PROGRESS_EVERY`` entries: nothing is done per entry.

Memory. Everything a scan allocates is bounded: one ``ROWS x STRIDE``
buffer, ``ROWS`` pending row entries and at most ``2k`` candidates; entries
and chunk bytes are read from LMDB's read-only file map (page cache, not
process memory). The scan reports the process's anonymous (private) RSS
apart from its file-backed RSS, since only the former is memory the sample
costs.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from chunkstore.store.errors import ChunkNotFound
from chunkstore.store.shard import ShardReader, ShardSnapshot
from chunkstore.swarm.bmt import ROW_STRIDE
from chunkstore.swarm.bmt import backend as hashing
from chunkstore.swarm.constants import MAX_CAC_SIZE, SOC_HEADER_SIZE, SPAN_SIZE, ChunkType

from .candidates import Candidate, CandidateSet, Key
from .errors import SamplerWorkerError
from .scope import SampleScope

ROWS = 256  # rows per kernel call: amortises its argument checks and dispatch over many chunks
STRIDE = ROW_STRIDE  # room for a full SOC
# plain ints: the per-entry loop compares them faster than IntEnum members
_CAC, _SOC = int(ChunkType.CAC), int(ChunkType.SOC)
_MIN_CAC, _MAX_CAC = SPAN_SIZE, MAX_CAC_SIZE
PROGRESS_EVERY = 4096  # entries between two progress reports (at the next hashed batch)

# The shared progress counters of this worker process (see ``init_worker``).
_progress: Any = None


def init_worker(progress: Any) -> None:
    """Pool initializer: keep the pool's shared ``int64`` counter array (a locked ``Array``)."""
    global _progress
    _progress = progress


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
    """
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

    total = below = rogue = new = loads = load_failed = 0
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
    for address, chunk_type, batch_id, ts in entries:
        total += 1
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
    mem = memory_kb()
    return ShardScan(
        shard=task.shard,
        candidates=cands.result(),
        complete=cands.complete,
        after=task.after,
        k=task.k,
        peak_rss_kb=mem.get("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        anon_rss_kb=mem.get("RssAnon", 0),
        stats={
            "total_iterated": total,
            "below_balance_ignored": below,
            "rogue_chunks": rogue,
            "new_ignored": new,
            "chunk_loads": loads,
            "chunk_load_failed": load_failed,
            "taddr_duration": taddr_s,
            "chunk_load_duration": chunk_load_s,
            "iteration_duration": max(0.0, elapsed - taddr_s - chunk_load_s),
        },
    )
