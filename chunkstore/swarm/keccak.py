"""Keccak-256 (the Ethereum hash, 0x01 padding) through ``safe-pysha3``.

``keccak_256`` is safe-pysha3's constructor, given the type of what it
returns here (the library ships no type information).
"""

from __future__ import annotations

from typing import Protocol, cast

from sha3 import keccak_256 as _keccak_256

from .constants import HASH_SIZE

__all__ = ["keccak_256", "keccak256", "HASH_SIZE"]

Buffer = bytes | bytearray | memoryview


class Keccak(Protocol):
    def update(self, data: Buffer, /) -> None: ...

    def digest(self) -> bytes: ...


class KeccakFactory(Protocol):
    def __call__(self, data: Buffer = ..., /) -> Keccak: ...


keccak_256 = cast(KeccakFactory, _keccak_256)


def keccak256(*parts: Buffer) -> bytes:
    """Keccak-256 digest of the concatenation of ``parts``."""
    h = keccak_256()
    for part in parts:
        h.update(part)
    return h.digest()
