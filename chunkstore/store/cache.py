"""The cache's records: chunks kept outside the reserve, by their last access, and the reads since.

Each cached chunk has a ``cache`` row (address -> access time) and an
``lru`` row (access time | address) in its own shard, written together by
the write session (writes.py: ``cache_put``, ``cache_touch``, ``cache_drop``),
so each shard's ``lru`` lists its cached chunks least recently used first;
``oldest`` merges the shards' lists. Which chunks enter the cache and how
many it may hold is the policy's business (chunkstore/reserve/cache.py).

Reads must refresh a chunk's place, but a synced write per read would tie
downloads to the disk's sync rate. So ``record_read`` only notes the time
in memory, and ``apply_reads`` writes the notes (one write session) before
anything is evicted, which is the only moment the order matters. Notes are
bounded: at ``MAX_READS`` the policy is told (``on_reads_full``) to apply
them, and past twice that, further reads go unnoted until it has. A crash
forgets the notes: some chunks look older than they are, nothing else.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from chunkstore.swarm.constants import ADDRESS_SIZE

from .layout import read_u64, shard_of
from .shard import Shard, entries, iter_prefix
from .writes import WriteSession

MAX_READS = 1 << 16
EVICT_STEP = 500  # cache entries dropped per transaction

CacheRow = tuple[int, bytes]  # (access time ns, address)


class AccessClock:
    """Nanosecond wall-clock times, strictly increasing within the process (so no two accesses tie)."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            self._last = max(self._last + 1, time.time_ns())
            return self._last


class CacheIndex:
    """The cache rows of one chunk store (``store.cache``)."""

    def __init__(
        self,
        shards: list[Shard],
        *,
        writing: Callable[[], AbstractContextManager[None]],
        session: Callable[[], WriteSession],
    ) -> None:
        self._shards = shards
        self._writing = writing
        self._session = session
        self.clock = AccessClock()
        self._reads: dict[bytes, int] = {}
        self._lock = threading.Lock()
        self.on_reads_full: Callable[[], None] | None = None  # the policy: apply the notes soon

    def size(self) -> int:
        """Chunks in the cache (LMDB's own counts; no scan)."""
        total = 0
        for shard in self._shards:
            with shard.env.begin() as txn:
                total += entries(txn, shard.cache)
        return total

    def contains(self, address: bytes) -> bool:
        shard = self._shards[shard_of(address, len(self._shards))]
        if shard.cache is None:
            return False
        with shard.env.begin() as txn:
            return txn.get(bytes(address), db=shard.cache) is not None

    def oldest(self, n: int) -> list[CacheRow]:
        """The ``n`` least recently used entries (as written; see ``apply_reads``), oldest first."""
        return list(heapq.merge(*(self._shard_oldest(shard, n) for shard in self._shards)))[:n]

    @staticmethod
    def _shard_oldest(shard: Shard, n: int) -> Iterator[CacheRow]:
        rows = []
        with shard.env.begin() as txn:
            for key, _ in iter_prefix(txn, shard.lru, b""):
                rows.append((read_u64(key[:8]), bytes(key[8 : 8 + ADDRESS_SIZE])))
                if len(rows) >= n:
                    break
        return iter(rows)

    # Reads.

    def record_read(self, address: bytes) -> None:
        """Note that ``address`` was read now (called on every ``ChunkStore.get``; no I/O)."""
        with self._lock:
            if len(self._reads) >= 2 * MAX_READS:
                return
            self._reads[bytes(address)] = self.clock()
            full = len(self._reads) == MAX_READS
        if full and self.on_reads_full is not None:
            self.on_reads_full()

    def reads_noted(self) -> int:
        with self._lock:
            return len(self._reads)

    def apply_reads(self) -> int:
        """Write the noted reads of cached chunks as their access times; returns how many moved."""
        with self._lock:
            reads, self._reads = self._reads, {}
        if not reads:
            return 0
        count = len(self._shards)
        moved = 0
        with self._writing():
            session = self._session()
            try:
                for address, when in reads.items():
                    if len(address) == ADDRESS_SIZE:
                        moved += session.cache_touch(shard_of(address, count), address, when)
                session.commit()
            except BaseException:
                session.abort()
                raise
        return moved

    # Changes.

    def evict(self, rows: list[CacheRow]) -> int:
        """Drop these cache entries (as ``oldest`` gave them), a transaction per shard and step;
        an entry read since is left alone. Chunks nothing else keeps are deleted. Returns how many went."""
        count = len(self._shards)
        by_shard: dict[int, list[CacheRow]] = {}
        for row in rows:
            by_shard.setdefault(shard_of(row[1], count), []).append(row)
        dropped = 0
        for s, group in sorted(by_shard.items()):
            for i in range(0, len(group), EVICT_STEP):
                with self._writing():
                    session = self._session()
                    try:
                        for when, address in group[i : i + EVICT_STEP]:
                            dropped += session.cache_drop(s, address, when)
                        session.commit()
                    except BaseException:
                        session.abort()
                        raise
        return dropped
