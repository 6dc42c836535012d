"""Every size and limit of the Swarm protocol (and of the reference node) this project relies on, once.

Every other module takes these from here or derives its own from them, so a
number that is a protocol fact is written in one place, under a name that
says which quantity it is. Reference-node names are given where they differ.
"""

from __future__ import annotations

from enum import IntEnum

# --- Hashes and addresses

HASH_SIZE = 32  # a Keccak-256 digest (swarm.HashSize)
ADDRESS_SIZE = HASH_SIZE  # a chunk address, an overlay address: one BMT or Keccak digest
ETH_ADDRESS_SIZE = 20  # an Ethereum account: the owner of a batch or of a SOC (crypto.AddressSize)
SIGNATURE_SIZE = 65  # r(32) | s(32) | v(1), v in 27..34

# --- Content-addressed chunks and the BMT

SEGMENT_SIZE = 32  # a BMT leaf (swarm.SectionSize)
BRANCHES = 128  # leaves of one chunk's BMT (swarm.Branches)
CHUNK_SIZE = BRANCHES * SEGMENT_SIZE  # 4096 payload bytes at most (swarm.ChunkSize)
BMT_DEPTH = BRANCHES.bit_length() - 1  # 7 levels of pairwise hashing above the leaves
SPAN_SIZE = 8  # little-endian length of the data a chunk stands for (swarm.SpanSize)
MAX_CAC_SIZE = SPAN_SIZE + CHUNK_SIZE  # 4104: span | full payload (swarm.ChunkWithSpanSize)



class ChunkType(IntEnum):
    """What a chunk is (swarm.ChunkType); the store records it with every stamp entry (one byte).

    0 marks rogue data: never admitted to the store, only seen in a damaged index.
    """

    UNKNOWN = 0
    ROGUE = 0
    CAC = 1
    SOC = 2


# --- Single-owner chunks: id | signature | span | payload

SOC_ID_SIZE = 32
SOC_HEADER_SIZE = SOC_ID_SIZE + SIGNATURE_SIZE  # 97: where the wrapped CAC starts
MIN_SOC_SIZE = SOC_HEADER_SIZE + SPAN_SIZE  # 105: a SOC wrapping an empty CAC
MAX_SOC_SIZE = SOC_HEADER_SIZE + MAX_CAC_SIZE  # 4201: the longest chunk data of any kind
# The owner of dispersed replicas (bee's replicas owner): such a SOC's id must match its wrapped address.
REPLICAS_OWNER = bytes.fromhex("dc5b20847f43d67928f49cd4f85d696b5a7617b5")

# --- Postage stamps: batch id | index (bucket | position) | timestamp | signature

BATCH_ID_SIZE = 32
STAMP_INDEX_SIZE = 8  # bucket (u32 BE) | position (u32 BE)
STAMP_TIMESTAMP_SIZE = 8  # Unix nanoseconds, big-endian
STAMP_SIZE = BATCH_ID_SIZE + STAMP_INDEX_SIZE + STAMP_TIMESTAMP_SIZE + SIGNATURE_SIZE  # 113
MAX_BUCKET_DEPTH = 32  # a bucket is at most the first 32 bits of an address
MAX_BATCH_DEPTH = 255  # the contract keeps a batch's depth in a uint8 (UINT8_MAX)
NETWORK_BUCKET_DEPTH = 16  # the bucket depth of batches on the network (postage.BucketDepth)

# --- Neighbourhoods

MAX_PO = 31  # proximity compares at most the first 4 bytes (swarm.MaxPO); also the largest radius and depth
PROXIMITY_BINS = MAX_PO + 1  # bins 0..31

# --- The reserve and its sample

RESERVE_CAPACITY = 1 << 22  # chunks a node's reserve holds before doubling (storer.DefaultReserveCapacity)
MAX_CAPACITY_DOUBLING = 1  # the reference node allows at most one doubling (node.maxAllowedDoubling)
CACHE_CAPACITY = 1_000_000  # chunks the node's cache keeps (the reference's --cache-capacity default)
RESERVE_MIN_EVICT_COUNT = 1000  # entries evicted at least per batch visited (node reserveMinEvictCount)
SAMPLE_SIZE = 16  # items of a reserve sample (storer sampleSize)
MAX_ANCHOR_SIZE = 32  # the redistribution contract's seeds (anchors) are 32 bytes
BLOCK_TIME = 5  # seconds per block on the chain the reference node follows (Gnosis Chain)

# --- Integer limits of the reference node's wire formats

UINT8_MAX = (1 << 8) - 1
UINT64_MAX = (1 << 64) - 1
INT64_MAX = (1 << 63) - 1
