"""Which stamp entries a sample walks: the anchor's neighbourhood inside the storage radius.

The reference node (``pkg/storer/sample.go``) iterates its reserve's bin
index from the *storage radius* (bins are proximity to the node's overlay),
then keeps the chunks whose proximity to the anchor is at least the depth
asked for (the committed depth). After the radius grows, the chunks left
below it wait for the background eviction; they must not enter a sample
meanwhile, or the answer would depend on how far the eviction has got.

Both conditions are prefix conditions on the chunk address, so each is one
key range of the address-ordered index, and their intersection is one key
range again: the filter costs nothing per entry.
"""

from __future__ import annotations

from dataclasses import dataclass

from chunkstore.store.layout import neighbourhood_range
from chunkstore.swarm.constants import ADDRESS_SIZE

Range = tuple[bytes, bytes | None]  # [lo, hi) as address prefixes; hi None: to the end


@dataclass(frozen=True)
class SampleScope:
    """The neighbourhood ``proximity(a, anchor) >= depth`` within ``proximity(a, overlay) >= radius``."""

    anchor: bytes
    depth: int
    overlay: bytes = b""
    radius: int = 0

    def key_range(self) -> Range | None:
        """The address range to walk, or None when nothing can match."""
        near = neighbourhood_range(self.anchor, self.depth)
        if near is None or self.radius == 0 or not self.overlay:
            return near
        inside = neighbourhood_range(self.overlay, self.radius)
        if inside is None:
            return None
        return intersect(near, inside)


def _point(prefix: bytes) -> bytes:
    # A prefix bound stands for the smallest address starting with it; padding makes
    # bounds of different lengths compare as the addresses they stand for.
    return prefix.ljust(ADDRESS_SIZE, b"\0")


def intersect(a: Range, b: Range) -> Range | None:
    """The intersection of two address ranges, or None when it is empty."""
    lo = max(_point(a[0]), _point(b[0]))
    highs = [_point(h) for h in (a[1], b[1]) if h is not None]
    hi = min(highs) if highs else None
    if hi is not None and lo >= hi:
        return None
    return lo, hi


def range_fraction_bits(rng: Range | None) -> int | None:
    """log2 of the share of the address space ``rng`` covers (None: empty), for size estimates.

    Ranges here are intersections of prefix ranges, so they are prefix ranges
    themselves and the share is a power of two.
    """
    if rng is None:
        return None
    lo, hi = rng
    start = int.from_bytes(_point(lo), "big")
    end = (1 << (8 * ADDRESS_SIZE)) if hi is None else int.from_bytes(_point(hi), "big")
    width = end - start
    if width <= 0:
        return None
    return 8 * ADDRESS_SIZE - (width.bit_length() - 1)
