"""Eviction: keeping the reserve within capacity, expiring batches, sweeping outside the radius.

Capacity (the reference node's ``unreserve`` with ``EvictBatchBin``): when the
reserve holds more stamp entries than its capacity, the excess is the
target. Batches are visited cheapest first (by value, then id); from each, up
to ``max(target - evicted, min_evict_count)`` entries whose proximity to the
overlay is below the radius are evicted, farthest bin first and in address
order within a bin. If a full round over the batches does not reach the
target, the radius goes up by one (stored at once) and the round repeats.
(The reference's current code visits batches in id order; the cheapest-first
order is its earlier, documented intent and evicts the least-paid data first.
Which entries below the radius go first does not change any sample: samples
cover the neighbourhood.)

Expiry: batches whose value is at most the chain state's total amount are
removed through ``BatchStore``'s removal (a durable "removing" mark, purge in
bounded transactions, then the record), which open-time recovery finishes
after a crash.

Sweep: after the radius was raised by hand (or the overlay changed), every
entry below the radius is evicted; a durable marker in the meta env says a
sweep is due, so a crash part-way only delays it.

Bounded transactions: each step evicts at most ``evict_step`` entries, one
transaction per shard, each under the writer lock on its own, and reads its
next entries outside the lock, in fresh read transactions. Every eviction
drops one stamp entry, its slot and, if no stamp is left, the chunk, all in
the chunk's shard, so each shard commit is consistent by itself: a crash
between steps (or between the shards of one step) leaves a smaller but clean
reserve, and the worker picks up again after the restart because the reserve
is still over capacity. When puts came in since its last transaction, the
eviction pauses ``evict_yield`` (2 ms) before the next: the waiting upload
gets the writer lock and the interpreter first (bench/bench_reserve.py,
``--evict-yield 0`` to compare: in a quiet run the upload p99 during an
eviction was 4.2 ms with the pause and 14.7 ms without, where uploads got
few turns; an eviction with no uploads going on never pauses).
Entries read before a concurrent put replaced their slot are dropped only if
still there (``WriteSession.drop_entry`` is a no-op on them) and not counted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from chunkstore.store.batchstore import Batch
from chunkstore.store.errors import PurgeInterrupted, UnknownBatch
from chunkstore.store.layout import SLOT_KEY_SIZE, u32
from chunkstore.store.shard import Shard
from chunkstore.store.store import ChunkStore
from chunkstore.swarm.constants import ADDRESS_SIZE, BATCH_ID_SIZE, MAX_PO, PROXIMITY_BINS
from chunkstore.swarm.proximity import proximity

from .options import ReserveOptions


class Evictable(Protocol):
    """What the eviction needs of the reserve it works for (``Reserve`` is one).

    Declared here, so that the reserve imports the eviction and not the other way round.
    """

    options: ReserveOptions
    overlay: bytes
    writes: int  # puts committed by this process
    writes_seen: int  # ... as of the eviction's last step
    expired_batches: int

    @property
    def store(self) -> ChunkStore: ...

    @property
    def radius(self) -> int: ...

    @property
    def sweep_radius(self) -> int: ...

    def set_radius(self, radius: int, *, sweep: bool = False) -> None: ...

    def clear_sweep(self, radius: int) -> None: ...

    def over_capacity(self) -> int: ...

    def expired_batch_ids(self) -> list[bytes]: ...

    def count(self, reason: str, n: int) -> None: ...


log = logging.getLogger(__name__)

Row = tuple[bytes, bytes, int]  # (chunk address, slot key, shard)
_BUCKET_AT = BATCH_ID_SIZE  # the slot key is batch id | bucket (4, BE) | position (4, BE)


def batches_by_value(reserve: Evictable) -> list[Batch]:
    return sorted(reserve.store.batches.list(), key=lambda b: (b.value, b.id))


# Which slots to look at.


def bin_buckets(overlay: bytes, b: int, bucket_depth: int) -> tuple[int, int, bool]:
    """Buckets ``[lo, hi)`` of a batch that hold its chunks at proximity ``b`` (< 31) to ``overlay``.

    The chunks at proximity ``b`` share the overlay's first ``b`` bits and
    differ at bit ``b``: a prefix of ``b + 1`` bits. A bucket is the first
    ``bucket_depth`` bits of the address, so when the prefix is no longer
    than that, the bin is a bucket range (``exact``); otherwise it is part of
    one bucket, which also holds other bins.
    """
    if not 0 <= b < MAX_PO:
        raise ValueError(f"bin {b} outside 0..{MAX_PO - 1}")
    top = int.from_bytes(overlay[:4], "big")
    bits = b + 1
    prefix = (top >> (32 - bits)) ^ 1
    if bits <= bucket_depth:
        shift = bucket_depth - bits
        return prefix << shift, (prefix + 1) << shift, True
    bucket = prefix >> (bits - bucket_depth)
    return bucket, bucket + 1, False


def read_buckets(shards: Sequence[Shard], batch_id: bytes, lo: int, hi: int, limit: int | None) -> tuple[list[Row], int]:
    """The slots of buckets ``lo..`` of a batch, whole buckets only, about ``limit`` rows per shard.

    Returns the rows and the first bucket not read. A bucket is cut only by
    the limit; when the very first bucket is larger than the limit it is
    read whole (a bucket is small on the network: 2^(depth - 16) slots).
    """
    start = batch_id + u32(lo)
    rows: list[tuple[int, bytes, bytes, int]] = []
    cut = hi
    for s, shard in enumerate(shards):
        n = 0
        with shard.env.begin() as txn:
            cur = txn.cursor(db=shard.slots)
            if not cur.set_range(start):
                continue
            for key, value in cur.iternext():
                if len(key) != SLOT_KEY_SIZE or key[:_BUCKET_AT] != batch_id:
                    break
                bucket = int.from_bytes(key[_BUCKET_AT : _BUCKET_AT + 4], "big")
                if bucket >= hi:
                    break
                rows.append((bucket, bytes(value[:ADDRESS_SIZE]), bytes(key), s))
                n += 1
                if limit is not None and n >= limit:
                    cut = min(cut, bucket)  # this shard's last bucket may go on past the limit
                    break
    if cut == lo:
        return read_buckets(shards, batch_id, lo, lo + 1, None)[0], lo + 1
    return [(addr, key, s) for bucket, addr, key, s in rows if bucket < cut], cut


def iter_bin(
    shards: Sequence[Shard], batch: Batch, overlay: bytes, b: int, limit: Callable[[], int]
) -> Iterator[list[Row]]:
    """A batch's entries at proximity ``b`` to the overlay, in address order, in chunks of whole buckets.

    ``limit()`` is asked before each read: about how many rows per shard the
    caller still wants. Taking that many from each shard is enough, since the
    first ``n`` rows in address order are among the first ``n`` of every shard.
    """
    lo, hi, exact = bin_buckets(overlay, b, batch.bucket_depth)
    while lo < hi:
        rows, lo = read_buckets(shards, batch.id, lo, hi, max(1, limit()))
        if not exact:
            rows = [r for r in rows if proximity(overlay, r[0]) == b]
        if rows:
            rows.sort()
            yield rows


# Evicting.


def evict_rows(reserve: Evictable, rows: list[Row], limit: int) -> int:
    """Evict the first ``limit`` of ``rows`` that are still there; returns how many were evicted.

    One transaction per shard, each under the writer lock on its own: a put
    waits for at most one shard's share of a step, and one sync.
    """
    n = i = 0
    while n < limit and i < len(rows):
        take = rows[i : i + limit - n]  # stale rows (already gone) make room for the next ones
        i += len(take)
        by_shard: dict[int, list[Row]] = {}
        for row in take:
            by_shard.setdefault(row[2], []).append(row)
        for s, group in sorted(by_shard.items()):
            n += _evict_in_shard(reserve, s, group)
    return n


def _evict_in_shard(reserve: Evictable, s: int, rows: list[Row]) -> int:
    store = reserve.store
    n = 0
    with store.writing():
        session = store.session()
        try:
            for addr, key, _ in rows:
                if session.drop_entry(s, addr, key):
                    session.drop_if_orphan(s, addr)
                    n += 1
            session.commit()
        except BaseException:
            session.abort()
            raise
    # Puts since the last step mean uploads are going on: let the next one in before the next step.
    # Without them the eviction runs at full speed.
    uploading, reserve.writes_seen = reserve.writes != reserve.writes_seen, reserve.writes
    if uploading and reserve.options.evict_yield:
        time.sleep(reserve.options.evict_yield)
    return n


def evict_batch_bin(
    reserve: Evictable, batch: Batch, count: float, radius: int, reason: str, stop: Callable[[], bool]
) -> int:
    """Evict up to ``count`` entries of ``batch`` at proximity below ``radius``, farthest bin first."""
    step = reserve.options.evict_step
    overlay = reserve.overlay
    evicted = 0

    def wanted() -> int:
        return int(min(step, count - evicted))

    for b in range(min(radius, MAX_PO)):
        for rows in iter_bin(reserve.store.shards, batch, overlay, b, wanted):
            for i in range(0, len(rows), step):
                if evicted >= count or stop():
                    return evicted
                n = evict_rows(reserve, rows[i : i + step], int(min(count - evicted, step)))
                reserve.count(reason, n)
                evicted += n
    return evicted


def unreserve(reserve: Evictable, stop: Callable[[], bool]) -> int:
    """Evict until within capacity, raising the radius when a round is not enough; returns entries evicted."""
    total = 0
    while not stop():
        target = reserve.over_capacity()
        if target <= 0:
            break
        done = _unreserve_round(reserve, target, stop)
        total += done
        if done == 0:
            break  # nothing left to evict at any radius (or stopped): do not spin
    return total


def _unreserve_round(reserve: Evictable, target: int, stop: Callable[[], bool]) -> int:
    batches = batches_by_value(reserve)
    if not batches:
        return 0
    radius = reserve.radius
    log.info("unreserve start", extra={"fields": {"target": target, "radius": radius}})
    evicted = 0
    while radius < PROXIMITY_BINS:
        for batch in batches:
            if stop():
                return evicted
            want = max(target - evicted, reserve.options.min_evict_count)
            evicted += evict_batch_bin(reserve, batch, want, radius, "capacity", stop)
            if evicted >= target:
                log.info("unreserve done", extra={"fields": {"evicted": evicted, "radius": radius}})
                return evicted
        if radius + 1 >= PROXIMITY_BINS:
            break
        radius += 1
        reserve.set_radius(radius)
        log.info("reserve radius increase", extra={"fields": {"radius": radius}})
    log.warning("unreserve: maximum radius reached", extra={"fields": {"evicted": evicted, "target": target}})
    return evicted


def sweep(reserve: Evictable, stop: Callable[[], bool]) -> int:
    """Evict every entry below a pending sweep radius; clears the marker when done."""
    radius = reserve.sweep_radius
    if radius == 0:
        return 0
    evicted = 0
    for batch in batches_by_value(reserve):
        if stop():
            return evicted
        evicted += evict_batch_bin(reserve, batch, float("inf"), radius, "radius", stop)
    if not stop():
        reserve.clear_sweep(radius)
        log.info("radius sweep done", extra={"fields": {"radius": radius, "evicted": evicted}})
    return evicted


def expire_batches(reserve: Evictable, stop: Callable[[], bool]) -> int:
    """Remove the batches the chain state says are expired; returns the stamp entries removed."""
    removed = 0
    for batch_id in reserve.expired_batch_ids():
        if stop():
            break
        try:
            n = reserve.store.batches.remove(batch_id, should_stop=stop)
        except UnknownBatch:
            continue  # removed meanwhile by someone else
        except PurgeInterrupted:
            break  # the "removing" mark stays: the next writable open finishes the purge
        reserve.count("expiry", n)
        reserve.expired_batches += 1
        removed += n
        log.info("batch expired", extra={"fields": {"batch_id": batch_id.hex(), "removed": n}})
    return removed
