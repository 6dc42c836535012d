"""The neighbourhoods a node with capacity doubling answers for, as ``GET /status/neighborhoods`` lists them.

With storage radius ``r`` and capacity doubling ``d`` a node keeps the
chunks of ``2^d`` neighbourhoods of depth ``r + d`` (the committed depth):
its own and its sisters, which share the overlay's first ``r`` bits and
differ in the next ``d``. The reference node (``NeighborhoodsStat``,
``neighborhoodPrefixes``) names each by the first ``r + d`` bits of a
prefix: the overlay's first ``r`` bits, then the ``d`` bits of the
neighbourhood's number (most significant first), then zeros. It counts the
reserve's entries within each and gives each neighbourhood's proximity to
the overlay, capped at the committed depth.

Counting needs no scan here. An entry is within a neighbourhood when its
first ``r + d`` address bits equal the prefix's. For the node's own
neighbourhood those are the entries of proximity ``>= r + d`` to the
overlay; with ``d <= 1`` (the reference allows no more) the only sister
differs from the overlay at bit ``r`` exactly, so its entries are those of
proximity exactly ``r``. Both are sums of the reserve's per-bin counters.

One quirk is kept for byte equality: at committed depth 0 the reference's
bit string runs over the whole 256-bit prefix (its counter wraps below
zero), so a fresh node names its one neighbourhood with 256 zeros.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chunkstore.swarm.constants import ADDRESS_SIZE, MAX_CAPACITY_DOUBLING, MAX_PO
from chunkstore.swarm.proximity import proximity

from .errors import InvalidReserveOption


@dataclass(frozen=True)
class Neighborhood:
    bits: str  # the reference's bit string of the prefix
    prefix: bytes  # 32 bytes: the overlay's first r bits, the neighbourhood's d bits, zeros
    reserve_size_within_radius: int
    proximity: int  # to the overlay, capped at the committed depth

    def as_json(self) -> dict[str, object]:
        return {
            "neighborhood": self.bits,
            "reserveSizeWithinRadius": self.reserve_size_within_radius,
            "proximity": self.proximity,
        }


def _bit(data: bytes, position: int) -> int:
    return (data[position // 8] >> (7 - position % 8)) & 1


def neighborhood_prefix(overlay: bytes, radius: int, doubling: int, number: int) -> bytes:
    """The prefix of neighbourhood ``number`` (0 .. 2^doubling - 1)."""
    if len(overlay) != ADDRESS_SIZE:
        raise InvalidReserveOption(f"overlay must be {ADDRESS_SIZE} bytes, got {len(overlay)}")
    if not 0 <= number < 1 << doubling:
        raise InvalidReserveOption(f"neighbourhood {number} is outside 0..{(1 << doubling) - 1}")
    out = bytearray(ADDRESS_SIZE)
    for position in range(min(radius, 8 * ADDRESS_SIZE)):
        if _bit(overlay, position):
            out[position // 8] |= 0x80 >> (position % 8)
    for k in range(doubling):
        position = radius + k
        if position < 8 * ADDRESS_SIZE and (number >> (doubling - 1 - k)) & 1:
            out[position // 8] |= 0x80 >> (position % 8)
    return bytes(out)


def bit_string(prefix: bytes, depth: int) -> str:
    """The first ``depth`` bits of ``prefix`` as "0"/"1" (all 256 at depth 0, as the reference)."""
    bits = "".join(f"{b:08b}" for b in prefix)
    return bits if depth == 0 else bits[:depth]


def neighborhoods(overlay: bytes, radius: int, doubling: int, bins: Sequence[int]) -> list[Neighborhood]:
    """The node's neighbourhoods, in the reference's order, with entries counted from per-bin counters.

    ``bins[i]`` is the number of reserve entries at proximity ``i`` to the
    overlay (bin ``MAX_PO`` holding everything at ``MAX_PO`` and beyond).
    """
    if not 0 <= doubling <= MAX_CAPACITY_DOUBLING:
        # A second doubling bit would split bin r between sisters: the counters cannot tell them apart.
        raise InvalidReserveOption(f"capacity doubling must be in 0..{MAX_CAPACITY_DOUBLING}, got {doubling}")
    if not 0 <= radius <= MAX_PO:
        raise InvalidReserveOption(f"storage radius must be in 0..{MAX_PO}, got {radius}")
    if len(bins) != MAX_PO + 1:
        raise InvalidReserveOption(f"expected {MAX_PO + 1} proximity bins, got {len(bins)}")
    depth = radius + doubling
    out = []
    for number in range(1 << doubling):
        prefix = neighborhood_prefix(overlay, radius, doubling, number)
        shared = proximity(prefix, overlay)
        if depth > MAX_PO:
            count = 0  # proximity never exceeds MAX_PO: no entry reaches this depth, as for the reference
        elif shared >= depth:
            count = sum(bins[depth:])
        else:
            count = bins[shared]  # shared == radius: the sister differing at bit r (doubling 1)
        out.append(Neighborhood(bit_string(prefix, depth), prefix, count, min(depth, shared)))
    return out
