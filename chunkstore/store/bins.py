"""Per-bin counts of stamp entries, kept in each shard's ``info`` database.

The reserve's size is the number of stamp entries (one per chunk and stamp,
as the reference node counts its batch-radius items), which LMDB counts for
free. The size *within the radius* needs to know how many entries sit at each
proximity to the overlay, so each shard keeps 32 counters (bin 0..31) next
to the overlay they refer to. ``WriteSession`` updates them in the same
transaction as the entries it adds or drops, so they are exact after any
crash; the writable open only checks them (their sum against LMDB's own
entry count) and recounts a shard whose counters are missing, refer to
another overlay, or disagree.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

import lmdb

from chunkstore.swarm.constants import ADDRESS_SIZE, PROXIMITY_BINS
from chunkstore.swarm.proximity import proximity

from .layout import INFO_BINS, INFO_OVERLAY
from .shard import Shard

_BINS = struct.Struct(f">{PROXIMITY_BINS}Q")


def encode_bins(counts: Sequence[int]) -> bytes:
    return _BINS.pack(*counts)


def decode_bins(raw: bytes | memoryview | None) -> list[int] | None:
    """The counters, or None when absent or malformed (then they are recounted)."""
    if raw is None or len(raw) != _BINS.size:
        return None
    return list(_BINS.unpack(bytes(raw)))


def read_counters(txn: lmdb.Transaction, shard: Shard) -> tuple[bytes | None, list[int] | None]:
    """``(overlay, bins)`` as stored in a shard's info (either may be None)."""
    raw = txn.get(INFO_OVERLAY, db=shard.info_db)
    overlay = bytes(raw) if raw is not None and len(raw) == ADDRESS_SIZE else None
    return overlay, decode_bins(txn.get(INFO_BINS, db=shard.info_db))


def count_bins(txn: lmdb.Transaction, shard: Shard, overlay: bytes) -> list[int]:
    """Count a shard's stamp entries per bin by scanning the stamp keys (no values, no chunk data)."""
    counts = [0] * PROXIMITY_BINS
    last_prefix = b""
    last_bin = 0
    for key in txn.cursor(db=shard.stamps).iternext(keys=True, values=False):
        prefix = bytes(key[:4])  # proximity looks at 4 bytes at most; entries come in address order
        if prefix != last_prefix:
            last_prefix, last_bin = prefix, proximity(overlay, prefix)
        counts[last_bin] += 1
    return counts


def counters_valid(txn: lmdb.Transaction, shard: Shard, overlay: bytes) -> bool:
    """Counters present, for ``overlay``, and summing to the entry count LMDB keeps."""
    stored_overlay, bins = read_counters(txn, shard)
    return stored_overlay == overlay and bins is not None and sum(bins) == txn.stat(shard.stamps)["entries"]


def write_counters(txn: lmdb.Transaction, shard: Shard, overlay: bytes, counts: Sequence[int]) -> None:
    txn.put(INFO_OVERLAY, overlay, db=shard.info_db)
    txn.put(INFO_BINS, encode_bins(counts), db=shard.info_db)


def sync_counters(shards: Iterable[Shard], overlay: bytes) -> list[int]:
    """Make every shard's counters refer to ``overlay`` and be right; returns the shards recounted.

    One write transaction per shard recounted, so a crash part-way leaves
    every shard either as it was or finished (and the next open carries on).
    The caller holds the writer lock.
    """
    recounted = []
    for shard in shards:
        with shard.env.begin() as txn:
            if counters_valid(txn, shard, overlay):
                continue
        with shard.env.begin(write=True) as txn:
            write_counters(txn, shard, overlay, count_bins(txn, shard, overlay))
        recounted.append(shard.index)
    return recounted


def shard_totals(shards: Iterable[Shard], overlay: bytes) -> tuple[int, list[int]]:
    """``(entries, entries per bin)`` over all shards, each shard read in one transaction.

    Bins come from the counters where they are valid for ``overlay``, else
    from a scan: only on a store no writable open has synced yet (opened
    read-only) or right after another process changed the overlay.
    """
    size = 0
    total = [0] * PROXIMITY_BINS
    for shard in shards:
        with shard.env.begin() as txn:
            entries = txn.stat(shard.stamps)["entries"]
            stored_overlay, bins = read_counters(txn, shard)
            if stored_overlay != overlay or bins is None or sum(bins) != entries:
                bins = count_bins(txn, shard, overlay)
        size += entries
        for b, n in enumerate(bins):
            total[b] += n
    return size, total
