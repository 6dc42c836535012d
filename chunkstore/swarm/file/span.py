"""Spans and the shape of Bee's file tree: how many references an intermediate chunk holds.

A file is cut into 4096-byte leaves; an intermediate chunk holds the
references of up to ``branching`` children (128 plain, 64 encrypted, fewer
with redundancy, where parity references fill the rest) and its span is the
sum of its children's spans. Every subtree but the rightmost at each level is
full, so a chunk's span and level determine how many data and parity
references it carries (Bee: pkg/file/utils.go ReferenceCount, joiner.go
subtrieSection). The joiner relies on that to find byte offsets without
reading siblings.
"""

from __future__ import annotations

from ..bmt import CHUNK_SIZE, SPAN_SIZE
from ..encryption import REFERENCE_SIZE
from ..keccak import HASH_SIZE
from ..redundancy.level import Level, max_shards, parities

__all__ = [
    "MAX_SPAN",
    "branching",
    "chunk_payload_size",
    "length_from_span",
    "reference_count",
    "split_references",
    "span_bytes",
    "subtree_sizes",
]

# Bee's trie tops out at level 8: 128^7 leaves of 4096 bytes.
MAX_SPAN = CHUNK_SIZE * 128**7


def span_bytes(length: int) -> bytes:
    """The 8-byte little-endian span of ``length`` bytes."""
    return int(length).to_bytes(SPAN_SIZE, "little")


def length_from_span(span: bytes | bytearray | memoryview) -> int:
    return int.from_bytes(bytes(span[:SPAN_SIZE]), "little")


def branching(level: Level | int, encrypted: bool) -> int:
    """Data references per full intermediate chunk."""
    return max_shards(level, encrypted)


def reference_count(span: int, level: Level | int, encrypted: bool) -> tuple[int, int]:
    """``(data references, parity references)`` of the intermediate chunk of a subtree of ``span`` bytes.

    ``span`` must exceed one chunk (a smaller subtree is a leaf).
    """
    fan = branching(level, encrypted)
    # The size one reference covers: the largest full-subtree size below span.
    covered = CHUNK_SIZE
    while covered * fan < span:
        covered *= fan
    data = -(-span // covered)
    return data, parities(level, data, encrypted)


def intermediate_payload_size(span: int, level: Level | int, encrypted: bool) -> int:
    """Bytes of references in the intermediate chunk of a ``span``-byte subtree."""
    data, parity = reference_count(span, level, encrypted)
    return data * (REFERENCE_SIZE if encrypted else HASH_SIZE) + parity * HASH_SIZE


def chunk_payload_size(payload: bytes | bytearray | memoryview) -> int:
    """Length of an intermediate chunk's references with trailing all-zero 32-byte words cut (0 if none)."""
    n = len(payload) - len(payload) % HASH_SIZE
    mv = memoryview(payload)
    zero = bytes(HASH_SIZE)
    while n >= HASH_SIZE and mv[n - HASH_SIZE : n] == zero:
        n -= HASH_SIZE
    return n


def split_references(payload: bytes, parity_count: int, encrypted: bool) -> tuple[list[bytes], list[bytes]]:
    """``(data references, parity addresses)`` of an intermediate chunk's payload (trailing zeros cut).

    Data references are 64 bytes (address | key) in an encrypted tree, parity
    references always 32. Raises ``ValueError`` if the layout does not add up.
    """
    ref_size = REFERENCE_SIZE if encrypted else HASH_SIZE
    data_bytes = len(payload) - parity_count * HASH_SIZE
    if data_bytes <= 0 or data_bytes % ref_size:
        raise ValueError(
            f"{len(payload)} reference bytes do not hold {parity_count} parity references "
            f"plus a whole number of {ref_size}-byte references"
        )
    refs = [payload[o : o + ref_size] for o in range(0, data_bytes, ref_size)]
    parity = [payload[o : o + HASH_SIZE] for o in range(data_bytes, len(payload), HASH_SIZE)]
    return refs, parity


def subtree_sizes(span: int, count: int, level: Level | int, encrypted: bool) -> list[int]:
    """Spans of the ``count`` children of a subtree of ``span`` bytes: all full but the last."""
    fan = branching(level, encrypted)
    size = CHUNK_SIZE
    while span - size * (count - 1) > size:
        size *= fan
    last = span - size * (count - 1)
    return [size] * (count - 1) + [last]
