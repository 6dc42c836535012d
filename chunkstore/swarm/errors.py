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
