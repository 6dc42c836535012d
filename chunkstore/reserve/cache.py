"""The cache: uploaded chunks the reserve does not keep, bounded, least recently used out first.

A chunk uploaded through an upload session (``/bytes``, ``/bzz``, ...) whose
address lies outside the storage radius is not refused: the store keeps it
in its cache (``chunkstore.store.Holds(cache=True)``), without its stamp, so
the content stays downloadable from this node, as the reference node's cache
keeps chunks outside its reserve. The cache holds at most ``capacity``
chunks (``--cache-capacity``, the reference's default 1,000,000, about 4 GiB):
when a write takes it over, the reserve worker drops the least recently used
entries (reads count as use) until it is within capacity again. A dropped
chunk is deleted unless a pin or a stamp entry still keeps it; a pinned chunk
is kept whatever the cache does, which is how content outside the radius is
kept for good.
"""

from __future__ import annotations

from collections.abc import Callable

from chunkstore.store.cache import MAX_READS
from chunkstore.store.store import ChunkStore

STEP = 2000  # entries picked per round (each shard's share dropped in transactions of cache.EVICT_STEP)


class CachePolicy:
    """Keeps ``store``'s cache within ``capacity`` chunks."""

    def __init__(self, store: ChunkStore, capacity: int) -> None:
        self.store = store
        self.capacity = capacity
        self.evicted = 0  # entries dropped by this process

    def size(self) -> int:
        return self.store.cache.size()

    def over_capacity(self) -> int:
        return max(0, self.size() - self.capacity)

    def evict(self, stop: Callable[[], bool]) -> int:
        """Drop least recently used entries until within capacity; returns how many went."""
        dropped = 0
        cache = self.store.cache
        if cache.reads_noted() >= MAX_READS:
            cache.apply_reads()  # the notes are full: write them whether or not anything goes now
        while not stop():
            excess = self.over_capacity()
            if excess <= 0:
                break
            cache.apply_reads()  # the order counts only now: write the reads noted since the last round
            rows = cache.oldest(min(excess, STEP))
            if not rows:
                break
            n = cache.evict(rows)
            dropped += n
            self.evicted += n
            if n == 0:
                break  # every pick moved meanwhile (another process read them): the next wake retries
        return dropped
