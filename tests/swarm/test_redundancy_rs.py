"""Reed-Solomon over GF(2^8) against klauspost/reedsolomon v1.11.8's own output, and decoding properties."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkstore.swarm.redundancy import reedsolomon as rs
from chunkstore.swarm.redundancy.level import Level, max_shards, parities

VECTORS = json.loads(
    (Path(__file__).resolve().parents[1] / "testdata" / "reedsolomon_klauspost_v1.11.8.json").read_text()
)


def vector_stream(seed: str, n: int) -> bytes:
    out = bytearray()
    counter = 0
    while len(out) < n:
        out += hashlib.sha256(seed.encode() + counter.to_bytes(4, "little")).digest()
        counter += 1
    return bytes(out[:n])


def vector_data(case: dict) -> list[bytes]:
    k, p, size = case["data_shards"], case["parity_shards"], case["shard_size"]
    stream = vector_stream(f"rs-vector-{k}-{p}-{size}", k * size)
    return [stream[j * size : (j + 1) * size] for j in range(k)]


def test_vectors_cover_every_pair_bee_uses():
    pairs = {(c["data_shards"], c["parity_shards"]) for c in VECTORS["cases"]}
    for level in list(Level)[1:]:
        for encrypted in (False, True):
            for k in range(1, max_shards(level, encrypted) + 1):
                assert (k, parities(level, k, encrypted)) in pairs


def test_parity_equals_klauspost_for_every_vector():
    assert len(VECTORS["cases"]) > 500
    for case in VECTORS["cases"]:
        parity = rs.encode(vector_data(case), case["parity_shards"])
        assert parity.shape == (case["parity_shards"], case["shard_size"])
        got = hashlib.sha256(parity.tobytes()).hexdigest()
        assert got == case["parity_sha256"], (case["data_shards"], case["parity_shards"], case["shard_size"])
        if "parity_hex" in case:
            assert [row.tobytes().hex() for row in parity] == case["parity_hex"]


def test_field_basics():
    # 0x11d field with generator 2: 2^8 = 0x1d, and every nonzero element has an inverse.
    assert rs.gf_mul(0x80, 2) == 0x1D
    assert rs.gf_mul(3, 7) == 9
    for a in range(1, 256):
        assert any(rs.gf_mul(a, b) == 1 for b in range(1, 256))


def test_coding_matrix_is_systematic_and_cached():
    m = rs.coding_matrix(5, 3)
    assert np.array_equal(m[:5], np.eye(5, dtype=np.uint8))
    assert m is rs.coding_matrix(5, 3)
    with pytest.raises(ValueError):
        m[0, 0] = 7  # read-only: a cached matrix must never be changed by a caller


def test_bad_counts_and_shapes_are_typed_errors():
    with pytest.raises(rs.ReedSolomonError):
        rs.coding_matrix(0, 2)
    with pytest.raises(rs.ReedSolomonError):
        rs.coding_matrix(200, 57)
    with pytest.raises(rs.ReedSolomonError):
        rs.encode([b"ab", b"abc"], 1)
    with pytest.raises(rs.ReedSolomonError):
        rs.reconstruct_data([b"ab", None, None], 2)


@settings(max_examples=60, deadline=None)
@given(
    k=st.integers(min_value=1, max_value=40),
    p=st.integers(min_value=1, max_value=20),
    size=st.integers(min_value=1, max_value=64),
    data=st.data(),
)
def test_any_k_of_n_shards_rebuild_the_data(k, p, size, data):
    shards = [data.draw(st.binary(min_size=size, max_size=size)) for _ in range(k)]
    parity = rs.encode(shards, p)
    everything: list[bytes | None] = shards + [row.tobytes() for row in parity]
    lost = data.draw(st.sets(st.integers(min_value=0, max_value=k + p - 1), max_size=p))
    damaged = [None if i in lost else s for i, s in enumerate(everything)]
    assert rs.reconstruct_data(damaged, k) == shards


@settings(max_examples=30, deadline=None)
@given(k=st.integers(min_value=1, max_value=20), p=st.integers(min_value=1, max_value=10), data=st.data())
def test_one_shard_short_of_k_is_refused(k, p, data):
    shards = [bytes([i]) * 8 for i in range(k)]
    everything: list[bytes | None] = shards + [row.tobytes() for row in rs.encode(shards, p)]
    lost = data.draw(st.sets(st.integers(min_value=0, max_value=k + p - 1), min_size=p + 1, max_size=p + 1))
    with pytest.raises(rs.ReedSolomonError):
        rs.reconstruct_data([None if i in lost else s for i, s in enumerate(everything)], k)


def test_full_size_medium_group_round_trip():
    rng = np.random.default_rng(7)
    data = rng.integers(0, 256, (119, 4104), dtype=np.uint8)
    parity = rs.encode(data, 9)
    shards: list[bytes | None] = [row.tobytes() for row in data] + [row.tobytes() for row in parity]
    for i in (0, 5, 50, 118, 119, 120, 121, 126, 127):
        shards[i] = None
    assert rs.reconstruct_data(shards, 119) == [row.tobytes() for row in data]
