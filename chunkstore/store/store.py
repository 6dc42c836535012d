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

import contextlib
import errno
import heapq
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, NoReturn, Self

import lmdb

from chunkstore.swarm.cac import check_address
from chunkstore.swarm.constants import ADDRESS_SIZE, ChunkType
from chunkstore.swarm.stamp import Stamp

from .admission import Admitted, StampLike, admit, admit_signed
from .batchstore import Batch, BatchStore, ShouldStop, decode_batch
from .cache import CacheIndex
from .errors import PurgeInterrupted, StoreFormatError, StoreFull, StoreReadOnly, StoreWriteFailed, UnknownBatch
from .files import MetaEnv, open_meta
from .issuers import IssuerStore
from .layout import DEFAULT_SHARDS, LOCK_FILE, neighbourhood_range, shard_of
from .mapsize import env_map_sizes
from .pins import PinStore
from .policy import OpenPolicy, StorePolicy
from .recovery import recover
from .shard import Buffer, Entry, Shard
from .tags import TagStore
from .writefailures import Refusal, WriteHealth, disk_space, size_text
from .writelock import WriterLock
from .writes import WriteSession

__all__ = ["ChunkStore", "ChunkType", "Holds", "PolicyFactory", "PutResult"]

# Builds the policy of a store being opened (the reserve's: chunkstore.reserve.store).
PolicyFactory = Callable[["ChunkStore"], StorePolicy]

# Slots removed per transaction when purging a batch: bounds a transaction's
# dirty pages however large the batch.
PURGE_STEP = 5000
# Puts leave this share of a shard's map (at least MIN_MAP_HEADROOM) unused: LMDB copies pages on write,
# so removals and evictions need free pages too, and a map filled to the brim by puts could not even be
# emptied without reopening it larger. Only looked at when the file nears the map's end (a map sized to
# the disk, the default, is never that close).
MAP_HEADROOM_SHARE = 64
MIN_MAP_HEADROOM = 256 << 10
# The same on the disk: puts leave this share of the store's file system (at most MAX_DISK_HEADROOM) free.
# A store that filled its own disk to the brim could neither remove a batch nor evict, since deleting
# copies pages too, and only space freed outside the store helped.
DISK_HEADROOM_SHARE = 64
MAX_DISK_HEADROOM = 64 << 20
MIN_FILE_CHURN = 1 << 20
# Pages freed inside a shard beyond the churn that let a new tag in below the headroom: room for a group of puts.
SHARD_ROOM_FOR_PUTS = 1 << 20


def _headroom_of(disk_size: int) -> int:
    return min(MAX_DISK_HEADROOM, disk_size // DISK_HEADROOM_SHARE)


# How a put keeps a chunk (``PutResult.kept``).
KEPT_RESERVE = "reserve"  # under its stamp, by the slot rule
KEPT_CACHE = "cache"  # outside the policy's admission (the storage radius): in the cache, by its data
KEPT_PIN = "pin"  # outside the policy's admission: by the pin collection of the put alone


@dataclass(frozen=True)
class PutResult:
    address: bytes
    chunk_type: ChunkType
    stored: bool  # False: the chunk (and, in the reserve, its stamp) were already there (a no-op)
    kept: str = KEPT_RESERVE
    fresh: bool = True  # the chunk's data was new (False: it was stored already, if under another stamp)


@dataclass(frozen=True)
class Holds:
    """What keeps the chunks of an upload besides the reserve (the ``holds`` of ``put``/``put_many``).

    ``pin``: every chunk also joins this pin collection (an id from ``store.pins.begin()``), in the
    same transaction that stores it. ``cache``: a chunk the policy refuses (the reserve: outside the
    storage radius) is not refused but kept in the cache, without its stamp, unless the pin keeps it.
    Without either, a refused chunk is refused as ever.
    """

    pin: bytes | None = None
    cache: bool = False


class ChunkStore:
    """Sharded chunk store at ``path`` (created if missing, unless ``readonly``).

    ``shards`` fixes the shard count of a new store (default 4); for an
    existing store it must be None or match. ``map_size`` is the LMDB map size
    of every environment (address space, not disk); by default each shard's
    is the size of the file system holding the store, within bounds (see
    mapsize.py). ``policy`` builds the policy that takes part in writes
    (admission, wake-ups); none admits all.

    A write that cannot be committed (full disk, full map, I/O error) raises
    ``StoreWriteFailed`` (``StoreFull`` for lack of space) with nothing of it
    stored; reads go on, and writes succeed again once there is room.
    ``write_refusal()`` tells whether writes are failing now.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        shards: int | None = None,
        *,
        readonly: bool = False,
        map_size: int | None = None,
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
        meta_size, _ = env_map_sizes(self.path, DEFAULT_SHARDS, readonly=readonly, configured=map_size)

        def shard_size(count: int) -> int:
            return env_map_sizes(self.path, count, readonly=readonly, configured=map_size)[1]

        self._health = WriteHealth(self.path, map_size)
        self._recovery_owed = False  # open-time repairs a full disk stopped: done before the next write
        try:
            if not readonly:
                os.makedirs(self.path, exist_ok=True)
                self._lock = WriterLock(os.path.join(self.path, LOCK_FILE))
            with self._open_guard():
                self._meta = open_meta(
                    self.path, shards, readonly=readonly, map_size=meta_size, shard_map_size=shard_size,
                    default_shards=DEFAULT_SHARDS,
                )
                self.shard_count: int = self._meta.shard_count
                self.map_size = shard_size(self.shard_count)  # of each shard; 0: as the last writer set it
                self._health.map_size = self.map_size or None
                self._shards = [
                    Shard(self.path, i, readonly=readonly, map_size=self.map_size) for i in range(self.shard_count)
                ]
                self._check_shards()
                self.pins = PinStore(
                    self._meta, self._shards, readonly=readonly, writing=self.writing, session=self.session,
                    room=self._check_disk_room,
                )
                self.tags = TagStore(self._meta, readonly=readonly, writing=self.writing, room=self._check_meta_room)
                self.cache = CacheIndex(self._shards, writing=self.writing, session=self.session)
                self.batches = BatchStore(
                    self._meta.env,
                    self._meta.batches,
                    readonly=readonly,
                    write_lock=self.writing,
                    purge=self._purge_batch,
                    changed=lambda: self._policy.batches_changed(),
                    dropped=lambda txn, batch_id: self.issuers.drop(txn, batch_id),
                )
                self.issuers = IssuerStore(
                    self._meta.env, self._meta.issuers, readonly=readonly, write_lock=self.writing
                )
                # Before recovery, so that what the policy sets up (the reserve syncs the bin
                # counters to its overlay) holds for recovery's writes too.
                if policy is not None:
                    self._policy = policy(self)
                self.recovered: dict[str, int] = {} if readonly else self._recover_at_open()
        except BaseException:
            self.close()
            raise

    def _recover_at_open(self) -> dict[str, int]:
        """Finish what a crash (or a full disk) left half done; on a disk still full, leave it to the next write.

        A store that could not finish a batch removal or a slot contest for want of room must still open:
        refused, the daemon could not start, and served nothing on a full disk. Reads need none of it.
        """
        try:
            return recover(self._shards, self.batches, self.pins)
        except (lmdb.Error, OSError, StoreWriteFailed) as exc:
            failure = self._health.translate(exc)
            if failure is None:
                raise
            self._recovery_owed = True
            return {}

    def _finish_recovery(self) -> None:
        """Under the writer lock: the open-time repairs owed, before any other write; raises if still refused."""
        self._recovery_owed = False  # recovery's own writes come through writing() again
        try:
            self.recovered = recover(self._shards, self.batches, self.pins)
        except BaseException:
            self._recovery_owed = True
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
            if self._lock is not None and self._meta is not None and hasattr(self, "tags"):
                try:
                    self.tags.flush()
                except StoreWriteFailed:
                    pass  # counters only; a full disk loses the last second of them
            if self._settled and self._lock is not None and self._shards:
                try:
                    self._flush_settled()
                except StoreWriteFailed:
                    pass  # the records ask for nothing more; the next writable open deletes them
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
        check_address(address)
        return self._shards[address[ADDRESS_SIZE - 1] % self.shard_count]

    # Reads.

    def get(self, address: bytes) -> bytes:
        """The chunk's data (a SOC as ``id | signature | span | payload``); ``ChunkNotFound`` if absent.

        Counts as a use of a cached chunk (the cache evicts the least recently used first).
        """
        data = self._shard_for(address).get(address)
        self.cache.record_read(address)
        return data

    def get_into(self, address: bytes, buf: Buffer) -> int:
        """Copy the chunk into ``buf``, return its length; on ``BufferTooSmall`` nothing is written."""
        return self._shard_for(address).read_into(address, buf)

    def has(self, address: bytes) -> bool:
        if isinstance(address, bytes | bytearray | memoryview) and len(address) != ADDRESS_SIZE:
            return False
        return self._shard_for(address).has(address)

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

    def put(
        self, data: bytes, stamp: StampLike, *, address: bytes | None = None, holds: Holds | None = None
    ) -> PutResult:
        """Validate and store one stamped chunk; durable when it returns.

        With ``address`` None the data is read as a CAC when the stamp is valid
        for that reading, else as a SOC; with an address, the data must be the
        CAC or SOC at it. Raises ``InvalidChunk``, ``InvalidStamp`` (and its
        ``UnknownBatch``), or ``StampConflict``; on any error nothing changes.
        ``holds``: what else keeps the chunk (a pin, the cache; see ``Holds``).
        """
        self.check_writable()
        return self._store([admit(data, stamp, self._lookup, address)], holds)[0]

    def put_many(self, items: Iterable[tuple[bytes, StampLike]], *, holds: Holds | None = None) -> list[PutResult]:
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
        return self._store(admitted, holds)

    def put_signed(self, items: Iterable[tuple[bytes, bytes, Stamp]], *, holds: Holds | None = None) -> list[PutResult]:
        """``put_many`` of ``(address, data, stamp)`` whose stamps the caller signed with the batch owner's key.

        For the node stamping its own batches: addresses, batches and slots are
        checked as ``put_many`` checks them, the signatures only by a spot
        check (``admission.admit_signed``). All or nothing on errors, durable
        when it returns, one commit per shard touched.
        """
        self.check_writable()
        return self._store(admit_signed(list(items), self._lookup), holds, restamped=True)

    def delete(self, address: bytes) -> bool:
        """Remove a chunk with all its stamps (freeing their slots) and its cache entry; False if it was
        absent. A pinned chunk keeps its data until unpinned."""
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

    def _store(self, admitted: list[Admitted], holds: Holds | None = None, restamped: bool = False) -> list[PutResult]:
        holds = holds or Holds()
        with self.writing():
            admitted = [self._recheck(item) for item in admitted]
            if holds.pin is not None:
                self.pins.expect_building(holds.pin)
            admissible = self._policy.admission_check()
            needs: dict[int, int] = {}
            for item in admitted:  # generous: a page per head, the tail, index entries, half-full leaves
                s = self.shard_of(item.address)
                needs[s] = needs.get(s, 0) + 2 * len(item.data) + 1024
            self._check_map_room(needs)
            self._check_disk_room(needs)
            session = self.session()
            results = []
            try:
                for i, item in enumerate(admitted):
                    try:
                        kept = KEPT_RESERVE
                        if admissible is not None:
                            try:
                                admissible(item.address)
                            except Exception:
                                if holds.pin is None and not holds.cache:
                                    raise
                                kept = KEPT_PIN if holds.pin is not None else KEPT_CACHE
                        stored, fresh = session.put_item(
                            item,
                            reserve=kept == KEPT_RESERVE,
                            pin=holds.pin,
                            cache=self.cache.clock() if kept == KEPT_CACHE else None,
                            restamped=restamped,
                        )
                        if kept == KEPT_PIN:  # a put is a use: a cached chunk pinned again moves up the cache
                            session.cache_touch(self.shard_of(item.address), item.address, self.cache.clock())
                        results.append(PutResult(item.address, item.chunk_type, stored, kept, fresh))
                    except Exception as exc:
                        if len(admitted) > 1:
                            exc.add_note(f"put_many item {i}")
                        raise
                session.commit()
            except (lmdb.Error, OSError, StoreWriteFailed) as exc:
                session.abort()
                failure = self._health.translate(exc)
                if failure is None:
                    raise
                # Every item lives in its home shard's transaction: those of the shards committed
                # before the failure are stored, whole; the others are not.
                done = set(session.committed)
                failure.stored = {
                    i: r for i, r in enumerate(results) if self.shard_of(r.address) in done
                }
                if failure is exc:
                    raise
                raise failure from exc
            except BaseException:
                session.abort()
                raise
        self._policy.after_write()
        return results

    def map_headroom(self, s: int) -> int:
        """Bytes of shard ``s``'s map that puts leave to removals and evictions."""
        return max(MIN_MAP_HEADROOM, self._shards[s].env.info()["map_size"] // MAP_HEADROOM_SHARE)

    def _check_map_room(self, needs: dict[int, int]) -> None:
        """Refuse a put that would leave less than the headroom in a shard's map (``needs``: bytes per shard)."""
        for s, need in needs.items():
            shard = self._shards[s]
            info = shard.env.info()
            headroom = self.map_headroom(s)
            if info["map_size"] - (info["last_pgno"] + 1) * shard.env.stat()["psize"] >= headroom + need:
                continue  # room past the file's end alone: no need to count pages
            if shard.map_room() >= headroom + need:
                continue
            raise StoreFull(
                "map_full",
                f"the LMDB map of {shard.path} ({size_text(info['map_size'])}) is full: puts stop "
                f"{headroom >> 10} KiB short of its end, left for removals and evictions; open the store with "
                "a larger map size (--map-size) or free room in it (remove batches, lower the reserve capacity)",
                path=shard.path,
            )

    def disk_headroom(self) -> int:
        """Bytes of the store's file system that puts leave free, to removals and evictions."""
        space = disk_space(self.path)
        return 0 if space is None else _headroom_of(space[1])

    def _check_disk_room(self, needs: dict[int, int]) -> None:
        """Refuse a put that would leave less than the headroom free on the disk (``needs``: bytes per shard)."""
        space = disk_space(self.path)  # one statvfs a put: free space and size together
        if space is None:
            return
        free, headroom = space[0], _headroom_of(space[1])
        if free >= headroom + sum(needs.values()):
            return  # the common case: no need to count the shards' pages
        # Pages freed inside a shard's file take new chunks without growing it (after a batch removal, say),
        # but only beyond the copy-on-write churn of recent commits: those scattered pages, measured at about
        # 400 KiB a shard while a store fills, did not stop its file growing into the last bytes of the disk.
        growth = 0
        for s, need in needs.items():
            end, free_inside = self._shards[s].file_pages()
            growth += max(0, need - max(0, free_inside - max(MIN_FILE_CHURN, end // DISK_HEADROOM_SHARE)))
        if growth == 0 or free >= headroom + growth:
            return
        self._refuse_for_headroom(free, headroom)

    def _refuse_for_headroom(self, free: int, headroom: int) -> NoReturn:
        failure = StoreFull(
            "disk_full",
            f"the file system holding {self.path} is full for puts ({free / (1 << 20):.1f} MiB free): they stop "
            f"{headroom / (1 << 20):.1f} MiB short of its end, left for removals and evictions; free space on it, "
            "remove batches or lower the reserve capacity",
            errno=errno.ENOSPC,
            path=self.path,
        )
        self._health.refuse(failure)
        raise failure

    def _check_meta_room(self, need: int) -> None:
        """``_check_disk_room`` for a new record in the meta env (a tag): below the headroom it is refused
        only when puts are too, no shard having pages freed inside its file to take them (after a batch
        removal an upload, which makes its tag first, must still go into those)."""
        space = disk_space(self.path)
        if space is None or space[0] >= _headroom_of(space[1]) + need:
            return
        for shard in self._shards:
            end, free_inside = shard.file_pages()
            if free_inside - max(MIN_FILE_CHURN, end // DISK_HEADROOM_SHARE) >= SHARD_ROOM_FOR_PUTS:
                return
        self._refuse_for_headroom(space[0], _headroom_of(space[1]))

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
        step = PURGE_STEP
        for s in range(self.shard_count):
            while True:
                if should_stop is not None and should_stop():
                    raise PurgeInterrupted(batch_id.hex())
                # The lock per step, not per purge: puts wait at most one step.
                try:
                    with self.writing():
                        session = self.session()
                        try:
                            n = session.purge_batch_part(s, batch_id, step)
                            session.commit()
                        except BaseException:
                            session.abort()
                            raise
                except StoreFull:
                    # Deleting needs fresh pages too (LMDB copies on write) and a full map or disk
                    # has few: smaller steps fit, and each one committed frees pages for the next.
                    if step == 1:
                        raise
                    step = max(1, step // 16)
                    continue
                removed += n
                if n < step:
                    break
                step = min(PURGE_STEP, step * 2)
        return removed

    def session(self) -> WriteSession:
        """A write session on the shards; the caller holds ``writing()`` and commits or aborts it."""
        return WriteSession(self._shards, self._settled, self._health)

    @contextmanager
    def writing(self) -> Iterator[None]:
        """The writer lock (threads and processes) around a change; a write that cannot be committed
        is raised as ``StoreWriteFailed``."""
        self.check_writable()
        assert self._lock is not None
        with self._lock:
            try:
                if self._recovery_owed:
                    self._finish_recovery()
                yield
            except (lmdb.Error, OSError) as exc:
                failure = self._health.translate(exc)
                if failure is None:
                    raise
                raise failure from exc
            except StoreWriteFailed as exc:
                self._health.refuse(exc)
                raise

    @contextmanager
    def _open_guard(self) -> Iterator[None]:
        """Opening: the writer lock when writable (open-time repairs write), failed writes typed."""
        if self._lock is None:
            yield
            return
        with self._lock:
            try:
                yield
            except (lmdb.Error, OSError) as exc:
                failure = self._health.translate(exc)
                if failure is None:
                    raise
                raise failure from exc

    def write_refusal(self) -> Refusal | None:
        """Why writes are being refused now (full disk or map, I/O error), or None when they work.

        Set by a write that could not be committed, cleared by the next one
        that is, or, for a full disk, as soon as the file system has room again.
        """
        return self._health.current()

    def probe_space(self) -> Refusal | None:
        """Write (and remove) one page beside the store: a file system with no room for it refuses writes now.

        A full disk was only noticed by the first write that failed, so a node restarted on one
        said it was ready until then. A failed probe is recorded as that write's refusal would be
        (cleared once the file system has room again); returns the refusal in force.
        """
        if self.readonly:
            return self._health.current()
        probe = os.path.join(self.path, f".space-probe-{os.getpid()}")
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, bytes(4096))
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            failure = self._health.translate(exc)
            if failure is None:
                raise
        finally:
            with contextlib.suppress(OSError):
                os.unlink(probe)
        return self._health.current()

    def check_writable(self) -> None:
        if self.readonly:
            raise StoreReadOnly(f"{self.path}: store opened read-only")

