"""JSON renderings of the inclusion proofs.

Two forms of the same values:
- ``render_rchash``: the reference node's ``GET /rchash`` answer (hex without
  0x, stamp index and timestamp as unpadded hex strings, ``socProof`` null for
  a CAC item);
- ``render_proofs_internal``: the node's internal JSON of the claim struct, the
  form of its regression vector (0x hex, base64 signatures, integer index and
  timestamp, ``socProof`` an empty list for a CAC item).
Keys are emitted in the order of the reference node's structs.
"""

from __future__ import annotations

import base64
from typing import Any

from .proof import ChunkInclusionProof, ChunkInclusionProofs


def _hex(b: bytes) -> str:
    return bytes(b).hex()


def _hex0x(b: bytes) -> str:
    return "0x" + bytes(b).hex()


def _b64(b: bytes) -> str:
    return base64.b64encode(bytes(b)).decode("ascii")


def render_proof_rchash(proof: ChunkInclusionProof) -> dict[str, Any]:
    soc = None
    if proof.soc_proof is not None:
        s = proof.soc_proof
        soc = [
            {
                "signer": _hex(s.signer),
                "signature": _hex(s.signature),
                "identifier": _hex(s.identifier),
                "chunkAddr": _hex(s.chunk_addr),
            }
        ]
    return {
        "proofSegments": [_hex(x) for x in proof.sample_proof.proof_segments],
        "proveSegment": _hex(proof.sample_proof.prove_segment),
        "proofSegments2": [_hex(x) for x in proof.chunk_proof.proof_segments],
        "proveSegment2": _hex(proof.chunk_proof.prove_segment),
        "chunkSpan": proof.chunk_span,
        "proofSegments3": [_hex(x) for x in proof.transformed_proof.proof_segments],
        "postageProof": {
            "signature": _hex(proof.stamp.signature),
            "postageId": _hex(proof.stamp.batch_id),
            # The reference formats these integers as hex without padding ("80303").
            "index": format(int.from_bytes(proof.stamp.index, "big"), "x"),
            "timeStamp": format(int.from_bytes(proof.stamp.timestamp, "big"), "x"),
        },
        "socProof": soc,
    }


def render_rchash(sample_hash: bytes, proofs: ChunkInclusionProofs, duration_seconds: float) -> dict[str, Any]:
    """The ``/rchash`` answer: ``{"hash", "proofs": {...}, "durationSeconds"}``."""
    return {
        "hash": _hex(sample_hash),
        "proofs": {
            "proof1": render_proof_rchash(proofs.proof1),
            "proof2": render_proof_rchash(proofs.proof2),
            "proofLast": render_proof_rchash(proofs.proof_last),
        },
        "durationSeconds": float(duration_seconds),
    }


def render_proof_internal(proof: ChunkInclusionProof) -> dict[str, Any]:
    soc: list[dict[str, str]] = []
    if proof.soc_proof is not None:
        s = proof.soc_proof
        soc.append(
            {
                "signer": _hex0x(s.signer),
                "signature": _b64(s.signature),
                "identifier": _hex0x(s.identifier),
                "chunkAddr": _hex0x(s.chunk_addr),
            }
        )
    return {
        "proofSegments": [_hex0x(x) for x in proof.sample_proof.proof_segments],
        "proveSegment": _hex0x(proof.sample_proof.prove_segment),
        "proofSegments2": [_hex0x(x) for x in proof.chunk_proof.proof_segments],
        "proveSegment2": _hex0x(proof.chunk_proof.prove_segment),
        "chunkSpan": proof.chunk_span,
        "proofSegments3": [_hex0x(x) for x in proof.transformed_proof.proof_segments],
        "postageProof": {
            "signature": _b64(proof.stamp.signature),
            "postageId": _hex0x(proof.stamp.batch_id),
            "index": int.from_bytes(proof.stamp.index, "big"),
            "timeStamp": int.from_bytes(proof.stamp.timestamp, "big"),
        },
        "socProof": soc,
    }


def render_proofs_internal(proofs: ChunkInclusionProofs) -> dict[str, Any]:
    """The claim struct as the reference node's regression vector spells it."""
    return {
        "proof1": render_proof_internal(proofs.proof1),
        "proof2": render_proof_internal(proofs.proof2),
        "proofLast": render_proof_internal(proofs.proof_last),
    }
