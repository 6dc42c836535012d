"""Typed exceptions raised by the library.

Every error a caller can provoke with bad input is one of these, so the HTTP
layer can map it to a 4xx answer and tests can assert the exact kind.
"""

from __future__ import annotations


class SwarmError(Exception):
    """Base class of every error this project raises on bad input or state."""


class InvalidChunk(SwarmError):
    """Chunk data or address is malformed or does not hash to its address."""


class InvalidSignature(SwarmError):
    """A signature is malformed or does not recover to the expected signer."""


class InvalidStamp(SwarmError):
    """A postage stamp is malformed or not valid for the chunk it stamps."""


class InvalidProof(SwarmError):
    """A BMT inclusion proof is malformed."""


class BucketFull(SwarmError):
    """Every position of the stamp's bucket is issued and the batch is immutable (bee's ErrBucketFull)."""

    def __init__(self, batch_id: bytes, bucket: int, positions: int) -> None:
        self.batch_id = bytes(batch_id)
        self.bucket = bucket
        self.positions = positions
        super().__init__(
            f"batch {self.batch_id.hex()} is overissued: bucket {bucket} has no free position left of {positions}"
        )
