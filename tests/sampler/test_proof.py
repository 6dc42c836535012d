"""The reference node's inclusion-proof regression vector, reproduced field by field."""

from __future__ import annotations

import json

import pytest

from chunkstore.swarm.bmt.reference import verify_proof
from chunkstore.swarm.errors import InvalidProof
from chunkstore.swarm.keccak import keccak256
from sampler.proof import (
    make_inclusion_proofs,
    proof_positions,
    proof_segment,
    sample_chunk,
    sample_hash,
    verify_inclusion_proof,
)
from sampler.render import render_proofs_internal, render_rchash
from tests.sampler.helpers import (
    VECTOR_ANCHOR1,
    VECTOR_ANCHOR2,
    VECTOR_SAMPLE_HASH,
    load_vector,
    vector_sample,
)


@pytest.fixture(scope="module")
def items():
    return vector_sample()


@pytest.fixture(scope="module")
def proofs(items):
    return make_inclusion_proofs(items, VECTOR_ANCHOR1, VECTOR_ANCHOR2)


def test_sample_hash(items):
    assert sample_hash(items) == VECTOR_SAMPLE_HASH
    address, data = sample_chunk(items)
    assert address == VECTOR_SAMPLE_HASH
    assert data[:8] == (1024).to_bytes(8, "little")
    assert len(data) == 8 + 1024


def test_positions():
    assert proof_positions(VECTOR_ANCHOR2) == (0, 3, 15)
    assert proof_segment(VECTOR_ANCHOR2) == 30
    # r2 skips r1 so the two are always distinct
    for v in range(0, 5000, 7):
        a = v.to_bytes(2, "big")
        r1, r2, r3 = proof_positions(a)
        assert r1 != r2 and 0 <= r1 < 15 and 0 <= r2 < 15 and r3 == 15
    assert proof_positions((13).to_bytes(32, "big")) == (13, 14, 15)
    with pytest.raises(ValueError):
        proof_positions(b"")


def test_vector_fields(proofs):
    got = render_proofs_internal(proofs)
    want = load_vector()
    assert list(got) == list(want)
    for name in want:
        assert list(got[name]) == list(want[name]), name
        for field, value in want[name].items():
            assert got[name][field] == value, f"{name}.{field}"
    assert got == want


def test_every_proof_verifies(items, proofs):
    root = sample_hash(items)
    for p in proofs:
        assert verify_proof(p.sample_proof, root)
        cac = p.soc_proof.chunk_addr if p.soc_proof else p.chunk_address
        assert verify_proof(p.chunk_proof, cac)
        if p.soc_proof is None:
            assert verify_proof(p.transformed_proof, p.transformed_address, VECTOR_ANCHOR1)
        verify_inclusion_proof(p, root, VECTOR_ANCHOR1)


def test_tampered_proof_refused(items, proofs):
    import dataclasses

    root = sample_hash(items)
    p = proofs.proof2
    bad = dataclasses.replace(p, transformed_address=bytes(32))
    with pytest.raises(InvalidProof):
        verify_inclusion_proof(bad, root, VECTOR_ANCHOR1)
    with pytest.raises(InvalidProof):
        verify_inclusion_proof(p, keccak256(b"x"), VECTOR_ANCHOR1)


def test_rchash_rendering(items, proofs):
    doc = render_rchash(sample_hash(items), proofs, 1.25)
    assert list(doc) == ["hash", "proofs", "durationSeconds"]
    assert doc["hash"] == VECTOR_SAMPLE_HASH.hex()
    assert list(doc["proofs"]) == ["proof1", "proof2", "proofLast"]
    assert doc["durationSeconds"] == 1.25
    want = load_vector()
    keys = [
        "proofSegments",
        "proveSegment",
        "proofSegments2",
        "proveSegment2",
        "chunkSpan",
        "proofSegments3",
        "postageProof",
        "socProof",
    ]
    for name, p in doc["proofs"].items():
        w = want[name]
        assert list(p) == keys
        for f in ("proofSegments", "proofSegments2", "proofSegments3"):
            assert p[f] == [h[2:] for h in w[f]]
        assert p["proveSegment"] == w["proveSegment"][2:]
        assert p["proveSegment2"] == w["proveSegment2"][2:]
        assert p["chunkSpan"] == w["chunkSpan"]
        pp = p["postageProof"]
        assert list(pp) == ["signature", "postageId", "index", "timeStamp"]
        assert pp["index"] == "80303" and pp["timeStamp"] == "30308"
        assert pp["postageId"] == w["postageProof"]["postageId"][2:]
        import base64

        assert pp["signature"] == base64.b64decode(w["postageProof"]["signature"]).hex()
        if w["socProof"]:
            assert isinstance(p["socProof"], list) and len(p["socProof"]) == 1
            s, ws = p["socProof"][0], w["socProof"][0]
            assert list(s) == ["signer", "signature", "identifier", "chunkAddr"]
            assert s["signer"] == ws["signer"][2:]
            assert s["signature"] == base64.b64decode(ws["signature"]).hex()
            assert s["identifier"] == ws["identifier"][2:]
            assert s["chunkAddr"] == ws["chunkAddr"][2:]
        else:
            assert p["socProof"] is None
    text = json.dumps(doc)
    assert '"socProof": null' in text


def test_wrong_sample_size(items):
    with pytest.raises(ValueError):
        make_inclusion_proofs(items[:15], VECTOR_ANCHOR1, VECTOR_ANCHOR2)
    with pytest.raises(ValueError):
        make_inclusion_proofs(items, b"", VECTOR_ANCHOR2)
