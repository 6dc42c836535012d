"""Access control (ACT) primitives as the reference node defines them (``pkg/accesscontrol``), no storage.

An ACT protects a reference with an *access key*: the reference is XORed
with the key stream of Bee's chunk encryption (``encryption.New(key, 0, 0,
keccak)``: no padding, counter 0), so it keeps its length (32 or 64 bytes).
The access key sits in a key-value store (the *ACT*, ``kvs``) once per
grantee, under a lookup key and encrypted the same way with a decryption
key, both derived from an ECDH secret between the publisher and the grantee:

* ``secret = x(d · P)`` as Go's ``big.Int.Bytes()`` gives it: big-endian,
  leading zero bytes dropped (so 31 bytes or fewer for about 1 in 256 pairs);
* ``lookup key = keccak256(secret | 0x00)``, ``decryption key =
  keccak256(secret | 0x01)`` (``session.go``, ``access.go: getKeys``).

The ACT is Bee's *simple* manifest (JSON, ``pkg/manifest/simple``):
``{"entries":{"<hex lookup key>":{"reference":"<hex encrypted access key>"}}}``,
keys sorted as Go's ``encoding/json`` sorts map keys, stored as a file.
Its versions are kept in a *history*, a mantaray manifest whose paths are
``str(2**63 - 1 - unix time)`` (newest first in byte order, ``history.go``).
The grantee list is the grantees' uncompressed keys (65 bytes each)
concatenated (``grantee.go``), stored encrypted; its reference is handed out
encrypted for the publisher with the publisher's decryption key.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

import coincurve

from .encryption import transcrypt
from .errors import SwarmError
from .keccak import keccak256

__all__ = [
    "MAX_INT64",
    "PUBLIC_KEY_SIZE",
    "ActError",
    "InvalidActPublicKey",
    "InvalidKvs",
    "access_keys",
    "decode_grantees",
    "decode_kvs",
    "encode_grantees",
    "encode_kvs",
    "history_path",
    "history_path_time",
    "parse_act_public_key",
    "remove_grantees",
    "add_grantees",
    "session_keys",
    "shared_secret",
    "transcrypt_reference",
    "uncompressed",
]

MAX_INT64 = (1 << 63) - 1
PUBLIC_KEY_SIZE = 65  # an uncompressed secp256k1 key, as the grantee list holds them
LOOKUP_NONCE = b"\x00"
ACCESS_KEY_NONCE = b"\x01"


class ActError(SwarmError):
    """An ACT structure that cannot be read (not the reference's ``ErrNotFound``: see the content layer)."""


class InvalidActPublicKey(ActError):
    """Not a secp256k1 public key (``ErrInvalidPublicKey``)."""


class InvalidKvs(ActError):
    """Stored bytes that are no simple manifest of an ACT."""


def parse_act_public_key(raw: bytes) -> coincurve.PublicKey:
    """A secp256k1 key in any form ``btcec.ParsePubKey`` reads: 33 bytes compressed, 65 uncompressed."""
    try:
        return coincurve.PublicKey(bytes(raw))
    except (ValueError, TypeError) as exc:
        raise InvalidActPublicKey(f"not a secp256k1 public key: {exc}") from None


def uncompressed(key: coincurve.PublicKey) -> bytes:
    """The 65-byte form (``elliptic.Marshal``): how keys are compared and listed."""
    return bytes(key.format(compressed=False))


def shared_secret(private_key: bytes, public_key: coincurve.PublicKey) -> bytes:
    """The x coordinate of ``d · P`` as ``big.Int.Bytes()``: no leading zero bytes."""
    point = public_key.multiply(bytes(private_key)).format(compressed=False)
    x = int.from_bytes(point[1:33], "big")
    return x.to_bytes((x.bit_length() + 7) // 8, "big")


def session_keys(private_key: bytes, public_key: coincurve.PublicKey, nonces: Sequence[bytes]) -> list[bytes]:
    """``keccak256(secret | nonce)`` for each nonce; the bare secret when there are none (``Session.Key``)."""
    secret = shared_secret(private_key, public_key)
    if not nonces:
        return [secret]
    return [keccak256(secret + bytes(nonce)) for nonce in nonces]


def access_keys(private_key: bytes, public_key: coincurve.PublicKey) -> tuple[bytes, bytes]:
    """``(lookup key, access key decryption key)`` of the pair (``getKeys``: nonces 0 and 1)."""
    lookup, decryption = session_keys(private_key, public_key, [LOOKUP_NONCE, ACCESS_KEY_NONCE])
    return lookup, decryption


def transcrypt_reference(key: bytes, data: bytes) -> bytes:
    """Encrypt or decrypt a reference or an access key: the key stream from counter 0, no padding."""
    return transcrypt(key, data)


# ---------------------------------------------------------------- the ACT's store


def encode_kvs(entries: Mapping[bytes, bytes]) -> bytes:
    """The simple manifest of an ACT, byte for byte as Go's ``json.Marshal`` writes it (keys sorted;
    no metadata: the reference puts an empty map, which ``omitempty`` leaves out)."""
    body = {k.hex(): {"reference": v.hex()} for k, v in sorted(entries.items(), key=lambda kv: kv[0].hex())}
    doc = {"entries": body} if body else {}
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


def decode_kvs(data: bytes) -> dict[bytes, bytes]:
    """The entries of a stored ACT (lookup key -> encrypted access key)."""
    try:
        doc = json.loads(data)
        raw = doc.get("entries") or {}
        return {bytes.fromhex(k): bytes.fromhex(v["reference"]) for k, v in raw.items()}
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        raise InvalidKvs(f"not an ACT key-value store: {exc}") from None


# ---------------------------------------------------------------- history paths


def history_path(timestamp: int) -> bytes:
    """The history path of an ACT version made at ``timestamp`` (unix seconds): newest sorts first."""
    return str(MAX_INT64 - timestamp).encode()


def history_path_time(path: bytes) -> int:
    """The reversed timestamp a history path holds (``strconv.ParseInt``); ``ActError`` if none."""
    try:
        text = path.decode("ascii")
        if not text or text.strip() != text or "_" in text:
            raise ValueError(text)
        value = int(text, 10)
    except (UnicodeDecodeError, ValueError):
        raise ActError(f"history path {path!r} is no timestamp") from None
    if not -(1 << 63) <= value <= MAX_INT64:
        raise ActError(f"history path {path!r} is out of range")
    return value


# ---------------------------------------------------------------- grantee lists


def encode_grantees(keys: Iterable[coincurve.PublicKey]) -> bytes:
    return b"".join(uncompressed(k) for k in keys)


def decode_grantees(data: bytes) -> list[coincurve.PublicKey]:
    """The keys of a stored list; none at all when one of them is not a key (as ``deserialize``)."""
    out = []
    for i in range(0, len(data), PUBLIC_KEY_SIZE):
        try:
            out.append(coincurve.PublicKey(bytes(data[i : i + PUBLIC_KEY_SIZE])))
        except (ValueError, TypeError):
            return []
    return out


def add_grantees(current: list[coincurve.PublicKey], add: Sequence[coincurve.PublicKey]) -> list[coincurve.PublicKey]:
    """``current`` then each key of ``add`` that is in neither (``GranteeListStruct.Add``)."""
    seen = {uncompressed(k) for k in current}
    out = list(current)
    for key in add:
        raw = uncompressed(key)
        if raw not in seen:
            seen.add(raw)
            out.append(key)
    return out


def remove_grantees(
    current: list[coincurve.PublicKey], remove: Sequence[coincurve.PublicKey]
) -> list[coincurve.PublicKey]:
    """The list without ``remove``, in the order the reference leaves it: each removed key's place is
    taken by the last one (``GranteeListStruct.Remove``), and the key moved there is not looked at again
    for that removal."""
    out = list(current)
    for key in remove:
        target = uncompressed(key)
        i = 0
        while i < len(out):
            if uncompressed(out[i]) == target:
                out[i] = out[-1]
                out.pop()
            i += 1
    return out
