"""Keccak-256 (the Ethereum hash, 0x01 padding) through ``safe-pysha3``."""

from __future__ import annotations

from sha3 import keccak_256

__all__ = ["keccak_256", "keccak256", "HASH_SIZE"]

HASH_SIZE = 32


def keccak256(*parts: bytes | bytearray | memoryview) -> bytes:
    """Keccak-256 digest of the concatenation of ``parts``."""
    h = keccak_256()
    for part in parts:
        h.update(part)
    return h.digest()
