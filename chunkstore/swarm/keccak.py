"""Keccak-256 (the Ethereum hash, 0x01 padding) through ``safe-pysha3``."""

from __future__ import annotations

from sha3 import keccak_256

from .constants import HASH_SIZE

__all__ = ["keccak_256", "keccak256", "HASH_SIZE"]


def keccak256(*parts: bytes | bytearray | memoryview) -> bytes:
    """Keccak-256 digest of the concatenation of ``parts``."""
    h = keccak_256()
    for part in parts:
        h.update(part)
    return h.digest()
