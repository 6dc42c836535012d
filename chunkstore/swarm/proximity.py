"""Proximity order between two addresses, by the reference node's rule."""

from __future__ import annotations

from .constants import MAX_PO

__all__ = ["MAX_PO", "proximity"]

_MAX_BYTES = MAX_PO // 8 + 1  # only the first 4 bytes are compared


def proximity(one: bytes | bytearray | memoryview, other: bytes | bytearray | memoryview) -> int:
    """Number of leading equal bits, comparing at most the first 4 bytes and
    at most the shorter input; ``MAX_PO`` (31) when every compared bit agrees.
    """
    n = min(_MAX_BYTES, len(one), len(other))
    for i in range(n):
        x = one[i] ^ other[i]
        if x:
            return i * 8 + (8 - x.bit_length())
    return MAX_PO
