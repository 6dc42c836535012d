"""JSON renderings of the inclusion proofs: one walk over the claim struct, two encodings.

Two forms of the same values, keys in the order of the reference node's structs:

- ``render_rchash``: the reference node's ``GET /rchash`` answer (hex without
  0x, stamp index and timestamp as unpadded hex strings, ``socProof`` null for
  a CAC item);
- ``render_proofs_internal``: the node's internal JSON of the claim struct, the
  form of its regression vector (0x hex, base64 signatures, integer index and
  timestamp, ``socProof`` an empty list for a CAC item).

They differ only in an ``Encoding``; ``_render_proof`` is the one place that
knows the struct.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .proof import ChunkInclusionProof, ChunkInclusionProofs


def _hex(b: bytes) -> str:
    return bytes(b).hex()


def _hex0x(b: bytes) -> str:
    return "0x" + bytes(b).hex()


def _b64(b: bytes) -> str:
    return base64.b64encode(bytes(b)).decode("ascii")


def _hex_int(b: bytes) -> str:
    # The reference formats these integers as hex without padding ("80303").
    return format(int.from_bytes(b, "big"), "x")


def _int(b: bytes) -> int:
    return int.from_bytes(b, "big")


@dataclass(frozen=True)
class Encoding:
    hash: Callable[[bytes], str]  # segments, addresses, ids
    signature: Callable[[bytes], str]
    number: Callable[[bytes], Any]  # the stamp's index and timestamp
    no_soc: Callable[[], Any]  # what a CAC item's socProof is


RCHASH = Encoding(hash=_hex, signature=_hex, number=_hex_int, no_soc=lambda: None)
INTERNAL = Encoding(hash=_hex0x, signature=_b64, number=_int, no_soc=list)


def _render_proof(proof: ChunkInclusionProof, enc: Encoding) -> dict[str, Any]:
    soc = enc.no_soc()
    if proof.soc_proof is not None:
        s = proof.soc_proof
        soc = [
            {
                "signer": enc.hash(s.signer),
                "signature": enc.signature(s.signature),
                "identifier": enc.hash(s.identifier),
                "chunkAddr": enc.hash(s.chunk_addr),
            }
        ]
    return {
        "proofSegments": [enc.hash(x) for x in proof.sample_proof.proof_segments],
        "proveSegment": enc.hash(proof.sample_proof.prove_segment),
        "proofSegments2": [enc.hash(x) for x in proof.chunk_proof.proof_segments],
        "proveSegment2": enc.hash(proof.chunk_proof.prove_segment),
        "chunkSpan": proof.chunk_span,
        "proofSegments3": [enc.hash(x) for x in proof.transformed_proof.proof_segments],
        "postageProof": {
            "signature": enc.signature(proof.stamp.signature),
            "postageId": enc.hash(proof.stamp.batch_id),
            "index": enc.number(proof.stamp.index),
            "timeStamp": enc.number(proof.stamp.timestamp),
        },
        "socProof": soc,
    }


def _render_proofs(proofs: ChunkInclusionProofs, enc: Encoding) -> dict[str, Any]:
    return {
        "proof1": _render_proof(proofs.proof1, enc),
        "proof2": _render_proof(proofs.proof2, enc),
        "proofLast": _render_proof(proofs.proof_last, enc),
    }


def render_proof_rchash(proof: ChunkInclusionProof) -> dict[str, Any]:
    return _render_proof(proof, RCHASH)


def render_proof_internal(proof: ChunkInclusionProof) -> dict[str, Any]:
    return _render_proof(proof, INTERNAL)


def render_rchash(sample_hash: bytes, proofs: ChunkInclusionProofs, duration_seconds: float) -> dict[str, Any]:
    """The ``/rchash`` answer: ``{"hash", "proofs": {...}, "durationSeconds"}``."""
    return {
        "hash": _hex(sample_hash),
        "proofs": _render_proofs(proofs, RCHASH),
        "durationSeconds": float(duration_seconds),
    }


def render_proofs_internal(proofs: ChunkInclusionProofs) -> dict[str, Any]:
    """The claim struct as the reference node's regression vector spells it."""
    return _render_proofs(proofs, INTERNAL)
