"""Ethereum-style secp256k1 signing (personal-sign) and recovery via coincurve.

The signed digest is ``keccak("\\x19Ethereum Signed Message:\\n32" | digest)``
and a signature is ``r(32) | s(32) | v(1)`` with ``v`` in 27..34 (the
reference node accepts the compact recovery codes 27..34 and uses
``(v - 27) & 3`` as the recovery id). Signing is deterministic (RFC 6979),
which the reference node's regression vector relies on.
"""

from __future__ import annotations

import coincurve

from .constants import ETH_ADDRESS_SIZE, SIGNATURE_SIZE
from .errors import InvalidSignature
from .keccak import keccak256

PERSONAL_PREFIX = b"\x19Ethereum Signed Message:\n"


def personal_digest(data: bytes) -> bytes:
    """Digest that personal-sign actually signs for message ``data``."""
    return keccak256(PERSONAL_PREFIX + str(len(data)).encode() + bytes(data))


def public_key_address(public_key: coincurve.PublicKey) -> bytes:
    """20-byte Ethereum address: tail of keccak of the uncompressed key."""
    return keccak256(public_key.format(compressed=False)[1:])[-ETH_ADDRESS_SIZE:]


def checksum_address(address: bytes) -> str:
    """EIP-55 text of a 20-byte Ethereum address: 0x, then each hex letter upper case where the keccak of
    the lower-case text has a nibble of 8 or more (Go's ``common.Address.Hex``)."""
    if len(address) != ETH_ADDRESS_SIZE:
        raise ValueError(f"an Ethereum address is {ETH_ADDRESS_SIZE} bytes, not {len(address)}")
    text = address.hex()
    nibbles = keccak256(text.encode()).hex()
    return "0x" + "".join(c.upper() if int(n, 16) >= 8 else c for c, n in zip(text, nibbles, strict=False))


class Signer:
    """A secp256k1 private key that signs the way the reference node does."""

    def __init__(self, private_key: bytes) -> None:
        if len(private_key) != 32:
            raise ValueError(f"private key is {len(private_key)} bytes; must be 32")
        try:
            self._key = coincurve.PrivateKey(bytes(private_key))
        except ValueError as exc:
            raise ValueError(f"invalid secp256k1 private key: {exc}") from None
        self.address = public_key_address(self._key.public_key)

    @classmethod
    def generate(cls) -> Signer:
        return cls(coincurve.PrivateKey().secret)

    @property
    def secret(self) -> bytes:
        return self._key.secret

    @property
    def public_key(self) -> bytes:
        """The 33-byte compressed public key (how the reference node shows it in ``/addresses``)."""
        return bytes(self._key.public_key.format(compressed=True))

    def sign(self, data: bytes) -> bytes:
        """Personal-sign ``data`` (normally a 32-byte digest): ``r | s | v``."""
        sig = self._key.sign_recoverable(personal_digest(data), hasher=None)
        return sig[:64] + bytes([sig[64] + 27])


def recover_public_key(signature: bytes | memoryview, data: bytes) -> coincurve.PublicKey:
    """Public key whose personal-sign of ``data`` is ``signature``."""
    if len(signature) != SIGNATURE_SIZE:
        raise InvalidSignature(f"signature is {len(signature)} bytes; must be {SIGNATURE_SIZE}")
    sig = bytes(signature)
    v = sig[64]
    if not 27 <= v < 35:
        raise InvalidSignature(f"signature recovery byte v={v}; must be in 27..34")
    try:
        return coincurve.PublicKey.from_signature_and_message(
            sig[:64] + bytes([(v - 27) & 3]), personal_digest(data), hasher=None
        )
    except ValueError as exc:
        raise InvalidSignature(f"signature does not recover a public key: {exc}") from None


def recover_address(signature: bytes | memoryview, data: bytes) -> bytes:
    """Ethereum address of the signer of ``data``."""
    return public_key_address(recover_public_key(signature, data))
