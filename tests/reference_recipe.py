"""The reference node's regression recipe (tests/testdata/README.md), built from
the primitives, shared by the primitive and sampler tests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from chunkstore.bmt import chunk_hash
from chunkstore.cac import make_cac
from chunkstore.keccak import keccak256
from chunkstore.signer import Signer
from chunkstore.soc import SOC, make_soc
from chunkstore.stamp import Stamp

TESTDATA = Path(__file__).resolve().parent / "testdata"
EXPECTED_SAMPLE_ADDRESS = bytes.fromhex("b012904b0c3e6462158b4416556caa888031a79bad46d2ffa7012408c9c38aa8")
ANCHOR1 = b"\x64"
ANCHOR2 = b"\x1e"
SIGNER = Signer(b"0" * 32)
BATCH_ID = keccak256(b"The Inverted Jenny")
INDEX = bytes.fromhex("0000000000080303")
TIMESTAMP = bytes.fromhex("0000000000030308")


@dataclass(frozen=True)
class RecipeChunk:
    address: bytes
    data: bytes
    cac_data: bytes  # the CAC itself, or the SOC's wrapped CAC
    soc: SOC | None
    stamp: Stamp
    transformed_address: bytes


def load_vector() -> dict:
    return json.loads((TESTDATA / "inclusion-proofs.json").read_text())


def recipe_chunks() -> list[RecipeChunk]:
    """The 16 chunks of the recipe, in recipe order (not sorted)."""
    out = []
    for i in range(16):
        cac_address, cac_data = make_cac(b"Unstoppable data! Chunk #%d" % (i + 1))
        taddr = chunk_hash(cac_data, ANCHOR1)
        soc = None
        address, data = cac_address, cac_data
        if i % 2 == 0:
            soc = make_soc(SIGNER, keccak256(b"ID #%d" % (i + 1)), cac_data)
            address, data = soc.address, soc.data
            taddr = keccak256(address, taddr)
        signature = SIGNER.sign(keccak256(address, BATCH_ID, INDEX, TIMESTAMP))
        out.append(RecipeChunk(address, data, cac_data, soc, Stamp(BATCH_ID, INDEX, TIMESTAMP, signature), taddr))
    return out
