"""Postage stamps: ``batchID(32) | index(8) | timestamp(8) | signature(65)``.

``index = bucket(4, BE) | position(4, BE)``; the timestamp is big-endian Unix
nanoseconds. The batch owner personal-signs
``keccak(chunk address | batchID | index | timestamp)``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .constants import BATCH_ID_SIZE, MAX_BUCKET_DEPTH, STAMP_INDEX_SIZE, STAMP_SIZE, STAMP_TIMESTAMP_SIZE
from .errors import InvalidSignature, InvalidStamp
from .keccak import keccak256
from .signer import Signer, recover_address


def bucket_of(address: bytes | bytearray | memoryview, bucket_depth: int) -> int:
    """Collision bucket of a chunk: the first ``bucket_depth`` bits of its address."""
    if not 0 <= bucket_depth <= MAX_BUCKET_DEPTH:
        raise InvalidStamp(f"bucket depth {bucket_depth} outside 0..{MAX_BUCKET_DEPTH}")
    return int.from_bytes(address[:4], "big") >> (MAX_BUCKET_DEPTH - bucket_depth)


def make_index(bucket: int, position: int) -> bytes:
    return struct.pack(">II", bucket, position)


def split_index(index: bytes | bytearray | memoryview) -> tuple[int, int]:
    """``(bucket, position)`` of an 8-byte stamp index."""
    if len(index) != STAMP_INDEX_SIZE:
        raise InvalidStamp(f"stamp index is {len(index)} bytes; must be {STAMP_INDEX_SIZE}")
    return struct.unpack(">II", index)


def stamp_digest(address: bytes, batch_id: bytes, index: bytes, timestamp: bytes) -> bytes:
    return keccak256(address, batch_id, index, timestamp)


@dataclass(frozen=True)
class Stamp:
    batch_id: bytes
    index: bytes
    timestamp: bytes
    signature: bytes

    @property
    def bucket(self) -> int:
        return split_index(self.index)[0]

    @property
    def position(self) -> int:
        return split_index(self.index)[1]

    @property
    def timestamp_ns(self) -> int:
        return int.from_bytes(self.timestamp, "big")

    def to_bytes(self) -> bytes:
        return self.batch_id + self.index + self.timestamp + self.signature

    def digest(self, address: bytes) -> bytes:
        return stamp_digest(bytes(address), self.batch_id, self.index, self.timestamp)

    def recover_owner(self, address: bytes) -> bytes:
        """Address of whoever signed this stamp for chunk ``address``."""
        try:
            return recover_address(self.signature, self.digest(address))
        except InvalidSignature as exc:
            raise InvalidStamp(f"stamp signature: {exc}") from None


def parse_stamp(raw: bytes | bytearray | memoryview) -> Stamp:
    if len(raw) != STAMP_SIZE:
        raise InvalidStamp(f"stamp is {len(raw)} bytes; must be {STAMP_SIZE}")
    b = bytes(raw)
    i = BATCH_ID_SIZE
    t = i + STAMP_INDEX_SIZE
    s = t + STAMP_TIMESTAMP_SIZE
    return Stamp(b[:i], b[i:t], b[t:s], b[s:])


def sign_stamp(
    signer: Signer, address: bytes, batch_id: bytes, bucket: int, position: int, timestamp_ns: int
) -> Stamp:
    """Stamp ``address`` in slot ``(bucket, position)`` of ``batch_id``."""
    if len(batch_id) != BATCH_ID_SIZE:
        raise InvalidStamp(f"batch id is {len(batch_id)} bytes; must be {BATCH_ID_SIZE}")
    index = make_index(bucket, position)
    timestamp = int(timestamp_ns).to_bytes(STAMP_TIMESTAMP_SIZE, "big")
    sig = signer.sign(stamp_digest(bytes(address), batch_id, index, timestamp))
    return Stamp(bytes(batch_id), index, timestamp, sig)


def check_stamp_slot(stamp: Stamp, address: bytes, depth: int, bucket_depth: int) -> None:
    """The index part of the validity rule: right bucket, position in range."""
    bucket, position = split_index(stamp.index)
    want = bucket_of(address, bucket_depth)
    if bucket != want:
        raise InvalidStamp(f"stamp bucket {bucket} does not match the chunk's bucket {want}")
    if depth < bucket_depth:
        raise InvalidStamp(f"batch depth {depth} is below its bucket depth {bucket_depth}")
    if position >= 1 << (depth - bucket_depth):
        raise InvalidStamp(f"stamp position {position} out of range; the batch allows < {1 << (depth - bucket_depth)}")


def validate_stamp(stamp: Stamp, address: bytes, owner: bytes, depth: int, bucket_depth: int) -> None:
    """Full validity rule for a stamp of a known batch (owner, depth, bucket depth)."""
    signer = stamp.recover_owner(address)
    if signer != bytes(owner):
        raise InvalidStamp(f"stamp signed by {signer.hex()}, not by the batch owner {bytes(owner).hex()}")
    check_stamp_slot(stamp, address, depth, bucket_depth)
