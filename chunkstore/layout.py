"""On-disk layout of the chunk store: names, key and value encodings, key ranges.

Everything that fixes a byte on disk lives here, so the format version below
changes exactly when this file changes meaning. The layout is described for
humans in chunkstore/README.md.
"""

from __future__ import annotations

import os
import struct
from enum import IntEnum

from .proximity import MAX_PO
from .signer import SIGNATURE_SIZE
from .stamp import BATCH_ID_SIZE, INDEX_SIZE, TIMESTAMP_SIZE

FORMAT_VERSION = 1
MAGIC = b"swarm-chunkstore"

ADDRESS_SIZE = 32
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
SHARD_DBS = (DB_INFO, DB_CHUNKS, DB_TAILS, DB_STAMPS, DB_SLOTS, DB_PENDING)
META_DBS = (DB_INFO, DB_BATCHES)

# Keys of the ``info`` databases.
INFO_MAGIC = b"magic"
INFO_FORMAT = b"format"
INFO_SHARDS = b"shards"
INFO_SHARD = b"shard"
INFO_BYTES = b"bytes"
# Reserve keys. In a shard's info: the overlay its bin counters are relative
# to, and the counters (stamp entries per proximity bin to that overlay), kept
# in the same transactions as the entries (chunkstore/bins.py). In the meta
# info: the node's overlay, storage radius, a pending radius sweep and the
# chain state (chunkstore/reserve.py, chainstate.py). They are derived or
# optional state: a store without them (written before they existed) opens
# as one with overlay unset, radius 0 and no chain state, and its counters are
# recounted by the first writable open, so the format version stays 1.
INFO_OVERLAY = b"overlay"
INFO_BINS = b"bins"
INFO_RADIUS = b"radius"
INFO_SWEEP = b"sweep"
INFO_CHAINSTATE = b"chainstate"
BIN_COUNT = MAX_PO + 1  # proximity bins 0..31

SLOT_KEY_SIZE = BATCH_ID_SIZE + INDEX_SIZE  # 40
STAMP_KEY_SIZE = ADDRESS_SIZE + SLOT_KEY_SIZE  # 72
STAMP_VALUE_SIZE = 1 + TIMESTAMP_SIZE + SIGNATURE_SIZE  # 74
SLOT_VALUE_SIZE = ADDRESS_SIZE + TIMESTAMP_SIZE  # 40

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")


class ChunkType(IntEnum):
    """What a stored chunk is; rogue data never enters the store, 0 only marks it elsewhere."""

    UNKNOWN = 0
    ROGUE = 0
    CAC = 1
    SOC = 2


def shard_dir(index: int) -> str:
    return f"shard-{index:03d}"


def shard_path(root: str | os.PathLike, index: int) -> str:
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
    return _U32.unpack(b)[0]


def read_u64(b: bytes | memoryview) -> int:
    return _U64.unpack(b)[0]


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
