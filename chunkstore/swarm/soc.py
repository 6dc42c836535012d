"""Single-owner chunks: ``data = id(32) | signature(65) | span(8) | payload``.

The address is ``keccak(id | owner)``; the owner signs (personal-sign)
``keccak(id | wrapped CAC address)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .cac import cac_address, check_data_length
from .constants import (
    CHUNK_SIZE,
    ETH_ADDRESS_SIZE,
    MAX_SOC_SIZE,
    MIN_SOC_SIZE,
    REPLICAS_OWNER,
    SIGNATURE_SIZE,
    SOC_HEADER_SIZE,
    SOC_ID_SIZE,
)
from .errors import InvalidChunk, InvalidSignature
from .keccak import keccak256
from .signer import Signer, recover_address


def soc_address(soc_id: bytes, owner: bytes) -> bytes:
    if len(soc_id) != SOC_ID_SIZE:
        raise InvalidChunk(f"SOC id is {len(soc_id)} bytes; must be {SOC_ID_SIZE}")
    if len(owner) != ETH_ADDRESS_SIZE:
        raise InvalidChunk(f"SOC owner is {len(owner)} bytes; must be {ETH_ADDRESS_SIZE}")
    return keccak256(soc_id, owner)


def soc_digest(soc_id: bytes, wrapped_address: bytes) -> bytes:
    """The 32-byte digest a SOC owner signs."""
    return keccak256(soc_id, wrapped_address)


def soc_identity(address: bytes, wrapped_address: bytes) -> bytes:
    """``keccak(address | wrapped address)``: what tells a SOC from another one at its address (the
    reference's ``storage.IdentityAddress``, by which its stamper knows a chunk)."""
    return keccak256(address, wrapped_address)


@dataclass(frozen=True)
class SOC:
    id: bytes
    signature: bytes
    owner: bytes
    wrapped_address: bytes
    wrapped_data: bytes  # span | payload
    address: bytes

    @property
    def data(self) -> bytes:
        return self.id + self.signature + self.wrapped_data

    @property
    def identity(self) -> bytes:
        """``soc_identity`` of this SOC."""
        return soc_identity(self.address, self.wrapped_address)


def make_soc(signer: Signer, soc_id: bytes, wrapped_data: bytes) -> SOC:
    """Sign ``wrapped_data`` (a CAC's ``span | payload``) under ``soc_id``."""
    wrapped = cac_address(wrapped_data)
    if len(soc_id) != SOC_ID_SIZE:
        raise InvalidChunk(f"SOC id is {len(soc_id)} bytes; must be {SOC_ID_SIZE}")
    sig = signer.sign(soc_digest(soc_id, wrapped))
    return SOC(bytes(soc_id), sig, signer.address, wrapped, bytes(wrapped_data), soc_address(soc_id, signer.address))


def parse_soc(data: bytes | bytearray | memoryview, *, cac_hash: Callable[[bytes], bytes] | None = None) -> SOC:
    """Parse SOC data and recover its owner; raises a typed error on any flaw.

    ``cac_hash`` hashes the wrapped chunk (default: the selected backend);
    callers that check the accelerated backend pass the reference BMT.
    """
    if len(data) < MIN_SOC_SIZE:
        raise InvalidChunk(f"SOC data is {len(data)} bytes; at least {MIN_SOC_SIZE}")
    if len(data) > MAX_SOC_SIZE:
        raise InvalidChunk(f"SOC payload is {len(data) - MIN_SOC_SIZE} bytes; at most {CHUNK_SIZE}")
    raw = bytes(data)
    soc_id, sig, wrapped_data = raw[:SOC_ID_SIZE], raw[SOC_ID_SIZE:SOC_HEADER_SIZE], raw[SOC_HEADER_SIZE:]
    check_data_length(wrapped_data)
    wrapped = cac_address(wrapped_data) if cac_hash is None else cac_hash(wrapped_data)
    owner = recover_address(sig, soc_digest(soc_id, wrapped))
    if owner == REPLICAS_OWNER and wrapped[1:] != soc_id[1:]:
        raise InvalidChunk("replica SOC id does not match its wrapped chunk address")
    return SOC(soc_id, sig, owner, wrapped, wrapped_data, soc_address(soc_id, owner))


def validate_soc(
    address: bytes, data: bytes | bytearray | memoryview, *, cac_hash: Callable[[bytes], bytes] | None = None
) -> SOC:
    """Parse ``data`` and check it is the SOC at ``address`` (``cac_hash`` as in ``parse_soc``)."""
    soc = parse_soc(data, cac_hash=cac_hash)
    if soc.address != bytes(address):
        raise InvalidChunk(f"SOC resolves to {soc.address.hex()}, not to address {bytes(address).hex()}")
    return soc


def verify_soc_signature(owner: bytes, soc_id: bytes, signature: bytes, wrapped_data: bytes) -> SOC:
    """Build the SOC sent as separate parts (the ``/soc`` API) and check its owner."""
    if len(signature) != SIGNATURE_SIZE:
        raise InvalidSignature(f"signature is {len(signature)} bytes; must be {SIGNATURE_SIZE}")
    soc = parse_soc(bytes(soc_id) + bytes(signature) + bytes(wrapped_data))
    if soc.owner != bytes(owner):
        raise InvalidSignature(f"signature recovers owner {soc.owner.hex()}, not {bytes(owner).hex()}")
    return soc
