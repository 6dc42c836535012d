"""The reference regression recipe, reproduced with the primitives alone: chunk
addresses, SOC and stamp signatures, and the single-chunk BMT proofs."""

from __future__ import annotations

import base64

import pytest

from chunkstore.swarm.bmt.reference import Proof, chunk_hash, prove, verify_proof
from chunkstore.swarm.cac import validate_cac
from chunkstore.swarm.soc import parse_soc, validate_soc
from chunkstore.swarm.stamp import validate_stamp
from tests.swarm.recipe import (
    ANCHOR1,
    ANCHOR2,
    BATCH_ID,
    EXPECTED_SAMPLE_ADDRESS,
    SIGNER,
    load_vector,
)

CHOSEN = {"proof1": 0, "proof2": 3, "proofLast": 15}  # r1, r2, r3 for anchor2 = 30


def h(x: str) -> bytes:
    return bytes.fromhex(x.removeprefix("0x"))


@pytest.fixture(scope="module")
def ordered(regression_recipe):
    return sorted(regression_recipe, key=lambda c: c.transformed_address)


def test_sample_chunk_address(ordered):
    payload = b"".join(c.address + c.transformed_address for c in ordered)
    assert chunk_hash(len(payload).to_bytes(8, "little") + payload) == EXPECTED_SAMPLE_ADDRESS


def test_anchor2_picks_positions_0_3_15():
    a = int.from_bytes(ANCHOR2, "big")
    r1, r2 = a % 15, a % 14
    r2 += r2 >= r1
    assert (r1, r2, 15) == (0, 3, 15)
    assert set(CHOSEN.values()) == {0, 3, 15}


def test_every_chunk_validates(ordered):
    for c in ordered:
        if c.soc is None:
            validate_cac(c.address, c.data)
        else:
            soc = validate_soc(c.address, c.data)
            assert soc.owner == SIGNER.address
        validate_stamp(c.stamp, c.address, SIGNER.address, depth=20, bucket_depth=0)


@pytest.mark.parametrize("name", sorted(CHOSEN))
def test_stamp_and_soc_signatures_match_vector(ordered, name):
    proof = load_vector()[name]
    item = ordered[CHOSEN[name]]
    postage = proof["postageProof"]
    assert base64.b64decode(postage["signature"]) == item.stamp.signature
    assert h(postage["postageId"]) == BATCH_ID
    assert postage["index"] == int.from_bytes(item.stamp.index, "big")
    assert postage["timeStamp"] == int.from_bytes(item.stamp.timestamp, "big")
    if item.soc is None:
        assert proof["socProof"] == []
    else:
        (soc_proof,) = proof["socProof"]
        assert h(soc_proof["signer"]) == SIGNER.address
        assert base64.b64decode(soc_proof["signature"]) == item.soc.signature
        assert h(soc_proof["identifier"]) == item.soc.id
        assert h(soc_proof["chunkAddr"]) == item.soc.wrapped_address
        assert parse_soc(item.data).signature == item.soc.signature


@pytest.mark.parametrize("name", sorted(CHOSEN))
def test_single_chunk_bmt_proofs_match_vector(ordered, name):
    proof = load_vector()[name]
    item = ordered[CHOSEN[name]]
    segment = int.from_bytes(ANCHOR2, "big") % 128
    plain = prove(item.cac_data, segment)
    assert [s.hex() for s in plain.proof_segments] == [x.removeprefix("0x") for x in proof["proofSegments2"]]
    assert plain.prove_segment == h(proof["proveSegment2"])
    assert int.from_bytes(plain.span, "little") == proof["chunkSpan"]
    assert verify_proof(plain, chunk_hash(item.cac_data))
    prefixed = prove(item.cac_data, segment, ANCHOR1)
    assert [s.hex() for s in prefixed.proof_segments] == [x.removeprefix("0x") for x in proof["proofSegments3"]]
    assert verify_proof(prefixed, chunk_hash(item.cac_data, ANCHOR1), ANCHOR1)


@pytest.mark.parametrize("name", sorted(CHOSEN))
def test_sample_chunk_proofs_match_vector(ordered, name):
    proof = load_vector()[name]
    payload = b"".join(c.address + c.transformed_address for c in ordered)
    data = len(payload).to_bytes(8, "little") + payload
    p = prove(data, 2 * CHOSEN[name])
    assert p.prove_segment == h(proof["proveSegment"])
    assert [s.hex() for s in p.proof_segments] == [x.removeprefix("0x") for x in proof["proofSegments"]]
    assert verify_proof(p, EXPECTED_SAMPLE_ADDRESS)
    tampered = Proof(p.index, bytes([p.prove_segment[0] ^ 1]) + p.prove_segment[1:], p.proof_segments, p.span)
    assert not verify_proof(tampered, EXPECTED_SAMPLE_ADDRESS)
