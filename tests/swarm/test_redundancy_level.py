"""Bee's redundancy levels: parity tables, fan-out per level, the level byte in spans."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chunkstore.swarm.redundancy.level import (
    DEFAULT_DOWNLOAD_LEVEL,
    DEFAULT_UPLOAD_LEVEL,
    InvalidLevel,
    Level,
    decode_span,
    encode_level,
    is_level_encoded,
    max_shards,
    parities,
    replica_count,
)


def test_defaults_are_bees():
    assert DEFAULT_UPLOAD_LEVEL == Level.MEDIUM
    assert DEFAULT_DOWNLOAD_LEVEL == Level.PARANOID


@pytest.mark.parametrize(
    ("level", "plain", "encrypted"),
    [
        (Level.NONE, (128, 0), (64, 0)),
        (Level.MEDIUM, (119, 9), (59, 9)),
        (Level.STRONG, (107, 21), (53, 21)),
        (Level.INSANE, (97, 31), (48, 31)),
        (Level.PARANOID, (39, 89), (20, 87)),
    ],
)
def test_fan_out_and_full_parities(level, plain, encrypted):
    # A full intermediate chunk: data refs plus their parities must fit 4096 bytes.
    assert (max_shards(level), parities(level, max_shards(level))) == plain
    assert (max_shards(level, True), parities(level, max_shards(level, True), True)) == encrypted
    assert plain[0] * 32 + plain[1] * 32 <= 4096
    assert encrypted[0] * 64 + encrypted[1] * 32 <= 4096


def test_table_rows_from_bee():
    # Spot checks of the appendix-F tables as Bee's level.go has them.
    assert [parities(Level.MEDIUM, k) for k in (1, 2, 5, 6, 14, 15, 94, 95)] == [2, 3, 3, 4, 4, 5, 8, 9]
    assert [parities(Level.MEDIUM, k, True) for k in (1, 2, 3, 46, 47)] == [3, 3, 4, 8, 9]
    assert parities(Level.INSANE, 2) == 6 and parities(Level.INSANE, 97) == 31
    assert parities(Level.PARANOID, 1) == 19 and parities(Level.PARANOID, 2, True) == 29
    assert parities(Level.NONE, 100) == 0


def test_bee_hashtrie_redundancy_counts():
    # Bee's hashtrie TestRedundancy: 98 chunks at INSANE make 31 + 6 parities,
    # 21 encrypted chunks at PARANOID make 87 + 29.
    assert parities(Level.INSANE, 97) + parities(Level.INSANE, 2) == 37
    assert parities(Level.PARANOID, 20, True) + parities(Level.PARANOID, 2, True) == 116


def test_replica_counts():
    assert [replica_count(level) for level in Level] == [0, 2, 4, 8, 16]


def test_level_out_of_range_is_typed():
    with pytest.raises(InvalidLevel):
        Level.of(5)
    with pytest.raises(InvalidLevel):
        parities(-1, 3)
    with pytest.raises(InvalidLevel):
        decode_span(bytes(7) + b"\xff")


@given(length=st.integers(min_value=0, max_value=2**56 - 1), level=st.sampled_from(list(Level)))
def test_level_in_span_round_trip(length, level):
    span = length.to_bytes(8, "little")
    encoded = encode_level(span, level)
    assert encoded[:7] == span[:7]
    if level == Level.NONE:
        # 0x80 alone does not count as encoded (Bee: last byte > 128).
        assert not is_level_encoded(encoded)
    else:
        assert decode_span(encoded) == (level, length)
    assert decode_span(span) == (Level.NONE, length)
