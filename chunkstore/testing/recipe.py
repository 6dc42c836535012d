"""The reference node's regression recipe: 16 chunks, their stamps and the sample they give.

Bee's storage-incentives test data (tests/testdata/README.md names the file)
builds a reserve sample from a fixed recipe: the CAC payloads ``"Unstoppable
data! Chunk #i"`` (i = 1..16), every odd-numbered one wrapped in a SOC with id
``keccak("ID #i")``, all signed by the key ``"0" * 32`` and stamped in one slot
of the batch ``keccak("The Inverted Jenny")``; anchor1 ``0x64``. The sample
chunk of those items hashes to :data:`EXPECTED_SAMPLE_ADDRESS`.

``chunkstore selfcheck`` rebuilds it so that an operator sees that hashing
and signing on this machine give the reference's bytes (a wrong keccak build
or signer would get a node frozen by the redistribution contract); the tests
use the same chunks for the sampler and proof vectors.
"""

from __future__ import annotations

from dataclasses import dataclass

from chunkstore.swarm.bmt.reference import chunk_hash
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.constants import SAMPLE_SIZE, ChunkType
from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.soc import SOC, make_soc
from chunkstore.swarm.stamp import Stamp, validate_stamp

EXPECTED_SAMPLE_ADDRESS = bytes.fromhex("b012904b0c3e6462158b4416556caa888031a79bad46d2ffa7012408c9c38aa8")
KEY = b"0" * 32
SIGNER = Signer(KEY)
BATCH_ID = keccak256(b"The Inverted Jenny")
BATCH_DEPTH = 20  # any depth whose positions include the recipe's one works; bucket depth 0
INDEX = bytes.fromhex("0000000000080303")
TIMESTAMP = bytes.fromhex("0000000000030308")
ANCHOR1 = b"\x64"
ANCHOR2 = b"\x1e"


@dataclass(frozen=True)
class RecipeChunk:
    address: bytes
    data: bytes  # as stored: the CAC, or the SOC around it
    cac_data: bytes  # the CAC itself, or the SOC's wrapped CAC
    soc: SOC | None
    stamp: Stamp
    transformed_address: bytes  # for ANCHOR1

    @property
    def chunk_type(self) -> ChunkType:
        return ChunkType.CAC if self.soc is None else ChunkType.SOC


def recipe_chunks() -> list[RecipeChunk]:
    """The 16 chunks of the recipe, in recipe order (not sorted)."""
    out = []
    for i in range(SAMPLE_SIZE):
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


def regression_sample_address() -> bytes:
    """The sample chunk address the recipe gives here; equal to EXPECTED_SAMPLE_ADDRESS on a sound install.

    Each stamp is checked as the store would (signer, bucket, position), so a
    broken signer fails here rather than only in the address.
    """
    pairs = []
    for chunk in recipe_chunks():
        validate_stamp(chunk.stamp, chunk.address, SIGNER.address, depth=BATCH_DEPTH, bucket_depth=0)
        pairs.append((chunk.transformed_address, chunk.address))
    pairs.sort()
    payload = b"".join(address + taddr for taddr, address in pairs)
    return chunk_hash(len(payload).to_bytes(8, "little") + payload)
