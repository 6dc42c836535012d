"""Bee's chunk encryption: the Keccak counter mode, the span's own counter, padding, batch = single."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkstore.swarm import encryption as enc
from chunkstore.swarm.keccak import keccak256

VECTOR = json.loads((Path(__file__).resolve().parents[1] / "testdata" / "bee_encryption_vector.json").read_text())


def seeded(seed: int):
    rng = random.Random(seed)
    return lambda n: rng.randbytes(n)


def test_bee_vector_4096_zero_bytes():
    key = bytes.fromhex(VECTOR["key"])
    assert enc.transcrypt(key, bytes(4096)).hex() == VECTOR["ciphertext"]


def test_keystream_definition():
    key = bytes(range(32))
    segment = keccak256(keccak256(key, (5).to_bytes(4, "little")))
    assert enc.keystream(key, 32, 5) == segment
    # Sectioned encryption equals whole (Bee's TestEncryptSectioned): counter i covers bytes 32i..32i+31.
    data = bytes(range(256)) * 4
    whole = enc.transcrypt(key, data, 42)
    assert b"".join(enc.transcrypt(key, data[i : i + 32], 42 + i // 32) for i in range(0, 1024, 32)) == whole


def test_span_uses_counter_128_and_padding_is_random():
    key = bytes(32)
    data = (11).to_bytes(8, "little") + b"hello world"
    k1, c1 = enc.encrypt_chunk(data, key, seeded(1))
    k2, c2 = enc.encrypt_chunk(data, key, seeded(2))
    assert k1 == k2 == key and len(c1) == 4104
    assert c1[:8] == enc.transcrypt(key, data[:8], enc.SPAN_COUNTER)
    assert c1[8:19] == enc.transcrypt(key, b"hello world", 0)
    assert c1[:19] == c2[:19] and c1[19:] != c2[19:]  # padding differs: not encrypted zeros
    span, payload = enc.decrypt_chunk(c1, key)
    assert span == data[:8] and payload[:11] == b"hello world" and len(payload) == 4096


@settings(max_examples=40, deadline=None)
@given(payload=st.binary(max_size=4096), seed=st.integers(0, 2**32))
def test_encrypt_decrypt_is_identity_and_batch_equals_single(payload, seed):
    data = len(payload).to_bytes(8, "little") + payload
    key, encrypted = enc.encrypt_chunk(data, None, seeded(seed))
    keys, batch = enc.encrypt_chunks([data], seeded(seed))
    assert keys == [key] and batch == [encrypted]
    span, plain = enc.decrypt_chunk(encrypted, key)
    assert span + plain[: len(payload)] == data
    assert enc.decrypt_chunks([encrypted], [key]) == [(span, plain)]


def test_batch_of_many_chunks():
    datas = [(n).to_bytes(8, "little") + bytes([n % 256]) * n for n in (0, 1, 31, 32, 33, 4095, 4096)]
    keys, batch = enc.encrypt_chunks(datas, seeded(3))
    source = seeded(3)
    single = [enc.encrypt_chunk(d, None, source) for d in datas]
    assert list(zip(keys, batch, strict=True)) == single


def test_bad_sizes_are_typed_errors():
    with pytest.raises(enc.EncryptionError):
        enc.encrypt_chunk(bytes(4105), bytes(32))
    with pytest.raises(enc.EncryptionError):
        enc.encrypt_chunk(bytes(8), bytes(31))
    with pytest.raises(enc.EncryptionError):
        enc.decrypt_chunk(bytes(4103), bytes(32))
    with pytest.raises(enc.EncryptionError):
        enc.encrypt_chunk(bytes(8), None, lambda n: bytes(n - 1))


@settings(max_examples=20, deadline=None)
@given(keys=st.lists(st.binary(min_size=32, max_size=32), min_size=1, max_size=11))
def test_both_key_stream_paths_equal_the_definition(keys):
    fast = enc.chunk_keystreams(keys)
    saved = list(enc._KERNEL)
    enc._KERNEL[:] = [None]  # force the batch-Keccak fallback
    try:
        slow = enc.chunk_keystreams(keys)
    finally:
        enc._KERNEL[:] = saved
    assert fast.tobytes() == slow.tobytes()
    for i, key in enumerate(keys):
        assert fast[i, :4096].tobytes() == enc.keystream(key, 4096)
        assert fast[i, 4096:].tobytes() == enc.keystream(key, 8, enc.SPAN_COUNTER)


def test_accelerated_key_stream_is_used_with_the_numba_backend():
    from chunkstore.swarm import bmt

    kernel = enc._fast_segment_keys()
    assert (kernel is not None) == (bmt.BACKEND == "numba")
