"""``GET /debugstore``: the reference node's storage debug info (``storer.Info``), from this store.

The reference renders a Go struct without JSON tags, so the keys are Go's
field names. What each number is here:

- ``ChunkStore``: ``TotalChunks`` chunks held, ``ReferenceCount`` stamp
  entries (one per chunk and stamp: what holds a chunk here, as references
  hold it in the reference's chunk store), ``SharedSlots`` chunks held
  under more than one stamp. Counted by one pass over the stamp index's
  keys (about two million a second), as the reference also iterates.
- ``Reserve``: ``TotalSize`` and ``SizeWithinRadius`` entries, ``Capacity``
  with doubling (the counters ``/status`` reads); ``LastBinIDs`` 32 zeros
  and ``Epoch`` 0: those number pull-sync intervals, and nothing syncs here.
- ``Pinning``: ``TotalCollections`` pins and ``TotalChunks`` their chunk
  rows (a chunk in two pins counts twice), as ``chunkstore_pins`` and
  ``chunkstore_pinned_chunks`` count them; ``Cache``: ``Size`` chunks in the
  cache and its ``Capacity``.
- ``Upload``: zeros. Uploads are stored as they arrive; nothing waits to be
  pushed to the network, so there is no upload store to count.
"""

from __future__ import annotations

from typing import Any

from chunkstore.reserve import ReserveStore
from chunkstore.swarm.constants import ADDRESS_SIZE, PROXIMITY_BINS

Section = dict[str, int]


def chunk_counts(store: ReserveStore) -> Section:
    """``TotalChunks``, ``SharedSlots`` and ``ReferenceCount`` over every shard (one snapshot each)."""
    chunks = shared = entries = 0
    for shard in store.shards:
        with shard.env.begin(buffers=True) as txn:
            previous = b""
            run = 0
            for key in txn.cursor(db=shard.stamps).iternext(keys=True, values=False):
                address = bytes(key[:ADDRESS_SIZE])
                entries += 1
                if address == previous:
                    run += 1
                    if run == 2:
                        shared += 1
                    continue
                chunks += 1
                previous, run = address, 1
    return {"TotalChunks": chunks, "SharedSlots": shared, "ReferenceCount": entries}


def debug_info(store: ReserveStore) -> dict[str, Any]:
    """The ``/debugstore`` object. Blocking: scans the stamp index."""
    status = store.reserve.status()
    keeping = store.keeping()
    out: dict[str, Any] = {
        "Upload": {"TotalUploaded": 0, "TotalSynced": 0, "PendingUpload": 0},
        "Pinning": {"TotalCollections": keeping.pins, "TotalChunks": keeping.pinned_chunks},
        "Cache": {"Size": keeping.cache_size, "Capacity": keeping.cache_capacity},
    }
    out["Reserve"] = {
        "SizeWithinRadius": status.size_within_radius,
        "TotalSize": status.size,
        "Capacity": status.capacity,
        "LastBinIDs": [0] * PROXIMITY_BINS,
        "Epoch": 0,
    }
    out["ChunkStore"] = chunk_counts(store)
    return out
