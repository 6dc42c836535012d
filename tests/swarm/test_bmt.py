"""BMT hash and proofs against a straightforward reference tree."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkstore.swarm.bmt.reference import (
    Proof,
    bmt_hash,
    chunk_hash,
    proof_root_hash,
    prove,
    verify_proof,
    zero_hashes,
)
from chunkstore.swarm.constants import BRANCHES, CHUNK_SIZE
from chunkstore.swarm.errors import InvalidChunk, InvalidProof
from chunkstore.swarm.keccak import keccak256


def reference_bmt(span: bytes, payload: bytes, prefix: bytes = b"") -> bytes:
    """The tree exactly as SPEC.md words it: pad, 128 segments, pair upward."""
    padded = payload + bytes(CHUNK_SIZE - len(payload))
    nodes = [padded[i : i + 32] for i in range(0, CHUNK_SIZE, 32)]
    while len(nodes) > 1:
        nodes = [keccak256(prefix + nodes[i] + nodes[i + 1]) for i in range(0, len(nodes), 2)]
    return keccak256(prefix + span + nodes[0])


payloads = st.binary(min_size=0, max_size=CHUNK_SIZE)
prefixes = st.binary(min_size=0, max_size=80)
spans = st.integers(min_value=0, max_value=2**64 - 1).map(lambda n: n.to_bytes(8, "little"))


def test_known_answers():
    assert keccak256(b"").hex() == "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
    assert zero_hashes()[1].hex() == "ad3228b676f7d3cd4284a5443f17f1962b36e491b30a40b2405849e597ba5fb5"
    # the empty chunk's address: span 0, all-zero tree
    assert chunk_hash(bytes(8)).hex() == "b34ca8c22b9e982354f9c7f50b470d66db428d880c8a904d5fe4ec9713171526"


@settings(max_examples=60, deadline=None)
@given(span=spans, payload=payloads, prefix=prefixes)
def test_bmt_equals_reference_tree(span, payload, prefix):
    assert bmt_hash(span, payload, prefix) == reference_bmt(span, payload, prefix)
    assert chunk_hash(span + payload, prefix) == reference_bmt(span, payload, prefix)


@given(payload=st.binary(min_size=0, max_size=64))
def test_memoryview_input_equals_bytes(payload):
    data = (len(payload)).to_bytes(8, "little") + payload
    assert chunk_hash(memoryview(bytearray(data))) == chunk_hash(data)


@settings(max_examples=40, deadline=None)
@given(payload=payloads, prefix=st.sampled_from([b"", b"\x64", bytes(range(32))]), data=st.data())
def test_every_proof_verifies_and_a_flipped_byte_fails(payload, prefix, data):
    chunk = len(payload).to_bytes(8, "little") + payload
    address = chunk_hash(chunk, prefix)
    index = data.draw(st.integers(0, BRANCHES - 1))
    proof = prove(chunk, index, prefix)
    assert verify_proof(proof, address, prefix)
    assert proof.prove_segment == (payload + bytes(CHUNK_SIZE))[index * 32 : index * 32 + 32]
    # flip one byte anywhere in the proof: it must no longer verify
    which = data.draw(st.integers(0, 8))
    pos = data.draw(st.integers(0, 31))
    segs = list(proof.proof_segments)
    if which == 0:
        seg = bytearray(proof.prove_segment)
        seg[pos] ^= 0x01
        bad = Proof(index, bytes(seg), proof.proof_segments, proof.span)
    elif which == 8:
        span = bytearray(proof.span)
        span[pos % 8] ^= 0x01
        bad = Proof(index, proof.prove_segment, proof.proof_segments, bytes(span))
    else:
        seg = bytearray(segs[which - 1])
        seg[pos] ^= 0x80
        segs[which - 1] = bytes(seg)
        bad = Proof(index, proof.prove_segment, tuple(segs), proof.span)
    assert not verify_proof(bad, address, prefix)


def test_proof_of_wrong_index_fails():
    chunk = (100).to_bytes(8, "little") + bytes(range(100))
    proof = prove(chunk, 1)
    moved = Proof(2, proof.prove_segment, proof.proof_segments, proof.span)
    assert not verify_proof(moved, chunk_hash(chunk))


@pytest.mark.parametrize("size", [CHUNK_SIZE + 1, CHUNK_SIZE + 100])
def test_oversize_payload_refused(size):
    with pytest.raises(InvalidChunk, match=f"payload is {size} bytes; at most 4096"):
        chunk_hash(bytes(8 + size))


@pytest.mark.parametrize("size", [0, 7])
def test_data_shorter_than_span_refused(size):
    with pytest.raises(InvalidChunk, match="span"):
        chunk_hash(bytes(size))


def test_malformed_proofs_refused():
    proof = prove(bytes(8), 0)
    with pytest.raises(InvalidProof):
        proof_root_hash(Proof(128, proof.prove_segment, proof.proof_segments, proof.span))
    with pytest.raises(InvalidProof):
        proof_root_hash(Proof(0, proof.prove_segment, proof.proof_segments[:6], proof.span))
    with pytest.raises(InvalidProof):
        prove(bytes(8), -1)
