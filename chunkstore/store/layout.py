"""On-disk layout of the chunk store: names, key and value encodings, key ranges.

Everything of the engine that fixes a byte on disk lives here, so the format
version below changes exactly when this file changes meaning (the reserve's
optional keys in the meta info are listed in chunkstore/reserve/reserve.py).
The layout is described for humans in chunkstore/store/README.md.
"""

from __future__ import annotations

import os
import struct

from chunkstore.swarm.constants import (
    ADDRESS_SIZE,
    BATCH_ID_SIZE,
    MAX_PO,
    SIGNATURE_SIZE,
    STAMP_INDEX_SIZE,
    STAMP_TIMESTAMP_SIZE,
)

# Version 2 added the pin and cache databases (below). A version-1 store is read as one whose new
# databases are empty, and a writable open upgrades it (files.py, shard.py): builds before version 2
# must not open it once it holds pins, since they would delete pinned chunks that have no stamp.
FORMAT_VERSION = 2
READABLE_FORMATS = (1, 2)
MAGIC = b"swarm-chunkstore"

DEFAULT_SHARDS = 4
MAX_SHARDS = 256  # sharding uses one address byte, so more shards would stay empty
MAX_READERS = 512

# A value longer than this spills into a second 4 KiB overflow page in LMDB
# (16-byte page header), so a full 4104-byte chunk would take 8 KiB on disk.
# Chunk data is cut here: the head goes to ``chunks``, the rest to ``tails``.
HEAD_SIZE = 4080

META_DIR = "meta"
LOCK_FILE = "LOCK"

# Named LMDB databases.
DB_INFO = b"info"
DB_BATCHES = b"batches"
DB_CHUNKS = b"chunks"
DB_TAILS = b"tails"
DB_STAMPS = b"stamps"
DB_SLOTS = b"slots"
DB_PENDING = b"pending"
# The node's stamp issuers (issuers.py): added while the format was still version 1, as an optional
# database (a store without it gets it at its first writable open, a read-only open sees no issuers).
DB_ISSUERS = b"issuers"
# Version 2: what keeps a chunk besides its stamps. A chunk is stored while it has a stamp entry, a pin
# or a cache entry (writes.py, ``drop_if_orphan``).
DB_PINREFS = b"pinrefs"  # shard: address | pin id -> "" (the pin collections holding a chunk)
DB_PINSETS = b"pinsets"  # shard: pin id | address -> "" (the same rows, by collection)
DB_CACHE = b"cache"  # shard: address -> last access (u64 BE ns)
DB_LRU = b"lru"  # shard: last access (u64 BE ns) | address -> "" (the cache in least-recently-used order)
DB_PINS = b"pins"  # meta: root reference (32 or 64) -> pin id | chunks (u64 BE) | created (u64 BE ns)
DB_PINNING = b"pinning"  # meta: pin id -> state (1) | started (u64 BE ns) | reference (0, 32 or 64): collections in flux
DB_TAGS = b"tags"  # meta: tag uid (u64 BE) -> counters and address (tags.py)
V1_SHARD_DBS = (DB_INFO, DB_CHUNKS, DB_TAILS, DB_STAMPS, DB_SLOTS, DB_PENDING)
V1_META_DBS = (DB_INFO, DB_BATCHES)  # what every version-1 store has (issuers may be missing)
SHARD_DBS = (*V1_SHARD_DBS, DB_PINREFS, DB_PINSETS, DB_CACHE, DB_LRU)
META_DBS = (*V1_META_DBS, DB_ISSUERS, DB_PINS, DB_PINNING, DB_TAGS)

# Keys of the ``info`` databases.
INFO_MAGIC = b"magic"
INFO_FORMAT = b"format"
INFO_SHARDS = b"shards"
INFO_SHARD = b"shard"
INFO_BYTES = b"bytes"
# Bin counters, in a shard's info: the overlay they count proximity against
# and the counters themselves (stamp entries per proximity bin), kept in the
# same transactions as the entries (bins.py). The meta info names the node's
# overlay under the same key. Derived state: a store without them (written
# before they existed) has its counters counted by the first open that names
# an overlay, so they did not bump the format version.
INFO_OVERLAY = b"overlay"
INFO_BINS = b"bins"
# The meta info also holds keys of the layers above, optional in the same way
# (chunkstore/reserve/reserve.py: radius, sweep, chainstate); the store reads
# and writes them only for those layers (``ChunkStore.read_info``/``write_info``).

# Counters of the meta info: the last pin id and the last tag uid handed out.
INFO_PIN_SEQ = b"pinseq"
INFO_TAG_SEQ = b"tagseq"

PIN_ID_SIZE = 8
PINREF_KEY_SIZE = ADDRESS_SIZE + PIN_ID_SIZE  # 40
SLOT_KEY_SIZE = BATCH_ID_SIZE + STAMP_INDEX_SIZE  # 40
STAMP_KEY_SIZE = ADDRESS_SIZE + SLOT_KEY_SIZE  # 72
STAMP_VALUE_SIZE = 1 + STAMP_TIMESTAMP_SIZE + SIGNATURE_SIZE  # 74: chunk type | timestamp | signature
SLOT_VALUE_SIZE = ADDRESS_SIZE + STAMP_TIMESTAMP_SIZE  # 40

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")


def shard_dir(index: int) -> str:
    return f"shard-{index:03d}"


def shard_path(root: str | os.PathLike[str], index: int) -> str:
    return os.path.join(os.fspath(root), shard_dir(index))


def shard_of(address: bytes | bytearray | memoryview, shards: int) -> int:
    """Shard of a chunk: its last address byte mod the shard count.

    The last byte is independent of any neighbourhood prefix, so every
    neighbourhood is spread over all shards evenly.
    """
    return address[ADDRESS_SIZE - 1] % shards


def u32(n: int) -> bytes:
    return _U32.pack(n)


def u64(n: int) -> bytes:
    return _U64.pack(n)


def read_u32(b: bytes | memoryview) -> int:
    return int(_U32.unpack(b)[0])


def read_u64(b: bytes | memoryview) -> int:
    return int(_U64.unpack(b)[0])


def slot_key(batch_id: bytes, index: bytes) -> bytes:
    return batch_id + index


def stamp_key(address: bytes, batch_id: bytes, index: bytes) -> bytes:
    return address + batch_id + index


def stamp_value(chunk_type: int, timestamp: bytes, signature: bytes) -> bytes:
    return bytes((chunk_type,)) + timestamp + signature


def slot_value(address: bytes, timestamp: bytes) -> bytes:
    return address + timestamp


def neighbourhood_range(anchor: bytes, depth: int) -> tuple[bytes, bytes | None] | None:
    """Address range ``[lo, hi)`` of ``proximity(address, anchor) >= depth``.

    ``hi`` is None when the range runs to the end of the key space; the whole
    result is None when nothing can match. Proximity compares at most the
    first 4 bytes and at most ``len(anchor)`` bytes and tops out at 31, so a
    depth past the compared bits still means "all compared bits equal", and a
    depth above 31 matches nothing.
    """
    if depth < 0:
        raise ValueError(f"depth {depth} is negative")
    if depth > MAX_PO:
        return None
    bits = min(depth, 8 * min(4, len(anchor)))
    nbytes = (bits + 7) // 8
    if nbytes == 0:
        return b"", None
    value = int.from_bytes(anchor[:nbytes], "big")
    drop = 8 * nbytes - bits
    lo = (value >> drop) << drop
    hi = lo + (1 << drop)
    lo_b = lo.to_bytes(nbytes, "big")
    if hi >> (8 * nbytes):
        return lo_b, None
    return lo_b, hi.to_bytes(nbytes, "big")
