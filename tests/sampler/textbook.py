"""Textbook Swarm primitives for the tests' reference sampler, written from SPEC.md alone.

Nothing here imports the code under test: keccak comes from ``sha3``
(safe-pysha3) directly, signatures are recovered with ``coincurve``
directly, and the BMT is the plainest recursive tree. A bug shared with
``chunkstore`` cannot hide behind it. Slow on purpose; tests use it on a few
thousand chunks at most.
"""

from __future__ import annotations

import coincurve
from sha3 import keccak_256

SEGMENT = 32
PAYLOAD = 4096
SPAN = 8
SOC_HEADER = 32 + 65  # id | signature


class Invalid(Exception):
    """The chunk or stamp is not valid (the message says why)."""


def keccak(*parts: bytes) -> bytes:
    return keccak_256(b"".join(bytes(p) for p in parts)).digest()


def _root(level: list[bytes], prefix: bytes) -> bytes:
    while len(level) > 1:
        level = [keccak_256(prefix + level[i] + level[i + 1]).digest() for i in range(0, len(level), 2)]
    return level[0]


def bmt_hash(data: bytes, prefix: bytes = b"") -> bytes:
    """``keccak(prefix | span | root)`` of the 128-leaf tree over the zero-padded payload."""
    data = bytes(data)
    if not SPAN <= len(data) <= SPAN + PAYLOAD:
        raise Invalid(f"chunk data of {len(data)} bytes")
    payload = data[SPAN:].ljust(PAYLOAD, b"\0")
    leaves = [payload[i : i + SEGMENT] for i in range(0, PAYLOAD, SEGMENT)]
    return keccak(prefix, data[:SPAN], _root(leaves, prefix))


def transformed_address(address: bytes, data: bytes, is_soc: bool, anchor: bytes) -> bytes:
    if is_soc:
        return keccak(address, bmt_hash(data[SOC_HEADER:], anchor))
    return bmt_hash(data, anchor)


def proximity(a: bytes, b: bytes) -> int:
    """Leading equal bits over at most the first 4 bytes (and the shorter input); 31 when all agree."""
    bits = 8 * min(4, len(a), len(b))
    for i in range(bits):
        if (a[i // 8] >> (7 - i % 8)) & 1 != (b[i // 8] >> (7 - i % 8)) & 1:
            return i
    return 31


def signer_of(signature: bytes, digest: bytes) -> bytes:
    """Ethereum address that personal-signed the 32-byte ``digest``, by recovery."""
    if len(signature) != 65:
        raise Invalid("signature length")
    v = signature[64]
    if not 27 <= v <= 34:
        raise Invalid(f"recovery byte {v}")
    message = keccak(b"\x19Ethereum Signed Message:\n32", digest)
    try:
        key = coincurve.PublicKey.from_signature_and_message(
            signature[:64] + bytes([(v - 27) & 3]), message, hasher=None
        )
    except ValueError as exc:
        raise Invalid(f"no key recovers: {exc}") from None
    return keccak(key.format(compressed=False)[1:])[-20:]


def check_chunk(address: bytes, data: bytes, is_soc: bool) -> None:
    """Raise ``Invalid`` unless ``data`` is the CAC (or SOC) at ``address``."""
    if not is_soc:
        if bmt_hash(data) != address:
            raise Invalid("CAC data does not hash to its address")
        return
    if len(data) < SOC_HEADER + SPAN:
        raise Invalid("SOC too short")
    soc_id, signature, wrapped = data[:32], data[32:SOC_HEADER], data[SOC_HEADER:]
    owner = signer_of(signature, keccak(soc_id, bmt_hash(wrapped)))
    if keccak(soc_id, owner) != address:
        raise Invalid("SOC address is not keccak(id | owner)")


def check_stamp(
    address: bytes, batch_id: bytes, index: bytes, timestamp: bytes, signature: bytes,
    owner: bytes, depth: int, bucket_depth: int,
) -> None:  # fmt: skip
    """Raise ``Invalid`` unless the stamp is the batch owner's, in the address's bucket and in range."""
    if signer_of(signature, keccak(address, batch_id, index, timestamp)) != owner:
        raise Invalid("stamp not signed by the batch owner")
    bucket = int.from_bytes(index[:4], "big")
    position = int.from_bytes(index[4:8], "big")
    if bucket != int.from_bytes(address[:4], "big") >> (32 - bucket_depth):
        raise Invalid("stamp bucket is not the address's")
    if position >= 1 << (depth - bucket_depth):
        raise Invalid("stamp position out of range")


def sample_hash(pairs: list[tuple[bytes, bytes]]) -> bytes:
    """Address of the CAC whose payload is ``address | transformed address`` of each item, in order."""
    payload = b"".join(address + taddr for address, taddr in pairs)
    return bmt_hash(len(payload).to_bytes(SPAN, "little") + payload)
