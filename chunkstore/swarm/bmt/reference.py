"""Binary Merkle Tree hash of a chunk, plain or prefixed, and inclusion proofs.

A chunk payload (at most 4096 bytes) is zero-padded to 4096 bytes, cut into 128
segments of 32 bytes and hashed pairwise upward: ``keccak(left | right)`` over
7 levels. The chunk address is ``keccak(span | root)``. The prefixed variant
feeds a fixed prefix (the sample anchor) before every keccak input, the span
step included; the reserve sampler uses it for transformed addresses.

Levels are hashed in one pass per level over a flat ``bytes`` buffer, and the
all-zero subtrees that a short payload leaves are taken from a per-prefix
cache instead of being hashed again.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..constants import BMT_DEPTH, BRANCHES, CHUNK_SIZE, HASH_SIZE, SEGMENT_SIZE, SPAN_SIZE
from ..errors import InvalidChunk, InvalidProof
from ..keccak import keccak_256

__all__ = [
    "BRANCHES",
    "CHUNK_SIZE",
    "SEGMENT_SIZE",
    "SPAN_SIZE",
    "Buffer",
    "Proof",
    "bmt_hash",
    "bmt_levels",
    "bmt_root",
    "chunk_hash",
    "proof_root_hash",
    "prove",
    "verify_proof",
    "zero_hashes",
]

Buffer = bytes | bytearray | memoryview


@lru_cache(maxsize=64)
def zero_hashes(prefix: bytes = b"") -> tuple[bytes, ...]:
    """Hash of an all-zero subtree at each level: level 0 is a zero segment."""
    out = [bytes(SEGMENT_SIZE)]
    for _ in range(BMT_DEPTH):
        out.append(keccak_256(prefix + out[-1] + out[-1]).digest())
    return tuple(out)


def _check_payload(payload: Buffer) -> None:
    if len(payload) > CHUNK_SIZE:
        raise InvalidChunk(f"payload is {len(payload)} bytes; at most {CHUNK_SIZE}")


def _next_level(level: bytes, used: int, prefix: bytes, zero: bytes) -> tuple[bytes, int]:
    """Hash pairs of ``level``; only the first ``used`` nodes can be non-zero."""
    pairs = len(level) // (2 * HASH_SIZE)
    used_pairs = (used + 1) // 2
    width = 2 * HASH_SIZE
    if prefix:
        out = [
            keccak_256(prefix + level[i : i + width]).digest()
            for i in range(0, used_pairs * width, width)
        ]
    else:
        out = [keccak_256(level[i : i + width]).digest() for i in range(0, used_pairs * width, width)]
    if used_pairs < pairs:
        out.append(zero * (pairs - used_pairs))
    return b"".join(out), used_pairs


def bmt_levels(payload: Buffer, prefix: bytes = b"") -> list[bytes]:
    """All tree levels, leaves first: level k holds 128 >> k nodes of 32 bytes."""
    _check_payload(payload)
    n = len(payload)
    level = bytes(payload) + bytes(CHUNK_SIZE - n) if n < CHUNK_SIZE else bytes(payload)
    used = max(1, -(-n // SEGMENT_SIZE))
    zeros = zero_hashes(prefix)
    levels = [level]
    for k in range(1, BMT_DEPTH + 1):
        level, used = _next_level(level, used, prefix, zeros[k])
        levels.append(level)
    return levels


def bmt_root(payload: Buffer, prefix: bytes = b"") -> bytes:
    """Root of the BMT over ``payload`` (without the span step)."""
    _check_payload(payload)
    n = len(payload)
    if n == 0:
        return zero_hashes(prefix)[BMT_DEPTH]
    level = bytes(payload) + bytes(CHUNK_SIZE - n) if n < CHUNK_SIZE else bytes(payload)
    used = -(-n // SEGMENT_SIZE)
    zeros = zero_hashes(prefix)
    for k in range(1, BMT_DEPTH + 1):
        level, used = _next_level(level, used, prefix, zeros[k])
    return level


def bmt_hash(span: Buffer, payload: Buffer, prefix: bytes = b"") -> bytes:
    """BMT hash of a chunk: ``keccak(prefix | span | root)``."""
    if len(span) != SPAN_SIZE:
        raise InvalidChunk(f"span is {len(span)} bytes; must be {SPAN_SIZE}")
    return keccak_256(prefix + bytes(span) + bmt_root(payload, prefix)).digest()


def chunk_hash(data: Buffer, prefix: bytes = b"") -> bytes:
    """BMT hash of ``data = span | payload`` (the CAC address when unprefixed)."""
    if len(data) < SPAN_SIZE:
        raise InvalidChunk(f"chunk data is {len(data)} bytes; at least the {SPAN_SIZE}-byte span is needed")
    mv = memoryview(data)
    return bmt_hash(mv[:SPAN_SIZE], mv[SPAN_SIZE:], prefix)


@dataclass(frozen=True)
class Proof:
    """Inclusion proof of one 32-byte segment of a chunk's payload.

    ``proof_segments`` are the siblings from the leaf level up: the sibling
    segment first, then the 6 sibling node hashes below the root.
    """

    index: int
    prove_segment: bytes
    proof_segments: tuple[bytes, ...]
    span: bytes


def prove(data: Buffer, index: int, prefix: bytes = b"") -> Proof:
    """Proof of segment ``index`` (0..127) of ``data = span | payload``."""
    if not 0 <= index < BRANCHES:
        raise InvalidProof(f"segment index {index} out of range 0..{BRANCHES - 1}")
    if len(data) < SPAN_SIZE:
        raise InvalidChunk(f"chunk data is {len(data)} bytes; at least the {SPAN_SIZE}-byte span is needed")
    mv = memoryview(data)
    levels = bmt_levels(mv[SPAN_SIZE:], prefix)
    siblings = []
    for k in range(BMT_DEPTH):
        sib = (index >> k) ^ 1
        siblings.append(levels[k][sib * HASH_SIZE : (sib + 1) * HASH_SIZE])
    return Proof(
        index=index,
        prove_segment=levels[0][index * SEGMENT_SIZE : (index + 1) * SEGMENT_SIZE],
        proof_segments=tuple(siblings),
        span=bytes(mv[:SPAN_SIZE]),
    )


def proof_root_hash(proof: Proof, prefix: bytes = b"") -> bytes:
    """The chunk hash a proof leads to: fold the siblings up, then the span."""
    if not 0 <= proof.index < BRANCHES:
        raise InvalidProof(f"segment index {proof.index} out of range 0..{BRANCHES - 1}")
    if len(proof.proof_segments) != BMT_DEPTH:
        raise InvalidProof(f"proof has {len(proof.proof_segments)} sibling hashes; must be {BMT_DEPTH}")
    if len(proof.prove_segment) != SEGMENT_SIZE or any(len(s) != HASH_SIZE for s in proof.proof_segments):
        raise InvalidProof("proof segments must be 32 bytes each")
    if len(proof.span) != SPAN_SIZE:
        raise InvalidProof(f"proof span is {len(proof.span)} bytes; must be {SPAN_SIZE}")
    node = proof.prove_segment
    for k, sibling in enumerate(proof.proof_segments):
        if (proof.index >> k) & 1:
            node = keccak_256(prefix + sibling + node).digest()
        else:
            node = keccak_256(prefix + node + sibling).digest()
    return keccak_256(prefix + proof.span + node).digest()


def verify_proof(proof: Proof, address: bytes, prefix: bytes = b"") -> bool:
    """True if ``proof`` leads to the chunk hash ``address``."""
    return proof_root_hash(proof, prefix) == bytes(address)
