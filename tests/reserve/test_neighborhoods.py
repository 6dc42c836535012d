"""Neighbourhood prefixes, names and counts, against the reference node's test and a brute-force count."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkstore.reserve.errors import InvalidReserveOption
from chunkstore.reserve.neighborhoods import bit_string, neighborhood_prefix, neighborhoods
from chunkstore.swarm.constants import MAX_PO
from chunkstore.swarm.proximity import proximity


def from_bits(bits: str) -> bytes:
    """A 32-byte address whose first bits are ``bits`` (the reference's ParseBitStrAddress)."""
    padded = bits.ljust(256, "0")
    return int(padded, 2).to_bytes(32, "big")


def test_reference_vector_prefixes_names_and_proximities() -> None:
    # bee pkg/storer/reserve_test.go TestNeighborhoodStats: base 10000, radius 2, doubling 2 gives
    # the neighbourhoods of base, 10010, 10100 and 10110 at depth 4, proximities 4, 3, 2, 2.
    base = from_bits("10000")
    expected = [("1000", 4), ("1001", 3), ("1010", 2), ("1011", 2)]
    for number, (bits, prox) in enumerate(expected):
        prefix = neighborhood_prefix(base, 2, 2, number)
        assert bit_string(prefix, 4) == bits
        assert prefix == from_bits(bits)
        assert min(4, proximity(prefix, base)) == prox


def test_depth_zero_names_the_whole_prefix() -> None:
    (only,) = neighborhoods(bytes.fromhex("ff" * 32), 0, 0, [5] + [0] * MAX_PO)
    assert only.bits == "0" * 256 and only.prefix == bytes(32)
    assert only.reserve_size_within_radius == 5 and only.proximity == 0


def test_json_shape() -> None:
    (n,) = neighborhoods(from_bits("101"), 3, 0, [0] * (MAX_PO + 1))
    assert n.as_json() == {"neighborhood": "101", "reserveSizeWithinRadius": 0, "proximity": 3}


@settings(max_examples=60, deadline=None)
@given(
    overlay=st.binary(min_size=32, max_size=32),
    radius=st.integers(0, MAX_PO),
    doubling=st.integers(0, 1),
    offsets=st.lists(st.tuples(st.integers(0, MAX_PO), st.binary(min_size=32, max_size=32)), max_size=60),
)
def test_counts_from_bins_equal_a_scan(overlay: bytes, radius: int, doubling: int, offsets: list) -> None:
    # entries scattered at chosen proximities to the overlay, as a reserve may hold them
    addresses = []
    for po, noise in offsets:
        value = int.from_bytes(overlay, "big") ^ (int.from_bytes(noise, "big") >> (po + 1) if po < MAX_PO else 0)
        if po < MAX_PO:
            value ^= 1 << (255 - po)  # flip bit po: proximity exactly po
        addresses.append(value.to_bytes(32, "big"))
    bins = [0] * (MAX_PO + 1)
    for a in addresses:
        bins[proximity(a, overlay)] += 1
    depth = radius + doubling
    got = neighborhoods(overlay, radius, doubling, bins)
    assert len(got) == 1 << doubling
    for n in got:
        scanned = sum(1 for a in addresses if proximity(a, n.prefix) >= depth)
        assert n.reserve_size_within_radius == scanned, (n, radius, doubling)
        assert n.bits == (bit_string(n.prefix, depth))
        assert n.proximity == min(depth, proximity(n.prefix, overlay))
    if doubling == 0:
        assert got[0].reserve_size_within_radius == sum(bins[radius:]) if depth <= MAX_PO else 0


def test_refusals() -> None:
    with pytest.raises(InvalidReserveOption):
        neighborhoods(bytes(32), 0, 2, [0] * (MAX_PO + 1))
    with pytest.raises(InvalidReserveOption):
        neighborhoods(bytes(32), 0, 0, [0] * 3)
    with pytest.raises(InvalidReserveOption):
        neighborhood_prefix(bytes(31), 0, 0, 0)
    with pytest.raises(InvalidReserveOption):
        neighborhood_prefix(bytes(32), 0, 1, 2)
