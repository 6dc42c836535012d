"""The chunk store: sharded LMDB holding chunks, their stamps and the batch slots.

Chunks are spread over N shard environments by their last address byte; in
each shard keys are in address order, so a neighbourhood (an address prefix)
is one key range per shard. Batches live in a separate meta environment. See
chunkstore/store/README.md for the on-disk layout and the crash-safety
argument. A policy may be registered at open (``policy=``, see policy.py):
the reserve is one, and ``chunkstore.reserve.ReserveStore`` is this store
with it.

Reads never lock; every change takes the writer lock (threads and processes).
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Self

from chunkstore.swarm.constants import ADDRESS_SIZE, ChunkType
from chunkstore.swarm.errors import InvalidChunk
from chunkstore.swarm.stamp import Stamp

from .admission import Admitted, StampLike, admit
from .batchstore import Batch, BatchStore, ShouldStop, decode_batch
from .errors import PurgeInterrupted, StoreFormatError, StoreReadOnly, UnknownBatch
from .files import MetaEnv, open_meta
from .layout import DEFAULT_MAP_SIZE, DEFAULT_SHARDS, LOCK_FILE, neighbourhood_range, shard_of
from .policy import OpenPolicy, StorePolicy
from .recovery import recover
from .shard import Buffer, Entry, Shard
from .writelock import WriterLock
from .writes import WriteSession

__all__ = ["ChunkStore", "ChunkType", "PolicyFactory", "PutResult"]

# Builds the policy of a store being opened (the reserve's: chunkstore.reserve.store).
PolicyFactory = Callable[["ChunkStore"], StorePolicy]

# Slots removed per transaction when purging a batch: bounds a transaction's
# dirty pages however large the batch.
PURGE_STEP = 5000


@dataclass(frozen=True)
class PutResult:
    address: bytes
    chunk_type: ChunkType
    stored: bool  # False: the exact chunk and stamp were already there (a no-op)


class ChunkStore:
    """Sharded chunk store at ``path`` (created if missing, unless ``readonly``).

    ``shards`` fixes the shard count of a new store (default 4); for an
    existing store it must be None or match. ``map_size`` is the LMDB map size
    of each environment (address space, not disk). ``policy`` builds the
    policy that takes part in writes (admission, wake-ups); none admits all.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        shards: int | None = None,
        *,
        readonly: bool = False,
        map_size: int = DEFAULT_MAP_SIZE,
        policy: PolicyFactory | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.readonly = readonly
        self._closed = False
        self._lock: WriterLock | None = None
        self._meta: MetaEnv | None = None
        self._shards: list[Shard] = []
        self._policy: StorePolicy = OpenPolicy()
        # Pending slot records already settled, per shard, deleted by the next write there.
        self._settled: dict[int, set[bytes]] = {}
        try:
            if not readonly:
                os.makedirs(self.path, exist_ok=True)
                self._lock = WriterLock(os.path.join(self.path, LOCK_FILE))
            with self._locked_if_writable():
                self._meta = open_meta(
                    self.path, shards, readonly=readonly, map_size=map_size, default_shards=DEFAULT_SHARDS
                )
                self.shard_count: int = self._meta.shard_count
                self._shards = [
                    Shard(self.path, i, readonly=readonly, map_size=map_size) for i in range(self.shard_count)
                ]
                self._check_shards()
                self.batches = BatchStore(
                    self._meta.env,
                    self._meta.batches,
                    readonly=readonly,
                    write_lock=self.writing,
                    purge=self._purge_batch,
                    changed=lambda: self._policy.batches_changed(),
                )
                # Before recovery, so that what the policy sets up (the reserve syncs the bin
                # counters to its overlay) holds for recovery's writes too.
                if policy is not None:
                    self._policy = policy(self)
                self.recovered = {} if readonly else recover(self._shards, self.batches)
        except BaseException:
            self.close()
            raise

    def _check_shards(self) -> None:
        for shard in self._shards:
            if shard.shard_count != self.shard_count:
                raise StoreFormatError(
                    f"{shard.path}: shard says the store has {shard.shard_count} shards; the meta env says {self.shard_count}"
                )

    # Lifecycle.

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._policy.close()  # a background eviction must end before the environments do
            if self._settled and self._lock is not None and self._shards:
                self._flush_settled()
        finally:
            for shard in self._shards:
                shard.close()
            if self._meta is not None:
                self._meta.close()
            if self._lock is not None:
                self._lock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _flush_settled(self) -> None:
        with self.writing():
            session = self.session()
            for s in list(self._settled):
                session.write(s)  # opening the transaction deletes the settled records
            session.commit()

    # Addressing.

    def shard_of(self, address: bytes) -> int:
        return shard_of(address, self.shard_count)

    def shard(self, index: int) -> Shard:
        """The shard object (read side) of shard ``index``."""
        return self._shards[index]

    @property
    def shards(self) -> tuple[Shard, ...]:
        """Every shard's read side, in index order."""
        return tuple(self._shards)

    @property
    def meta(self) -> MetaEnv:
        """The meta environment: store-wide info and the batch records."""
        assert self._meta is not None, "the store is closed"
        return self._meta

    @property
    def policy(self) -> StorePolicy:
        return self._policy

    # Store-wide info: also keys of the layers above (the reserve's radius, sweep, chain state).

    def read_info(self, key: bytes) -> bytes | None:
        """A value of the meta env's info database (one read transaction)."""
        meta = self.meta
        with meta.env.begin() as txn:
            raw = txn.get(key, db=meta.info)
            return None if raw is None else bytes(raw)

    def write_info(self, values: dict[bytes, bytes | None]) -> None:
        """Set (or, for None, delete) info keys in one durable transaction, under the writer lock."""
        meta = self.meta
        with self.writing(), meta.env.begin(write=True) as txn:
            for key, value in values.items():
                if value is None:
                    txn.delete(key, db=meta.info)
                else:
                    txn.put(key, value, db=meta.info)

    def _shard_for(self, address: bytes) -> Shard:
        if len(address) != ADDRESS_SIZE:
            raise InvalidChunk(f"address is {len(address)} bytes; must be {ADDRESS_SIZE}")
        return self._shards[address[ADDRESS_SIZE - 1] % self.shard_count]

    # Reads.

    def get(self, address: bytes) -> bytes:
        """The chunk's data (a SOC as ``id | signature | span | payload``); ``ChunkNotFound`` if absent."""
        return self._shard_for(address).get(address)

    def get_into(self, address: bytes, buf: Buffer) -> int:
        """Copy the chunk into ``buf``, return its length; on ``BufferTooSmall`` nothing is written."""
        return self._shard_for(address).read_into(address, buf)

    def has(self, address: bytes) -> bool:
        return len(address) == ADDRESS_SIZE and self._shard_for(address).has(address)

    def stamps_of(self, address: bytes) -> list[Stamp]:
        return self._shard_for(address).stamps_of(address)

    def iter_neighbourhood(self, anchor: bytes, depth: int, shard: int | None = None) -> Iterator[Entry]:
        """``(address, chunk_type, batch_id, stamp_timestamp_ns)`` per stamp entry with
        ``proximity(address, anchor) >= depth``, from the index only, lazily.

        Ascending address within a shard; with ``shard=None`` all shards merged
        in address order. Each shard is read in one snapshot.
        """
        rng = neighbourhood_range(bytes(anchor), depth)
        if shard is not None and not 0 <= shard < self.shard_count:
            raise ValueError(f"shard {shard} outside 0..{self.shard_count - 1}")
        if rng is None:
            return iter(())
        if shard is not None:
            return self._shards[shard].iter_range(*rng)
        return heapq.merge(*(s.iter_range(*rng) for s in self._shards), key=itemgetter(0))

    def chunk_count(self) -> int:
        return sum(s.counts()["chunks"] for s in self._shards)

    def stats(self) -> dict[str, Any]:
        """Counts of chunks, stamp entries, slots and data bytes, total and per shard.

        Entry counts come from LMDB's own per-database counters and bytes from
        a counter kept in each shard's info database, so this reads no chunk.
        """
        per_shard = [s.counts() for s in self._shards]
        out: dict[str, Any] = {
            key: sum(c[key] for c in per_shard) for key in ("chunks", "stamps", "slots", "bytes", "pending")
        }
        meta = self.meta
        with meta.env.begin() as txn:
            out["batches"] = txn.stat(meta.batches)["entries"]
        out["shards"] = self.shard_count
        out["per_shard"] = per_shard
        return out

    # Writes.

    def put(self, data: bytes, stamp: StampLike, *, address: bytes | None = None) -> PutResult:
        """Validate and store one stamped chunk; durable when it returns.

        With ``address`` None the data is read as a CAC when the stamp is valid
        for that reading, else as a SOC; with an address, the data must be the
        CAC or SOC at it. Raises ``InvalidChunk``, ``InvalidStamp`` (and its
        ``UnknownBatch``), or ``StampConflict``; on any error nothing changes.
        """
        self.check_writable()
        return self._store([admit(data, stamp, self._lookup, address)])[0]

    def put_many(self, items: Iterable[tuple[bytes, StampLike]]) -> list[PutResult]:
        """Store several chunks, as ``put`` one after the other would, durable when it returns.

        All or nothing on errors: the first bad item (its index is in the
        exception's notes) aborts the whole call with nothing written. One
        commit per shard touched.
        """
        self.check_writable()
        admitted = []
        for i, (data, stamp) in enumerate(items):
            try:
                admitted.append(admit(data, stamp, self._lookup))
            except Exception as exc:
                exc.add_note(f"put_many item {i}")
                raise
        return self._store(admitted)

    def delete(self, address: bytes) -> bool:
        """Remove a chunk with all its stamps (freeing their slots); False if it was absent."""
        self.check_writable()
        self._shard_for(address)
        with self.writing():
            session = self.session()
            try:
                found = session.delete_chunk(bytes(address))
                session.commit()
            except BaseException:
                session.abort()
                raise
        return found

    def _store(self, admitted: list[Admitted]) -> list[PutResult]:
        with self.writing():
            admitted = [self._recheck(item) for item in admitted]
            admissible = self._policy.admission_check()
            session = self.session()
            results = []
            try:
                for i, item in enumerate(admitted):
                    try:
                        if admissible is not None:
                            admissible(item.address)
                        results.append(PutResult(item.address, item.chunk_type, session.apply(item)))
                    except Exception as exc:
                        if len(admitted) > 1:
                            exc.add_note(f"put_many item {i}")
                        raise
                session.commit()
            except BaseException:
                session.abort()
                raise
        self._policy.after_write()
        return results

    def _lookup(self, batch_id: bytes) -> tuple[Batch, bytes]:
        raw = self.batches.raw(batch_id)
        if raw is not None:
            batch, state = decode_batch(batch_id, raw)
            if state == 0:
                return batch, raw
        raise UnknownBatch(batch_id)

    def _recheck(self, item: Admitted) -> Admitted:
        """Validation ran before the lock; redo it if the batch changed meanwhile."""
        if self.batches.raw(item.stamp.batch_id) == item.batch_record:
            return item
        return admit(item.data, item.stamp, self._lookup, item.address)

    def _purge_batch(self, batch_id: bytes, should_stop: ShouldStop | None = None) -> int:
        removed = 0
        for s in range(self.shard_count):
            while True:
                if should_stop is not None and should_stop():
                    raise PurgeInterrupted(batch_id.hex())
                # The lock per step, not per purge: puts wait at most one step.
                with self.writing():
                    session = self.session()
                    try:
                        n = session.purge_batch_part(s, batch_id, PURGE_STEP)
                        session.commit()
                    except BaseException:
                        session.abort()
                        raise
                removed += n
                if n < PURGE_STEP:
                    break
        return removed

    def session(self) -> WriteSession:
        """A write session on the shards; the caller holds ``writing()`` and commits or aborts it."""
        return WriteSession(self._shards, self._settled)

    def writing(self) -> WriterLock:
        """The writer lock (threads and processes), to hold around a change."""
        self.check_writable()
        assert self._lock is not None
        return self._lock

    def _locked_if_writable(self) -> WriterLock | _NoLock:
        return self._lock if self._lock is not None else _NoLock()

    def check_writable(self) -> None:
        if self.readonly:
            raise StoreReadOnly(f"{self.path}: store opened read-only")


class _NoLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
