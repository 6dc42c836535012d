"""Stamp entries per batch in the reserve, for the status page's "share of the reserve" column.

No counter keeps this, so it is counted: one pass over each batch's key range of every shard's
``slots`` database (one slot per stamp entry), keys only, about 2 million keys a second. A
full 2^22-entry reserve costs some two seconds of one thread, so the answer is cached and
recounted at most once per ``max_age`` seconds, in the store's thread pool, and says when it
was counted.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from chunkstore.store.store import ChunkStore
from chunkstore.swarm.constants import BATCH_ID_SIZE

MAX_AGE = 60.0  # seconds a count is served before the next request recounts


def count_batch_entries(store: ChunkStore, batch_ids: list[bytes]) -> dict[bytes, int]:
    """Stamp entries held per batch, summed over the shards (each shard read in one snapshot)."""
    counts = dict.fromkeys(batch_ids, 0)
    for index in range(store.shard_count):
        shard = store.shard(index)
        with shard.env.begin(buffers=True) as txn:
            cursor = txn.cursor(db=shard.slots)
            for batch_id in batch_ids:
                if not cursor.set_range(batch_id):
                    continue
                n = 0
                for key in cursor.iternext(keys=True, values=False):
                    if key[:BATCH_ID_SIZE] != batch_id:
                        break
                    n += 1
                counts[batch_id] += n
    return counts


@dataclass(frozen=True)
class BatchEntries:
    counted_at: float  # Unix seconds
    entries: dict[bytes, int]

    def as_json(self) -> dict[str, Any]:
        return {"countedAt": self.counted_at, "entries": {k.hex(): v for k, v in self.entries.items()}}


class BatchEntriesCache:
    """The last count, recounted when older than ``max_age`` or when the batches changed; concurrent
    callers share one recount."""

    def __init__(self, max_age: float = MAX_AGE) -> None:
        self.max_age = max_age
        self._last: BatchEntries | None = None
        self._lock = threading.Lock()

    def get(self, store: ChunkStore) -> BatchEntries:
        with self._lock:  # held while counting: a second caller waits and takes the fresh count
            ids = [b.id for b in store.batches.list()]
            last = self._last
            if last is None or time.time() - last.counted_at > self.max_age or set(ids) != set(last.entries):
                started = time.time()
                last = self._last = BatchEntries(started, count_batch_entries(store, ids))
            return last
