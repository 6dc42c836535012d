"""Self-check: rebuild the reference node's regression sample from its recipe.

Operators run ``chunkstore selfcheck`` after an install to see that hashing and
signing on this machine produce the reference node's bytes (a wrong keccak
build or signer would get a node frozen by the redistribution contract).
"""

from __future__ import annotations

import argparse
import time

from chunkstore.swarm.bmt.reference import chunk_hash
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.soc import make_soc
from chunkstore.swarm.stamp import Stamp, validate_stamp

EXPECTED_SAMPLE_ADDRESS = "b012904b0c3e6462158b4416556caa888031a79bad46d2ffa7012408c9c38aa8"
ANCHOR1 = b"\x64"


def regression_sample_address() -> str:
    """Sample chunk address of the reference regression recipe (vectors/README.md)."""
    signer = Signer(b"0" * 32)
    batch_id = keccak256(b"The Inverted Jenny")
    index = bytes.fromhex("0000000000080303")
    timestamp = bytes.fromhex("0000000000030308")
    pairs = []
    for i in range(16):
        address, data = make_cac(b"Unstoppable data! Chunk #%d" % (i + 1))
        taddr = chunk_hash(data, ANCHOR1)
        if i % 2 == 0:
            soc = make_soc(signer, keccak256(b"ID #%d" % (i + 1)), data)
            address, taddr = soc.address, keccak256(soc.address, taddr)
        stamp = Stamp(batch_id, index, timestamp, signer.sign(keccak256(address, batch_id, index, timestamp)))
        validate_stamp(stamp, address, signer.address, depth=20, bucket_depth=0)
        pairs.append((taddr, address))
    pairs.sort()
    payload = b"".join(address + taddr for taddr, address in pairs)
    return chunk_hash(len(payload).to_bytes(8, "little") + payload).hex()


def main(argv: list[str]) -> int:
    argparse.ArgumentParser(prog="chunkstore selfcheck", description=__doc__).parse_args(argv)
    start = time.perf_counter()
    got = regression_sample_address()
    ok = got == EXPECTED_SAMPLE_ADDRESS
    print(f"regression sample address {got}: {'ok' if ok else 'MISMATCH, expected ' + EXPECTED_SAMPLE_ADDRESS}")
    from chunkstore.swarm.bmt import accelerated as hashing

    fast_ok = all(
        hashing.chunk_hash(data, prefix) == chunk_hash(data, prefix)
        for data in (bytes(8), b"\x05" + bytes(7) + b"hello", bytes(range(256)) * 16 + bytes(8))
        for prefix in (b"", ANCHOR1)
    )
    print(f"hashing backend {hashing.BACKEND}: {'agrees with the reference BMT' if fast_ok else 'DISAGREES with the reference BMT'}")
    ok = ok and fast_ok
    print(f"took {1000 * (time.perf_counter() - start):.1f} ms")
    return 0 if ok else 1
