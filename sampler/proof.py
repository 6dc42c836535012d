"""Sample chunk, sample hash and the inclusion proofs of the redistribution claim.

The sample chunk is a CAC whose payload is ``chunk address | transformed
address`` for each of the 16 items in order (1024 bytes, span 1024); its
address is the sample hash. From anchor2 three sample positions are chosen:
``r1 = anchor2 mod 15``, ``r2 = anchor2 mod 14`` (plus one when it reaches
r1) and ``r3 = 15``; and one segment ``seg = anchor2 mod 128``. For each
chosen item the claim carries: the proof of segment ``2*i`` of the sample
chunk (that segment is the item's chunk address), the plain and the
anchor1-prefixed BMT proofs of segment ``seg`` of the item's CAC (the wrapped
CAC of a SOC), its stamp, and for a SOC its signer, signature, id and wrapped
CAC address.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from chunkstore.swarm.bmt.reference import Proof, chunk_hash, proof_root_hash, prove
from chunkstore.swarm.constants import BRANCHES, SAMPLE_SIZE, SPAN_SIZE, ChunkType
from chunkstore.swarm.errors import InvalidProof
from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.signer import recover_address
from chunkstore.swarm.soc import parse_soc, soc_address, soc_digest
from chunkstore.swarm.stamp import Stamp

from .items import SampleItem, wrapped_cac


def sample_chunk(items: list[SampleItem]) -> tuple[bytes, bytes]:
    """``(address, data)`` of the sample chunk built from ``items`` in their order."""
    payload = b"".join(bytes(it.chunk_address) + bytes(it.transformed_address) for it in items)
    # Hashed by the reference BMT: the claim must not depend on the accelerated backend.
    data = len(payload).to_bytes(SPAN_SIZE, "little") + payload
    return chunk_hash(data), data


def sample_hash(items: list[SampleItem]) -> bytes:
    """The sample hash: address of the sample chunk."""
    return sample_chunk(items)[0]


def proof_positions(anchor2: bytes) -> tuple[int, int, int]:
    """Sample positions ``(r1, r2, r3)`` that the claim proves, picked by anchor2."""
    if not anchor2:
        raise ValueError("anchor2 is empty")
    value = int.from_bytes(anchor2, "big")
    last = SAMPLE_SIZE - 1
    r1 = value % last
    r2 = value % (last - 1)
    # r2 is drawn from one fewer position so that skipping r1 keeps it uniform and distinct.
    if r2 >= r1:
        r2 += 1
    return r1, r2, last


def proof_segment(anchor2: bytes) -> int:
    """Segment of each chosen chunk that the claim proves."""
    if not anchor2:
        raise ValueError("anchor2 is empty")
    return int.from_bytes(anchor2, "big") % BRANCHES


@dataclass(frozen=True)
class SOCProof:
    signer: bytes
    signature: bytes
    identifier: bytes
    chunk_addr: bytes


@dataclass(frozen=True)
class ChunkInclusionProof:
    """One witness of the claim, in the field order of the contract's struct."""

    sample_proof: Proof  # segment 2*i of the sample chunk
    chunk_proof: Proof  # segment seg of the item's CAC, plain BMT
    transformed_proof: Proof  # segment seg of the item's CAC, anchor1-prefixed BMT
    stamp: Stamp
    soc_proof: SOCProof | None
    # Kept so a verifier can check the witness without the sample at hand.
    chunk_address: bytes
    transformed_address: bytes

    @property
    def chunk_span(self) -> int:
        return int.from_bytes(self.chunk_proof.span, "little")


@dataclass(frozen=True)
class ChunkInclusionProofs:
    proof1: ChunkInclusionProof
    proof2: ChunkInclusionProof
    proof_last: ChunkInclusionProof

    def __iter__(self) -> Iterator[ChunkInclusionProof]:
        return iter((self.proof1, self.proof2, self.proof_last))


def _soc_proof(item: SampleItem) -> SOCProof | None:
    if item.chunk_type != ChunkType.SOC:
        return None
    # The reference BMT: a proof must not depend on the accelerated backend being right.
    soc = parse_soc(item.chunk_data, cac_hash=chunk_hash)
    return SOCProof(signer=soc.owner, signature=soc.signature, identifier=soc.id, chunk_addr=soc.wrapped_address)


def _witness(item: SampleItem, sample_data: bytes, position: int, seg: int, anchor1: bytes) -> ChunkInclusionProof:
    cac = wrapped_cac(item.chunk_data, item.chunk_type)
    if len(cac) < SPAN_SIZE:
        raise ValueError(f"sample item {position} has no CAC span to prove")
    return ChunkInclusionProof(
        sample_proof=prove(sample_data, 2 * position),
        chunk_proof=prove(cac, seg),
        transformed_proof=prove(cac, seg, anchor1),
        stamp=item.stamp,
        soc_proof=_soc_proof(item),
        chunk_address=bytes(item.chunk_address),
        transformed_address=bytes(item.transformed_address),
    )


def make_inclusion_proofs(items: list[SampleItem], anchor1: bytes, anchor2: bytes) -> ChunkInclusionProofs:
    """The three chunk inclusion proofs for a 16-item sample."""
    if len(items) != SAMPLE_SIZE:
        raise ValueError(f"a sample has {SAMPLE_SIZE} items, not {len(items)}")
    if not anchor1:
        raise ValueError("anchor1 is empty")
    _, sample_data = sample_chunk(items)
    seg = proof_segment(anchor2)
    r1, r2, r3 = proof_positions(anchor2)
    return ChunkInclusionProofs(
        proof1=_witness(items[r1], sample_data, r1, seg, anchor1),
        proof2=_witness(items[r2], sample_data, r2, seg, anchor1),
        proof_last=_witness(items[r3], sample_data, r3, seg, anchor1),
    )


def verify_inclusion_proof(proof: ChunkInclusionProof, sample_address: bytes, anchor1: bytes) -> None:
    """Check one witness the way the redistribution contract does; raise ``InvalidProof`` naming the flaw.

    The stamp's signer is not checked here: that needs the batch owner, which
    the contract reads from its own postage state.
    """
    if proof_root_hash(proof.sample_proof) != bytes(sample_address):
        raise InvalidProof("sample chunk proof does not lead to the sample hash")
    if proof.sample_proof.index % 2:
        raise InvalidProof(f"sample chunk proof is for odd segment {proof.sample_proof.index}")
    # Segment 2*i holds the chunk address and its sibling 2*i+1 the transformed address.
    if proof.sample_proof.prove_segment != proof.chunk_address:
        raise InvalidProof("sample chunk proof does not prove the item's chunk address")
    if proof.sample_proof.proof_segments[0] != proof.transformed_address:
        raise InvalidProof("sample chunk proof's sibling segment is not the item's transformed address")
    if proof.chunk_proof.index != proof.transformed_proof.index:
        raise InvalidProof("plain and prefixed chunk proofs are for different segments")
    if proof.chunk_proof.prove_segment != proof.transformed_proof.prove_segment:
        raise InvalidProof("plain and prefixed chunk proofs prove different data")
    if proof.chunk_proof.span != proof.transformed_proof.span:
        raise InvalidProof("plain and prefixed chunk proofs carry different spans")
    cac_address = proof_root_hash(proof.chunk_proof)
    transformed = proof_root_hash(proof.transformed_proof, anchor1)
    if proof.soc_proof is None:
        if cac_address != proof.chunk_address:
            raise InvalidProof("chunk proof does not lead to the chunk address")
    else:
        soc = proof.soc_proof
        if soc.chunk_addr != cac_address:
            raise InvalidProof("chunk proof does not lead to the SOC's wrapped chunk address")
        if soc_address(soc.identifier, soc.signer) != proof.chunk_address:
            raise InvalidProof("SOC id and signer do not give the chunk address")
        if recover_address(soc.signature, soc_digest(soc.identifier, soc.chunk_addr)) != soc.signer:
            raise InvalidProof("SOC signature does not recover to its signer")
        transformed = keccak256(proof.chunk_address, transformed)
    if transformed != proof.transformed_address:
        raise InvalidProof("prefixed chunk proof does not lead to the transformed address")
