"""PSS trojan chunks, as the reference node makes and opens them (``pkg/pss/trojan.go``).

A message for a topic is hidden in an ordinary content-addressed chunk:

    data = hint(8) | nonce(32) | ephemeral key x(32) | ciphertext(4032)

* the plaintext is ``uint16_be(len(msg)) | keccak(msg)[2:32] | msg``, at most
  ``MAX_PAYLOAD`` (4000) bytes of message, padded to 4032 bytes with random
  bytes and encrypted with Bee's chunk key stream (``encryption.transcrypt``)
  under the ElGamal key ``keccak(x(eph * recipient) | topic)``, where x is
  the shared point's x coordinate as Go's ``big.Int.Bytes`` writes it (no
  leading zero bytes);
* the hint is ``keccak(key | topic)[:8]`` and is the chunk's span field, so
  the chunk's address is the BMT hash over the rest with the hint as span;
* the nonce is mined until the address starts with one of the targets
  (1 to 3 bytes each, all of one length); its byte 28's low bit is the
  parity of the ephemeral key's y (the reference's opener always reads the
  key as odd, which gives the same shared x either way).

A receiver opens a chunk with its own key or, failing that, with the
topic's own key (the private key whose scalar is the topic), for each topic
it listens to: the message is the one whose hint and integrity check match.
A sender that names no recipient encrypts to the topic's key, which anyone
who knows the topic can open.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence

import coincurve
import numpy as np

from .constants import ADDRESS_SIZE, CHUNK_SIZE, SPAN_SIZE
from .encryption import transcrypt
from .errors import SwarmError
from .keccak import keccak256

MAX_PAYLOAD = CHUNK_SIZE - 3 * ADDRESS_SIZE  # 4000 bytes of message
MAX_TARGET = 3  # bytes of a target prefix
_CIPHERTEXT = CHUNK_SIZE - 2 * ADDRESS_SIZE  # 4032: integrity(32) + message, padded
_HINT = SPAN_SIZE
_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141  # the order of secp256k1
MINING_BATCH = 256  # candidate nonces hashed per call

RandomSource = Callable[[int], bytes]


class PssError(SwarmError):
    """A message or target list the reference refuses to wrap, or a recipient key that is not a key."""


def topic_of(name: str | bytes) -> bytes:
    """The 32-byte topic of a topic name: its Keccak-256 (``pss.NewTopic``)."""
    return keccak256(name.encode() if isinstance(name, str) else bytes(name))


def topic_key(topic: bytes) -> coincurve.PrivateKey:
    """The topic's own key: scalar = the topic mod n (``crypto.Secp256k1PrivateKeyFromBytes``)."""
    scalar = int.from_bytes(topic, "big") % _N
    if scalar == 0:
        raise PssError("the topic is a multiple of the curve order: it has no key")
    return coincurve.PrivateKey(scalar.to_bytes(32, "big"))


def parse_public_key(raw: bytes) -> coincurve.PublicKey:
    """A recipient's secp256k1 public key, compressed (33 bytes) or not (65)."""
    try:
        return coincurve.PublicKey(bytes(raw))
    except (ValueError, TypeError) as exc:
        raise PssError(f"not a secp256k1 public key: {exc}") from None


def check_targets(targets: Sequence[bytes]) -> None:
    if not targets:
        raise PssError("target list cannot be empty")
    if any(not 1 <= len(t) <= MAX_TARGET for t in targets):
        raise PssError(f"a target is 1 to {MAX_TARGET} bytes")
    if len({len(t) for t in targets}) != 1:
        raise PssError("target list cannot have targets of different length")


def _shared_key(secret: coincurve.PrivateKey, public: coincurve.PublicKey, topic: bytes) -> bytes:
    point = public.multiply(secret.secret).format(compressed=False)
    x = int.from_bytes(point[1:33], "big")
    return keccak256(x.to_bytes((x.bit_length() + 7) // 8, "big"), topic)


def _integrity(msg: bytes) -> bytes:
    return len(msg).to_bytes(2, "big") + keccak256(msg)[2:]


def _addresses(rows: np.ndarray) -> np.ndarray:
    """The CAC addresses of full chunks, one per row (the BMT backend's batch hash)."""
    from .bmt.backend import bmt_hashes

    n = rows.shape[0]
    out = np.zeros((n, ADDRESS_SIZE), np.uint8)
    bmt_hashes(rows, np.full(n, rows.shape[1], np.int64), np.zeros(n, np.int64), b"", out)
    return out


def wrap(
    topic: bytes,
    msg: bytes,
    recipient: coincurve.PublicKey,
    targets: Sequence[bytes],
    *,
    random_bytes: RandomSource = os.urandom,
    give_up: Callable[[], bool] = lambda: False,
) -> tuple[bytes, bytes]:
    """The trojan chunk ``(address, data)`` carrying ``msg`` for ``topic`` to ``recipient``.

    The nonce is mined ``MINING_BATCH`` candidates at a time; ``give_up`` is
    asked between batches (the client gone) and stops with ``PssError``.
    A target of n bytes takes 256^n candidates on average.
    """
    msg = bytes(msg)
    if len(msg) > MAX_PAYLOAD:
        raise PssError(f"message payload size cannot be greater than {MAX_PAYLOAD} bytes")
    check_targets(targets)
    ephemeral = coincurve.PrivateKey(random_bytes(32))
    key = _shared_key(ephemeral, recipient, topic)
    plaintext = _integrity(msg) + msg
    ciphertext = transcrypt(key, plaintext) + random_bytes(_CIPHERTEXT - len(plaintext))
    eph = ephemeral.public_key.format(compressed=True)
    hint = keccak256(key, topic)[:_HINT]
    payload = eph[1:] + ciphertext
    nonce = bytearray(random_bytes(32))
    nonce[28] = (nonce[28] | 1) if eph[0] & 1 else (nonce[28] & 0xFE)
    wanted = {bytes(t) for t in targets}
    width = len(targets[0])
    rows = np.zeros((MINING_BATCH, SPAN_SIZE + CHUNK_SIZE), np.uint8)
    rows[:, :_HINT] = np.frombuffer(hint, np.uint8)
    rows[:, _HINT:_HINT + 32] = np.frombuffer(bytes(nonce), np.uint8)
    rows[:, _HINT + 32:] = np.frombuffer(payload, np.uint8)
    while not give_up():
        rows[:, _HINT:_HINT + 4] = np.frombuffer(random_bytes(4 * MINING_BATCH), np.uint8).reshape(-1, 4)
        addresses = _addresses(rows)
        for i in range(MINING_BATCH):
            if bytes(addresses[i, :width]) in wanted:
                return bytes(addresses[i]), rows[i].tobytes()
    raise PssError("mining the message's chunk was given up")


def unwrap(data: bytes, keys: Iterable[coincurve.PrivateKey], topics: Iterable[bytes]) -> tuple[bytes, bytes] | None:
    """``(topic, message)`` of a trojan chunk that one of ``keys`` (then the topic's own key) opens, else None."""
    data = bytes(data)
    if len(data) != SPAN_SIZE + CHUNK_SIZE:
        return None
    try:
        ephemeral = coincurve.PublicKey(b"\x03" + data[40:72])  # read as odd, as the reference does
    except ValueError:
        return None
    hint, ciphertext = data[:_HINT], data[72:]
    mine = list(keys)
    for topic in topics:
        try:
            candidates = [*mine, topic_key(topic)]
        except PssError:
            candidates = mine
        for secret in candidates:
            key = _shared_key(secret, ephemeral, topic)
            if keccak256(key, topic)[:_HINT] != hint:
                continue
            plaintext = transcrypt(key, ciphertext)
            length = int.from_bytes(plaintext[:2], "big")
            if length > MAX_PAYLOAD:
                continue
            msg = plaintext[32:32 + length]
            if _integrity(msg) == plaintext[:32]:
                return topic, msg
    return None
