"""Phase 1 of the sample, run in a worker process per shard.

A worker walks the neighbourhood's key range of one shard in the stamp
index, drops (chunk, stamp) entries by index data alone (below-balance
batch, rogue type, stamp newer than the consensus time), copies each
remaining chunk's bytes into a row of a reused ``uint8`` buffer, hashes whole
batches of rows with the batch kernel, and keeps only the ``k`` smallest
``(transformed address, batch id)`` candidates. No per-chunk objects beyond
the index tuple are made, and all reads of one scan happen in one LMDB read
transaction, so a shard is sampled from one consistent snapshot.

The worker returns plain tuples and counters: the parent (phase 2) loads the
full chunks and stamps of the few candidates that can enter the sample.
"""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass, field

import numpy as np

from chunkstore import hashing
from chunkstore.shard import ShardReader, ShardSnapshot
from chunkstore.soc import HEADER_SIZE
from chunkstore.store_errors import ChunkNotFound

from .candidates import Candidate, CandidateSet, Key
from .errors import SamplerWorkerError

ROWS = 256  # rows per kernel call: amortises its argument checks and dispatch over many chunks
STRIDE = 4208  # >= 97 + 8 + 4096 (a full SOC), rounded up to 16
_CAC, _SOC = 1, 2
_MIN_CAC, _MAX_CAC = 8, 8 + 4096


def _hash_rows(
    buf: np.ndarray,
    lengths: np.ndarray,
    offsets: np.ndarray,
    soc_addresses: np.ndarray,
    is_soc: np.ndarray,
    prefix: bytes,
    out: np.ndarray,
) -> None:
    """Transformed addresses of a batch of rows (the one place that names the backend)."""
    hashing.transformed_addresses(buf, lengths, offsets, soc_addresses, is_soc, prefix, out)


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


@dataclass
class ShardScan:
    shard: int
    candidates: list[Candidate]
    complete: bool  # no eligible candidate above ``after`` was left out
    after: Key | None
    k: int
    stats: dict[str, float] = field(default_factory=dict)
    peak_rss_kb: int = 0  # of the process that ran the scan (a maximum, not a sum)


def scan_shard(task: ShardTask) -> ShardScan:
    """Phase 1 over one shard, in a worker process: opens the shard read-only."""
    try:
        with ShardReader(task.path, task.shard) as reader, reader.snapshot() as snap:
            return scan_snapshot(task, snap)
    except Exception as exc:
        # Re-raised as one picklable type: exceptions with their own constructor
        # arguments cannot cross the process boundary intact.
        raise SamplerWorkerError(task.shard, f"{type(exc).__name__}: {exc}") from None


def scan_snapshot(task: ShardTask, snap: ShardSnapshot) -> ShardScan:
    """Phase 1 over one shard read through ``snap`` (one read transaction).

    In-process callers pass a snapshot of the store's own shard: LMDB allows
    one open handle per environment and process.
    """
    t_start = time.perf_counter()
    anchor = task.anchor
    excluded = task.excluded
    consensus = task.consensus_time

    buf = np.zeros((ROWS, STRIDE), np.uint8)
    rows = [memoryview(buf[i]) for i in range(ROWS)]
    lengths = np.zeros(ROWS, np.int64)
    offsets = np.zeros(ROWS, np.int64)
    is_soc = np.zeros(ROWS, np.uint8)
    soc_addresses = np.zeros((ROWS, 32), np.uint8)
    soc_view = memoryview(soc_addresses.reshape(-1))
    out = np.zeros((ROWS, 32), np.uint8)

    cands = CandidateSet(task.k, task.after)
    addresses: list[bytes] = []
    types: list[int] = []
    entry_rows: list[int] = []
    entry_batches: list[bytes] = []

    total = below = rogue = new = loads = load_failed = 0
    read_ns = 0
    taddr_s = 0.0

    def flush() -> None:
        nonlocal taddr_s
        n = len(addresses)
        if n:
            t = time.perf_counter()
            _hash_rows(buf, lengths[:n], offsets[:n], soc_addresses, is_soc[:n], anchor, out)
            taddr_s += time.perf_counter() - t
            cands.offer_rows(out, entry_rows, entry_batches, addresses, types)
        addresses.clear()
        types.clear()
        entry_rows.clear()
        entry_batches.clear()

    perf_ns = time.perf_counter_ns
    last_address = None  # the chunk in the newest row, for its further stamps
    for address, chunk_type, batch_id, ts in snap.iter_neighbourhood(anchor, task.depth):
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
        if address == last_address:
            # Entries are in address order, so a chunk's further stamps follow at once:
            # they share its row and its hash.
            entry_rows.append(len(addresses) - 1)
            entry_batches.append(batch_id)
            continue
        n = len(addresses)
        if n == ROWS:
            flush()
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
        offset = HEADER_SIZE if chunk_type == _SOC else 0
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
    flush()
    elapsed = time.perf_counter() - t_start
    chunk_load_s = read_ns / 1e9
    return ShardScan(
        shard=task.shard,
        candidates=cands.result(),
        complete=cands.complete,
        after=task.after,
        k=task.k,
        peak_rss_kb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
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
